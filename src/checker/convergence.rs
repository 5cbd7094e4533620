//! I5 convergence: from a deadline after the last fault, every live node follows one
//! leader, the only coordinator, and they end on one epoch.

use super::invariant::{show, Invariant, Violation};
use crate::history::{Entry, Record};
use crate::protocol::{Membership, Millis, NodeId, Role, Timing, View};
use std::collections::BTreeMap;

/// Which node the cluster must converge on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leader {
    /// This node (preempt = always: the highest live eligible ID).
    Node(NodeId),
    /// Any one live eligible node, as long as everyone agrees (preempt = never).
    AnyLive,
    /// No live member may lead (each is unhealthy, a learner, a witness or removed): no
    /// live node may be a coordinator, and none is owed a leader. Before this, such an
    /// ending fell back to `AnyLive` and demanded a coordinator nobody could be (classic
    /// seed 7156709 of the million run: the one voter left was made ineligible).
    Nobody,
}

/// The I5 expectation: who is live at the end, whom they must follow, and from when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Convergence {
    /// Nodes running (not crashed, not paused) from the last fault to the end.
    pub live: Vec<NodeId>,
    pub leader: Leader,
    /// From this time to the end of the history the cluster must be converged.
    pub deadline_ms: Millis,
}

impl Convergence {
    /// The I5 expectation over a cluster whose member list may have changed at runtime
    /// (src/protocol/membership.rs). `list` is the list the cluster ends on (`None`:
    /// every node lives by its config file's seed, as before lists could change). Only
    /// its members must converge: a removed node or a spare never added is outside the
    /// cluster. With `highest` (preempt = always) the leader is the highest live member
    /// that is `healthy` and whose seat lets it lead: never a learner, a witness or a
    /// removed node, while a promoted one may. Without a list, `healthy` alone decides,
    /// as it did before. When no live member may lead, nobody must ([`Leader::Nobody`]).
    pub fn among_members(
        list: Option<&Membership>,
        live: &[NodeId],
        healthy: impl Fn(NodeId) -> bool,
        highest: bool,
        deadline_ms: Millis,
    ) -> Convergence {
        let member = |id: NodeId| list.map_or(true, |l| l.contains(id));
        let may_lead = |id: NodeId| list.map_or(true, |l| l.get(id).is_some_and(|m| m.may_lead()));
        let live: Vec<NodeId> = live.iter().copied().filter(|&id| member(id)).collect();
        let highest_leader = live
            .iter()
            .rev()
            .copied()
            .find(|&id| healthy(id) && may_lead(id));
        let leader = match (highest_leader, highest) {
            (None, _) => Leader::Nobody,
            (Some(id), true) => Leader::Node(id),
            (Some(_), false) => Leader::AnyLive,
        };
        Convergence {
            live,
            leader,
            deadline_ms,
        }
    }
}

/// The I5 deadline: `last_fault_ms + timing.convergence_bound_ms()` plus slack for
/// message delays. Each step of the slowest recovery chain (suspicion, Election,
/// Answer, re-election after T', Election to a dead node, declaration, Coordinator)
/// adds at most one one-way delay on top of the timeouts the bound already counts;
/// eight delays cover that chain with room to spare. Real-process tests pass their own
/// generous bound for the network (and scheduling) delay.
pub fn convergence_deadline(
    last_fault_ms: Millis,
    timing: &Timing,
    max_delay_ms: Millis,
) -> Millis {
    last_fault_ms + timing.convergence_bound_ms() + 8 * max_delay_ms
}

