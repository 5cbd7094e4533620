//! One test per membership rule in the module doc of
//! `src/protocol/machine/membership.rs`, named after the rule. Each drives a single
//! `Machine` by hand in quorum mode at `Timing::default()` (h 100, D 300, T 100, T' 300).

use bully::protocol::{
    Action, Body, Cells, Change, ChangeRefused, ConfigId, Epoch, Event, Fact, Flaw, Machine,
    MachineConfig, Member, Membership, Message, Millis, Misbehaviour, NodeId, Role, Seat,
};

#[path = "common/drive.rs"]
mod drive;

fn ep(term: u64, leader: NodeId) -> Epoch {
    Epoch { term, leader }
}

fn config(id: NodeId, peers: &[NodeId]) -> MachineConfig {
    drive::rule_member(id, peers)
}

fn deliver(m: &mut Machine, from: NodeId, term: u64, body: Body, now: Millis) -> Vec<Action> {
    drive::feed(m, drive::message(from, term, body), now)
}

fn deliver_under(
    m: &mut Machine,
    from: NodeId,
    term: u64,
    list: ConfigId,
    body: Body,
    now: Millis,
) -> Vec<Action> {
    let msg = Message {
        promise_ms: 0,
        term,
        config: list,
        est: None,
        body,
    };
    drive::feed(m, Event::Message { from, msg }, now)
}

fn change(m: &mut Machine, change: Change, now: Millis) -> Vec<Action> {
    drive::feed(m, Event::ChangeMembers(change), now)
}

fn facts(actions: &[Action]) -> Vec<Fact> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Fact(f) => Some(*f),
            _ => None,
        })
        .collect()
}

