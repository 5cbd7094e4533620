//! Issuing: the cluster CA and the node and client certificates it signs, written
//! with modes that keep keys private from the moment they exist.

use super::files::{client_files, node_cert_file, node_key_file, CA_CERT_FILE, CA_KEY_FILE};
use super::identity::{node_dns_name, CLIENT_DNS_NAME};
use super::load::{bad_ca, load_certs, load_key_pair, public_key_of};
use super::CertError;
use crate::protocol::NodeId;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Common name of the CA, so `openssl x509 -text` shows what the file is.
const CA_COMMON_NAME: &str = "bully cluster CA";

/// Certificates are valid from 1 January of last year to 1 January this many years after
/// this year: 19 to 20 years from the day of issue (19.1 for one issued in late
/// November); rotation is a re-issue with `--replace` (there is no revocation in a
/// closed cluster CA).
const VALID_YEARS: i32 = 20;

/// Mode of node and client keys: the owner (root, who installs them) writes, the
/// service's group (`bully`) reads, so a node running as an unprivileged user can
/// load a key it cannot change.
pub const KEY_MODE: u32 = 0o640;
/// Mode of the CA key: only its owner may read it; no service ever needs it.
pub const CA_KEY_MODE: u32 = 0o600;
/// Mode of certificates: public by nature.
const CERT_MODE: u32 = 0o644;

/// Longest client name `certs client --name` accepts (it becomes part of file names).
pub const MAX_CLIENT_NAME: usize = 64;

/// Creates a new CA, a certificate per node and a client certificate in `dir`, refusing
/// to replace an existing CA. Returns the files written.
pub fn init(dir: &Path, nodes: &[NodeId]) -> Result<Vec<PathBuf>, CertError> {
    init_with(dir, nodes, false)
}

