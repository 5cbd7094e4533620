//! The cluster's certificates: making them (`bully certs init`), loading them with errors
//! that name the file, and reading the identity a certificate is bound to.
//!
//! Identity lives in the subject alternative name: `node-<id>.bully` for a node,
//! `client.bully` for an API client. A node dials a peer with the server name
//! `node-<peer>.bully`, so TLS name verification itself refuses a process holding another
//! node's certificate; on the server side the client certificate's SAN tells who dialed.

mod inspect;

pub use inspect::{show, CertSummary, KeyState};

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
/// The CA's private key; only `certs init`, `add` and `client` need it, never a running
/// node, so it stays on the machine that issues certificates.
pub const CA_KEY_FILE: &str = "ca.key";
/// The client certificate used by `bully leader/status/watch`.
pub const CLIENT_CERT_FILE: &str = "client.pem";
/// The client certificate's key.
pub const CLIENT_KEY_FILE: &str = "client.key";

/// Common name of the CA, so `openssl x509 -text` shows what the file is.
const CA_COMMON_NAME: &str = "bully cluster CA";

/// Certificates are valid this many years from the start of last year; rotation is a
/// re-issue with `--replace` (there is no revocation in a closed cluster CA).
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

/// Certificate and key file of a named client: `client` keeps the files `certs init`
/// writes (`client.pem`), any other name gets `client-<name>.pem` beside them.
pub fn client_files(name: &str) -> (String, String) {
    if name == "client" {
        (CLIENT_CERT_FILE.to_string(), CLIENT_KEY_FILE.to_string())
    } else {
        (format!("client-{name}.pem"), format!("client-{name}.key"))
    }
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
    #[error("{} already exists; refusing to overwrite it ({})", .0.display(), overwrite_hint(.0))]
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
    #[error("client name {0:?} is not usable: use 1 to 64 letters, digits, `.`, `_` or `-`, not starting with `.`")]
    BadClientName(String),
    #[error("cannot generate certificate: {0}")]
    Generate(String),
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
    let ca = Ca::load(&dir.join(CA_CERT_FILE), &dir.join(CA_KEY_FILE))?;
    issue_nodes(&ca, dir, nodes, replace)
}

/// Issues a client certificate (SAN `client.bully`, common name `name`) with the CA
/// in `dir`, so each operator or script gets a key of its own; files as
/// [`client_files`] names them. Refuses to replace one unless `replace`.
pub fn issue_client(dir: &Path, name: &str, replace: bool) -> Result<Vec<PathBuf>, CertError> {
    check_client_name(name)?;
    let ca = Ca::load(&dir.join(CA_CERT_FILE), &dir.join(CA_KEY_FILE))?;
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
    let (cert_path, key_path) = (dir.join(cert_file), dir.join(key_file));
    if !replace {
        refuse_existing(&[&cert_path, &key_path])?;
    }
    let (cert, key) = ca.issue(
        CLIENT_DNS_NAME,
        name,
        &[ExtendedKeyUsagePurpose::ClientAuth],
    )?;
    Ok(vec![
        write_file(&cert_path, cert.as_bytes(), CERT_MODE)?,
        write_file(&key_path, key.as_bytes(), KEY_MODE)?,
    ])
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
    let mut written = Vec::new();
    for (id, (cert_path, key_path)) in nodes.iter().zip(&targets) {
        // Nodes are servers to the peers that dial them and clients when they dial.
        let dns = node_dns_name(*id);
        let (cert, key) = ca.issue(
            &dns,
            &dns,
            &[
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        )?;
        written.push(write_file(cert_path, cert.as_bytes(), CERT_MODE)?);
        written.push(write_file(key_path, key.as_bytes(), KEY_MODE)?);
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

    /// Issues a leaf certificate for one DNS name (the identity) with a common name
    /// (who holds it); returns (cert PEM, key PEM).
    fn issue(
        &self,
        dns: &str,
        common_name: &str,
        usages: &[ExtendedKeyUsagePurpose],
    ) -> Result<(String, String), CertError> {
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

    fn der(path: &Path) -> CertificateDer<'static> {
        load_certs(path).unwrap().remove(0)
    }

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
    fn signing_without_the_ca_key_names_the_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        init(dir.path(), &[1]).unwrap();
        fs::remove_file(dir.path().join(CA_KEY_FILE)).unwrap();
        let err = add_nodes(dir.path(), &[2]).unwrap_err();
        assert!(
            matches!(err, CertError::Missing(ref p) if p.ends_with(CA_KEY_FILE)),
            "{err}"
        );
        assert!(!dir.path().join(node_cert_file(2)).exists());
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
