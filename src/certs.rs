//! The cluster's certificates: making them (`bully certs init`), loading them with errors
//! that name the file, and reading the identity a certificate is bound to.
//!
//! Identity lives in the subject alternative name: `node-<id>.bully` for a node,
//! `client.bully` for an API client. A node dials a peer with the server name
//! `node-<peer>.bully`, so TLS name verification itself refuses a process holding another
//! node's certificate; on the server side the client certificate's SAN tells who dialed.

use crate::protocol::NodeId;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::RootCertStore;
use std::collections::BTreeSet;
use std::fmt;
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// DNS SAN carried by the client certificate.
pub const CLIENT_DNS_NAME: &str = "client.bully";

/// File names inside a certificate directory, shared by `init` and the config examples.
pub const CA_CERT_FILE: &str = "ca.pem";
/// The CA's private key; only `certs init` / `add_nodes` need it, never a running node.
pub const CA_KEY_FILE: &str = "ca.key";
/// The client certificate used by `bully leader/status/watch`.
pub const CLIENT_CERT_FILE: &str = "client.pem";
/// The client certificate's key.
pub const CLIENT_KEY_FILE: &str = "client.key";

/// Common name of the CA, so `openssl x509 -text` shows what the file is.
const CA_COMMON_NAME: &str = "bully cluster CA";

/// Certificates are valid this many years from the start of last year; rotation is a
/// re-run of `certs init` (there is no revocation in a closed cluster CA).
const VALID_YEARS: i32 = 20;

/// The DNS name a node's certificate carries and peers verify when they dial it.
pub fn node_dns_name(id: NodeId) -> String {
    format!("node-{id}.bully")
}

/// Certificate file for node `id` in a certificate directory.
pub fn node_cert_file(id: NodeId) -> String {
    format!("node-{id}.pem")
}

/// Key file for node `id` in a certificate directory.
pub fn node_key_file(id: NodeId) -> String {
    format!("node-{id}.key")
}

/// Who a certificate speaks for. Peers are identified by this, never by address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Identity {
    /// A cluster member; the ID is the one in `node-<id>.bully`.
    Node(NodeId),
    /// An API client (`client.bully`): may query, may not speak the peer protocol.
    Client,
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Identity::Node(id) => write!(f, "node-{id}"),
            Identity::Client => f.write_str("client"),
        }
    }
}

