//! `bully certs show`: what each certificate in a directory speaks for, until when,
//! whether the directory's CA signed it and whether its key is there and matches —
//! the questions to answer before copying files to hosts or after a rotation.

use super::load::{load_key_pair, public_key_of};
use super::{identity_of, load_certs, CertError, Identity, CA_CERT_FILE};
use rustls::pki_types::CertificateDer;
use std::fmt;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// One certificate file of a directory, as `certs show` prints it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CertSummary {
    /// The `.pem` file.
    pub file: PathBuf,
    /// `CA`, `node-<id>`, `client`, or why no bully identity could be read.
    pub identity: String,
    /// The subject's common name (for a client: the name given to `certs client`).
    pub common_name: String,
    /// Last day of validity, `YYYY-MM-DD` (UTC).
    pub expires: String,
    /// Whole days until expiry; negative once expired.
    pub days_left: i64,
    /// Whether the directory's `ca.pem` signed it (the CA itself: self-signed).
    pub signed_by_ca: bool,
    /// The key beside it (`.key`) and how it stands.
    pub key: KeyState,
}

/// The private key next to a certificate: present with its mode, missing, or not the
/// certificate's key (a half-finished rotation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "state", content = "mode")]
pub enum KeyState {
    /// Present and matching; the file's permission bits.
    Matches(u32),
    /// No key file beside the certificate (as on a host that only verifies).
    Missing,
    /// A key file that does not belong to the certificate, or cannot be read.
    Mismatch,
}

/// `ok 0640`, `missing` or `MISMATCH`: the KEY column of `certs show`.
impl fmt::Display for KeyState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyState::Matches(mode) => write!(f, "ok {mode:04o}"),
            KeyState::Missing => f.write_str("missing"),
            KeyState::Mismatch => f.write_str("MISMATCH"),
        }
    }
}

/// Summarises every `.pem` file in `dir`, sorted by file name. Fails only when the
/// directory or its `ca.pem` cannot be read; a bad file elsewhere is reported in its row.
pub fn show(dir: &Path) -> Result<Vec<CertSummary>, CertError> {
    let ca_path = dir.join(CA_CERT_FILE);
    let ca = load_certs(&ca_path)?.remove(0);
    let ca_key = public_key_of(&ca, &ca_path)?;
    let entries = fs::read_dir(dir).map_err(|source| CertError::Read {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "pem"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|file| summarise(&file, &ca, &ca_key))
        .collect()
}

fn summarise(
    file: &Path,
    ca: &CertificateDer<'_>,
    ca_key: &[u8],
) -> Result<CertSummary, CertError> {
    let der = load_certs(file)?.remove(0);
    let (_, parsed) = x509_parser::parse_x509_certificate(der.as_ref())
        .map_err(|e| CertError::Parse(e).in_file(file))?;
    let (_, ca_parsed) =
        x509_parser::parse_x509_certificate(ca.as_ref()).map_err(CertError::Parse)?;
    let is_ca = der.as_ref() == ca.as_ref();
    let identity = if is_ca {
        "CA".to_string()
    } else {
        match identity_of(&der) {
            Ok(Identity::Node(id)) => format!("node-{id}"),
            Ok(Identity::Client) => "client".to_string(),
            Err(e) => format!("none ({e})"),
        }
    };
    let common_name = parsed
        .subject()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .unwrap_or("")
        .to_string();
    let not_after = parsed.validity().not_after;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let signed_by_ca = parsed
        .verify_signature(Some(ca_parsed.public_key()))
        .is_ok();
    Ok(CertSummary {
        file: file.to_path_buf(),
        identity,
        common_name,
        expires: not_after.to_datetime().date().to_string(),
        days_left: (not_after.timestamp() - now).div_euclid(86_400),
        signed_by_ca,
        key: key_state(file, &der, is_ca.then_some(ca_key)),
    })
}

/// Looks at `<stem>.key` beside `cert`.
fn key_state(cert_file: &Path, cert: &CertificateDer<'_>, ca_key: Option<&[u8]>) -> KeyState {
    let key_file = cert_file.with_extension("key");
    let Ok(meta) = fs::metadata(&key_file) else {
        return KeyState::Missing;
    };
    let public = match ca_key {
        Some(key) => key.to_vec(),
        None => match public_key_of(cert, cert_file) {
            Ok(key) => key,
            Err(_) => return KeyState::Mismatch,
        },
    };
    let matches = load_key_pair(&key_file).is_ok_and(|key| key.public_key_der() == public);
    if matches {
        KeyState::Matches(meta.permissions().mode() & 0o7777)
    } else {
        KeyState::Mismatch
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn show_names_identities_and_checks_keys() {
        let dir = tempfile::tempdir().unwrap();
        crate::certs::init(dir.path(), &[1, 2]).unwrap();
        crate::certs::issue_client(dir.path(), "backup", false).unwrap();
        // A half-finished rotation: node 2's key belongs to node 1.
        fs::copy(dir.path().join("node-1.key"), dir.path().join("node-2.key")).unwrap();
        let rows = show(dir.path()).unwrap();
        let by_file = |name: &str| {
            rows.iter()
                .find(|r| r.file.file_name().unwrap() == name)
                .unwrap_or_else(|| panic!("no row for {name}: {rows:?}"))
        };
        assert_eq!(rows.len(), 5, "{rows:?}");
        assert_eq!(by_file("ca.pem").identity, "CA");
        assert_eq!(by_file("ca.pem").key, KeyState::Matches(0o600));
        assert_eq!(by_file("node-1.pem").identity, "node-1");
        assert_eq!(by_file("node-1.pem").key, KeyState::Matches(0o640));
        assert_eq!(by_file("node-2.pem").key, KeyState::Mismatch);
        let backup = by_file("client-backup.pem");
        assert_eq!(
            (backup.identity.as_str(), backup.common_name.as_str()),
            ("client", "backup")
        );
        assert!(rows.iter().all(|r| r.signed_by_ca), "{rows:?}");
        assert!(rows.iter().all(|r| r.days_left > 365 * 15), "{rows:?}");
    }

    #[test]
    fn a_certificate_from_another_ca_is_not_signed_by_this_one() {
        let ours = tempfile::tempdir().unwrap();
        let theirs = tempfile::tempdir().unwrap();
        crate::certs::init(ours.path(), &[1]).unwrap();
        crate::certs::init(theirs.path(), &[1]).unwrap();
        fs::copy(
            theirs.path().join("node-1.pem"),
            ours.path().join("node-9.pem"),
        )
        .unwrap();
        let rows = show(ours.path()).unwrap();
        let foreign = rows
            .iter()
            .find(|r| r.file.ends_with("node-9.pem"))
            .unwrap();
        assert!(!foreign.signed_by_ca);
        assert_eq!(foreign.key, KeyState::Missing);
    }
}
