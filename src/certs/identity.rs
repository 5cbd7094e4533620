//! Who a certificate speaks for: the bully DNS name in its subject alternative names.

use super::CertError;
use crate::protocol::NodeId;
use rustls::pki_types::CertificateDer;
use std::fmt;

/// DNS SAN carried by the client certificate.
pub const CLIENT_DNS_NAME: &str = "client.bully";

/// The DNS name a node's certificate carries and peers verify when they dial it.
pub fn node_dns_name(id: NodeId) -> String {
    format!("node-{id}.bully")
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

/// Reads the identity from a certificate's DNS SANs. Exactly one bully name must be
/// present: a certificate that could speak for two identities is refused.
pub fn identity_of(cert: &CertificateDer<'_>) -> Result<Identity, CertError> {
    let (_, parsed) =
        x509_parser::parse_x509_certificate(cert.as_ref()).map_err(CertError::Parse)?;
    let san = parsed
        .subject_alternative_name()
        .map_err(CertError::BadSan)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certs::{init, load_certs, CA_CERT_FILE};
    use std::path::Path;

    fn der(path: &Path) -> CertificateDer<'static> {
        load_certs(path).unwrap().remove(0)
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
}
