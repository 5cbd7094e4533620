//! The client API on the node's QUIC endpoint: one bidirectional stream per request,
//! framed by the codec. Clients authenticate with a certificate from the cluster CA.
//!
//! Requests: `Status` (one answer), `Watch` (a status frame now and after every
//! change, until the client goes away), `StepDown` (switchover), `Metrics` (counters).

use super::metrics::{Metrics, MetricsSnapshot};
use super::status::Status;
use super::switchover::{self, Members};
use crate::protocol::NodeId;
use crate::transport::{read_frame, write_frame};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, watch};

/// What a client asks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    Status,
    Watch,
    /// Become ineligible for `for_ms` so the next highest eligible node takes over.
    StepDown {
        for_ms: u64,
    },
    /// A snapshot of the node's counters.
    Metrics,
    /// Switchover: the coordinator hands over to node `to` (see `switchover`).
    SwitchOver {
        to: NodeId,
        for_ms: u64,
    },
    /// From a coordinator preparing a switchover to `target`: be ineligible for
    /// `for_ms`, or until `target` has led and stopped leading.
    StandAside {
        for_ms: u64,
        target: NodeId,
    },
}

/// What a node answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    Status(Status),
    Metrics(MetricsSnapshot),
    /// A request was accepted; the text says what happens next.
    Done(String),
    /// A request was refused; the text says why.
    Refused(String),
}

/// Commands the API hands to the node's runtime (the only writer of the machine).
#[derive(Debug)]
pub enum Command {
    /// Apply a re-read config (SIGHUP); never sent by a network client.
    Reload {
        config: Box<crate::config::NodeConfig>,
        reply: oneshot::Sender<Result<String, String>>,
    },
    StepDown {
        for_ms: u64,
        /// A switchover: the handover succeeds only when this node leads.
        to: Option<NodeId>,
        reply: oneshot::Sender<Result<String, String>>,
    },
    StandAside {
        for_ms: u64,
        target: NodeId,
        reply: oneshot::Sender<Result<String, String>>,
    },
}

/// What the API serves from: the published status, the runtime's command queue and
/// the counters. Cheap to clone (one per request stream).
#[derive(Clone)]
pub struct ApiContext {
    pub status: watch::Receiver<Status>,
    pub commands: mpsc::Sender<Command>,
    pub metrics: Arc<Metrics>,
    /// Where the peers are, for a switchover.
    pub members: Arc<Members>,
}

/// The answer to a command the runtime accepted or refused.
fn answered(result: Result<String, String>) -> Response {
    match result {
        Ok(text) => Response::Done(text),
        Err(text) => Response::Refused(text),
    }
}

/// Serves every request stream a client opens on `conn` until it closes.
/// Each stream runs in its own task so a long watch does not block a status query.
pub async fn serve_client(conn: quinn::Connection, context: ApiContext) {
    let remote = conn.remote_address();
    loop {
        let (send, recv) = match conn.accept_bi().await {
            Ok(streams) => streams,
            Err(e) => {
                tracing::debug!(%remote, "client connection ended: {e}");
                return;
            }
        };
        let context = context.clone();
        tokio::spawn(async move {
            if let Err(e) = serve_stream(send, recv, context).await {
                tracing::debug!(%remote, "client request failed: {e}");
            }
        });
    }
}

async fn serve_stream(
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    context: ApiContext,
) -> anyhow::Result<()> {
    let ApiContext {
        mut status,
        commands,
        metrics,
        members,
    } = context;
    let Some(request) = read_frame::<Request>(&mut recv).await? else {
        return Ok(());
    };
    match request {
        Request::Status => {
            let now = status.borrow_and_update().as_of_now();
            write_frame(&mut send, &Response::Status(now)).await?;
        }
        Request::Watch => loop {
            let now = status.borrow_and_update().as_of_now();
            write_frame(&mut send, &Response::Status(now)).await?;
            // `changed` is cancellation-safe; it fails only when the node shuts down.
            tokio::select! {
                changed = status.changed() => if changed.is_err() { break },
                _ = send.stopped() => break,
            }
        },
        Request::StepDown { for_ms } => {
            let (reply, answer) = oneshot::channel();
            let to = None;
            commands
                .send(Command::StepDown { for_ms, to, reply })
                .await?;
            write_frame(&mut send, &answered(answer.await?)).await?;
        }
        Request::StandAside { for_ms, target } => {
            let (reply, answer) = oneshot::channel();
            let command = Command::StandAside {
                for_ms,
                target,
                reply,
            };
            commands.send(command).await?;
            write_frame(&mut send, &answered(answer.await?)).await?;
        }
        Request::SwitchOver { to, for_ms } => {
            let now = status.borrow().as_of_now();
            let result = switchover::run(&members, &now, &commands, to, for_ms).await;
            write_frame(&mut send, &answered(result)).await?;
        }
        Request::Metrics => {
            let now = status.borrow().as_of_now();
            write_frame(&mut send, &Response::Metrics(now.metrics(&metrics))).await?;
        }
    }
    let _ = send.finish();
    Ok(())
}
