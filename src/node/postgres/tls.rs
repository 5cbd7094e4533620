//! `[postgres] tls = "on"` (issue 49, "Secrets and defaults"): TLS between the
//! members' servers and every client of bully's, with bully's CA or the user's.
//! - the files: the user's (`tls_ca`, `tls_cert`, `tls_key`) or the node's `[tls]`
//!   ([`sources`]), copied beside the server's data dir ([`install`]), owned by the
//!   server's user, the key mode 0600 as PostgreSQL requires, and never inside the data
//!   dir, so no base backup carries the key;
//! - the server: `ssl = on` and the copies' paths ([`server_settings`], in `bully.conf`);
//! - libpq's clients (the standbys, `pg_basebackup`, `pg_rewind`): `sslmode=verify-ca`
//!   and `sslrootcert=` ([`conninfo_words`]);
//! - the manager's own round trips: rustls over ring ([`Connector`]), verifying as
//!   `verify-ca` does.
//!
//! Why `verify-ca`, not `verify-full`: a node's certificate names `node-<id>.bully`
//! (src/certs/identity.rs), not the address its server listens on, and the members
//! reach each other's servers by IP address (`[postgres] listen`, `connect_address`),
//! so a host-name check would refuse every server. The chain check still proves the
//! server holds a key the cluster's CA signed, which only the members' (and bully's
//! clients') certificates are: a closed CA, as the QUIC transport's.

use super::owned::replace_private;
use super::quote::conninfo_value;
use crate::certs::{load_roots, TlsFiles};
use crate::config::postgres::{PostgresConfig, TlsMode};
use nix::unistd::{Gid, Uid};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_postgres_rustls::MakeRustlsConnect;

/// The files the server and libpq read: copies beside the data dir (`<data_dir>.ca.pem`,
/// `<data_dir>.server.pem`, `<data_dir>.server.key`), as the passfile is
/// (src/node/postgres/secrets.rs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Installed {
    /// Where the copies for the server at `data_dir` live.
    pub fn beside(data_dir: &Path) -> Installed {
        let with = |suffix: &str| {
            let mut path = data_dir.as_os_str().to_owned();
            path.push(suffix);
            PathBuf::from(path)
        };
        Installed {
            ca: with(".ca.pem"),
            cert: with(".server.pem"),
            key: with(".server.key"),
        }
    }
}

/// Where the TLS files come from under `config`: `None` with `tls = "off"`; the user's
/// three files when set (`PostgresConfig::problem` refuses one without the others),
/// else the node's `[tls]` files (`node`).
pub fn sources(config: &PostgresConfig, node: &TlsFiles) -> Option<TlsFiles> {
    if config.tls == TlsMode::Off {
        return None;
    }
    match (&config.tls_ca, &config.tls_cert, &config.tls_key) {
        (Some(ca), Some(cert), Some(key)) => Some(TlsFiles {
            ca: ca.clone(),
            cert: cert.clone(),
            key: key.clone(),
        }),
        _ => Some(node.clone()),
    }
}

/// The copies' paths for `config`'s server, `None` with `tls = "off"`.
pub fn installed(config: &PostgresConfig) -> Option<Installed> {
    (config.tls == TlsMode::On).then(|| Installed::beside(&config.data_dir))
}

/// Copies `sources` beside the server's data dir, owned by `owner`, mode 0600 from
/// their creation, each replaced by a rename (a running server rereads them at a
/// reload). Done before every write of `bully.conf`, so a changed file is in force at
/// the next start; a copy that already holds the source's bytes is left as it is (the
/// include file is rewritten on every repoint and synchronous change: no fsync there).
pub fn install(
    sources: &TlsFiles,
    data_dir: &Path,
    owner: Option<(Uid, Gid)>,
) -> Result<Installed, String> {
    let installed = Installed::beside(data_dir);
    for (from, to) in [
        (&sources.ca, &installed.ca),
        (&sources.cert, &installed.cert),
        (&sources.key, &installed.key),
    ] {
        let text = std::fs::read_to_string(from)
            .map_err(|e| format!("cannot read {}: {e}", from.display()))?;
        if std::fs::read_to_string(to).is_ok_and(|held| held == text) {
            continue;
        }
        replace_private(to, &text, owner)?;
    }
    Ok(installed)
}

