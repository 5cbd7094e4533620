//! Whether a peer's config agrees with ours where safety depends on it, judged from the
//! two hellos ([`compare`]), and what this node remembers of each peer's verdict
//! ([`Verdicts`]), so that a disagreement is logged and reported to the runtime once per
//! peer (not at every redial), and its end too.
//!
//! What is compared, and why:
//! - the member list, within one member (see [`super::hello::membership_mismatch`]);
//! - the mode: a `classic` member leads alone when cut off, beside a quorum majority;
//! - `timing.suspect_after_ms` (D): a follower's ack promises D on its own clock, and
//!   the coordinator holds its role for D less a drift margin on its own clock (see
//!   `crate::protocol::lease`). A coordinator whose D is larger than its followers'
//!   outlives their promise, and they elect another while it still leads.
//!
//! What is carried but may differ: `heartbeat_ms` sets only the coordinator's own drift
//! margin and heartbeat period, and its lease stays within its own D whatever the
//! followers' heartbeat; it is shown in the refusal line beside D. The answer and
//! coordinator timeouts (and the preempt delay) only decide when a node stops waiting
//! and elects: no safety argument reads them, so they are not exchanged.
//!
//! Both ends compare the two hellos themselves. An end that refuses closes the
//! connection with a close code per [`MismatchKind`] and the reason; an end whose
//! comparison never ran (the other hello was lost in the close) learns the verdict from
//! that code ([`refused_by_peer`]).

use super::close;
use super::event::TransportEvent;
use super::hello::{membership_mismatch, Hello, Settings};
use super::shared::{Shared, Shutdown};
use crate::protocol::NodeId;
use std::collections::HashMap;
use tracing::{debug, info, warn};

/// What differs between our config and a peer's, in the order it is looked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MismatchKind {
    /// The member lists differ by more than one member.
    Members,
    /// One runs `quorum`, the other `classic`.
    Mode,
    /// `timing.suspect_after_ms` (D) differs.
    Timing,
}

impl MismatchKind {
    /// Every kind, in a stable order for metrics.
    pub const ALL: [MismatchKind; 3] = [
        MismatchKind::Members,
        MismatchKind::Mode,
        MismatchKind::Timing,
    ];

    /// The `reason` label of the refusal metric.
    pub fn label(self) -> &'static str {
        match self {
            MismatchKind::Members => "members",
            MismatchKind::Mode => "mode",
            MismatchKind::Timing => "timing",
        }
    }

    /// The close code a refusal for this reason carries.
    pub fn close_code(self) -> quinn::VarInt {
        match self {
            MismatchKind::Members => close::MEMBERSHIP,
            MismatchKind::Mode => close::MODE,
            MismatchKind::Timing => close::TIMING,
        }
    }

    /// The kind a close code stands for, if it is a refusal over config.
    pub fn from_close_code(code: quinn::VarInt) -> Option<MismatchKind> {
        MismatchKind::ALL
            .into_iter()
            .find(|k| k.close_code() == code)
    }
}

/// A peer's config disagrees with ours: what, and the words naming both sides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigMismatch {
    pub kind: MismatchKind,
    /// Names both sides, field by field; also the close reason sent to the peer.
    pub reason: String,
}

