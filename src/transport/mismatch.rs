//! [`ConfigMismatch`] and [`MismatchKind`]: how a peer's config disagrees with ours,
//! as the transport reports it (events, refusals, counters). Plain data: the judging is
//! `agreement`'s.

use super::close;

/// What differs between our config and a peer's, in the order it is looked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MismatchKind {
    /// The member lists differ by more than one member.
    Members,
    /// One runs `quorum`, the other `classic`.
    Mode,
    /// `timing.suspect_after_ms` (D) differs: what builds before the timing was
    /// cluster state refused (docs/design.md#cluster-settings). This build never
    /// refuses over D; the kind stays so a peer's close code and the refusal metric's
    /// `timing` label keep their meaning.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_codes_map_back_to_their_kind() {
        for kind in MismatchKind::ALL {
            assert_eq!(MismatchKind::from_close_code(kind.close_code()), Some(kind));
        }
        assert_eq!(MismatchKind::from_close_code(close::BAD_FRAME), None);
    }
}