/// Like [`init`]; with `overwrite` an existing CA and its certificates are replaced.
pub fn init_with(dir: &Path, nodes: &[NodeId], overwrite: bool) -> Result<Vec<PathBuf>, CertError> {
    check_distinct(nodes)?;
    let ca_cert = dir.join(CA_CERT_FILE);
    let ca_key = dir.join(CA_KEY_FILE);
    if !overwrite {
        refuse_existing(&[&ca_cert, &ca_key])?;
    }
    fs::create_dir_all(dir).map_err(|source| CertError::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    let ca = Ca::generate()?;
    let mut written = vec![
        write_file(&ca_cert, ca.cert.pem().as_bytes(), CERT_MODE)?,
        write_file(&ca_key, ca.key.serialize_pem().as_bytes(), CA_KEY_MODE)?,
    ];
    written.extend(issue_nodes(&ca, dir, nodes, true)?);
    written.extend(issue_client_with(&ca, dir, "client", true)?);
    Ok(written)
}

/// Issues certificates for new node IDs with the CA already in `dir` (`ca.pem`,
/// `ca.key`), so a cluster can grow without re-issuing everyone's certificate.
/// Refuses to replace an existing node certificate.
pub fn add_nodes(dir: &Path, nodes: &[NodeId]) -> Result<Vec<PathBuf>, CertError> {
    add_nodes_with(dir, nodes, false)
}

/// Like [`add_nodes`]; with `replace` existing node certificates and keys are issued
/// anew (rotation: a new key, same CA, so the other nodes need nothing).
pub fn add_nodes_with(
    dir: &Path,
    nodes: &[NodeId],
    replace: bool,
) -> Result<Vec<PathBuf>, CertError> {
    check_distinct(nodes)?;
    let ca = Ca::load(dir)?;
    issue_nodes(&ca, dir, nodes, replace)
}

/// Issues a client certificate (SAN `client.bully`, common name `name`) with the CA
/// in `dir`, so each operator or script gets a key of its own; files as
/// [`client_files`] names them. Refuses to replace one unless `replace`.
pub fn issue_client(dir: &Path, name: &str, replace: bool) -> Result<Vec<PathBuf>, CertError> {
    check_client_name(name)?;
    let ca = Ca::load(dir)?;
    issue_client_with(&ca, dir, name, replace)
}

/// A client name becomes part of a file name: plain characters only.
fn check_client_name(name: &str) -> Result<(), CertError> {
    let usable = !name.is_empty()
        && name.len() <= MAX_CLIENT_NAME
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if usable {
        Ok(())
    } else {
        Err(CertError::BadClientName(name.to_string()))
    }
}

fn issue_client_with(
    ca: &Ca,
    dir: &Path,
    name: &str,
    replace: bool,
) -> Result<Vec<PathBuf>, CertError> {
    let (cert_file, key_file) = client_files(name);
    let files = (dir.join(cert_file), dir.join(key_file));
    if !replace {
        refuse_existing(&[&files.0, &files.1])?;
    }
    let usages = [ExtendedKeyUsagePurpose::ClientAuth];
    Ok(ca.issue_to(CLIENT_DNS_NAME, name, &usages, &files)?.into())
}

/// Checks all before writing any, so a refusal leaves the directory unchanged.
fn refuse_existing(paths: &[&PathBuf]) -> Result<(), CertError> {
    match paths.iter().find(|p| p.exists()) {
        Some(path) => Err(CertError::Exists((*path).clone())),
        None => Ok(()),
    }
}

fn check_distinct(nodes: &[NodeId]) -> Result<(), CertError> {
    let mut seen = BTreeSet::new();
    match nodes.iter().find(|id| !seen.insert(**id)) {
        Some(id) => Err(CertError::DuplicateNode(*id)),
        None => Ok(()),
    }
}

fn issue_nodes(
    ca: &Ca,
    dir: &Path,
    nodes: &[NodeId],
    overwrite: bool,
) -> Result<Vec<PathBuf>, CertError> {
    let targets: Vec<(PathBuf, PathBuf)> = nodes
        .iter()
        .map(|id| (dir.join(node_cert_file(*id)), dir.join(node_key_file(*id))))
        .collect();
    if !overwrite {
        let all: Vec<&PathBuf> = targets.iter().flat_map(|(c, k)| [c, k]).collect();
        refuse_existing(&all)?;
    }
    // Nodes are servers to the peers that dial them and clients when they dial.
    let usages = [
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let mut written = Vec::new();
    for (id, files) in nodes.iter().zip(&targets) {
        let dns = node_dns_name(*id);
        written.extend(ca.issue_to(&dns, &dns, &usages, files)?);
    }
    Ok(written)
}

/// A CA able to sign: its parameters (subject, key id method) and key.
struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl Ca {
    fn generate() -> Result<Self, CertError> {
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, CA_COMMON_NAME);
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        set_validity(&mut params);
        let key = KeyPair::generate()?;
        let cert = params.self_signed(&key)?;
        Ok(Ca { cert, key })
    }

    /// Rebuilds a signer from the CA in `dir`: rcgen needs the CA's parameters (subject
    /// and key identifier) and key; re-self-signing them yields the same issuer name
    /// and key, so certificates it signs verify against the original `ca.pem`.
    fn load(dir: &Path) -> Result<Self, CertError> {
        let (cert_path, key_path) = (dir.join(CA_CERT_FILE), dir.join(CA_KEY_FILE));
        let ca_der = load_certs(&cert_path)?.remove(0);
        let params =
            CertificateParams::from_ca_cert_der(&ca_der).map_err(|e| bad_ca(&cert_path, e))?;
        let key = load_key_pair(&key_path).map_err(|e| match e {
            CertError::Missing(key) => CertError::NoCaKey {
                key,
                dir: dir.to_path_buf(),
            },
            other => other,
        })?;
        if key.public_key_der() != public_key_of(&ca_der, &cert_path)? {
            return Err(CertError::CaKeyMismatch {
                cert: cert_path,
                key: key_path,
            });
        }
        let cert = params.self_signed(&key)?;
        Ok(Ca { cert, key })
    }

    /// Issues a leaf certificate for one DNS name (the identity) with a common name
    /// (who holds it) and writes it and its new key to `files` (certificate, key).
    fn issue_to(
        &self,
        dns: &str,
        common_name: &str,
        usages: &[ExtendedKeyUsagePurpose],
        (cert_path, key_path): &(PathBuf, PathBuf),
    ) -> Result<[PathBuf; 2], CertError> {
        let mut params = CertificateParams::new(vec![dns.to_string()])?;
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, common_name);
        params.distinguished_name = dn;
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = usages.to_vec();
        params.use_authority_key_identifier_extension = true;
        set_validity(&mut params);
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.cert, &self.key)?;
        Ok([
            write_file(cert_path, cert.pem().as_bytes(), CERT_MODE)?,
            write_file(key_path, key.serialize_pem().as_bytes(), KEY_MODE)?,
        ])
    }
}