/// Our hello against a peer's (`us` and `peer` name the two sides in the reason);
/// `None` when they agree where it matters.
pub fn compare(us: NodeId, ours: &Hello, peer: NodeId, theirs: &Hello) -> Option<ConfigMismatch> {
    if let Some(reason) = membership_mismatch(&ours.members, &theirs.members) {
        return Some(ConfigMismatch {
            kind: MismatchKind::Members,
            reason,
        });
    }
    let (a, b) = (&ours.settings, &theirs.settings);
    let mode = a.mode != b.mode;
    let timing = a.suspect_after_ms != b.suspect_after_ms;
    let (kind, what) = match (mode, timing) {
        (false, false) => return None,
        (true, false) => (MismatchKind::Mode, "mode differs"),
        (true, true) => (
            MismatchKind::Mode,
            "mode and timing.suspect_after_ms differ",
        ),
        (false, true) => (MismatchKind::Timing, "timing.suspect_after_ms differs"),
    };
    Some(ConfigMismatch {
        kind,
        reason: format!(
            "{what}: ours (node {us}) {}, theirs (node {peer}) {}; every member must run \
             the same mode and suspect_after_ms",
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

/// The peers whose config was last seen to disagree with ours, and how. Held across
/// the event it causes, so the runtime hears a peer's verdicts in the order they were
/// reached even when two connections of the pair report at once.
#[derive(Debug, Default)]
pub(super) struct Verdicts(tokio::sync::Mutex<HashMap<NodeId, ConfigMismatch>>);

/// Records that `peer` disagrees; true if that is news (it agreed or was unknown, or
/// disagreed otherwise).
fn note_disagreement(
    map: &mut HashMap<NodeId, ConfigMismatch>,
    peer: NodeId,
    mismatch: &ConfigMismatch,
) -> bool {
    let same = map.get(&peer).is_some_and(|m| m.kind == mismatch.kind);
    map.insert(peer, mismatch.clone());
    !same
}

/// A peer's config disagrees with ours (we refused its connection, or it refused ours):
/// counts it, and the first time logs it naming both sides and tells the runtime.
/// Returns false if the event could not be delivered (shutdown).
pub(super) async fn disagreed(
    shared: &Shared,
    peer: NodeId,
    mismatch: ConfigMismatch,
    shutdown: &mut Shutdown,
) -> bool {
    shared.stats.add_config_refusal(mismatch.kind);
    let mut map = shared.verdicts.0.lock().await;
    let reason = mismatch.reason.clone();
    if !note_disagreement(&mut map, peer, &mismatch) {
        debug!(peer, %reason, "config still disagrees; connection refused");
        return true;
    }
    warn!(peer, %reason, "config disagrees with a peer's; refusing its connections");
    let mismatch = Some(mismatch);
    shared
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
    shutdown: &mut Shutdown,
) -> bool {
    shared.stats.add_refused();
    conn.close(mismatch.kind.close_code(), mismatch.reason.as_bytes());
    disagreed(shared, peer, mismatch, shutdown).await
}

/// A peer's hello agrees with ours: if it disagreed before, logs it and tells the
/// runtime. Returns false if the event could not be delivered (shutdown).
pub(super) async fn agreed(shared: &Shared, peer: NodeId, shutdown: &mut Shutdown) -> bool {
    let mut map = shared.verdicts.0.lock().await;
    if map.remove(&peer).is_none() {
        return true;
    }
    info!(peer, "the peer's config agrees with ours now");
    let mismatch = None;
    shared
        .emit(TransportEvent::PeerConfig { peer, mismatch }, shutdown)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Mode;

    fn hello(members: &[NodeId], mode: Mode, suspect_after_ms: u64, heartbeat_ms: u64) -> Hello {
        Hello {
            nonce: 1,
            members: members.to_vec(),
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
                hello(&[1, 2, 3], Mode::Quorum, 1500, 100),
                MismatchKind::Timing,
                "timing.suspect_after_ms differs: ours (node 1) mode=quorum suspect_after_ms=300 \
                 heartbeat_ms=100, theirs (node 3) mode=quorum suspect_after_ms=1500",
            ),
            (
                hello(&[1, 2, 3], Mode::Classic, 1500, 100),
                MismatchKind::Mode,
                "mode and timing.suspect_after_ms differ",
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

    #[test]
    fn close_codes_map_back_to_their_kind() {
        for kind in MismatchKind::ALL {
            assert_eq!(MismatchKind::from_close_code(kind.close_code()), Some(kind));
        }
        assert_eq!(MismatchKind::from_close_code(close::BAD_FRAME), None);
    }

    #[test]
    fn a_disagreement_is_news_once_per_kind() {
        let mut map = HashMap::new();
        let mode = ConfigMismatch {
            kind: MismatchKind::Mode,
            reason: "a".into(),
        };
        assert!(note_disagreement(&mut map, 2, &mode));
        assert!(
            !note_disagreement(&mut map, 2, &mode),
            "the same again is no news"
        );
        let timing = ConfigMismatch {
            kind: MismatchKind::Timing,
            ..mode.clone()
        };
        assert!(note_disagreement(&mut map, 2, &timing), "another kind is");
        assert!(note_disagreement(&mut map, 3, &timing), "another peer is");
    }
}
