//! `[http] tls`: the endpoint's HTTPS. The node serves its own certificate
//! (`node-<id>.bully`, from the cluster CA of `[tls]`) and asks the client for one:
//! a client certificate from the same CA is verified in the handshake and named to
//! the routes ([`Caller`]), which the write routes require (`http_auth`); a client
//! without one still reads (a load balancer's checks, Prometheus). The material is
//! loaded at start and again at every reload, so rotated certificates apply to the
//! next connection.

use crate::certs::{identity_of, Identity, TlsFiles};
use crate::transport::tls::provider;
use rustls::server::WebPkiClientVerifier;
use std::sync::Arc;
use tokio_rustls::TlsAcceptor;

/// Who sent a request, as far as the connection shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Caller {
    /// The connection is HTTPS.
    pub tls: bool,
    /// The identity of the client certificate the handshake verified against the
    /// cluster CA, if the client sent one.
    pub certificate: Option<Identity>,
}

/// The HTTPS acceptor for the node whose certificate files are `files`: TLS 1.2 and
/// 1.3 (load balancers' health checks still speak 1.2), HTTP/1.1 by ALPN, a client
/// certificate asked for and verified when given. `Err` names the file at fault.
pub fn acceptor(files: &TlsFiles) -> Result<TlsAcceptor, String> {
    let material = files.load().map_err(|e| format!("[http] tls: {e}"))?;
    let provider = provider();
    let clients =
        WebPkiClientVerifier::builder_with_provider(Arc::new(material.roots), provider.clone())
            .allow_unauthenticated()
            .build()
            .map_err(|e| format!("[http] tls: the CA in {}: {e}", files.ca.display()))?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("[http] tls: {e}"))?
        .with_client_cert_verifier(clients)
        .with_single_cert(material.chain, material.key)
        .map_err(|e| format!("[http] tls: {}: {e}", files.cert.display()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The caller of a connection whose handshake ended with `connection`.
pub fn caller(connection: &rustls::ServerConnection) -> Caller {
    let certificate = connection
        .peer_certificates()
        .and_then(|chain| chain.first())
        .and_then(|leaf| identity_of(leaf).ok());
    Caller {
        tls: true,
        certificate,
    }
}
