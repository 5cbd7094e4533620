//! [`CertError`]: why a certificate could not be made, loaded or read.

use super::files::{CA_CERT_FILE, CA_KEY_FILE};
use crate::protocol::NodeId;
use std::io;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// A foreign library's error (rustls, rcgen, x509-parser), kept as the source.
pub type Detail = Box<dyn std::error::Error + Send + Sync>;

/// Everything that can go wrong making, loading or reading certificates. Every variant
/// that concerns a file names it, so the message alone says which file to fix.
#[derive(Debug, Error)]
pub enum CertError {
    #[error("{} already exists; refusing to overwrite it ({})", .0.display(), overwrite_hint(.0))]
    Exists(PathBuf),
    #[error("{0} does not exist")]
    Missing(PathBuf),
    /// Signing needs `ca.key`, which never goes to the nodes.
    #[error(
        "{} does not exist: run this where the CA key is kept (it never goes to the \
         nodes), or make a CA first with `bully certs init --dir {}`",
        key.display(),
        dir.display()
    )]
    NoCaKey { key: PathBuf, dir: PathBuf },
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
    #[error("{path} is not valid PEM: {source}")]
    BadPem { path: PathBuf, source: Detail },
    #[error("{path} holds no PEM {what}")]
    NotPem { path: PathBuf, what: &'static str },
    #[error("{path} is not a usable CA certificate: {source}")]
    BadCa { path: PathBuf, source: Detail },
    #[error("{cert} is not a usable CA certificate: its public key does not match {key}")]
    CaKeyMismatch { cert: PathBuf, key: PathBuf },
    #[error("{path}: {source}")]
    InFile {
        path: PathBuf,
        source: Box<CertError>,
    },
    #[error("cannot parse certificate: {0}")]
    Parse(#[source] x509_parser::nom::Err<x509_parser::error::X509Error>),
    #[error("cannot parse certificate: subject alternative name: {0}")]
    BadSan(#[source] x509_parser::error::X509Error),
    #[error("certificate names no bully identity (node-<id>.bully or client.bully); its DNS names: {0:?}")]
    NoIdentity(Vec<String>),
    #[error("certificate names more than one bully identity: {0:?}")]
    AmbiguousIdentity(Vec<String>),
    #[error("node id {0} is listed twice")]
    DuplicateNode(NodeId),
    #[error("client name {0:?} is not usable: use 1 to 64 letters, digits, `.`, `_` or `-`, not starting with `.`")]
    BadClientName(String),
    #[error("cannot generate certificate: {0}")]
    Generate(#[from] rcgen::Error),
}

impl CertError {
    /// The error with the file it concerns in front (for errors that do not name it).
    pub(super) fn in_file(self, path: &Path) -> CertError {
        CertError::InFile {
            path: path.to_path_buf(),
            source: Box::new(self),
        }
    }
}

/// What replacing an existing file would mean: fatal for the CA, a rotation otherwise.
fn overwrite_hint(path: &Path) -> &'static str {
    let is_ca = path
        .file_name()
        .is_some_and(|n| n == CA_CERT_FILE || n == CA_KEY_FILE);
    if is_ca {
        "replacing the CA invalidates every certificate it signed"
    } else {
        "pass --replace to re-issue it with a new key"
    }
}