/// Everything that can go wrong making, loading or reading certificates. Every variant
/// that concerns a file names it.
#[derive(Debug, Error)]
pub enum CertError {
    #[error("{0} already exists; refusing to overwrite it (replacing the CA invalidates every certificate it signed)")]
    Exists(PathBuf),
    #[error("{0} does not exist")]
    Missing(PathBuf),
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
    #[error("{path} is not valid PEM: {detail}")]
    BadPem { path: PathBuf, detail: String },
    #[error("{path} holds no PEM {what}")]
    NotPem { path: PathBuf, what: &'static str },
    #[error("{path} is not a usable CA certificate: {detail}")]
    BadCa { path: PathBuf, detail: String },
    #[error("{path}: {source}")]
    InFile {
        path: PathBuf,
        source: Box<CertError>,
    },
    #[error("cannot parse certificate: {0}")]
    Parse(String),
    #[error("certificate names no bully identity (node-<id>.bully or client.bully); its DNS names: {0:?}")]
    NoIdentity(Vec<String>),
    #[error("certificate names more than one bully identity: {0:?}")]
    AmbiguousIdentity(Vec<String>),
    #[error("node id {0} is listed twice")]
    DuplicateNode(NodeId),
    #[error("cannot generate certificate: {0}")]
    Generate(String),
}

impl From<rcgen::Error> for CertError {
    fn from(e: rcgen::Error) -> Self {
        CertError::Generate(e.to_string())
    }
}

/// Reads the identity from a certificate's DNS SANs. Exactly one bully name must be
/// present: a certificate that could speak for two identities is refused.
pub fn identity_of(cert: &CertificateDer<'_>) -> Result<Identity, CertError> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref())
        .map_err(|e| CertError::Parse(e.to_string()))?;
    let san = parsed
        .subject_alternative_name()
        .map_err(|e| CertError::Parse(format!("subject alternative name: {e}")))?;
    let dns: Vec<String> = san
        .map(|ext| {
            ext.value
                .general_names
                .iter()
                .filter_map(|name| match name {
                    x509_parser::extensions::GeneralName::DNSName(d) => Some(d.to_string()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    let found: Vec<(String, Identity)> = dns
        .iter()
        .filter_map(|d| identity_from_dns(d).map(|i| (d.clone(), i)))
        .collect();
    match found.as_slice() {
        [] => Err(CertError::NoIdentity(dns)),
        [(_, identity)] => Ok(*identity),
        many => Err(CertError::AmbiguousIdentity(
            many.iter().map(|(d, _)| d.clone()).collect(),
        )),
    }
}

/// Parses `node-<id>.bully` (canonical decimal, no sign or leading zero) or
/// `client.bully`; anything else is not a bully name. Canonical digits keep the
/// name ↔ ID mapping one-to-one.
fn identity_from_dns(name: &str) -> Option<Identity> {
    if name.eq_ignore_ascii_case(CLIENT_DNS_NAME) {
        return Some(Identity::Client);
    }
    let lower = name.to_ascii_lowercase();
    let digits = lower.strip_prefix("node-")?.strip_suffix(".bully")?;
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    if !canonical {
        return None;
    }
    digits.parse().ok().map(Identity::Node)
}

/// The three files a node or client needs for mutual TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The cluster CA certificate: the only trust anchor.
    pub ca: PathBuf,
    /// Our certificate (node or client), signed by the CA.
    pub cert: PathBuf,
    /// The private key matching `cert`.
    pub key: PathBuf,
}

impl TlsFiles {
    /// The files for node `id` in a directory made by [`init`].
    pub fn for_node(dir: &Path, id: NodeId) -> Self {
        TlsFiles {
            ca: dir.join(CA_CERT_FILE),
            cert: dir.join(node_cert_file(id)),
            key: dir.join(node_key_file(id)),
        }
    }

    /// The client files in a directory made by [`init`].
    pub fn for_client(dir: &Path) -> Self {
        TlsFiles {
            ca: dir.join(CA_CERT_FILE),
            cert: dir.join(CLIENT_CERT_FILE),
            key: dir.join(CLIENT_KEY_FILE),
        }
    }

    /// Loads and checks all three files; each error names the file at fault.
    pub fn load(&self) -> Result<TlsMaterial, CertError> {
        let roots = load_roots(&self.ca)?;
        let chain = load_certs(&self.cert)?;
        let identity = identity_of(&chain[0]).map_err(|e| in_file(&self.cert, e))?;
        let key = load_key(&self.key)?;
        Ok(TlsMaterial {
            roots,
            chain,
            key,
            identity,
        })
    }
}

/// Loaded TLS files, ready for rustls.
#[derive(Debug)]
pub struct TlsMaterial {
    /// Trust anchors: the cluster CA only.
    pub roots: RootCertStore,
    /// Our certificate first, then any intermediates.
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
    /// Who our own certificate says we are.
    pub identity: Identity,
}

fn in_file(path: &Path, e: CertError) -> CertError {
    CertError::InFile {
        path: path.to_path_buf(),
        source: Box::new(e),
    }
}

fn read_file(path: &Path) -> Result<Vec<u8>, CertError> {
    fs::read(path).map_err(|source| match source.kind() {
        io::ErrorKind::NotFound => CertError::Missing(path.to_path_buf()),
        _ => CertError::Read {
            path: path.to_path_buf(),
            source,
        },
    })
}

/// Reads every certificate in a PEM file; fails if there is none.
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, CertError> {
    let bytes = read_file(path)?;
    let certs = rustls_pemfile::certs(&mut bytes.as_slice())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CertError::BadPem {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(CertError::NotPem {
            path: path.to_path_buf(),
            what: "certificate",
        });
    }
    Ok(certs)
}

/// Reads the first private key (PKCS#8, PKCS#1 or SEC1) in a PEM file.
pub fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, CertError> {
    let bytes = read_file(path)?;
    rustls_pemfile::private_key(&mut bytes.as_slice())
        .map_err(|e| CertError::BadPem {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })?
        .ok_or_else(|| CertError::NotPem {
            path: path.to_path_buf(),
            what: "private key",
        })
}

/// Reads the CA file into a root store holding only the cluster CA(s).
pub fn load_roots(path: &Path) -> Result<RootCertStore, CertError> {
    let mut roots = RootCertStore::empty();
    for cert in load_certs(path)? {
        roots.add(cert).map_err(|e| CertError::BadCa {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })?;
    }
    Ok(roots)
}

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
        for path in [&ca_cert, &ca_key] {
            if path.exists() {
                return Err(CertError::Exists(path.clone()));
            }
        }
    }
    fs::create_dir_all(dir).map_err(|source| CertError::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    let ca = Ca::generate()?;
    let mut written = vec![
        write_file(&ca_cert, ca.cert.pem().as_bytes(), false)?,
        write_file(&ca_key, ca.key.serialize_pem().as_bytes(), true)?,
    ];
    written.extend(issue_nodes(&ca, dir, nodes, true)?);
    let (cert, key) = ca.issue(CLIENT_DNS_NAME, &[ExtendedKeyUsagePurpose::ClientAuth])?;
    written.push(write_file(
        &dir.join(CLIENT_CERT_FILE),
        cert.as_bytes(),
        false,
    )?);
    written.push(write_file(
        &dir.join(CLIENT_KEY_FILE),
        key.as_bytes(),
        true,
    )?);
    Ok(written)
}

/// Issues certificates for new node IDs with the CA already in `dir` (`ca.pem`,
/// `ca.key`), so a cluster can grow without re-issuing everyone's certificate.
/// Refuses to replace an existing node certificate.
pub fn add_nodes(dir: &Path, nodes: &[NodeId]) -> Result<Vec<PathBuf>, CertError> {
    check_distinct(nodes)?;
    let ca = Ca::load(&dir.join(CA_CERT_FILE), &dir.join(CA_KEY_FILE))?;
    issue_nodes(&ca, dir, nodes, false)
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
        // Check all before writing any, so a refusal leaves the directory unchanged.
        for path in targets.iter().flat_map(|(c, k)| [c, k]) {
            if path.exists() {
                return Err(CertError::Exists(path.clone()));
            }
        }
    }
    let mut written = Vec::new();
    for (id, (cert_path, key_path)) in nodes.iter().zip(&targets) {
        // Nodes are servers to the peers that dial them and clients when they dial.
        let (cert, key) = ca.issue(
            &node_dns_name(*id),
            &[
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        )?;
        written.push(write_file(cert_path, cert.as_bytes(), false)?);
        written.push(write_file(key_path, key.as_bytes(), true)?);
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

    /// Rebuilds a signer from an existing CA: rcgen needs the CA's parameters (subject
    /// and key identifier) and key; re-self-signing them yields the same issuer name
    /// and key, so certificates it signs verify against the original `ca.pem`.
    fn load(cert_path: &Path, key_path: &Path) -> Result<Self, CertError> {
        let ca_der = load_certs(cert_path)?.remove(0);
        let params =
            CertificateParams::from_ca_cert_der(&ca_der).map_err(|e| CertError::BadCa {
                path: cert_path.to_path_buf(),
                detail: e.to_string(),
            })?;
        let pem = String::from_utf8(read_file(key_path)?).map_err(|e| CertError::BadPem {
            path: key_path.to_path_buf(),
            detail: e.to_string(),
        })?;
        let key = KeyPair::from_pem(&pem).map_err(|e| CertError::BadPem {
            path: key_path.to_path_buf(),
            detail: e.to_string(),
        })?;
        if key.public_key_der() != public_key_of(&ca_der, cert_path)? {
            return Err(CertError::BadCa {
                path: cert_path.to_path_buf(),
                detail: format!("its public key does not match {}", key_path.display()),
            });
        }
        let cert = params.self_signed(&key)?;
        Ok(Ca { cert, key })
    }

    /// Issues a leaf certificate for one DNS name; returns (cert PEM, key PEM).
    fn issue(
        &self,
        dns: &str,
        usages: &[ExtendedKeyUsagePurpose],
    ) -> Result<(String, String), CertError> {
        let mut params = CertificateParams::new(vec![dns.to_string()])?;
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, dns);
        params.distinguished_name = dn;
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = usages.to_vec();
        params.use_authority_key_identifier_extension = true;
        set_validity(&mut params);
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.cert, &self.key)?;
        Ok((cert.pem(), key.serialize_pem()))
    }
}

fn public_key_of(der: &CertificateDer<'_>, path: &Path) -> Result<Vec<u8>, CertError> {
    let (_, parsed) =
        x509_parser::parse_x509_certificate(der.as_ref()).map_err(|e| CertError::BadCa {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })?;
    Ok(parsed.public_key().raw.to_vec())
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

/// Writes a file; keys are created with mode 0600 so no other user can read them.
/// An existing file is replaced (callers check for overwrites first).
fn write_file(path: &Path, contents: &[u8], secret: bool) -> Result<PathBuf, CertError> {
    let err = |source| CertError::Write {
        path: path.to_path_buf(),
        source,
    };
    if path.exists() {
        // Remove first: `mode` only applies when the file is created.
        fs::remove_file(path).map_err(err)?;
    }
    let mode = if secret { 0o600 } else { 0o644 };
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

    fn der(path: &Path) -> CertificateDer<'static> {
        load_certs(path).unwrap().remove(0)
    }

    #[test]
    fn init_writes_every_file_with_private_keys_0600() {
        let dir = tempfile::tempdir().unwrap();
        let written = init(dir.path(), &[1, 2, 3]).unwrap();
        assert_eq!(written.len(), 2 + 3 * 2 + 2);
        for path in &written {
            let mode = fs::metadata(path).unwrap().permissions().mode() & 0o777;
            let is_key = path.extension().is_some_and(|e| e == "key");
            assert_eq!(
                mode,
                if is_key { 0o600 } else { 0o644 },
                "{}",
                path.display()
            );
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
        let leaf = der(&dir.path().join(node_cert_file(4)));
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
    fn identity_reads_node_and_client_names() {
        let dir = tempfile::tempdir().unwrap();
        init(dir.path(), &[7]).unwrap();
        assert_eq!(
            identity_of(&der(&dir.path().join("node-7.pem"))).unwrap(),
            Identity::Node(7)
        );
        assert_eq!(
            identity_of(&der(&dir.path().join("client.pem"))).unwrap(),
            Identity::Client
        );
        // The CA has no SAN at all.
        assert!(matches!(
            identity_of(&der(&dir.path().join(CA_CERT_FILE))),
            Err(CertError::NoIdentity(_))
        ));
        assert!(identity_of(&CertificateDer::from(vec![1, 2, 3])).is_err());
    }

    #[test]
    fn only_canonical_bully_names_are_identities() {
        assert_eq!(identity_from_dns("node-12.bully"), Some(Identity::Node(12)));
        assert_eq!(identity_from_dns("node-0.bully"), Some(Identity::Node(0)));
        assert_eq!(identity_from_dns("client.bully"), Some(Identity::Client));
        for bad in [
            "node-012.bully",
            "node-.bully",
            "node-+1.bully",
            "node-1.bully.evil",
            "node-1",
            "x.bully",
        ] {
            assert_eq!(identity_from_dns(bad), None, "{bad}");
        }
        assert_eq!(identity_from_dns("node-99999999999999999999.bully"), None);
    }

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
