//! What the embedder holds of a running node ([`NodeHandle`]): its status, counters and
//! addresses, a reload, and the way to stop it and wait for every one of its tasks.

use crate::api::Status;
use crate::config::NodeConfig;
use crate::node::shared::error::NodeError;
use crate::node::shared::error::ReloadError;
use crate::node::shared::mailbox::Command;
use crate::node::shared::metrics::Metrics;
use crate::shutdown::{Shutdown, TripOnDrop};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

/// A running node. Dropping it stops the node without waiting for it; call
/// [`NodeHandle::shutdown`] to wait.
pub struct NodeHandle {
    pub(super) commands: mpsc::Sender<Command>,
    pub(super) status: watch::Receiver<Status>,
    /// The runtime's stop signal (src/shutdown.rs): tripped by [`NodeHandle::shutdown`]
    /// or when the handle is dropped.
    pub(super) stop: TripOnDrop,
    /// Tripped once the runtime is gone (its inputs hold the guard).
    pub(super) ended: Shutdown,
    pub(super) runtime: JoinHandle<Result<(), NodeError>>,
    pub(super) local_addr: SocketAddr,
    pub(super) http_addr: Option<SocketAddr>,
    pub(super) metrics: Arc<Metrics>,
}

impl NodeHandle {
    /// The node's current status (role, epoch, coordinator, peers).
    pub fn status(&self) -> Status {
        self.status.borrow().as_of_now()
    }

    /// A receiver that wakes on every status change.
    pub fn subscribe(&self) -> watch::Receiver<Status> {
        self.status.clone()
    }

    /// The node's live counters.
    pub fn metrics(&self) -> Arc<Metrics> {
        Arc::clone(&self.metrics)
    }

    /// The TCP address of the HTTP endpoint as started, when `[http]` is configured (a
    /// reload may move it).
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_addr
    }

    /// The UDP address the node's QUIC endpoint is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Applies a re-read config without leaving the cluster (see `node/drive/reload.rs`):
    /// `Ok` says what changed, `Err` why nothing did.
    pub async fn reload(&self, config: NodeConfig) -> Result<String, ReloadError> {
        let (reply, answer) = oneshot::channel();
        let command = Command::Reload {
            config: Box::new(config),
            reply,
        };
        if self.commands.send(command).await.is_err() {
            return Err(ReloadError::Stopping);
        }
        answer.await.unwrap_or(Err(ReloadError::Stopping))
    }

    /// Stops the node: a coordinator demotes itself and runs `on_demoted`, every task
    /// of the node ends, connections close (peers see it go at once rather than after
    /// the idle timeout); returns once all that is done.
    pub async fn shutdown(self) -> Result<(), NodeError> {
        self.stop.trip();
        self.wait().await
    }

    /// Completes once the node's runtime has ended: by itself (a fatal storage error)
    /// or after a shutdown; [`NodeHandle::wait`] then returns at once. Unlike a status
    /// subscription it does not wake its waiter on every heartbeat.
    pub async fn ended(&self) {
        self.ended.tripped().await;
    }

    /// Waits until the node stops by itself (a fatal storage error) or is shut down.
    pub async fn wait(self) -> Result<(), NodeError> {
        match self.runtime.await {
            Ok(result) => result,
            Err(e) => Err(NodeError::RuntimeTask(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A handle on a stand-in runtime that ends when `end` fires, holding the guard of
    /// its end as the real one does.
    fn handle_on_stand_in(end: oneshot::Receiver<()>) -> NodeHandle {
        let status = Status::starting_candidate(1, &[2]);
        let (_status_tx, status) = watch::channel(status);
        let ended = Shutdown::new();
        let gone = ended.trip_on_drop();
        let (commands, _commands_rx) = mpsc::channel(1);
        let runtime = tokio::spawn(async move {
            let _held = gone;
            let _ = end.await;
            Ok(())
        });
        NodeHandle {
            commands,
            status,
            stop: Shutdown::new().trip_on_drop(),
            ended,
            runtime,
            local_addr: "127.0.0.1:1".parse().expect("an address"),
            http_addr: None,
            metrics: Arc::new(Metrics::new(1)),
        }
    }

    #[tokio::test]
    async fn ended_waits_for_the_runtime_and_completes_when_it_is_gone() {
        let (end, ended) = oneshot::channel();
        let node = handle_on_stand_in(ended);
        let early = tokio::time::timeout(Duration::from_millis(100), node.ended()).await;
        assert!(early.is_err(), "ended while the runtime still ran");
        end.send(()).expect("the runtime is waiting");
        tokio::time::timeout(Duration::from_secs(5), node.ended())
            .await
            .expect("the runtime's end must be noticed");
        node.wait().await.expect("the stand-in ends cleanly");
    }
}