/// I5: from `deadline_ms` to the end of the history, every live node follows one
/// leader (the expected one), which is live, eligible and the only coordinator, and at
/// the end all live nodes hold the same epoch.
///
/// Views are read per node: the node's view at the deadline is its last View record at
/// or before it; every later View record must satisfy the same rule.
pub fn check_convergence(entries: &[Entry], expect: &Convergence) -> Vec<Violation> {
    let at = expect.deadline_ms;
    let views = views_from(entries, expect);
    let missing: Vec<Violation> = views
        .iter()
        .filter(|(_, list)| list.first().map_or(true, |&(t, _)| t > at))
        .map(|(&node, _)| convergence_failure(node, at, "no view published by the deadline".into()))
        .collect();
    if !missing.is_empty() {
        return missing;
    }
    let leader = match expect.leader {
        Leader::Nobody => return coordinators_where_nobody_may_lead(&views, at),
        Leader::Node(id) => id,
        Leader::AnyLive => match the_one_live_coordinator(&views, expect) {
            Ok(one) => one,
            Err(violation) => return vec![violation],
        },
    };
    if !views.contains_key(&leader) {
        let explanation = format!(
            "expected leader {leader} is not in the live set {:?}",
            expect.live
        );
        return vec![convergence_failure(leader, at, explanation)];
    }
    let wrong = wrong_views(&views, leader, at);
    if !wrong.is_empty() {
        return wrong;
    }
    let final_epoch = |n: &NodeId| views[n].last().and_then(|&(_, v)| v.epoch);
    let leader_epoch = final_epoch(&leader);
    views
        .keys()
        .filter(|n| final_epoch(n) != leader_epoch)
        .map(|&node| {
            let explanation = format!(
                "ends on epoch {}, the leader on {}",
                show(final_epoch(&node)),
                show(leader_epoch)
            );
            convergence_failure(node, at, explanation)
        })
        .collect()
}

/// Per live node, its views from the deadline on: the last one at or before the
/// deadline first (absent if it published none by then), then every later one.
type ViewsFrom = BTreeMap<NodeId, Vec<(Millis, View)>>;

fn views_from(entries: &[Entry], expect: &Convergence) -> ViewsFrom {
    let mut views: ViewsFrom = expect.live.iter().map(|&n| (n, Vec::new())).collect();
    for entry in entries {
        if let (Record::View(view), Some(list)) = (&entry.record, views.get_mut(&entry.node)) {
            if entry.at_ms <= expect.deadline_ms {
                list.clear();
            }
            list.push((entry.at_ms, *view));
        }
    }
    views
}

fn convergence_failure(node: NodeId, at_ms: Millis, explanation: String) -> Violation {
    Violation {
        invariant: Invariant::Convergence,
        node,
        at_ms,
        explanation,
    }
}

/// With [`Leader::Nobody`]: each live node's first view from the deadline on that shows
/// it as a coordinator.
fn coordinators_where_nobody_may_lead(views: &ViewsFrom, at: Millis) -> Vec<Violation> {
    views
        .iter()
        .filter_map(|(&node, list)| {
            let &(t, v) = list.iter().find(|(_, v)| v.role == Role::Coordinator)?;
            let explanation = format!(
                "view is coordinator {} though no live member may lead",
                show(v.epoch)
            );
            Some(convergence_failure(node, t.max(at), explanation))
        })
        .collect()
}

/// With [`Leader::AnyLive`]: the one live coordinator at the deadline, which every live
/// node must follow.
fn the_one_live_coordinator(views: &ViewsFrom, expect: &Convergence) -> Result<NodeId, Violation> {
    let coordinators: Vec<NodeId> = views
        .iter()
        .filter(|(_, list)| list[0].1.role == Role::Coordinator)
        .map(|(&n, _)| n)
        .collect();
    match coordinators[..] {
        [one] => Ok(one),
        _ => {
            let node = expect.live.first().copied().unwrap_or_default();
            let explanation =
                format!("live coordinators at the deadline: {coordinators:?}, not one");
            Err(convergence_failure(node, expect.deadline_ms, explanation))
        }
    }
}

/// Each node's first view from the deadline on that is not "the leader as an eligible
/// coordinator" or "following the leader".
fn wrong_views(views: &ViewsFrom, leader: NodeId, at: Millis) -> Vec<Violation> {
    let mut out = Vec::new();
    for (&node, list) in views {
        let bad = list.iter().find(|(_, v)| {
            if node == leader {
                v.role != Role::Coordinator || !v.eligible
            } else {
                v.role != Role::Follower || v.coordinator() != Some(leader)
            }
        });
        if let Some(&(t, v)) = bad {
            let wanted = if node == leader {
                "an eligible coordinator".to_string()
            } else {
                format!("following node {leader}")
            };
            let explanation = format!(
                "view is {} {} (eligible {}), expected {wanted}",
                v.role,
                show(v.epoch),
                v.eligible
            );
            out.push(convergence_failure(node, t.max(at), explanation));
        }
    }
    out
}
