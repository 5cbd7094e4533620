//! The HTTP endpoint, `[http] listen` (off unless set; HTTPS with `[http] tls`): for load balancers
//! (HAProxy `option httpchk GET /coordinator`, or a config written for Patroni),
//! Prometheus and people with curl.
//!
//! | path           | answer                                                          |
//! |----------------|-----------------------------------------------------------------|
//! | `/coordinator` | 200 on a ready coordinator ([`Status::ready`](crate::api::Status::ready)), else 503; epoch |
//! | `/health`      | 200 while the node runs (with `[postgres]`: while its server runs, else 503); JSON with role and eligibility |
//! | `/status`      | 200, the node's [`Status`](crate::api::Status) as JSON                         |
//! | `/metrics`     | 200, OpenMetrics text (`node/publish/exposition.rs`)            |
//! | `/primary`, `/read-write`, `/master`, `/leader`, `/`, `/replica`, `/read-only`, `/liveness`, `/readiness`, `/quorum`, `/sync`, `/async`, `/read-only-quorum`, `/read-only-sync`, `/standby-leader` | Patroni's checks, 200 or 503 (`http_patroni`) |
//! | `/patroni`     | 200, Patroni's status body (`http_patroni`)                      |
//! | `/config`      | 200, the cluster settings in Patroni's shape; 502 before any is stored (`http_patroni`) |
//! | `/cluster`     | 200, every member as it answers now, in Patroni's shape (`http_cluster`) |
//! | `/history`     | 200, the server's timeline switches in Patroni's shape; 503 when its history file cannot be read (`http_history`) |
//! | `/failsafe`    | 502, as Patroni's without `failsafe_mode`: the members are the DCS (`http_patroni`) |
//!
//! GET, and HEAD and OPTIONS answering like GET without the body; Patroni's write
//! routes (`POST /switchover`, `/failover`, `/restart`, `/reinitialize`, `/reload`,
//! `DELETE /switchover`, `http_write`) only over HTTPS with a client certificate from
//! the cluster CA, and the basic credentials when `[http] username` is set
//! (`http_auth`); another method is a 405, a path not listed a 404, and what hyper
//! cannot parse a 400 (or 431 for a head over [`MAX_HEAD`]), never a panic. One
//! request per connection (the answer says `connection: close`). With `[http] tls`
//! the endpoint speaks HTTPS with the node's certificate (`http_tls`); without it,
//! bind it to loopback or a trusted network.
//!
//! Bounds, so slow or stalled clients cannot exhaust the endpoint or delay others
//! (tests/http_slow_clients.rs): every accepted connection gets its own task at once,
//! so a well-formed request never waits behind a slow one; at most
//! [`MAX_CONNECTIONS`] are open, and one more evicts the oldest (`http_slots`); each
//! must send its head within [`READ_TIMEOUT`] and is done within [`DEADLINE`]
//! (`http_conn`, on hyper). What to answer is decided apart from the socket
//! (`http_routes`, `http_patroni`, `http_coordinator`). The server and every
//! connection end on their group's stop signal (the node stopping, or a reload moving
//! the endpoint).

use super::http_conn;
use super::http_slots::Slots;
use super::http_tls::{self, Caller};
use crate::node::shared::tasks::NodeTasks;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::TcpListener;

pub use super::http_conn::{HttpState, DEADLINE, MAX_HEAD, READ_TIMEOUT};

/// Connections open at once; a new one beyond this evicts the oldest. With at most
/// [`MAX_HEAD`] buffered per connection this bounds the endpoint's memory.
pub const MAX_CONNECTIONS: usize = 512;

/// One accepted connection: plain, or HTTPS once its handshake is done within
/// [`READ_TIMEOUT`] (a client that never finishes it is dropped).
async fn connection(stream: tokio::net::TcpStream, state: &HttpState) -> std::io::Result<()> {
    let Some(acceptor) = state.security().acceptor else {
        return http_conn::serve(stream, state, Caller::default()).await;
    };
    let handshake = tokio::time::timeout(READ_TIMEOUT, acceptor.accept(stream));
    let tls = match handshake.await {
        Ok(done) => done?,
        Err(_) => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("TLS handshake not done within {READ_TIMEOUT:?}"),
            ))
        }
    };
    let caller = http_tls::caller(tls.get_ref().1);
    http_conn::serve(tls, state, caller).await
}

/// Binds the listener (so a busy port fails the node's start with a clear error).
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// Serves connections until `tasks` stops; each connection is one of `tasks` too.
pub async fn serve(listener: TcpListener, state: HttpState, tasks: NodeTasks) {
    let slots = Slots::new(MAX_CONNECTIONS);
    while let Some(accepted) = tasks.until_stopped(listener.accept()).await {
        let (stream, remote) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Typically out of file descriptors: back off instead of spinning.
                tracing::warn!("http accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let (slot, evicted) = slots.take();
        if evicted > 0 {
            tracing::debug!(%remote, "http: {MAX_CONNECTIONS} connections open; closed the oldest");
        }
        let id = slot.id();
        let state = state.clone();
        let group = tasks.clone();
        let task = tasks.spawn(async move {
            if let Some(Err(e)) = group.until_stopped(connection(stream, &state)).await {
                tracing::debug!(%remote, "http connection failed: {e}");
            }
            drop(slot);
        });
        slots.attach(id, task.abort_handle());
    }
}
