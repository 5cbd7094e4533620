//! Recovery from a lost majority (`bully recover`, docs/design.md#recovery-from-a-lost-majority):
//! what a survivor stores so that the listed survivors alone form a new configuration.
//!
//! The new list keeps only the survivors and is stamped above every term this node has
//! seen (term cell, accepted epoch, the stamp of the list it holds), with the node's own
//! ID as the stamp's leader. Lists are ordered stamp first (`membership.rs`), so every
//! node that hears of the new list prefers it to any list this node ever saw; the
//! leader in the stamp keeps two survivors' recovered lists apart (one identity, one
//! list: `checker/lists.rs`), and the term cell raised to the stamp's term makes the
//! survivor's next declaration higher still. With other survivors, the node also waits
//! for each one's term before it votes or leads (`Cells::awaits_survivors`,
//! src/protocol/recovery.rs): a term another survivor alone saw is above this node's
//! stamp. Pure: the command that reads and writes the store is
//! `node/drive/forced_recovery.rs`.

use super::epoch::{Cells, Epoch, NodeId};
use super::membership::{ConfigId, Member, Membership};
use std::collections::BTreeSet;
use std::fmt;

/// What a forced recovery writes, and what it gives up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForcedRecovery {
    /// The cells before: what this node had seen.
    pub cells_before: Cells,
    /// The cells to store: the term cell raised to the new list's stamp, and the wait
    /// for the other survivors' terms.
    pub cells: Cells,
    /// The list this node held before (stored, or seeded from its config file).
    pub from: Membership,
    /// The new list: the survivors only, stamped above every term seen here.
    pub list: Membership,
    /// The members left out: they must never start again on their old data dirs.
    pub lost: Vec<Member>,
}

/// Why a forced recovery is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecoverRefused {
    /// No survivor was named.
    NoSurvivors,
    /// The node running the command must be one of the survivors.
    NotListed { me: NodeId },
    /// A named survivor is not in the list this node holds.
    NotAMember { id: NodeId },
    /// A named survivor is a learner: it has no vote to carry over.
    Learner { id: NodeId },
    /// No named survivor may lead.
    NoLeader,
    /// Every member is named: nothing was lost.
    NothingLost,
    /// The named survivors still hold a majority of the voters: the cluster elects and
    /// changes its list by itself (`bully member remove`), safely. Not refused while
    /// the store still waits for the survivors of an earlier forced recovery.
    StillAMajority { survivors: usize, voters: usize },
}

impl fmt::Display for RecoverRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecoverRefused::NoSurvivors => write!(f, "--members names no node"),
            RecoverRefused::NotListed { me } => write!(
                f,
                "this node ({me}) is not in --members: run recover on a survivor it names"
            ),
            RecoverRefused::NotAMember { id } => {
                write!(f, "node {id} is not in the member list this node holds")
            }
            RecoverRefused::Learner { id } => write!(
                f,
                "node {id} is a learner (no vote yet): leave it out and add it again later"
            ),
            RecoverRefused::NoLeader => {
                write!(f, "no node in --members may lead (all witnesses)")
            }
            RecoverRefused::NothingLost => {
                write!(
                    f,
                    "--members names every member: there is nothing to recover"
                )
            }
            RecoverRefused::StillAMajority { survivors, voters } => write!(
                f,
                "the {survivors} nodes named are a majority of the {voters} voters: the \
                 cluster can elect a coordinator, and `bully member remove` drops the lost \
                 members safely; recover is only for a lost majority"
            ),
        }
    }
}

/// The highest term `cells` and `list` show this node has seen.
pub fn highest_seen(cells: &Cells, list: &Membership) -> u64 {
    let accepted = cells.accepted.map_or(0, |e| e.term);
    let stamped = list.id.stamp.map_or(0, |e| e.term);
    cells.term.max(accepted).max(stamped)
}

