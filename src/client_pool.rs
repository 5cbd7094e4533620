//! Connections a node keeps to its peers' APIs, one per peer, so a request it makes
//! for someone else (a leader query confirmed by the coordinator,
//! src/node/serve/forward.rs; a synchronous record read or written,
//! src/node/postgres/records.rs) costs one round trip, not a QUIC and TLS handshake
//! each time. A kept connection that fails is dropped and dialled afresh once.

use crate::api::{Request, Response};
use crate::certs::TlsFiles;
use crate::client::{Client, ClientError};
use crate::protocol::NodeId;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;

/// Kept connections by peer. Clones share them.
#[derive(Clone, Default)]
pub struct ClientPool {
    clients: Arc<Mutex<BTreeMap<NodeId, (SocketAddr, Client)>>>,
}

impl ClientPool {
    /// Sends `request` to node `id` at `addr` (its certificate must be that node's),
    /// on the kept connection if there is one to that address, and keeps the
    /// connection for the next request once it answered. Connecting takes at most
    /// `connect_within`, answering `answer_within`.
    pub async fn request(
        &self,
        (id, addr): (NodeId, SocketAddr),
        tls: &TlsFiles,
        request: Request,
        connect_within: Duration,
        answer_within: Duration,
    ) -> Result<Response, ClientError> {
        let kept = self.clients.lock().await.remove(&id);
        if let Some((_, client)) = kept.filter(|(at, _)| *at == addr) {
            // A kept connection may have died with the peer's restart (it fails at
            // once): one fresh try. A peer that did not answer in time is not asked
            // twice.
            match client.request_within(request.clone(), answer_within).await {
                Ok(answer) => {
                    self.keep(id, addr, client).await;
                    return Ok(answer);
                }
                Err(e @ ClientError::Timeout { .. }) => return Err(e),
                Err(_) => {}
            }
        }
        let client = Client::connect(addr, tls, Some(id), connect_within).await?;
        let answer = client.request_within(request, answer_within).await?;
        self.keep(id, addr, client).await;
        Ok(answer)
    }

    /// Keeps `client` as the connection to node `id` at `addr`.
    async fn keep(&self, id: NodeId, addr: SocketAddr, client: Client) {
        self.clients.lock().await.insert(id, (addr, client));
    }
}

impl std::fmt::Debug for ClientPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientPool")
    }
}
