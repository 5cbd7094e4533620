//! The cluster's certificates: making them (`bully certs init`), loading them with errors
//! that name the file, and reading the identity a certificate is bound to.
//!
//! Identity lives in the subject alternative name: `node-<id>.bully` for a node,
//! `client.bully` for an API client. A node dials a peer with the server name
//! `node-<peer>.bully`, so TLS name verification itself refuses a process holding another
//! node's certificate; on the server side the client certificate's SAN tells who dialed.
//!
//! # Layout
//! - `files`: the file names of a certificate directory and [`TlsFiles`], the three
//!   paths a node or client needs (the config's `[tls]` table is one too).
//! - `identity`: [`Identity`] and the DNS names that carry it.
//! - `load`: reading PEM files into [`TlsMaterial`] for rustls.
//! - `issue`: the CA and the certificates it signs ([`init`], [`add_nodes`],
//!   [`issue_client`]), written with the right file modes.
//! - `inspect`: [`show`], what each certificate in a directory is.
//! - `error`: [`CertError`].

mod error;
mod files;
mod identity;
mod inspect;
mod issue;
mod load;

pub use error::CertError;
pub use files::{
    client_files, node_cert_file, node_key_file, TlsFiles, CA_CERT_FILE, CA_KEY_FILE,
    CLIENT_CERT_FILE, CLIENT_KEY_FILE,
};
pub use identity::{identity_of, node_dns_name, Identity, CLIENT_DNS_NAME};
pub use inspect::{show, CertSummary, KeyState};
pub use issue::{
    add_nodes, add_nodes_with, init, init_with, issue_client, CA_KEY_MODE, KEY_MODE,
    MAX_CLIENT_NAME,
};
pub use load::{load_certs, load_key, load_roots, TlsMaterial};
