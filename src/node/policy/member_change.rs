//! An operator's membership change on the coordinator, from the request to its answer
//! (docs/design.md#membership): the machine decides and reports facts; this says when
//! the operator's request is done (the list it asked for is committed), failed (the
//! change was refused, the node left office, or the time ran out), or still waiting.

use crate::protocol::{Change, Membership, Millis, Seat};

/// How long a change may take before the operator is told what is missing. An add
/// waits for the new node to catch up, which takes its start-up and one round trip.
pub const CHANGE_TIMEOUT_MS: Millis = 20_000;

/// A change the coordinator is carrying out, and whom to answer.
#[derive(Debug)]
pub struct PendingChange<R> {
    pub change: Change,
    pub reply: R,
    give_up_at: Millis,
}

/// Where a pending change stands.
#[derive(Debug, PartialEq, Eq)]
pub enum Progress {
    Waiting,
    Done(String),
    Failed(String),
}

impl<R> PendingChange<R> {
    /// A change asked for at `now`.
    pub fn new(change: Change, reply: R, now: Millis) -> PendingChange<R> {
        PendingChange {
            change,
            reply,
            give_up_at: now + CHANGE_TIMEOUT_MS,
        }
    }

    /// Where the change stands, given the list the node holds, whether it is committed,
    /// and whether the node still leads.
    pub fn progress(
        &self,
        list: &Membership,
        committed: bool,
        leading: bool,
        now: Millis,
    ) -> Progress {
        if !leading {
            return Progress::Failed(
                "this node left office during the change; it may or may not have been \
                 stored: see `bully member list`"
                    .into(),
            );
        }
        let version = list.id.version;
        let member = list.get(self.change.subject());
        let done = match &self.change {
            _ if !committed => None,
            Change::Add { id, seat, .. } => member.is_some_and(|m| !m.learner).then(|| {
                let what = match seat {
                    Seat::Voter => "member",
                    Seat::Witness => "witness",
                };
                format!("node {id} joined as a voting {what} (member list v{version})")
            }),
            Change::Remove { id } => member
                .is_none()
                .then(|| format!("node {id} left the cluster (member list v{version})")),
            Change::Replace { id } => member.is_some_and(|m| m.learner).then(|| {
                format!(
                    "node {id} is a learner again (member list v{version}); it takes its \
                         seat once it has caught up (start it on its new disk)"
                )
            }),
            Change::Promote { id } => member
                .is_some_and(|m| !m.learner)
                .then(|| format!("node {id} took its seat (member list v{version})")),
            Change::Settings { set } => list
                .settings
                .as_ref()
                .is_some_and(|now| now.with_all(set).as_ref() == Ok(now))
                .then(|| {
                format!("the cluster settings are committed (member list v{version}); every member lives by them")
            }),
        };
        if let Some(done) = done {
            return Progress::Done(done);
        }
        if now < self.give_up_at {
            return Progress::Waiting;
        }
        let secs = CHANGE_TIMEOUT_MS / 1000;
        Progress::Failed(match (&self.change, member) {
            (Change::Add { id, .. }, Some(m)) if m.learner => format!(
                "node {id} was added as a learner but has not caught up within {secs} s: \
                 is it running, with a certificate of this cluster's CA? It takes its seat \
                 as soon as it has (see `bully member list`)"
            ),
            _ => format!(
                "the change was not committed within {secs} s: a majority of the members \
                 may be unreachable; see `bully member list`"
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{ConfigId, Epoch, Member};

    fn list(members: &[(u64, bool)]) -> Membership {
        Membership {
            settings: None,
            id: ConfigId {
                stamp: Some(Epoch { term: 1, leader: 3 }),
                version: 2,
            },
            members: members
                .iter()
                .map(|&(id, learner)| Member {
                    id,
                    seat: Seat::Voter,
                    learner,
                    addr: String::new(),
                })
                .collect(),
        }
    }

    #[test]
    fn an_add_is_done_only_once_the_new_member_votes_in_a_committed_list() {
        let add = Change::Add {
            id: 4,
            addr: "h:1".into(),
            seat: Seat::Voter,
        };
        let pending = PendingChange::new(add, (), 0);
        let learning = list(&[(1, false), (3, false), (4, true)]);
        assert_eq!(
            pending.progress(&learning, true, true, 10),
            Progress::Waiting
        );
        let seated = list(&[(1, false), (3, false), (4, false)]);
        assert_eq!(
            pending.progress(&seated, false, true, 10),
            Progress::Waiting
        );
        assert!(matches!(
            pending.progress(&seated, true, true, 10),
            Progress::Done(_)
        ));
        let late = pending.progress(&learning, true, true, CHANGE_TIMEOUT_MS);
        assert!(matches!(late, Progress::Failed(text) if text.contains("has not caught up")));
        assert!(matches!(
            pending.progress(&learning, true, false, 10),
            Progress::Failed(_)
        ));
    }

    #[test]
    fn a_remove_is_done_once_a_committed_list_lacks_it() {
        let pending = PendingChange::new(Change::Remove { id: 1 }, (), 0);
        let before = list(&[(1, false), (3, false)]);
        assert_eq!(pending.progress(&before, true, true, 5), Progress::Waiting);
        let after = list(&[(3, false)]);
        assert!(matches!(
            pending.progress(&after, true, true, 5),
            Progress::Done(_)
        ));
    }
}
