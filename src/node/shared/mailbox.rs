//! What reaches the runtime from the node's other parts: commands from the client API
//! and the [`crate::node::NodeHandle`], with the channel their answer goes back on, and
//! the end of an `on_elected` run. On the node's ground floor so that the parts that
//! send them (`serve/`, `commands/`) need nothing of the runtime (`drive/`).

use super::error::ReloadError;
use crate::config::NodeConfig;
use crate::protocol::{Change, Epoch, NodeId};
use tokio::sync::{mpsc, oneshot};

/// Where the answer to a step-down or stand-aside goes: the text a client is shown as
/// done (`Ok`) or refused (`Err`).
pub type Reply = oneshot::Sender<Result<String, String>>;

/// What the API and the [`crate::node::NodeHandle`] ask of the runtime, the only writer of
/// the machine.
#[derive(Debug)]
pub enum Command {
    /// Apply a re-read config (SIGHUP); never sent by a network client.
    Reload {
        config: Box<NodeConfig>,
        reply: oneshot::Sender<Result<String, ReloadError>>,
    },
    StepDown {
        for_ms: u64,
        /// A switchover: the handover succeeds only when this node leads.
        to: Option<NodeId>,
        reply: Reply,
    },
    StandAside {
        for_ms: u64,
        target: NodeId,
        reply: Reply,
    },
    /// A membership change, answered once the list it asks for is committed.
    ChangeMembers { change: Change, reply: Reply },
    /// A maintenance pause setting, kept if it supersedes the node's own
    /// (src/api/pause.rs).
    SetPause {
        pause: crate::api::Pause,
        reply: Reply,
    },
    /// This node has compared its maintenance pause with `peer`'s (or failed to ask):
    /// it may stand for election again as far as that peer goes
    /// (src/node/policy/pause_gate.rs).
    PauseReconciled { peer: NodeId },
    /// Append a record to the event log (a scheduled switchover's outcome); no answer.
    Note(crate::history::Record),
}

/// How an `on_elected` run ended, for the epoch it was run for: the coordinator is
/// ready for clients only once its database was promoted for that very epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElectedHookDone {
    pub epoch: Option<Epoch>,
    pub succeeded: bool,
}

/// The runtime is gone: the node is stopping, and no command will be answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the node is stopping")]
pub struct Stopping;

/// Hands the runtime the command `ask` builds around a reply channel and waits for its
/// answer: done (`Ok`) or refused (`Err`), or [`Stopping`] when the runtime is gone.
/// The one way the node's other parts ask something of the runtime and wait.
pub async fn ask_runtime(
    commands: &mpsc::Sender<Command>,
    ask: impl FnOnce(Reply) -> Command,
) -> Result<Result<String, String>, Stopping> {
    let (reply, answer) = oneshot::channel();
    commands.send(ask(reply)).await.map_err(|_| Stopping)?;
    answer.await.map_err(|_| Stopping)
}
