//! The hello both ends of a peer connection send first, each on its own unidirectional
//! stream, which then carries that end's messages when it is its path to the other
//! (see [`super::path`]).
//!
//! A hello carries a random nonce chosen once per process. The dialer learns which
//! process it reached; the accepting side learns which process dialed it. When a peer
//! dials us with a nonce other than the one our own outbound connection reached, that
//! connection points at a dead process (the peer restarted) and is redialed at once
//! instead of after the idle timeout. The dialer also waits for the accepting side's
//! hello before it reports the peer up, which proves the peer accepted our certificate.
//!
//! A hello also carries the sender's member list (itself and its peers now) and which
//! list that is (its [`ConfigId`]). While both lists are still the ones seeded from the
//! config files (unstamped), both sides refuse a peer whose list differs from theirs
//! by more than one member ([`membership_mismatch`]): in quorum mode two
//! configurations that differ by two or more can each count a different majority and
//! elect two coordinators in one term, and nothing else orders two config files.
//! Changing membership one node at a time keeps any two lists within one. Once either
//! list was written by a coordinator (stamped), the protocol orders the two lists
//! (`crate::protocol::membership`) and a node that missed two changes must still be
//! reached so the newer list can reach it: `agreement` then leaves the lists alone.
//!
//! It carries the sender's [`Settings`] too: the mode and the timing the lease rests on,
//! which [`super::agreement`] compares with ours.

use super::frame::{read_frame, write_frame, FrameError};
use crate::codec::{CodecError, HEADER_LEN};
use crate::protocol::{ConfigId, Mode, NodeId, Timing};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The first frame on a peer stream. Public because it is part of the wire protocol
/// (tests speak it with raw quinn).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// Random, fixed for the life of the sending process.
    pub nonce: u64,
    /// The sender and its peers now, in ascending order.
    pub members: Vec<NodeId>,
    /// Which member list `members` is: whether the two lists are compared depends on
    /// whether either was written by a coordinator (see `agreement`).
    pub config: ConfigId,
    /// The sender's mode and safety timing.
    pub settings: Settings,
}

/// The part of a node's config every member must agree on (see [`super::agreement`]
/// for what is compared and why), sent in every hello.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settings {
    pub mode: Mode,
    /// D: what a follower's lease promise lasts and the coordinator's lease is cut from.
    pub suspect_after_ms: u64,
    /// Shown beside D; may differ between members.
    pub heartbeat_ms: u64,
}

impl Settings {
    /// The settings of a node running `mode` with `timing`.
    pub fn new(mode: Mode, timing: &Timing) -> Settings {
        Settings {
            mode,
            suspect_after_ms: timing.suspect_after_ms,
            heartbeat_ms: timing.heartbeat_ms,
        }
    }
}

/// Why a peer's member list is refused, naming both lists, if it is: when the two lists
/// differ by more than one member (counting members on either side only).
pub fn membership_mismatch(ours: &[NodeId], theirs: &[NodeId]) -> Option<String> {
    let ours_only = ours.iter().filter(|id| !theirs.contains(id)).count();
    let theirs_only = theirs.iter().filter(|id| !ours.contains(id)).count();
    (ours_only + theirs_only > 1).then(|| {
        format!(
            "member lists differ by more than one member: ours {} theirs {}; change membership one node at a time",
            list(ours),
            list(theirs)
        )
    })
}

fn list(ids: &[NodeId]) -> String {
    let ids: Vec<String> = ids.iter().map(|id| id.to_string()).collect();
    format!("[{}]", ids.join(","))
}

/// Both hellos must arrive within this long of the handshake, or the connection is
/// dropped: a peer that connects must speak.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(2);

/// Opens a unidirectional stream and writes our hello on it. Not cancellation-safe.
pub(super) async fn send(
    conn: &quinn::Connection,
    hello: &Hello,
) -> Result<quinn::SendStream, FrameError> {
    let mut stream = conn.open_uni().await.map_err(io_error)?;
    write_frame(&mut stream, hello).await?;
    Ok(stream)
}

/// Accepts the peer's unidirectional stream and reads its hello. A stream that ends
/// before the hello is a truncated frame. Not cancellation-safe.
pub(super) async fn recv(
    conn: &quinn::Connection,
) -> Result<(quinn::RecvStream, Hello), FrameError> {
    let mut stream = conn.accept_uni().await.map_err(io_error)?;
    match read_frame::<Hello>(&mut stream).await? {
        Some(hello) => Ok((stream, hello)),
        None => Err(CodecError::Truncated {
            expected: HEADER_LEN,
            got: 0,
        }
        .into()),
    }
}

fn io_error(e: quinn::ConnectionError) -> FrameError {
    FrameError::Io(e.into())
}

#[cfg(test)]
mod tests {
    use super::membership_mismatch;

    #[test]
    fn lists_within_one_member_are_accepted() {
        assert_eq!(membership_mismatch(&[1, 2, 3], &[1, 2, 3]), None);
        assert_eq!(membership_mismatch(&[1, 2, 3], &[1, 2, 3, 4]), None);
        assert_eq!(membership_mismatch(&[1, 2, 3, 4], &[1, 2, 3]), None);
    }

    #[test]
    fn lists_two_apart_are_refused_naming_both() {
        let why = membership_mismatch(&[1, 2, 3], &[1, 2, 3, 4, 5]).unwrap();
        assert!(why.contains("ours [1,2,3] theirs [1,2,3,4,5]"), "{why}");
        // One added and one removed is two changes too.
        assert!(membership_mismatch(&[1, 2, 3], &[1, 2, 4]).is_some());
    }
}
