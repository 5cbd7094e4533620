//! Whether a peer's config agrees with ours where safety depends on it, judged from the
//! two hellos ([`compare`]), and what follows: a disagreement is counted, and logged and
//! reported to the runtime once per peer (not at every redial), and its end too, by
//! what `verdicts` remembers of each peer.
//!
//! What is compared, and why:
//! - the member list, within one member (see [`super::hello::membership_mismatch`]),
//!   but only while both lists are the ones seeded from the config files (neither
//!   hello's [`crate::protocol::ConfigId`] stamped): once a coordinator wrote either,
//!   the protocol orders the lists and carries the newer one to the older node, which
//!   may have missed two changes while it was down, so it must not be refused;
//! - the mode: a `classic` member leads alone when cut off, beside a quorum majority.
//!
//! What is carried but may differ: D and the heartbeat, shown in the refusal line. The
//! timing is cluster state that changes while the cluster runs
//! (docs/design.md#cluster-settings), so two members hold different D while a change
//! spreads; that is safe because a follower's ack promises at least the D its
//! coordinator asks (`crate::protocol::Message::promise_ms`), not because the hello
//! makes every D equal. Refusing the peer here, as the hello did before, split the
//! cluster for the whole of a change (issue 47: no coordinator 48 % of a chaos run).
//!
//! Both ends compare the two hellos themselves. An end that refuses closes the
//! connection with a close code per [`MismatchKind`] and the reason; an end whose
//! comparison never ran (the other hello was lost in the close) learns the verdict from
//! that code ([`refused_by_peer`]).

use super::event::TransportEvent;
use super::hello::{membership_mismatch, Hello, Settings};
use super::mismatch::{ConfigMismatch, MismatchKind};
use super::shared::Shared;
use crate::protocol::NodeId;
use crate::shutdown::Shutdown;
use tracing::{debug, info, warn};

/// Our hello against a peer's (`us` and `peer` name the two sides in the reason);
/// `None` when they agree where it matters.
pub fn compare(us: NodeId, ours: &Hello, peer: NodeId, theirs: &Hello) -> Option<ConfigMismatch> {
    let both_seeded = ours.config.stamp.is_none() && theirs.config.stamp.is_none();
    if let Some(reason) = both_seeded
        .then(|| membership_mismatch(&ours.members, &theirs.members))
        .flatten()
    {
        return Some(ConfigMismatch {
            kind: MismatchKind::Members,
            reason,
        });
    }
    let (a, b) = (&ours.settings, &theirs.settings);
    if a.mode == b.mode {
        return None;
    }
    Some(ConfigMismatch {
        kind: MismatchKind::Mode,
        reason: format!(
            "mode differs: ours (node {us}) {}, theirs (node {peer}) {}; every member must \
             run the same mode",
            fields(a),
            fields(b)
        ),
    })
}

fn fields(s: &Settings) -> String {
    format!(
        "mode={} suspect_after_ms={} heartbeat_ms={}",
        s.mode, s.suspect_after_ms, s.heartbeat_ms
    )
}

/// The verdict a peer's close carried, if it closed our connection over config: the
/// reason is its own words (its "ours" is our "theirs").
pub fn refused_by_peer(peer: NodeId, conn: &quinn::Connection) -> Option<ConfigMismatch> {
    let quinn::ConnectionError::ApplicationClosed(c) = conn.close_reason()? else {
        return None;
    };
    let kind = MismatchKind::from_close_code(c.error_code)?;
    Some(ConfigMismatch {
        kind,
        reason: format!(
            "refused by node {peer}: {}",
            String::from_utf8_lossy(&c.reason)
        ),
    })
}

/// A peer's config disagrees with ours (we refused its connection, or it refused ours):
/// counts it, and the first time logs it naming both sides and tells the runtime.
/// Returns false if the event could not be delivered (shutdown).
pub(super) async fn disagreed(
    shared: &Shared,
    peer: NodeId,
    mismatch: ConfigMismatch,
    shutdown: &Shutdown,
) -> bool {
    shared.stats.add_config_refusal(mismatch.kind);
    let mut verdicts = shared.verdicts.lock().await;
    let reason = mismatch.reason.clone();
    if !verdicts.disagrees(peer, &mismatch) {
        debug!(peer, %reason, "config still disagrees; connection refused");
        return true;
    }
    warn!(peer, %reason, "config disagrees with a peer's; refusing its connections");
    let mismatch = Some(mismatch);
    shared
        .events
        .emit(TransportEvent::PeerConfig { peer, mismatch }, shutdown)
        .await
}

/// Refuses a peer connection whose hello disagrees with ours: closes it with the
/// kind's code and the reason (so the peer learns why), counts it, and reports it as
/// [`disagreed`] does. Returns false at shutdown.
pub(super) async fn refuse(
    shared: &Shared,
    conn: &quinn::Connection,
    peer: NodeId,
    mismatch: ConfigMismatch,
    shutdown: &Shutdown,
) -> bool {
    shared.stats.add_refused();
    conn.close(mismatch.kind.close_code(), mismatch.reason.as_bytes());
    disagreed(shared, peer, mismatch, shutdown).await
}

