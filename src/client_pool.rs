//! Connections a node keeps to its peers' APIs, one per peer, so a request it makes
//! for someone else (a leader query confirmed by the coordinator,
//! src/node/serve/forward.rs; a synchronous record read or written,
//! src/node/postgres/records.rs) costs one round trip, not a QUIC and TLS handshake
//! each time. A kept connection that fails is dropped and dialled afresh once. A peer
//! killed and restarted leaves the kept connection silent (the new process cannot
//! reset it), so a caller whose requests answer at once bounds the kept try short
//! ([`Within::kept`]) and is not held up by it.

use crate::api::{Request, Response};
use crate::certs::TlsFiles;
use crate::client::{Client, ClientError};
use crate::protocol::NodeId;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;

/// How long each part of [`ClientPool::request`] may take.
#[derive(Debug, Clone, Copy)]
pub struct Within {
    /// The try on a kept connection; at most `answer`. Equal to `answer`: a peer that
    /// did not answer in time is not asked twice. Zero: no kept connection is used.
    pub kept: Duration,
    pub connect: Duration,
    pub answer: Duration,
}

/// How long a kept connection gets to answer a request a live peer answers at once,
/// before a fresh one is dialled ([`Within::quick`]).
const KEPT_TRY: Duration = Duration::from_millis(100);

impl Within {
    /// A request a live peer answers at once (a status read): a kept connection gets
    /// [`KEPT_TRY`], then a fresh one is dialled.
    pub fn quick(connect: Duration, answer: Duration) -> Within {
        Within {
            kept: KEPT_TRY.min(answer),
            connect,
            answer,
        }
    }

    /// A request that must not be sent twice (a step-down): a fresh connection only.
    pub fn fresh(connect: Duration, answer: Duration) -> Within {
        Within {
            kept: Duration::ZERO,
            connect,
            answer,
        }
    }
}

/// Kept connections by peer. Clones share them.
#[derive(Clone, Default)]
pub struct ClientPool {
    clients: Arc<Mutex<BTreeMap<NodeId, (SocketAddr, Client)>>>,
}

impl ClientPool {
    /// Sends `request` to node `id` at `addr` (its certificate must be that node's),
    /// on the kept connection if there is one to that address, and keeps the
    /// connection for the next request once it answered.
    pub async fn request(
        &self,
        (id, addr): (NodeId, SocketAddr),
        tls: &TlsFiles,
        request: Request,
        within: Within,
    ) -> Result<Response, ClientError> {
        let kept = self.clients.lock().await.remove(&id);
        let kept = kept.filter(|(at, _)| *at == addr && within.kept > Duration::ZERO);
        if let Some((_, client)) = kept {
            // A kept connection may have died with the peer's restart: one fresh try.
            let kept = within.kept.min(within.answer);
            match client.request_within(request.clone(), kept).await {
                Ok(answer) => {
                    self.keep(id, addr, client).await;
                    return Ok(answer);
                }
                Err(e @ ClientError::Timeout { .. }) if kept == within.answer => return Err(e),
                Err(_) => {}
            }
        }
        let client = Client::connect(addr, tls, Some(id), within.connect).await?;
        let answer = client.request_within(request, within.answer).await?;
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
