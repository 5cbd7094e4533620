//! Q4 for readers: in quorum mode an answer to "who leads?" that names X at time t
//! means X's office covers t (docs/design.md#asking-who-leads). The simulator records
//! every answer its queries got and checks them against the offices of the history
//! ([`check_leader_answers`]); the model checker asks at every state and compares with
//! the machine it names ([`check_answer_in_office`]).

use super::invariant::{Invariant, Violation};
use super::office::{InOffice, Office};
use crate::protocol::{Epoch, Millis, NodeId};

/// One answer to "who leads?": node `asked` named the leader of `epoch` at `at_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaderAnswer {
    pub asked: NodeId,
    pub epoch: Epoch,
    pub at_ms: Millis,
}

/// Every answer in `answers` lies within an office of the node it names, in the epoch
/// it names (`offices` as [`super::offices_with`] reads them off the same history); one
/// violation per answer that does not.
pub fn check_leader_answers(answers: &[LeaderAnswer], offices: &[Office]) -> Vec<Violation> {
    let covered = |a: &LeaderAnswer| {
        offices.iter().any(|o| {
            o.node == a.epoch.leader
                && o.epoch == a.epoch
                && o.from_ms <= a.at_ms
                && a.at_ms <= o.until_ms
        })
    };
    answers
        .iter()
        .filter(|a| !covered(a))
        .map(|a| {
            let explanation = format!(
                "node {} answered that node {} leads (epoch {}) at {} ms, outside any office \
                 of node {} in that epoch",
                a.asked, a.epoch.leader, a.epoch, a.at_ms, a.epoch.leader
            );
            Violation::new(Invariant::LeaderAnswer, a.asked, a.at_ms, explanation)
        })
        .collect()
}

/// The model checker's form: node `asked` named the leader of `epoch` at `at_ms`, and
/// `named` is that node's office as its machine reads it then (`None`: it is down, or
/// does not read itself coordinator of `epoch`).
pub fn check_answer_in_office(
    asked: NodeId,
    epoch: Epoch,
    at_ms: Millis,
    named: Option<InOffice>,
) -> Option<Violation> {
    if named.is_some_and(|o| o.node == epoch.leader && o.epoch == Some(epoch)) {
        return None;
    }
    let explanation = format!(
        "node {asked} answered that node {} leads (epoch {epoch}), but node {} is not in \
         office in that epoch",
        epoch.leader, epoch.leader
    );
    Some(Violation::new(
        Invariant::LeaderAnswer,
        asked,
        at_ms,
        explanation,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(leader: NodeId, term: u64, at_ms: Millis) -> LeaderAnswer {
        let epoch = Epoch { term, leader };
        LeaderAnswer {
            asked: 1,
            epoch,
            at_ms,
        }
    }

    #[test]
    fn an_answer_inside_the_named_office_passes_and_one_after_it_fails() {
        let office = Office::for_test(3, 100, 400);
        assert!(
            check_leader_answers(&[answer(3, 100, 100), answer(3, 100, 400)], &[office]).is_empty()
        );
        let late = check_leader_answers(&[answer(3, 100, 401)], &[office]);
        assert_eq!(late.len(), 1, "{late:?}");
        assert_eq!(late[0].invariant, Invariant::LeaderAnswer);
        // The right node in the wrong epoch is not covered either.
        assert_eq!(
            check_leader_answers(&[answer(3, 7, 200)], &[office]).len(),
            1
        );
    }

    #[test]
    fn the_model_form_wants_the_named_node_in_office_in_that_epoch() {
        let epoch = Epoch { term: 2, leader: 3 };
        let office = InOffice {
            node: 3,
            epoch: Some(epoch),
            lease_until: Some(50),
        };
        assert_eq!(check_answer_in_office(1, epoch, 10, Some(office)), None);
        assert!(check_answer_in_office(1, epoch, 10, None).is_some());
    }
}
