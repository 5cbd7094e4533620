//! QUIC application close codes, so the other side's logs say why it was dropped.

use quinn::VarInt;

/// Orderly shutdown of this node.
pub const SHUTDOWN: VarInt = VarInt::from_u32(0);
/// Replaced by a newer connection (the peer redialed or restarted).
pub const SUPERSEDED: VarInt = VarInt::from_u32(1);
/// The certificate names a node that is not one of our peers (not in our member list).
pub const UNKNOWN_PEER: VarInt = VarInt::from_u32(2);
/// A truncated, oversized, wrong-version or undecodable frame.
pub const BAD_FRAME: VarInt = VarInt::from_u32(3);
/// The runtime asked to drop the peer (it broke a protocol rule).
pub const MISBEHAVED: VarInt = VarInt::from_u32(4);
/// The certificate's identity may not use the requested protocol (e.g. a client
/// certificate on the peer ALPN), or names no identity.
pub const FORBIDDEN: VarInt = VarInt::from_u32(5);
/// The peer did not follow the stream protocol (e.g. no hello in time).
pub const PROTOCOL: VarInt = VarInt::from_u32(6);
/// The peer's member list differs from ours by more than one member.
pub const MEMBERSHIP: VarInt = VarInt::from_u32(7);
/// What we sent went unanswered for the silence timeout (see `super::silence`).
pub const SILENT: VarInt = VarInt::from_u32(8);
/// The peer runs the other mode (`quorum` against `classic`).
pub const MODE: VarInt = VarInt::from_u32(9);
/// The peer's `timing.suspect_after_ms` (D) differs from ours.
pub const TIMING: VarInt = VarInt::from_u32(10);
/// The peer was removed from our member list (see `super::Transport::set_peers`): we
/// no longer dial it, and refuse it with [`UNKNOWN_PEER`] if it dials us.
pub const REMOVED: VarInt = VarInt::from_u32(11);
/// The reason sent with [`REMOVED`].
pub(super) const REMOVED_REASON: &[u8] = b"removed from the member list";
/// The peer is one a forced recovery on this node gave up (`bully recover`): it is
/// not in our member list and must stand down for good
/// (src/protocol/machine/given_up.rs).
pub const GIVEN_UP: VarInt = VarInt::from_u32(12);

/// The words of a peer that closed our connection as [`GIVEN_UP`], if it did.
pub(super) fn given_up_reason(error: &quinn::ConnectionError) -> Option<String> {
    match error {
        quinn::ConnectionError::ApplicationClosed(c) if c.error_code == GIVEN_UP => {
            Some(String::from_utf8_lossy(&c.reason).into_owned())
        }
        _ => None,
    }
}
