//! Where the runtime pauses a batch of the machine's actions so that a coordinator that
//! leaves office voluntarily (a clean stop, a step-down, a resign after a failed
//! `on_elected`, a health check's failure, a handover to a higher node) has run its
//! `on_demoted` before its Resign goes out: the successor's `on_elected` may promote its
//! database moments after the Resign, and the old one must not be writable then.
//!
//! The machine (`src/protocol/machine/`) stays as it is: it reports the demotion as a
//! `Fact::Demoted`, publishes the new view (which queues `on_demoted`) and sends the
//! Resign. This module only says how far the runtime may run before it waits for that
//! hook; everything after the wait point (the Resign, a handover's vote) is held.
//! A lapsed lease or a newer epoch is not voluntary: nothing is held then (the node
//! sends no Resign after a lapse, and after a newer epoch a newer coordinator already
//! exists).

use crate::protocol::{Action, Body, DemotionReason, Epoch, Fact};
use std::collections::VecDeque;

/// Whether leaving office for `reason` was the coordinator's own choice.
pub fn voluntary(reason: DemotionReason) -> bool {
    match reason {
        DemotionReason::Stopped | DemotionReason::Ineligible | DemotionReason::Yielded { .. } => {
            true
        }
        DemotionReason::LeaseLost | DemotionReason::NewerEpoch => false,
    }
}

/// The number of leading actions of `pending` to run before waiting for `on_demoted`,
/// or `None` when the batch holds no voluntary demotion. The wait point is just after
/// the view published after the demotion (that view queues the hook). A Resign for the
/// demoted epoch that the machine put before the demotion (classic mode's health or
/// step-down path) is moved to just after the wait point, keeping its order.
pub fn wait_point(pending: &mut VecDeque<Action>) -> Option<usize> {
    let epoch = voluntarily_left(pending)?;
    let at = pending.iter().position(|a| {
        matches!(a, Action::Fact(Fact::Demoted { epoch: e, reason, .. }) if *e == epoch && voluntary(*reason))
    })?;
    let published = at
        + pending
            .iter()
            .skip(at)
            .position(|a| matches!(a, Action::ViewChanged(_)))?;
    let (early, before): (Vec<Action>, Vec<Action>) =
        pending.drain(..at).partition(|a| resigns(a, epoch));
    let through_view: Vec<Action> = pending.drain(..=published - at).collect();
    let wait_after = before.len() + through_view.len();
    let rest: Vec<Action> = pending.drain(..).collect();
    pending.extend(before);
    pending.extend(through_view);
    pending.extend(early);
    pending.extend(rest);
    Some(wait_after)
}

/// The epoch a coordinator leaves voluntarily in `pending`, if it does: what the
/// runtime waits for its keepers to release (`src/node/serve/keepers.rs`) at the
/// [`wait_point`], beside `on_demoted`.
pub fn voluntarily_left(pending: &VecDeque<Action>) -> Option<Epoch> {
    pending.iter().find_map(|a| match a {
        Action::Fact(Fact::Demoted { epoch, reason, .. }) if voluntary(*reason) => Some(*epoch),
        _ => None,
    })
}

/// Whether `action` sends a Resign for `epoch`.
fn resigns(action: &Action, epoch: Epoch) -> bool {
    matches!(action, Action::Send { msg, .. } if msg.body == Body::Resign { epoch })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Cells, Message, Role, View};

    const EPOCH: Epoch = Epoch { term: 3, leader: 3 };

    fn demoted(reason: DemotionReason) -> Action {
        Action::Fact(Fact::Demoted {
            epoch: EPOCH,
            reason,
            office_ended_at: 0,
        })
    }

    fn view() -> Action {
        Action::ViewChanged(View {
            id: 3,
            role: Role::Candidate,
            epoch: Some(EPOCH),
            eligible: false,
            incarnation: 1,
        })
    }

    fn send(to: u64, body: Body) -> Action {
        Action::Send {
            to,
            msg: Message {
                term: 3,
                config: Default::default(),
                est: None,
                body,
            },
        }
    }

    fn resign(to: u64) -> Action {
        send(to, Body::Resign { epoch: EPOCH })
    }

    fn kinds(pending: &VecDeque<Action>) -> Vec<String> {
        pending
            .iter()
            .map(|a| match a {
                Action::Fact(_) => "demoted".to_string(),
                Action::ViewChanged(_) => "view".to_string(),
                Action::Send { to, msg } => format!("{:?}>{to}", msg.body.kind()),
                Action::Persist(_) | Action::PersistMembers(_) => "persist".to_string(),
                Action::Misbehaved { .. } => "misbehaved".to_string(),
            })
            .collect()
    }

    #[test]
    fn a_voluntary_demotion_waits_after_its_view_before_the_resign() {
        // Quorum mode's order: demoted, view, resign to each peer, a handover's vote.
        for reason in [
            DemotionReason::Stopped,
            DemotionReason::Ineligible,
            DemotionReason::Yielded { to: 4 },
        ] {
            let mut pending = VecDeque::from([
                demoted(reason),
                view(),
                resign(1),
                resign(2),
                send(4, Body::Vote { term: 4 }),
            ]);
            let before = kinds(&pending);
            assert_eq!(voluntarily_left(&pending), Some(EPOCH), "{reason}");
            assert_eq!(wait_point(&mut pending), Some(2), "{reason}");
            assert_eq!(kinds(&pending), before, "nothing reordered");
        }
    }

    #[test]
    fn a_resign_sent_before_the_demotion_is_moved_after_the_wait() {
        // Classic mode's health or step-down path resigns first, then leaves office.
        let mut pending = VecDeque::from([
            Action::Persist(Cells::default()),
            resign(1),
            resign(2),
            demoted(DemotionReason::Ineligible),
            view(),
        ]);
        assert_eq!(wait_point(&mut pending), Some(3));
        let resign_kind = Body::Resign { epoch: EPOCH }.kind();
        assert_eq!(
            kinds(&pending),
            [
                "persist".to_string(),
                "demoted".to_string(),
                "view".to_string(),
                format!("{resign_kind:?}>1"),
                format!("{resign_kind:?}>2"),
            ]
        );
    }

    #[test]
    fn a_lapse_or_a_newer_epoch_holds_nothing() {
        for reason in [DemotionReason::LeaseLost, DemotionReason::NewerEpoch] {
            let mut pending = VecDeque::from([demoted(reason), view(), resign(1)]);
            assert_eq!(voluntarily_left(&pending), None, "{reason}");
            assert_eq!(wait_point(&mut pending), None, "{reason}");
        }
        let mut nothing = VecDeque::from([resign(1), view()]);
        assert_eq!(wait_point(&mut nothing), None);
        assert_eq!(voluntarily_left(&nothing), None);
    }
}
