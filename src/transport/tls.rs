//! rustls and quinn configuration. Every rustls config is built with an explicit ring
//! provider, so no process-wide default is needed and a second compiled-in provider
//! cannot make rustls panic. TLS 1.3 only (QUIC requires it), no 0-RTT (its data is
//! replayable and arrives before the client is authenticated).

use super::error::{PeerIdentityError, TransportError};
use crate::certs::{identity_of, node_dns_name, Identity, TlsFiles, TlsMaterial};
use crate::protocol::{NodeId, Timing};
use quinn::crypto::rustls::{HandshakeData, QuicClientConfig, QuicServerConfig};
use quinn::{IdleTimeout, VarInt};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{DigitallySignedStruct, SignatureScheme};
use std::sync::Arc;
use std::time::Duration;

/// ALPN for node-to-node connections (the peer stream protocol, see [`super`]).
pub const ALPN_PEER: &[u8] = b"bully-peer/1";
/// ALPN for API clients (`bully leader`, `status`, `watch`): bidirectional request streams.
pub const ALPN_API: &[u8] = b"bully-api/1";

/// First RTT guess before any measurement. quinn's default (333 ms) is meant for the
/// open internet; cluster members share a LAN, and a short guess makes handshake
/// retransmissions (a peer that was just restarting) come after tens of ms, not a second.
pub const INITIAL_RTT: Duration = Duration::from_millis(10);

/// How many request streams an API client may have open at once.
pub const MAX_CLIENT_STREAMS: u32 = 16;

/// Server name used by [`super::connect_client`] when any node will do; the verifier
/// then checks the certificate against the name the certificate itself claims.
pub const ANY_NODE_SERVER_NAME: &str = "any-node.bully";

/// The ring provider, passed explicitly to every builder.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Who the other side of an established connection is, from its certificate.
pub fn peer_identity(conn: &quinn::Connection) -> Result<Identity, TransportError> {
    let any = conn
        .peer_identity()
        .ok_or(PeerIdentityError::NoCertificate)?;
    let chain = any
        .downcast::<Vec<CertificateDer<'static>>>()
        .map_err(|_| PeerIdentityError::UnexpectedType)?;
    let leaf = chain.first().ok_or(PeerIdentityError::EmptyChain)?;
    Ok(identity_of(leaf).map_err(PeerIdentityError::Cert)?)
}

/// The ALPN protocol the handshake settled on, if any.
pub fn negotiated_alpn(conn: &quinn::Connection) -> Option<Vec<u8>> {
    conn.handshake_data()?
        .downcast::<HandshakeData>()
        .ok()?
        .protocol
}

/// The server side of a node: requires a client certificate from the cluster CA and
/// offers both ALPN protocols.
pub(super) fn server_config(
    files: &TlsFiles,
    material: &TlsMaterial,
    timing: &Timing,
) -> Result<quinn::ServerConfig, TransportError> {
    let provider = provider();
    let verifier = WebPkiClientVerifier::builder_with_provider(
        Arc::new(material.roots.clone()),
        provider.clone(),
    )
    .build()
    .map_err(|e| config_error(files, e))?;
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| config_error(files, e))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(material.chain.clone(), material.key.clone_key())
        .map_err(|e| config_error(files, e))?;
    tls.alpn_protocols = vec![ALPN_PEER.to_vec(), ALPN_API.to_vec()];
    tls.max_early_data_size = 0;
    let crypto = QuicServerConfig::try_from(tls).map_err(|e| config_error(files, e))?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    let mut transport = timed_transport(timing)?;
    // A peer sends on exactly one unidirectional stream; clients use bidirectional ones.
    // The dialer keeps a quiet link alive (its pings reset our idle timer too); a ping
    // from each side would double the cost of every quiet link.
    transport
        .keep_alive_interval(None)
        .max_concurrent_uni_streams(VarInt::from_u32(1))
        .max_concurrent_bidi_streams(VarInt::from_u32(MAX_CLIENT_STREAMS));
    config.transport_config(Arc::new(transport));
    Ok(config)
}

/// The dialing side of a node: presents our node certificate and verifies the peer's
/// against the name given at connect time (`node-<peer>.bully`).
pub(super) fn peer_client_config(
    files: &TlsFiles,
    material: &TlsMaterial,
    timing: &Timing,
) -> Result<quinn::ClientConfig, TransportError> {
    let verifier = webpki_server_verifier(files, material)?;
    let mut transport = timed_transport(timing)?;
    // The peer opens one stream towards its dialer, for its hello.
    transport
        .max_concurrent_uni_streams(VarInt::from_u32(1))
        .max_concurrent_bidi_streams(VarInt::from_u32(0));
    client_config(files, material, verifier, ALPN_PEER, transport)
}

/// An API client's config. With `expect = Some(id)` the server must be `node-<id>`;
/// with `None` any node certificate from the cluster CA is accepted.
pub(super) fn api_client_config(
    files: &TlsFiles,
    material: &TlsMaterial,
    expect: Option<NodeId>,
) -> Result<quinn::ClientConfig, TransportError> {
    let webpki = webpki_server_verifier(files, material)?;
    let verifier: Arc<dyn ServerCertVerifier> = match expect {
        Some(_) => webpki,
        None => Arc::new(AnyNodeVerifier { inner: webpki }),
    };
    let mut transport = quinn::TransportConfig::default();
    // Generous: the server's keep-alives hold the connection while a watch is idle,
    // and the smaller idle timeout of the two sides wins anyway.
    transport
        .keep_alive_interval(Some(Duration::from_secs(1)))
        .max_idle_timeout(Some(idle_timeout(Duration::from_secs(10))?))
        .initial_rtt(INITIAL_RTT)
        .max_concurrent_uni_streams(VarInt::from_u32(0))
        .max_concurrent_bidi_streams(VarInt::from_u32(0))
        .datagram_receive_buffer_size(None);
    client_config(files, material, verifier, ALPN_API, transport)
}

