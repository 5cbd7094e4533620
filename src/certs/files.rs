//! The files of a certificate directory: one home for their names, and [`TlsFiles`],
//! the three paths a node or client loads (also the config's `[tls]` table).

use crate::protocol::NodeId;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The CA certificate: every node and client trusts only this.
pub const CA_CERT_FILE: &str = "ca.pem";
/// The CA's private key; only `certs init`, `add` and `client` need it, never a running
/// node, so it stays on the machine that issues certificates.
pub const CA_KEY_FILE: &str = "ca.key";
/// The client certificate used by `bully leader/status/watch`.
pub const CLIENT_CERT_FILE: &str = "client.pem";
/// The client certificate's key.
pub const CLIENT_KEY_FILE: &str = "client.key";

/// Certificate file for node `id` in a certificate directory.
pub fn node_cert_file(id: NodeId) -> String {
    format!("node-{id}.pem")
}

/// Key file for node `id` in a certificate directory.
pub fn node_key_file(id: NodeId) -> String {
    format!("node-{id}.key")
}

/// Certificate and key file of a named client: `client` keeps the files `certs init`
/// writes (`client.pem`), any other name gets `client-<name>.pem` beside them.
pub fn client_files(name: &str) -> (String, String) {
    if name == "client" {
        (CLIENT_CERT_FILE.to_string(), CLIENT_KEY_FILE.to_string())
    } else {
        (format!("client-{name}.pem"), format!("client-{name}.key"))
    }
}

/// The three PEM files a node or client needs for mutual TLS, as `bully certs init`
/// writes them; in a node config, the `[tls]` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsFiles {
    /// The cluster CA certificate: peers and clients must present a certificate it signed.
    pub ca: PathBuf,
    /// Our certificate (node or client), signed by the CA and bound to our identity.
    pub cert: PathBuf,
    /// The private key matching `cert`.
    pub key: PathBuf,
}

impl TlsFiles {
    /// The files for node `id` in a directory made by [`super::init`].
    pub fn for_node(dir: &Path, id: NodeId) -> Self {
        TlsFiles {
            ca: dir.join(CA_CERT_FILE),
            cert: dir.join(node_cert_file(id)),
            key: dir.join(node_key_file(id)),
        }
    }

    /// The client files in a directory made by [`super::init`].
    pub fn for_client(dir: &Path) -> Self {
        TlsFiles {
            ca: dir.join(CA_CERT_FILE),
            cert: dir.join(CLIENT_CERT_FILE),
            key: dir.join(CLIENT_KEY_FILE),
        }
    }
}