/// The recovery node `me` performs, holding `cells` and `current`, keeping only
/// `survivors`; or why not.
pub fn plan(
    me: NodeId,
    cells: &Cells,
    current: &Membership,
    survivors: &BTreeSet<NodeId>,
) -> Result<ForcedRecovery, RecoverRefused> {
    if survivors.is_empty() {
        return Err(RecoverRefused::NoSurvivors);
    }
    if !survivors.contains(&me) {
        return Err(RecoverRefused::NotListed { me });
    }
    for &id in survivors {
        match current.get(id) {
            None => return Err(RecoverRefused::NotAMember { id }),
            Some(m) if m.learner => return Err(RecoverRefused::Learner { id }),
            Some(_) => {}
        }
    }
    let (kept, lost): (Vec<Member>, Vec<Member>) = current
        .members
        .iter()
        .cloned()
        .partition(|m| survivors.contains(&m.id));
    if !kept.iter().any(Member::may_lead) {
        return Err(RecoverRefused::NoLeader);
    }
    if lost.is_empty() {
        return Err(RecoverRefused::NothingLost);
    }
    // A survivor still waiting for another survivor that never came up cannot elect
    // (src/protocol/recovery.rs): recovering again without that one is the way out.
    if current.has_majority(survivors) && !cells.awaits_survivors {
        return Err(RecoverRefused::StillAMajority {
            survivors: survivors.len(),
            voters: current.voters().len(),
        });
    }
    let term = highest_seen(cells, current) + 1;
    let list = Membership {
        id: ConfigId {
            stamp: Some(Epoch { term, leader: me }),
            version: current.id.version + 1,
        },
        members: kept,
        settings: current.settings.clone(),
    };
    Ok(ForcedRecovery {
        cells_before: *cells,
        cells: Cells {
            term,
            awaits_survivors: survivors.len() > 1,
            ..*cells
        },
        from: current.clone(),
        list,
        lost,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Seat;

    fn member(id: NodeId, seat: Seat) -> Member {
        Member {
            id,
            seat,
            learner: false,
            addr: format!("h:{id}"),
        }
    }

    fn five() -> Membership {
        let mut list = Membership::seeded((1..=5).map(|id| member(id, Seat::Voter)).collect());
        list.id = ConfigId {
            stamp: Some(Epoch { term: 9, leader: 5 }),
            version: 3,
        };
        list
    }

    const CELLS: Cells = Cells {
        term: 7,
        accepted: Some(Epoch { term: 8, leader: 5 }),
        incarnation: 4,
        promise_ms: 0,
        recovered: false,
        given_up: false,
        awaits_survivors: false,
    };

    #[test]
    fn the_new_list_outranks_every_term_seen_and_keeps_the_survivors_only() {
        let plan = plan(1, &CELLS, &five(), &[1, 2].into()).unwrap();
        assert_eq!(
            plan.list.id.stamp,
            Some(Epoch {
                term: 10,
                leader: 1
            })
        );
        assert_eq!(plan.list.id.version, 4);
        assert!(plan.list.id > five().id);
        assert_eq!(plan.cells.term, 10);
        assert_eq!(plan.cells.accepted, CELLS.accepted);
        assert_eq!(plan.cells.incarnation, CELLS.incarnation);
        assert!(
            plan.cells.awaits_survivors,
            "node 2's terms are not known here"
        );
        let kept: Vec<NodeId> = plan.list.members.iter().map(|m| m.id).collect();
        assert_eq!(kept, vec![1, 2]);
        assert_eq!(plan.list.members[1].addr, "h:2", "addresses are kept");
        let lost: Vec<NodeId> = plan.lost.iter().map(|m| m.id).collect();
        assert_eq!(lost, vec![3, 4, 5]);
    }

    #[test]
    fn two_survivors_recovering_apart_never_share_an_identity() {
        let one = plan(1, &CELLS, &five(), &[1, 2].into()).unwrap();
        let two = plan(2, &CELLS, &five(), &[1, 2].into()).unwrap();
        assert_ne!(one.list.id, two.list.id);
        assert_eq!(one.list.members, two.list.members);
        let alone = plan(1, &CELLS, &five(), &[1].into()).unwrap();
        assert!(
            !alone.cells.awaits_survivors,
            "no other survivor to wait for"
        );
    }

    #[test]
    fn a_survivor_that_never_came_up_is_recovered_without() {
        let first = plan(1, &CELLS, &five(), &[1, 2, 3].into());
        assert!(first.is_err(), "three of five are a majority");
        let survivors = {
            let mut list = five();
            list.members.truncate(3);
            list
        };
        let waiting = Cells {
            awaits_survivors: true,
            ..CELLS
        };
        let again = plan(1, &waiting, &survivors, &[1, 2].into()).unwrap();
        assert_eq!(again.list.members.len(), 2);
        let settled = plan(1, &CELLS, &survivors, &[1, 2].into()).unwrap_err();
        assert!(matches!(settled, RecoverRefused::StillAMajority { .. }));
    }

    #[test]
    fn refusals_name_the_reason() {
        let list = five();
        let refused = |me, survivors: &[NodeId]| {
            plan(me, &CELLS, &list, &survivors.iter().copied().collect()).unwrap_err()
        };
        assert_eq!(refused(1, &[]), RecoverRefused::NoSurvivors);
        assert_eq!(refused(1, &[2]), RecoverRefused::NotListed { me: 1 });
        assert_eq!(refused(1, &[1, 9]), RecoverRefused::NotAMember { id: 9 });
        assert_eq!(
            refused(1, &[1, 2, 3]),
            RecoverRefused::StillAMajority {
                survivors: 3,
                voters: 5
            }
        );
        let mut witnesses = list.clone();
        witnesses.members[0].seat = Seat::Witness;
        assert_eq!(
            plan(1, &CELLS, &witnesses, &[1].into()).unwrap_err(),
            RecoverRefused::NoLeader
        );
        let mut learning = list.clone();
        learning.members[1].learner = true;
        assert_eq!(
            plan(1, &CELLS, &learning, &[1, 2].into()).unwrap_err(),
            RecoverRefused::Learner { id: 2 }
        );
        let one = Membership::seeded(vec![member(1, Seat::Voter)]);
        assert_eq!(
            plan(1, &CELLS, &one, &[1].into()).unwrap_err(),
            RecoverRefused::NothingLost
        );
    }
}
