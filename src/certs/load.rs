//! Reading PEM files for rustls: every error names the file at fault.

use super::{identity_of, CertError, Identity, TlsFiles};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::RootCertStore;
use std::fs;
use std::io;
use std::path::Path;

/// Loaded TLS files, ready for rustls.
#[derive(Debug)]
pub struct TlsMaterial {
    /// Trust anchors: the cluster CA only.
    pub roots: RootCertStore,
    /// Our certificate first, then any intermediates.
    pub chain: Vec<CertificateDer<'static>>,
    /// The key that proves `chain[0]` is ours.
    pub key: PrivateKeyDer<'static>,
    /// Who our own certificate says we are.
    pub identity: Identity,
}

impl TlsFiles {
    /// Loads and checks all three files; each error names the file at fault.
    pub fn load(&self) -> Result<TlsMaterial, CertError> {
        let roots = load_roots(&self.ca)?;
        let chain = load_certs(&self.cert)?;
        let identity = identity_of(&chain[0]).map_err(|e| e.in_file(&self.cert))?;
        let key = load_key(&self.key)?;
        Ok(TlsMaterial {
            roots,
            chain,
            key,
            identity,
        })
    }
}

/// Reads a whole file; a missing one is [`CertError::Missing`].
pub(super) fn read_file(path: &Path) -> Result<Vec<u8>, CertError> {
    fs::read(path).map_err(|source| match source.kind() {
        io::ErrorKind::NotFound => CertError::Missing(path.to_path_buf()),
        _ => CertError::Read {
            path: path.to_path_buf(),
            source,
        },
    })
}

fn bad_pem(path: &Path, source: impl Into<super::error::Detail>) -> CertError {
    CertError::BadPem {
        path: path.to_path_buf(),
        source: source.into(),
    }
}

fn not_pem(path: &Path, what: &'static str) -> CertError {
    CertError::NotPem {
        path: path.to_path_buf(),
        what,
    }
}

/// Reads every certificate in a PEM file; fails if there is none.
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, CertError> {
    let bytes = read_file(path)?;
    let certs = rustls_pemfile::certs(&mut bytes.as_slice())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad_pem(path, e))?;
    if certs.is_empty() {
        return Err(not_pem(path, "certificate"));
    }
    Ok(certs)
}

/// Reads the first private key (PKCS#8, PKCS#1 or SEC1) in a PEM file.
pub fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, CertError> {
    let bytes = read_file(path)?;
    rustls_pemfile::private_key(&mut bytes.as_slice())
        .map_err(|e| bad_pem(path, e))?
        .ok_or_else(|| not_pem(path, "private key"))
}

/// Reads a PEM key file for rcgen (the CA's key, or a key `certs show` checks).
pub(super) fn load_key_pair(path: &Path) -> Result<rcgen::KeyPair, CertError> {
    let pem = String::from_utf8(read_file(path)?).map_err(|e| bad_pem(path, e))?;
    rcgen::KeyPair::from_pem(&pem).map_err(|e| bad_pem(path, e))
}

/// Reads the CA file into a root store holding only the cluster CA(s).
pub fn load_roots(path: &Path) -> Result<RootCertStore, CertError> {
    let mut roots = RootCertStore::empty();
    for cert in load_certs(path)? {
        roots.add(cert).map_err(|e| bad_ca(path, e))?;
    }
    Ok(roots)
}

pub(super) fn bad_ca(path: &Path, source: impl Into<super::error::Detail>) -> CertError {
    CertError::BadCa {
        path: path.to_path_buf(),
        source: source.into(),
    }
}

/// The subject public key of a certificate read from `path` (named in the error).
pub(super) fn public_key_of(der: &CertificateDer<'_>, path: &Path) -> Result<Vec<u8>, CertError> {
    let (_, parsed) =
        x509_parser::parse_x509_certificate(der.as_ref()).map_err(|e| bad_ca(path, e))?;
    Ok(parsed.public_key().raw.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certs::{init, CA_CERT_FILE};

    #[test]
    fn load_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.pem");
        let err = load_certs(&missing).unwrap_err();
        assert!(err.to_string().contains("nope.pem"), "{err}");
        assert!(matches!(err, CertError::Missing(_)));

        let garbage = dir.path().join("garbage.pem");
        fs::write(&garbage, "not a pem file\n").unwrap();
        let err = load_certs(&garbage).unwrap_err();
        assert!(err.to_string().contains("garbage.pem"), "{err}");
        let err = load_key(&garbage).unwrap_err();
        assert!(
            matches!(
                err,
                CertError::NotPem {
                    what: "private key",
                    ..
                }
            ),
            "{err}"
        );

        init(dir.path(), &[1]).unwrap();
        // A certificate where a key should be: no key in it.
        let err = load_key(&dir.path().join("node-1.pem")).unwrap_err();
        assert!(err.to_string().contains("node-1.pem"), "{err}");
        // The CA as our own certificate: no identity, and the error names the file.
        let files = TlsFiles {
            cert: dir.path().join(CA_CERT_FILE),
            ..TlsFiles::for_node(dir.path(), 1)
        };
        let err = files.load().unwrap_err();
        assert!(err.to_string().contains(CA_CERT_FILE), "{err}");
    }
}