/// From the start of last year (tolerates clocks a little behind) for [`VALID_YEARS`].
fn set_validity(params: &mut CertificateParams) {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let year = 1970 + (secs / 31_556_952) as i32;
    params.not_before = rcgen::date_time_ymd(year - 1, 1, 1);
    params.not_after = rcgen::date_time_ymd(year + VALID_YEARS, 1, 1);
}

/// Writes a file created with `mode` (see [`KEY_MODE`]), so a key is never readable
/// by others, not even for a moment. An existing file is replaced (callers check for
/// overwrites first).
fn write_file(path: &Path, contents: &[u8], mode: u32) -> Result<PathBuf, CertError> {
    let err = |source| CertError::Write {
        path: path.to_path_buf(),
        source,
    };
    if path.exists() {
        // Remove first: `mode` only applies when the file is created.
        fs::remove_file(path).map_err(err)?;
    }
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(err)?;
    file.write_all(contents).map_err(err)?;
    file.sync_all().map_err(err)?;
    // The umask may have cleared bits; set exactly what we mean.
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).map_err(err)?;
    Ok(path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certs::{load_roots, Identity, TlsFiles};

    #[test]
    fn init_writes_keys_0640_and_the_ca_key_0600() {
        let dir = tempfile::tempdir().unwrap();
        let written = init(dir.path(), &[1, 2, 3]).unwrap();
        assert_eq!(written.len(), 2 + 3 * 2 + 2);
        for path in &written {
            let mode = fs::metadata(path).unwrap().permissions().mode() & 0o777;
            let expected = match path.file_name().and_then(|n| n.to_str()) {
                Some(CA_KEY_FILE) => 0o600,
                _ if path.extension().is_some_and(|e| e == "key") => 0o640,
                _ => 0o644,
            };
            assert_eq!(mode, expected, "{}", path.display());
        }
        for id in [1, 2, 3] {
            let files = TlsFiles::for_node(dir.path(), id);
            assert_eq!(files.load().unwrap().identity, Identity::Node(id));
        }
        let client = TlsFiles::for_client(dir.path()).load().unwrap();
        assert_eq!(client.identity, Identity::Client);
    }

    #[test]
    fn init_refuses_to_replace_a_ca_unless_asked() {
        let dir = tempfile::tempdir().unwrap();
        init(dir.path(), &[1]).unwrap();
        let before = fs::read(dir.path().join(CA_CERT_FILE)).unwrap();
        let err = init(dir.path(), &[1]).unwrap_err();
        assert!(
            matches!(err, CertError::Exists(ref p) if p.ends_with(CA_CERT_FILE)),
            "{err}"
        );
        assert_eq!(fs::read(dir.path().join(CA_CERT_FILE)).unwrap(), before);
        init_with(dir.path(), &[1], true).unwrap();
        assert_ne!(fs::read(dir.path().join(CA_CERT_FILE)).unwrap(), before);
    }

    #[test]
    fn duplicate_node_ids_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            init(dir.path(), &[1, 2, 1]),
            Err(CertError::DuplicateNode(1))
        ));
    }

    #[test]
    fn added_nodes_verify_against_the_existing_ca() {
        let dir = tempfile::tempdir().unwrap();
        init(dir.path(), &[1]).unwrap();
        let written = add_nodes(dir.path(), &[4]).unwrap();
        assert_eq!(written.len(), 2);
        let roots = std::sync::Arc::new(load_roots(&dir.path().join(CA_CERT_FILE)).unwrap());
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        use rustls::client::danger::ServerCertVerifier;
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider)
            .build()
            .unwrap();
        let leaf = load_certs(&dir.path().join(node_cert_file(4)))
            .unwrap()
            .remove(0);
        let name = rustls::pki_types::ServerName::try_from(node_dns_name(4)).unwrap();
        verifier
            .verify_server_cert(&leaf, &[], &name, &[], rustls::pki_types::UnixTime::now())
            .expect("a node added later is signed by the original CA");
        assert!(matches!(
            add_nodes(dir.path(), &[4]),
            Err(CertError::Exists(_))
        ));
    }

    #[test]
    fn named_clients_get_their_own_files_and_rotation_needs_replace() {
        let dir = tempfile::tempdir().unwrap();
        init(dir.path(), &[1]).unwrap();
        let written = issue_client(dir.path(), "monitoring", false).unwrap();
        assert_eq!(
            written,
            vec![
                dir.path().join("client-monitoring.pem"),
                dir.path().join("client-monitoring.key")
            ]
        );
        let files = TlsFiles {
            cert: written[0].clone(),
            key: written[1].clone(),
            ..TlsFiles::for_client(dir.path())
        };
        assert_eq!(files.load().unwrap().identity, Identity::Client);
        let before = fs::read(&written[1]).unwrap();
        let err = issue_client(dir.path(), "monitoring", false).unwrap_err();
        assert!(err.to_string().contains("--replace"), "{err}");
        assert_eq!(
            fs::read(&written[1]).unwrap(),
            before,
            "a refusal writes nothing"
        );
        issue_client(dir.path(), "monitoring", true).unwrap();
        assert_ne!(
            fs::read(&written[1]).unwrap(),
            before,
            "--replace makes a new key"
        );
        // Rotating a node certificate keeps it verifiable by the same CA.
        let old_key = fs::read(dir.path().join(node_key_file(1))).unwrap();
        add_nodes_with(dir.path(), &[1], true).unwrap();
        assert_ne!(
            fs::read(dir.path().join(node_key_file(1))).unwrap(),
            old_key
        );
        assert_eq!(
            TlsFiles::for_node(dir.path(), 1).load().unwrap().identity,
            Identity::Node(1)
        );
    }

    #[test]
    fn client_names_that_would_escape_the_directory_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        init(dir.path(), &[1]).unwrap();
        let too_long = "x".repeat(MAX_CLIENT_NAME + 1);
        for bad in ["", "../x", "a/b", ".hidden", "sp ace", too_long.as_str()] {
            assert!(
                matches!(
                    issue_client(dir.path(), bad, false),
                    Err(CertError::BadClientName(_))
                ),
                "{bad:?}"
            );
        }
        assert!(issue_client(dir.path(), "ops-1.backup_2", false).is_ok());
    }

    #[test]
    fn signing_without_the_ca_key_names_the_missing_file_and_where_it_lives() {
        let dir = tempfile::tempdir().unwrap();
        init(dir.path(), &[1]).unwrap();
        fs::remove_file(dir.path().join(CA_KEY_FILE)).unwrap();
        let err = add_nodes(dir.path(), &[2]).unwrap_err();
        assert!(
            matches!(err, CertError::NoCaKey { ref key, .. } if key.ends_with(CA_KEY_FILE)),
            "{err}"
        );
        assert!(
            err.to_string()
                .contains("run this where the CA key is kept"),
            "{err}"
        );
        assert!(!dir.path().join(node_cert_file(2)).exists());
    }

    #[test]
    fn a_ca_key_that_is_not_the_cas_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        init(dir.path(), &[1]).unwrap();
        init(other.path(), &[1]).unwrap();
        fs::copy(other.path().join(CA_KEY_FILE), dir.path().join(CA_KEY_FILE)).unwrap();
        let err = issue_client(dir.path(), "ops", false).unwrap_err();
        assert!(matches!(err, CertError::CaKeyMismatch { .. }), "{err}");
        assert!(err.to_string().contains("does not match"), "{err}");
    }
}