/// A peer's hello agrees with ours: if it disagreed before, logs it and tells the
/// runtime. Returns false if the event could not be delivered (shutdown).
pub(super) async fn agreed(shared: &Shared, peer: NodeId, shutdown: &Shutdown) -> bool {
    let mut verdicts = shared.verdicts.lock().await;
    if !verdicts.agrees(peer) {
        return true;
    }
    info!(peer, "the peer's config agrees with ours now");
    let mismatch = None;
    shared
        .events
        .emit(TransportEvent::PeerConfig { peer, mismatch }, shutdown)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{ConfigId, Epoch, Mode};

    fn hello(members: &[NodeId], mode: Mode, suspect_after_ms: u64, heartbeat_ms: u64) -> Hello {
        Hello {
            nonce: 1,
            members: members.to_vec(),
            config: ConfigId::default(),
            settings: Settings {
                mode,
                suspect_after_ms,
                heartbeat_ms,
            },
        }
    }

    #[test]
    fn equal_settings_and_close_lists_agree_whatever_the_heartbeat() {
        let ours = hello(&[1, 2, 3], Mode::Quorum, 300, 100);
        assert_eq!(compare(1, &ours, 2, &ours), None);
        let theirs = hello(&[1, 2, 3, 4], Mode::Quorum, 300, 50);
        assert_eq!(compare(1, &ours, 2, &theirs), None);
        // D is cluster state that differs while a change spreads: never refused.
        let theirs = hello(&[1, 2, 3], Mode::Quorum, 3000, 1000);
        assert_eq!(compare(1, &ours, 2, &theirs), None);
    }

    #[test]
    fn each_difference_is_named_with_both_sides_field_by_field() {
        let ours = hello(&[1, 2, 3], Mode::Quorum, 300, 100);
        let cases = [
            (
                hello(&[1, 2, 3], Mode::Classic, 300, 100),
                MismatchKind::Mode,
                "mode differs: ours (node 1) mode=quorum suspect_after_ms=300 heartbeat_ms=100, \
                 theirs (node 3) mode=classic suspect_after_ms=300 heartbeat_ms=100",
            ),
            (
                hello(&[1, 2, 3], Mode::Classic, 1500, 100),
                MismatchKind::Mode,
                "theirs (node 3) mode=classic suspect_after_ms=1500",
            ),
            (
                hello(&[1, 2, 3, 4, 5], Mode::Classic, 1500, 100),
                MismatchKind::Members,
                "ours [1,2,3] theirs [1,2,3,4,5]",
            ),
        ];
        for (theirs, kind, words) in cases {
            let m = compare(1, &ours, 3, &theirs).expect("a mismatch");
            assert_eq!(m.kind, kind, "{}", m.reason);
            assert!(m.reason.contains(words), "{} lacks {words}", m.reason);
            let back = compare(3, &theirs, 1, &ours).expect("symmetric");
            assert_eq!(back.kind, kind, "both ends reach the same verdict");
        }
    }

    /// A list written by the coordinator of term 4, at `version`.
    fn stamped(version: u64) -> ConfigId {
        ConfigId {
            stamp: Some(Epoch { term: 4, leader: 1 }),
            version,
        }
    }

    #[test]
    fn lists_two_apart_are_refused_only_while_both_are_seeded() {
        let with = |members: &[NodeId], config| Hello {
            config,
            ..hello(members, Mode::Quorum, 300, 100)
        };
        let seeded = ConfigId::default();
        let (short, long) = (&[1, 2, 3][..], &[1, 2, 3, 4, 5][..]);
        let m = compare(1, &with(short, seeded), 2, &with(long, seeded)).expect("refused");
        assert_eq!(m.kind, MismatchKind::Members, "{}", m.reason);
        let m = compare(2, &with(long, seeded), 1, &with(short, seeded)).expect("both ends");
        assert_eq!(m.kind, MismatchKind::Members, "{}", m.reason);
        // A node that missed two changes meets one holding the newer, stamped list.
        for (ours, theirs) in [
            (seeded, stamped(2)),
            (stamped(0), seeded),
            (stamped(0), stamped(2)),
        ] {
            assert_eq!(compare(1, &with(short, ours), 2, &with(long, theirs)), None);
            assert_eq!(compare(2, &with(long, theirs), 1, &with(short, ours)), None);
        }
    }

    #[test]
    fn the_mode_is_refused_whatever_the_lists() {
        let ours = Hello {
            config: stamped(1),
            ..hello(&[1, 2, 3], Mode::Quorum, 300, 100)
        };
        let theirs = Hello {
            config: stamped(3),
            ..hello(&[1, 2, 3, 4, 5], Mode::Classic, 300, 100)
        };
        let m = compare(1, &ours, 2, &theirs).expect("refused");
        assert_eq!(m.kind, MismatchKind::Mode, "{}", m.reason);
    }
}