/// The server parameters for TLS (`bully.conf`), as plain values.
pub fn server_settings(installed: &Installed) -> [(&'static str, String); 4] {
    let path = |p: &PathBuf| p.display().to_string();
    [
        ("ssl", "on".into()),
        ("ssl_cert_file", path(&installed.cert)),
        ("ssl_key_file", path(&installed.key)),
        ("ssl_ca_file", path(&installed.ca)),
    ]
}

/// What a libpq connection string adds to verify the server against `ca`.
pub fn conninfo_words(ca: &Path) -> String {
    format!(
        " sslmode=verify-ca sslrootcert={}",
        conninfo_value(&ca.display().to_string())
    )
}

/// How the manager's round trips connect: plain, or TLS verified against the CA.
#[derive(Clone)]
pub enum Connector {
    Plain,
    Tls(MakeRustlsConnect),
}

impl Connector {
    /// The connector for `sources` (`None`: plain); an error names the CA file.
    pub fn new(sources: Option<&TlsFiles>) -> Result<Connector, String> {
        let Some(files) = sources else {
            return Ok(Connector::Plain);
        };
        let roots = load_roots(&files.ca).map_err(|e| format!("[postgres] tls: {e}"))?;
        let provider = crate::transport::tls::provider();
        let verifier = Arc::new(VerifyCa {
            roots,
            provider: Arc::clone(&provider),
        });
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("[postgres] tls: {e}"))?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        Ok(Connector::Tls(MakeRustlsConnect::new(config)))
    }
}

impl Connector {
    /// Connects by `config` (with TLS required, when TLS), the connection run on a
    /// task of its own; the manager's round trips and the tests' use it.
    pub async fn connect(
        &self,
        mut config: tokio_postgres::Config,
    ) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
        match self {
            Connector::Plain => {
                let (client, connection) = config.connect(tokio_postgres::NoTls).await?;
                tokio::spawn(connection);
                Ok(client)
            }
            Connector::Tls(make) => {
                config.ssl_mode(tokio_postgres::config::SslMode::Require);
                let (client, connection) = config.connect(make.clone()).await?;
                tokio::spawn(connection);
                Ok(client)
            }
        }
    }
}

/// libpq's `sslmode=verify-ca` for rustls: the chain must lead to the CA; the name
/// the client dialled (an address) is not checked (see the module docs).
#[derive(Debug)]
struct VerifyCa {
    roots: RootCertStore,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for VerifyCa {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let cert = ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_cert_signed_by_trust_anchor(
            &cert,
            &self.roots,
            intermediates,
            now,
            self.provider.signature_verification_algorithms.all,
        )?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn node_files(dir: &Path) -> TlsFiles {
        crate::certs::init(dir, &[1, 2]).unwrap();
        TlsFiles::for_node(dir, 1)
    }

    #[test]
    fn the_files_are_the_users_else_the_nodes_and_none_when_off() {
        let node = TlsFiles::for_node(Path::new("/etc/bully/certs"), 1);
        let mut config = PostgresConfig::new("/var/lib/pg/n1", "10.0.0.1:5432".parse().unwrap());
        assert_eq!(sources(&config, &node), None);
        assert_eq!(installed(&config), None);
        config.tls = TlsMode::On;
        assert_eq!(sources(&config, &node), Some(node.clone()));
        config.tls_ca = Some("/etc/pg/ca.pem".into());
        config.tls_cert = Some("/etc/pg/server.pem".into());
        config.tls_key = Some("/etc/pg/server.key".into());
        let own = sources(&config, &node).unwrap();
        assert_eq!(own.key, Path::new("/etc/pg/server.key"));
        assert_eq!(
            installed(&config).unwrap(),
            Installed {
                ca: "/var/lib/pg/n1.ca.pem".into(),
                cert: "/var/lib/pg/n1.server.pem".into(),
                key: "/var/lib/pg/n1.server.key".into(),
            }
        );
    }

    #[test]
    fn the_copies_are_private_beside_the_data_dir_and_follow_their_sources() {
        let dir = tempfile::tempdir().unwrap();
        let files = node_files(&dir.path().join("certs"));
        let data_dir = dir.path().join("pg");
        let copies = install(&files, &data_dir, None).unwrap();
        assert_eq!(copies, Installed::beside(&data_dir));
        for (from, to) in [
            (&files.ca, &copies.ca),
            (&files.cert, &copies.cert),
            (&files.key, &copies.key),
        ] {
            assert_eq!(std::fs::read(from).unwrap(), std::fs::read(to).unwrap());
            let mode = std::fs::metadata(to).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "{}", to.display());
        }
        // A source changed (a rotated certificate) is copied again.
        std::fs::write(&files.cert, "rotated").unwrap();
        install(&files, &data_dir, None).unwrap();
        assert_eq!(std::fs::read_to_string(&copies.cert).unwrap(), "rotated");
        let missing = TlsFiles {
            key: dir.path().join("nope.key"),
            ..files
        };
        let error = install(&missing, &data_dir, None).unwrap_err();
        assert!(error.contains("nope.key"), "{error}");
    }

    #[test]
    fn a_connector_needs_a_readable_ca() {
        assert!(matches!(Connector::new(None), Ok(Connector::Plain)));
        let dir = tempfile::tempdir().unwrap();
        let files = node_files(dir.path());
        assert!(matches!(
            Connector::new(Some(&files)),
            Ok(Connector::Tls(_))
        ));
        let bad = TlsFiles {
            ca: dir.path().join("missing-ca.pem"),
            ..files
        };
        let error = Connector::new(Some(&bad)).err().unwrap();
        assert!(error.contains("missing-ca.pem"), "{error}");
    }
}
