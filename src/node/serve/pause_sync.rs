//! Spreads the maintenance pause (src/api/pause.rs) between members: each time a
//! peer's link comes up, this node asks the peer's status over its API and the older
//! of the two records is replaced by the newer. A member that was down (or cut off)
//! when `bully pause` or `bully resume` ran learns it from the first peer it reaches,
//! and a member that missed a resume is told so by whoever kept it.

use super::switchover::{ask_member, Members};
use crate::api::{Request, Response, Status};
use crate::node::shared::mailbox::Command;
use crate::protocol::NodeId;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};

/// How long the peer has to answer each request.
const ANSWER_WITHIN: Duration = Duration::from_secs(2);

/// Compares this node's pause with `peer`'s and moves the newer one across; then
/// tells the runtime the comparison is over, whatever its outcome.
pub async fn reconcile(
    members: &Members,
    status: &watch::Receiver<Status>,
    commands: &mpsc::Sender<Command>,
    peer: NodeId,
) {
    compare(members, status, commands, peer).await;
    let _ = commands.send(Command::PauseReconciled { peer }).await;
}

async fn compare(
    members: &Members,
    status: &watch::Receiver<Status>,
    commands: &mpsc::Sender<Command>,
    peer: NodeId,
) {
    let ours = status.borrow().as_of_now();
    let theirs = match ask_member(members, &ours, peer, Request::Status, ANSWER_WITHIN).await {
        Ok(Response::Status(theirs)) => theirs.pause,
        Ok(other) => {
            tracing::debug!(peer, "pause sync: the peer answered {other:?}");
            return;
        }
        Err(e) => {
            tracing::debug!(peer, "pause sync: cannot ask the peer: {e}");
            return;
        }
    };
    if theirs.supersedes(&ours.pause) {
        tracing::debug!(
            peer,
            generation = theirs.generation,
            "a peer keeps a newer maintenance pause"
        );
        let (reply, answer) = oneshot::channel();
        let command = Command::SetPause {
            pause: theirs,
            reply,
        };
        if commands.send(command).await.is_ok() {
            if let Ok(Err(e)) = answer.await {
                tracing::error!(peer, "{e}");
            }
        }
    } else if ours.pause.supersedes(&theirs) {
        let request = Request::SetPause {
            pause: ours.pause.clone(),
        };
        match ask_member(members, &ours, peer, request, ANSWER_WITHIN).await {
            Ok(Response::Done(text)) => {
                tracing::info!(peer, "passed on the maintenance pause: {text}")
            }
            Ok(other) => tracing::warn!(peer, "passing on the maintenance pause: {other:?}"),
            Err(e) => tracing::debug!(peer, "cannot pass on the maintenance pause: {e}"),
        }
    }
}