fn client_config(
    files: &TlsFiles,
    material: &TlsMaterial,
    verifier: Arc<dyn ServerCertVerifier>,
    alpn: &[u8],
    transport: quinn::TransportConfig,
) -> Result<quinn::ClientConfig, TransportError> {
    let mut tls = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| config_error(files, e))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_client_auth_cert(material.chain.clone(), material.key.clone_key())
        .map_err(|e| config_error(files, e))?;
    tls.alpn_protocols = vec![alpn.to_vec()];
    tls.enable_early_data = false;
    let crypto = QuicClientConfig::try_from(tls).map_err(|e| config_error(files, e))?;
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    config.transport_config(Arc::new(transport));
    Ok(config)
}

fn webpki_server_verifier(
    files: &TlsFiles,
    material: &TlsMaterial,
) -> Result<Arc<WebPkiServerVerifier>, TransportError> {
    WebPkiServerVerifier::builder_with_provider(Arc::new(material.roots.clone()), provider())
        .build()
        .map_err(|e| config_error(files, e))
}

/// Bytes a connection may receive ahead of what we have read, across its streams.
/// Finite (quinn's default is unlimited) so that `super::rtt_refresh` can raise it by
/// one byte to make the connection send a frame; our messages are tens of bytes, so
/// this never holds a peer back.
pub(super) const RECEIVE_WINDOW: u32 = 4 << 20;

/// [`Timing::quiet_link_timeout_ms`], and a keep-alive after half of it without
/// receiving anything: quinn restarts that timer on every packet received, so a link
/// that carries heartbeats never sends one; only links with no traffic do, twice per
/// idle timeout, and only from the dialing side (the accepting side turns it off).
/// Links with traffic are held to the shorter silence timeout by `super::silence`.
/// Quinn's defaults: no keep-alive, 30 s.
fn timed_transport(timing: &Timing) -> Result<quinn::TransportConfig, TransportError> {
    let idle = Duration::from_millis(timing.quiet_link_timeout_ms());
    let mut transport = quinn::TransportConfig::default();
    transport
        .keep_alive_interval(Some(idle / 2))
        .max_idle_timeout(Some(idle_timeout(idle)?))
        .initial_rtt(INITIAL_RTT)
        .datagram_receive_buffer_size(None)
        .receive_window(VarInt::from_u32(RECEIVE_WINDOW))
        .ack_frequency_config(Some(ack_at_once()));
    Ok(transport)
}

/// Asks the peer (QUIC ACK_FREQUENCY extension) to acknowledge every packet that
/// carries data at once instead of up to 25 ms later. Our messages are a packet each
/// and come 100 ms apart, so the delay never saved a packet: the lone ACK left anyway,
/// but from a timer wake-up of its own. Sent at once, it leaves in the wake-up that
/// received the packet. Idle 5 nodes: followers 0.22 -> 0.13 % of a core (classic).
fn ack_at_once() -> quinn::AckFrequencyConfig {
    let mut ack = quinn::AckFrequencyConfig::default();
    ack.ack_eliciting_threshold(quinn::VarInt::from_u32(0));
    ack
}

fn idle_timeout(d: Duration) -> Result<IdleTimeout, TransportError> {
    IdleTimeout::try_from(d).map_err(|_| TransportError::IdleTimeout(d))
}

fn config_error(
    files: &TlsFiles,
    e: impl std::error::Error + Send + Sync + 'static,
) -> TransportError {
    TransportError::Tls {
        cert: files.cert.clone(),
        key: files.key.clone(),
        source: Box::new(e),
    }
}

/// Accepts a server certificate for any node of the cluster: the chain must verify
/// against the CA and the certificate must be valid for the `node-<id>.bully` name it
/// carries. Used by CLI clients that do not know (or care) which node answers.
#[derive(Debug)]
struct AnyNodeVerifier {
    inner: Arc<WebPkiServerVerifier>,
}

impl ServerCertVerifier for AnyNodeVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let id = match identity_of(end_entity) {
            Ok(Identity::Node(id)) => id,
            _ => {
                return Err(rustls::Error::InvalidCertificate(
                    rustls::CertificateError::NotValidForName,
                ))
            }
        };
        let name = ServerName::try_from(node_dns_name(id))
            .map_err(|e| rustls::Error::General(e.to_string()))?;
        self.inner
            .verify_server_cert(end_entity, intermediates, &name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// quinn has no getters on its configs; the Debug output is what it shows.
    #[test]
    fn peer_links_ask_for_every_packet_to_be_acked_at_once() {
        let transport = timed_transport(&Timing::default()).expect("default timing");
        let shown = format!("{transport:?}");
        assert!(
            shown.contains(
                "ack_frequency_config: Some(AckFrequencyConfig { ack_eliciting_threshold: 0"
            ),
            "{shown}"
        );
    }
}
