//! What a message tells its receiver about the sender's stored cells: the one place
//! that reads a [`Body`] for invariant I3 (durability: an epoch is in the flushed cells
//! before any message reveals it). The simulator and the model checker both judge a
//! send by it, through `crate::checker::check_send`; the machine reads a claim through
//! it when it checks who may send one.

use super::{Body, Epoch};

/// The epoch a message reveals, and how it must relate to the sender's stored accepted
/// epoch when the message leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reveal {
    /// Nothing about the accepted epoch (Answer, Probe, PreVote, Vote, TermQuery,
    /// TermReport).
    Nothing,
    /// A claim to lead or to have led this epoch (Coordinator, Heartbeat, Resign): it
    /// must be exactly the sender's stored accepted epoch.
    Claim(Epoch),
    /// The sender's accepted epoch as it reports it (Election, Ack): at most the stored
    /// one.
    AtMost(Option<Epoch>),
}

impl Reveal {
    /// The epoch revealed, if any: what a receiver may now know the sender accepted.
    pub fn epoch(self) -> Option<Epoch> {
        match self {
            Reveal::Nothing => None,
            Reveal::Claim(epoch) => Some(epoch),
            Reveal::AtMost(epoch) => epoch,
        }
    }

    /// Whether a sender whose stored accepted epoch is `stored` may send this.
    pub fn is_stored(self, stored: Option<Epoch>) -> bool {
        match self {
            Reveal::Nothing => true,
            Reveal::Claim(epoch) => Some(epoch) == stored,
            Reveal::AtMost(epoch) => epoch <= stored,
        }
    }
}

impl Body {
    /// What this message reveals of its sender's accepted epoch (invariant I3).
    pub fn reveals(&self) -> Reveal {
        match *self {
            Body::Coordinator { epoch }
            | Body::Heartbeat { epoch, .. }
            | Body::Resign { epoch } => Reveal::Claim(epoch),
            Body::Election { accepted } | Body::Ack { accepted, .. } => Reveal::AtMost(accepted),
            Body::Answer
            | Body::Probe
            | Body::PreVote { .. }
            | Body::Vote { .. }
            | Body::TermQuery
            | Body::TermReport
            | Body::TermUnknown
            | Body::Members { .. } => Reveal::Nothing,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_must_equal_and_reports_stay_at_most_the_stored_epoch() {
        let e = |term| Epoch { term, leader: 3 };
        let claim = Body::Heartbeat {
            epoch: e(2),
            round: 1,
        }
        .reveals();
        assert_eq!(claim, Reveal::Claim(e(2)));
        assert!(claim.is_stored(Some(e(2))));
        assert!(!claim.is_stored(Some(e(3))));
        let report = Body::Election {
            accepted: Some(e(2)),
        }
        .reveals();
        assert!(report.is_stored(Some(e(3))));
        assert!(!report.is_stored(Some(e(1))));
        assert!(!report.is_stored(None));
        assert_eq!(Body::Answer.reveals().epoch(), None);
        assert!(Body::Probe.reveals().is_stored(None));
    }
}
