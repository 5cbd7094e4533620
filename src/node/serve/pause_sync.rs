//! Spreads the maintenance pause (src/api/pause.rs) between members: each time a
//! peer's link comes up, and each time this node keeps a newer record (then with every
//! connected peer), this node asks the peer's status over its API and the older of
//! the two records is replaced by the newer. A member that was down (or cut off) when
//! `bully pause` or `bully resume` ran learns it from the first peer it reaches, one
//! the command could not reach but whose links are up learns it from its peers, and a
//! member that missed a resume is told so by whoever kept it. A comparison that
//! fails (the peer's API did not answer in time, our own store refused the newer
//! record) is tried again for as long as the link stays up: until it succeeds, the
//! pause gate (src/node/policy/pause_gate.rs) keeps this node from standing.

use super::switchover::{ask_member, PeerApis, ASK_TIMEOUT};
use crate::api::{Request, Response, Status};
use crate::client_pool::Within;
use crate::node::shared::mailbox::{ask_runtime, Command};
use crate::protocol::NodeId;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// How long the peer has to answer each request.
const ANSWER_WITHIN: Duration = Duration::from_secs(2);

/// Each comparison on a fresh connection: a kept one to a peer killed and restarted
/// stays silent until it times out, which would hold the election gate that long.
const FRESH: Within = Within {
    kept: Duration::ZERO,
    connect: ASK_TIMEOUT,
    answer: ANSWER_WITHIN,
};

/// The wait before the first retry of a failed comparison; it doubles up to
/// [`LAST_RETRY_WAIT`].
const FIRST_RETRY_WAIT: Duration = Duration::from_millis(250);

/// The longest wait between two tries.
const LAST_RETRY_WAIT: Duration = Duration::from_secs(4);

/// Compares this node's pause with `peer`'s and moves the newer one across, trying
/// again while the link stays up; once a comparison succeeds, tells the runtime so.
/// Gives up silently when the link goes down: the gate forgets the peer then, and the
/// next link-up starts a new comparison.
pub async fn reconcile(
    members: &PeerApis,
    status: &watch::Receiver<Status>,
    commands: &mpsc::Sender<Command>,
    peer: NodeId,
) {
    let mut wait = FIRST_RETRY_WAIT;
    loop {
        match compare(members, status, commands, peer).await {
            Ok(()) => break,
            Err(e) if connected(status, peer) => {
                tracing::info!(peer, "pause sync failed, trying again in {wait:?}: {e}");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(LAST_RETRY_WAIT);
            }
            Err(e) => {
                tracing::debug!(peer, "pause sync ended with the link: {e}");
                return;
            }
        }
        if !connected(status, peer) {
            return;
        }
    }
    let _ = commands.send(Command::PauseReconciled { peer }).await;
}

/// Whether this node's link to `peer` is up, as its status says.
fn connected(status: &watch::Receiver<Status>, peer: NodeId) -> bool {
    status
        .borrow()
        .peers
        .iter()
        .any(|p| p.id == peer && p.connected)
}

/// One comparison: `Ok` once this node knows it holds a record at least as new as
/// `peer`'s (passing ours on is the peer's own comparison's job too, so a failure to
/// pass it on is logged, not retried); `Err` when it could not learn `peer`'s record or
/// could not keep a newer one.
async fn compare(
    members: &PeerApis,
    status: &watch::Receiver<Status>,
    commands: &mpsc::Sender<Command>,
    peer: NodeId,
) -> Result<(), String> {
    let ours = status.borrow().as_of_now();
    let theirs = match ask_member(members, &ours, peer, Request::Status, FRESH).await {
        Ok(Response::Status(theirs)) => theirs.pause,
        Ok(other) => return Err(format!("the peer answered {other:?}")),
        Err(e) => return Err(format!("cannot ask the peer: {e}")),
    };
    if theirs.supersedes(&ours.pause) {
        tracing::debug!(
            peer,
            generation = theirs.generation,
            "a peer keeps a newer maintenance pause"
        );
        let ask = |reply| Command::SetPause {
            pause: theirs,
            reply,
        };
        ask_runtime(commands, ask)
            .await
            .map_err(|stopping| stopping.to_string())?
            .map_err(|e| format!("keeping the peer's newer pause: {e}"))?;
    } else if ours.pause.supersedes(&theirs) {
        let request = Request::SetPause {
            pause: ours.pause.clone(),
        };
        match ask_member(members, &ours, peer, request, FRESH).await {
            Ok(Response::Done(text)) => {
                tracing::info!(peer, "passed on the maintenance pause: {text}")
            }
            Ok(other) => tracing::warn!(peer, "passing on the maintenance pause: {other:?}"),
            Err(e) => tracing::debug!(peer, "cannot pass on the maintenance pause: {e}"),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certs::TlsFiles;
    use crate::config::PeerConfig;
    use std::time::Instant;

    /// A node (1) whose status shows peer 2 connected, and a peer 2 that can never be
    /// asked (our certificate files do not exist).
    fn unreachable_peer(dir: &std::path::Path) -> (PeerApis, watch::Sender<Status>) {
        let members = PeerApis {
            peers: vec![PeerConfig {
                id: 2,
                addr: "127.0.0.1:9".parse().unwrap(),
                witness: false,
            }],
            tls: TlsFiles::for_node(dir, 1),
            local_addr: "127.0.0.1:0".parse().unwrap(),
            clients: Default::default(),
        };
        let mut status = Status::starting_candidate(1, &[2]);
        status.set_peer(2, true);
        (members, watch::channel(status).0)
    }

    /// A failed comparison is not reported as done while the link is up (the gate
    /// would let a follower that may have missed a pause stand), and the retries end
    /// with the link, still without a report.
    #[tokio::test]
    async fn a_failed_comparison_holds_the_gate_until_the_link_goes() {
        let dir = tempfile::tempdir().unwrap();
        let (members, status_tx) = unreachable_peer(dir.path());
        let status = status_tx.subscribe();
        let (commands, mut mailbox) = mpsc::channel(4);
        let sync = tokio::spawn(async move { reconcile(&members, &status, &commands, 2).await });
        // Three tries at least (at 0, 250 and 750 ms), none reported.
        let held = tokio::time::timeout(Duration::from_millis(1200), mailbox.recv()).await;
        assert!(
            held.is_err(),
            "reported while the peer never answered: {held:?}"
        );
        assert!(!sync.is_finished(), "gave up while the link was up");
        status_tx.send_modify(|s| {
            s.set_peer(2, false);
        });
        let gone = Instant::now();
        tokio::time::timeout(Duration::from_secs(20), sync)
            .await
            .expect("the retries end once the link is down")
            .unwrap();
        assert!(
            mailbox.try_recv().is_err(),
            "reported after the link went down ({:?} later)",
            gone.elapsed()
        );
    }
}
