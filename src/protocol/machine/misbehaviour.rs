//! The rules a peer can break, checked on every message before the machine observes
//! anything in it, so a refused message never raises our term: unknown senders,
//! Elections going down, Answers going up, claims for an epoch led by someone else, and
//! one rule of docs/design.md with a test of its own:
//!
//! - term_jump: a message whose term (or a member list's stamp, [`stamp_jumps`]) is
//!   more than [`MAX_TERM_JUMP`] above ours is misbehaviour: one forged term near
//!   `u64::MAX` would otherwise end all elections.

use super::config::MachineConfig;
use crate::protocol::epoch::NodeId;
use crate::protocol::membership::Membership;
use crate::protocol::message::{Body, Message};
use crate::protocol::reveal::Reveal;

/// The furthest a message's term may be above the highest term we have seen. Each
/// election raises the term by one, so no honest peer is anywhere near this; a peer
/// beyond it is refused as misbehaving.
pub const MAX_TERM_JUMP: u64 = 1 << 32;

/// Protocol rules a peer can break.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Misbehaviour {
    /// Coordinator, Heartbeat or Resign for an epoch whose leader is not the sender.
    ForeignClaim,
    /// Election from a higher ID (Elections only go up).
    ElectionFromHigher,
    /// Answer from a lower ID (Answers only go down).
    AnswerFromLower,
    /// A message from an ID that is not a configured peer.
    UnknownPeer,
    /// A term more than [`MAX_TERM_JUMP`] above the highest we have seen.
    TermJump,
}

impl std::fmt::Display for Misbehaviour {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Misbehaviour::ForeignClaim => "claimed an epoch led by another node",
            Misbehaviour::ElectionFromHigher => "sent Election to a lower node",
            Misbehaviour::AnswerFromLower => "sent Answer to a higher node",
            Misbehaviour::UnknownPeer => "is not a configured peer",
            Misbehaviour::TermJump => "sent a term impossibly far above ours",
        })
    }
}

/// The protocol rule `msg` from `from` breaks, if any, for a node with `config` that has
/// seen terms up to `seen`: unknown senders, impossible terms, Elections going down,
/// Answers going up, claims for an epoch led by someone else.
pub(super) fn misbehaviour(
    config: &MachineConfig,
    member: bool,
    seen: u64,
    from: NodeId,
    msg: &Message,
) -> Option<Misbehaviour> {
    if !member {
        return Some(Misbehaviour::UnknownPeer);
    }
    let jumps = |term: u64| jumps(seen, term);
    if jumps(msg.term) || message_epoch_term(&msg.body).is_some_and(jumps) {
        return Some(Misbehaviour::TermJump);
    }
    // A sender with an estimate source orders elections by (est, id): its Elections
    // and Answers may go either way (docs/design.md#elected-by-data-est).
    let by_id = msg.est.is_none();
    match msg.body {
        Body::Election { .. } if by_id && from > config.id => {
            Some(Misbehaviour::ElectionFromHigher)
        }
        Body::Answer if by_id && from < config.id => Some(Misbehaviour::AnswerFromLower),
        _ => match msg.body.reveals() {
            Reveal::Claim(epoch) if epoch.leader != from => Some(Misbehaviour::ForeignClaim),
            _ => None,
        },
    }
}

/// term_jump for a member list, which any sender may send (a node may not know its
/// writer yet): whether its stamp names a term more than [`MAX_TERM_JUMP`] above
/// `seen`.
pub(super) fn stamp_jumps(seen: u64, list: &Membership) -> bool {
    list.id.stamp.is_some_and(|stamp| jumps(seen, stamp.term))
}

/// term_jump itself: whether `term` is more than [`MAX_TERM_JUMP`] above `seen`.
fn jumps(seen: u64, term: u64) -> bool {
    term > seen.saturating_add(MAX_TERM_JUMP)
}

/// The highest term a message body names, besides the sender's own term.
fn message_epoch_term(body: &Body) -> Option<u64> {
    match *body {
        Body::PreVote { term, .. } | Body::Vote { term } => Some(term),
        _ => body.reveals().epoch().map(|e| e.term),
    }
}