fn lists_sent(actions: &[Action]) -> Vec<(NodeId, Membership)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Send { to, msg } => match &msg.body {
                Body::Members { list } => Some((*to, list.clone())),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

fn stored(actions: &[Action]) -> Option<Membership> {
    actions.iter().find_map(|a| match a {
        Action::PersistMembers(list) => Some(list.clone()),
        _ => None,
    })
}

fn ack(epoch: Epoch, round: u64) -> Body {
    Body::Ack {
        accepted: Some(epoch),
        round,
    }
}

fn add(id: NodeId) -> Change {
    Change::Add {
        id,
        addr: format!("127.0.0.1:{}", 7000 + id),
        seat: Seat::Voter,
    }
}

/// Node 3 of {1, 2, 3}, established at term 1 by node 1's ack.
fn coordinator_three() -> Machine {
    coordinator_three_with(None)
}

/// [`coordinator_three`], its machine built with `flaw`.
fn coordinator_three_with(flaw: Option<Flaw>) -> Machine {
    let config = config(3, &[1, 2]).with_flaw(flaw);
    let mut m = drive::start_connected(config, Cells::default(), 0);
    drive::feed(&mut m, Event::Tick, 100);
    deliver(&mut m, 1, 0, Body::Vote { term: 1 }, 101);
    deliver(&mut m, 1, 1, ack(ep(1, 3), 0), 102);
    assert_eq!(m.view().role, Role::Coordinator);
    m
}

/// Coordinator 3 after its list is confirmed under 1@3 and node 4 was added as a
/// learner (list v1, committed by node 1).
fn with_learner_four() -> (Machine, ConfigId) {
    let mut m = coordinator_three();
    let asked = change(&mut m, add(4), 110);
    let confirmed = stored(&asked).expect("the list is confirmed under our epoch first");
    deliver_under(&mut m, 1, 1, confirmed.id, ack(ep(1, 3), 0), 111);
    let learner_list = m.members().clone();
    assert_eq!(learner_list.id.version, 1);
    deliver_under(&mut m, 1, 1, learner_list.id, ack(ep(1, 3), 0), 112);
    assert!(m.members_committed());
    (m, learner_list.id)
}

#[test]
fn one_change() {
    // The coordinator confirms its seeded list under its own epoch (same members,
    // stamp 1@3) before it changes anything, and proposes the operator's change only
    // once a majority stored the confirmation; a second change meanwhile is refused.
    let mut m = coordinator_three();
    let asked = change(&mut m, add(4), 110);
    let confirmed = stored(&asked).expect("persisted before it is sent");
    assert_eq!(
        confirmed.id,
        ConfigId {
            stamp: Some(ep(1, 3)),
            version: 0
        }
    );
    assert_eq!(confirmed.members.len(), 3, "same members, confirmed");
    let told: Vec<NodeId> = lists_sent(&asked).iter().map(|(to, _)| *to).collect();
    assert_eq!(told, vec![1, 2]);
    let persist_at = asked
        .iter()
        .position(|a| matches!(a, Action::PersistMembers(_)))
        .unwrap();
    // Only a round of the lease, under the list held before, goes out ahead of it
    // (lease_before_list).
    let first_send = asked
        .iter()
        .position(|a| matches!(a, Action::Send { msg, .. } if msg.config == confirmed.id))
        .unwrap();
    assert!(persist_at < first_send, "stored before anyone hears of it");
    let again = change(&mut m, add(5), 111);
    assert_eq!(
        facts(&again),
        vec![Fact::ChangeRefused {
            reason: ChangeRefused::ChangeInProgress
        }]
    );
    // Node 1 shows the confirmed list: 2 of 3 hold it, the add goes out as v1.
    let proposed = deliver_under(&mut m, 1, 1, confirmed.id, ack(ep(1, 3), 0), 112);
    assert!(facts(&proposed).contains(&Fact::MembersCommitted { id: confirmed.id }));
    let v1 = stored(&proposed).expect("the add is stored");
    assert_eq!(v1.id.version, 1);
    assert!(
        v1.get(4).unwrap().learner,
        "a new member enters as a learner"
    );
    let told: Vec<NodeId> = lists_sent(&proposed).iter().map(|(to, _)| *to).collect();
    assert_eq!(told, vec![1, 2, 4], "the new member is told too");
}

#[test]
fn learner() {
    // A learner's acks neither commit a list nor hold the lease; once it acked our
    // epoch under the current list, the coordinator gives it its seat.
    let (mut m, v1) = with_learner_four();
    let before = m.lease_until();
    // The next round (after the one sent before v1 was stored, at 112) goes out; only
    // the learner acks it: no renewal.
    let round_one = drive::feed(&mut m, Event::Tick, 212);
    assert!(round_one.iter().any(
        |a| matches!(a, Action::Send { msg, .. } if matches!(msg.body, Body::Heartbeat { .. }))
    ));
    let promoted = deliver_under(&mut m, 4, 1, v1, ack(ep(1, 3), 3), 213);
    assert_eq!(m.lease_until(), before, "a learner's ack holds no lease");
    let v2 = stored(&promoted).expect("the learner is promoted");
    assert_eq!(v2.id.version, 2);
    assert!(v2.get(4).unwrap().may_lead());
    assert_eq!(v2.voters().len(), 4);
    // Now 3 of 4 voters must hold v2 before the next change: node 1 alone is not enough.
    deliver_under(&mut m, 1, 1, v2.id, ack(ep(1, 3), 3), 214);
    assert!(
        !m.members_committed(),
        "2 of 4 voters is no majority of the new list"
    );
    let committed = deliver_under(&mut m, 4, 1, v2.id, ack(ep(1, 3), 3), 215);
    assert!(facts(&committed).contains(&Fact::MembersCommitted { id: v2.id }));
}

#[test]
fn hand_over_first() {
    // The coordinator never removes or replaces itself; other refusals name the reason.
    let mut m = coordinator_three();
    for (asked, reason) in [
        (Change::Remove { id: 3 }, ChangeRefused::IsCoordinator),
        (Change::Replace { id: 3 }, ChangeRefused::IsCoordinator),
        (Change::Remove { id: 9 }, ChangeRefused::NotAMember),
        (add(2), ChangeRefused::AlreadyMember),
    ] {
        let refused = change(&mut m, asked, 110);
        assert_eq!(facts(&refused), vec![Fact::ChangeRefused { reason }]);
        assert!(stored(&refused).is_none());
    }
    // A follower refuses every change: only the coordinator changes the list.
    let mut follower = drive::start_connected(config(1, &[2, 3]), Cells::default(), 0);
    let refused = change(&mut follower, add(4), 10);
    assert_eq!(
        facts(&refused),
        vec![Fact::ChangeRefused {
            reason: ChangeRefused::NotCoordinator
        }]
    );
}

#[test]
fn members_spread() {
    // A node stores a newer list before anything else it does and acks its sender; it
    // sends its own list to a peer whose message shows an older one, and not again
    // within T' while that peer still shows the older one.
    let (coordinator, _) = with_learner_four();
    let v1 = coordinator.members().clone();
    let mut m = drive::start_connected(config(2, &[1, 3]), Cells::default(), 0);
    let got = deliver_under(&mut m, 3, 1, v1.id, Body::Members { list: v1.clone() }, 50);
    assert_eq!(stored(&got).as_ref(), Some(&v1));
    assert!(matches!(got.first(), Some(Action::PersistMembers(_))));
    assert!(facts(&got).contains(&Fact::MembersChanged {
        id: v1.id,
        voters: 3
    }));
    assert_eq!(m.members(), &v1);
    // An older list is not stored.
    let old = deliver(
        &mut m,
        1,
        0,
        Body::Members {
            list: Membership::seeded(vec![]),
        },
        60,
    );
    assert!(stored(&old).is_none());
    // Node 1 shows the seeded list: it gets ours, once per T'.
    let pushed = deliver(&mut m, 1, 0, Body::Probe, 70);
    assert_eq!(lists_sent(&pushed), vec![(1, v1.clone())]);
    let quiet = deliver(&mut m, 1, 0, Body::Probe, 80);
    assert!(lists_sent(&quiet).is_empty());
    let again = deliver(&mut m, 1, 0, Body::Probe, 80 + 300);
    assert_eq!(lists_sent(&again).len(), 1);
}

#[test]
fn term_jump_of_a_list() {
    // A member list from any sender is read before the sender is known, so its stamp is
    // checked on its own: one stamped impossibly far above our term is misbehaviour,
    // stored nowhere, and raises no term (it would end every election, and a
    // coordinator holding it gives way: newer_list).
    let (coordinator, _) = with_learner_four();
    let v1 = coordinator.members().clone();
    let forged = v1.restamped(ep(u64::MAX - 1, 3), 0);
    let mut m = drive::start_connected(config(2, &[1, 3]), Cells::default(), 0);
    let seen = m.seen_term();
    let got = deliver(&mut m, 3, 1, Body::Members { list: forged }, 50);
    assert_eq!(
        got,
        vec![Action::Misbehaved {
            peer: 3,
            what: Misbehaviour::TermJump
        }]
    );
    assert_eq!(m.seen_term(), seen);
    assert_ne!(m.members().id, v1.id);
    // The same list at a possible term is stored.
    let got = deliver(&mut m, 3, 1, Body::Members { list: v1.clone() }, 60);
    assert_eq!(stored(&got).as_ref(), Some(&v1));
}

#[test]
fn up_to_date() {
    // A voter holding a confirmed list refuses the pre-vote of a candidate whose message
    // shows an older list (and sends it the list); once the candidate shows it, it votes.
    let (coordinator, _) = with_learner_four();
    let v1 = coordinator.members().clone();
    let mut m = drive::start_connected(config(2, &[1, 3]), Cells::default(), 0);
    deliver_under(&mut m, 3, 1, v1.id, Body::Members { list: v1.clone() }, 50);
    let asked = Body::PreVote {
        term: 2,
        heard: None,
    };
    // Candidate 3 (above us, so Bully order lets us vote for it) still shows the seed.
    let refused = deliver(&mut m, 3, 1, asked.clone(), 400);
    assert!(
        !refused.iter().any(
            |a| matches!(a, Action::Send { msg, .. } if matches!(msg.body, Body::Vote { .. }))
        ),
        "no vote for a candidate behind on the list: {refused:?}"
    );
    assert_eq!(lists_sent(&refused), vec![(3, v1.clone())]);
    let granted = deliver_under(&mut m, 3, 1, v1.id, asked, 401);
    assert!(
        granted.iter().any(
            |a| matches!(a, Action::Send { to: 3, msg } if msg.body == Body::Vote { term: 2 })
        ),
        "{granted:?}"
    );
}

#[test]
fn removed() {
    // A node that stores a list without itself is ineligible, and a learner is too.
    let mut m = drive::start_connected(config(2, &[1, 3]), Cells::default(), 0);
    assert!(m.view().eligible);
    let member = |id| Member {
        id,
        seat: Seat::Voter,
        learner: false,
        addr: String::new(),
    };
    let without_two = Membership {
        settings: None,
        id: ConfigId {
            stamp: Some(ep(1, 3)),
            version: 1,
        },
        members: vec![member(1), member(3)],
    };
    deliver_under(
        &mut m,
        3,
        1,
        without_two.id,
        Body::Members { list: without_two },
        50,
    );
    assert!(!m.view().eligible, "a removed node never leads");
}

#[test]
fn lease_before_list() {
    // A round of the lease goes out before the list is stored (docs/design.md#membership):
    // the followers ack it before their own flush of the list holds their acks up, so
    // the lease enters the change fresh. Span at the default timing: D - h = 200 ms.
    let mut m = coordinator_three();
    let before = m.lease_until().expect("a lease");
    let asked = change(&mut m, add(4), 250);
    let round = asked.iter().position(
        |a| matches!(a, Action::Send { msg, .. } if matches!(msg.body, Body::Heartbeat { .. })),
    );
    let persist = asked
        .iter()
        .position(|a| matches!(a, Action::PersistMembers(_)));
    let (Some(round_at), Some(persist_at)) = (round, persist) else {
        panic!("a round and a stored list: {asked:?}");
    };
    assert!(round_at < persist_at, "the round goes out first: {asked:?}");
    let Action::Send { msg, .. } = &asked[round_at] else {
        unreachable!()
    };
    let Body::Heartbeat { round, .. } = msg.body else {
        unreachable!()
    };
    assert!(
        before < 450,
        "the lease of the declaration ends before 450: {before}"
    );
    deliver(&mut m, 1, 1, ack(ep(1, 3), round), 260);
    assert_eq!(
        m.lease_until(),
        Some(450),
        "a span from the round sent at 250"
    );
    // The old order (the sabotage): the list is stored with no round before it.
    let mut old = coordinator_three_with(Some(Flaw::NoRenewBeforeList));
    let asked = change(&mut old, add(4), 250);
    assert!(
        !asked.iter().any(
            |a| matches!(a, Action::Send { msg, .. } if matches!(msg.body, Body::Heartbeat { .. }))
        ),
        "no round before the list under the sabotage: {asked:?}"
    );
}
