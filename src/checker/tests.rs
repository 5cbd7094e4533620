//! Unit tests of the history checks, one small history per rule.

use super::*;
use crate::history::{Entry, Record};
use crate::protocol::{Body, Cells, Epoch, Fact, Message, Millis, NodeId, Role, View};

fn ep(term: u64, leader: NodeId) -> Epoch {
    Epoch { term, leader }
}

fn persisted(term: u64, accepted: Option<Epoch>) -> Record {
    Record::Persisted(Cells {
        term,
        accepted,
        incarnation: 1,
        promise_ms: 0,
        recovered: false,
        given_up: false,
        awaits_survivors: false,
    })
}

fn declared(term: u64, leader: NodeId) -> Record {
    Record::Fact(Fact::Declared {
        epoch: ep(term, leader),
    })
}

fn fact(fact: Fact) -> Record {
    Record::Fact(fact)
}

fn est(term: u64, leader: NodeId) -> Record {
    fact(Fact::Established {
        epoch: ep(term, leader),
    })
}

/// `leader` lost the office of term `term`, its lease having ended at `office_ended_at`.
fn demoted(term: u64, leader: NodeId, office_ended_at: Millis) -> Record {
    fact(Fact::Demoted {
        epoch: ep(term, leader),
        reason: crate::protocol::DemotionReason::LeaseLost,
        office_ended_at,
    })
}

#[test]
fn i6_offices_overlap_and_pause_bound() {
    let h = vec![
        Entry::new(100, 2, est(1, 2)),
        Entry::new(500, 1, est(2, 1)),
        Entry::new(600, 2, demoted(1, 2, 450)),
    ];
    assert_eq!(check_no_overlap(&h, 300), vec![], "office ended at 450");
    let mut late = h.clone();
    late[2] = Entry::new(600, 2, demoted(1, 2, 550));
    assert_eq!(
        kinds(&check_no_overlap(&late, 300)),
        vec![Invariant::NoOverlap]
    );
    assert_eq!(overlap_ms(&offices(&late, Some(300))), 50);
    assert_eq!(overlaps(&offices(&late, Some(300))), vec![(500, 550)]);
    // Paused at 150 and never heard from again: the lease bound ends it at 450.
    let paused = vec![
        Entry::new(100, 2, est(1, 2)),
        Entry::new(150, 2, Record::Paused),
        Entry::new(500, 1, est(2, 1)),
        Entry::new(700, 3, Record::Healed),
    ];
    assert_eq!(check_no_overlap(&paused, 300), vec![]);
    assert_eq!(
        kinds(&check_no_overlap(&paused, 400)),
        vec![Invariant::NoOverlap]
    );
}

#[test]
fn a_paused_coordinators_office_ends_with_the_lease_it_held_unless_queued_acks_renew_it() {
    // Seed 399221 (10⁶-seed leader run): 2 was cut off from its majority, so its lease
    // ran out at 300 although rounds it sent reach 480; paused at 250, it never ran
    // again. 1 established at 400, after the promises to 2 ran out: no overlap.
    let paused_lease = |until_ms, renewable_until_ms| Record::PausedLease {
        until_ms,
        renewable_until_ms,
    };
    let never_resumed = vec![
        Entry::new(100, 2, est(1, 2)),
        Entry::new(250, 2, Record::Paused),
        Entry::new(250, 2, paused_lease(300, 480)),
        Entry::new(400, 1, est(2, 1)),
        Entry::new(900, 2, Record::Crashed),
    ];
    assert_eq!(check_no_overlap(&never_resumed, 383), vec![]);
    // Resumed at 350, after its lease but before its rounds ran out: acks queued for
    // them may renew the lease, and it may lead on (seeds 1350, 3845), until its
    // demotion says otherwise.
    let mut resumed_late = never_resumed.clone();
    resumed_late.insert(3, Entry::new(350, 2, Record::Resumed));
    assert_eq!(
        kinds(&check_no_overlap(&resumed_late, 383)),
        vec![Invariant::NoOverlap]
    );
    // Its demotion then says the lease ended at 300: no overlap.
    let mut demoted_at_resume = resumed_late.clone();
    demoted_at_resume.insert(4, Entry::new(355, 2, demoted(1, 2, 300)));
    assert_eq!(check_no_overlap(&demoted_at_resume, 383), vec![]);
    // Resumed after its rounds ran out, nothing renews it: the office ended at 300.
    let mut too_late = never_resumed.clone();
    too_late.insert(4, Entry::new(500, 2, Record::Resumed));
    assert_eq!(check_no_overlap(&too_late, 383), vec![]);
}

#[test]
fn overlaps_are_the_stretches_with_two_in_office_merged_where_they_touch() {
    let office = Office::for_test;
    // 3 leads 0..100; 2 from 50..150; 1 from 100..200 (2 and 1 overlap 100..150,
    // touching 3 and 2's 50..100); 4 alone at 300..400, 5 from 390.
    let all = [
        office(3, 0, 100),
        office(2, 50, 150),
        office(1, 100, 200),
        office(4, 300, 400),
        office(5, 390, 500),
    ];
    assert_eq!(overlaps(&all), vec![(50, 150), (390, 400)]);
    assert_eq!(overlap_ms(&all), 110);
    assert_eq!(overlaps(&all[..1]), vec![]);
}

#[test]
fn i7_two_coordinators_of_one_term() {
    let h = vec![
        Entry::new(1, 1, fact(Fact::Established { epoch: ep(4, 1) })),
        Entry::new(2, 2, fact(Fact::Established { epoch: ep(4, 2) })),
    ];
    assert_eq!(kinds(&check_one_per_term(&h)), vec![Invariant::OnePerTerm]);
}

fn view(id: NodeId, role: Role, epoch: Option<Epoch>) -> Record {
    Record::View(View {
        id,
        role,
        epoch,
        eligible: true,
        incarnation: 1,
    })
}

fn kinds(v: &[Violation]) -> Vec<Invariant> {
    v.iter().map(|v| v.invariant).collect()
}

#[test]
fn clean_history_passes() {
    let h = vec![
        Entry::new(0, 2, Record::Started { incarnation: 1 }),
        Entry::new(0, 2, persisted(0, None)),
        Entry::new(0, 2, view(2, Role::Candidate, None)),
        Entry::new(100, 2, persisted(1, Some(ep(1, 2)))),
        Entry::new(100, 2, view(2, Role::Coordinator, Some(ep(1, 2)))),
        Entry::new(0, 1, Record::Started { incarnation: 1 }),
        Entry::new(0, 1, view(1, Role::Candidate, None)),
        Entry::new(101, 1, persisted(1, Some(ep(1, 2)))),
        Entry::new(101, 1, view(1, Role::Follower, Some(ep(1, 2)))),
    ];
    assert_eq!(check_safety(&h), vec![]);
    let expect = Convergence {
        live: vec![1, 2],
        leader: Leader::Node(2),
        deadline_ms: 200,
    };
    assert_eq!(check_convergence(&h, &expect), vec![]);
    let any = Convergence {
        leader: Leader::AnyLive,
        ..expect
    };
    assert_eq!(check_convergence(&h, &any), vec![]);
}

#[test]
fn i1_accepted_epoch_going_back() {
    let h = vec![
        Entry::new(1, 1, persisted(5, Some(ep(5, 3)))),
        Entry::new(2, 1, Record::Started { incarnation: 2 }),
        Entry::new(3, 1, persisted(5, Some(ep(4, 3)))),
    ];
    assert_eq!(kinds(&check_safety(&h)), vec![Invariant::Fencing]);
}

#[test]
fn i2_same_term_declared_twice_by_one_node() {
    let h = vec![
        Entry::new(1, 1, persisted(5, Some(ep(5, 1)))),
        Entry::new(2, 1, persisted(6, Some(ep(6, 2)))),
        Entry::new(3, 1, persisted(6, Some(ep(5, 1)))),
    ];
    let found = kinds(&check_safety(&h));
    assert!(found.contains(&Invariant::Uniqueness), "{found:?}");
    assert!(found.contains(&Invariant::Fencing), "{found:?}");
}

#[test]
fn i2_term_cell_going_back() {
    let h = vec![
        Entry::new(1, 1, persisted(5, None)),
        Entry::new(2, 1, persisted(4, None)),
    ];
    assert_eq!(kinds(&check_safety(&h)), vec![Invariant::Uniqueness]);
}

#[test]
fn i2_soft_only_in_quiet_windows() {
    let h = vec![
        Entry::new(0, 1, Record::Started { incarnation: 1 }),
        Entry::new(0, 2, Record::Started { incarnation: 1 }),
        Entry::new(1000, 1, declared(3, 1)),
        Entry::new(1010, 2, declared(3, 2)),
    ];
    assert_eq!(
        kinds(&check_unique_terms(&h, quiet(500))),
        vec![Invariant::Uniqueness]
    );
    assert_eq!(check_unique_terms(&h, quiet(2000)), vec![]);
    let mut paused = h.clone();
    paused.insert(2, Entry::new(10, 1, Record::Paused));
    assert_eq!(check_unique_terms(&paused, quiet(500)), vec![]);
}

fn quiet(before_ms: Millis) -> QuietWindow {
    QuietWindow {
        before_ms,
        stale_view_ms: 400,
        election_ms: 600,
    }
}

#[test]
fn i2_soft_not_while_a_lost_declaration_or_list_misleads_a_live_node() {
    let lost = |node, body: &Body| {
        Entry::new(
            300,
            node,
            Record::Lost {
                from: 3,
                msg: Message {
                    promise_ms: 0,
                    term: 2,
                    config: Default::default(),
                    est: None,
                    body: body.clone(),
                },
            },
        )
    };
    let twins = [
        Entry::new(1000, 1, declared(3, 1)),
        Entry::new(1010, 2, declared(3, 2)),
    ];
    let declaration = Body::Coordinator { epoch: ep(2, 3) };
    // Classic seed 7746024: the list that seated the higher node, lost in its sender's
    // crash, misleads as long as a lost declaration.
    let seating = Body::Members {
        list: list(2, &[1, 2, 3], None),
    };
    for body in [&declaration, &seating] {
        // Node 2 lost it at 300 ms: misled until 700 ms, within the 500 ms before
        // the twins.
        let misled = [vec![lost(2, body)], twins.to_vec()].concat();
        assert_eq!(check_unique_terms(&misled, quiet(500)), vec![], "{body:?}");
        // Long enough before, or lost by a node that was down: the twins count.
        assert_eq!(
            kinds(&check_unique_terms(&misled, quiet(200))),
            vec![Invariant::Uniqueness]
        );
        let down = [
            vec![Entry::new(100, 2, Record::Crashed), lost(2, body)],
            twins.to_vec(),
        ]
        .concat();
        assert_eq!(
            kinds(&check_unique_terms(&down, quiet(500))),
            vec![Invariant::Uniqueness]
        );
    }
    // A lost heartbeat misleads nobody for long: the twins count.
    let heartbeat = Body::Heartbeat {
        epoch: ep(2, 3),
        round: 0,
    };
    let beat = [vec![lost(2, &heartbeat)], twins.to_vec()].concat();
    assert_eq!(
        kinds(&check_unique_terms(&beat, quiet(500))),
        vec![Invariant::Uniqueness]
    );
    // Classic seed 665150: a lost Election (or its Answer) leaves its sender's election
    // unanswered until it ends, a starting node's start-up wait later: counted for
    // `election_ms` (600 here) after the loss, and no longer.
    for body in [&Body::Election { accepted: None }, &Body::Answer] {
        let unanswered = [vec![lost(1, body)], twins.to_vec()].concat();
        assert_eq!(
            check_unique_terms(&unanswered, quiet(200)),
            vec![],
            "{body:?}"
        );
        let short = QuietWindow {
            election_ms: 100,
            ..quiet(200)
        };
        assert_eq!(
            kinds(&check_unique_terms(&unanswered, short)),
            vec![Invariant::Uniqueness]
        );
    }
}

#[test]
fn i4_declaring_before_the_preempt_delay() {
    let h = vec![
        Entry::new(100, 1, Record::Started { incarnation: 2 }),
        Entry::new(100, 1, persisted(0, None)),
        Entry::new(150, 1, persisted(1, Some(ep(1, 1)))),
        Entry::new(150, 1, declared(1, 1)),
    ];
    assert_eq!(
        kinds(&check_start_delay(&h, 100)),
        vec![Invariant::Recovery]
    );
    assert_eq!(check_start_delay(&h, 50), vec![]);
    let mut followed = h.clone();
    followed.insert(
        2,
        Entry::new(120, 1, view(1, Role::Follower, Some(ep(0, 2)))),
    );
    assert_eq!(check_start_delay(&followed, 100), vec![]);
}

#[test]
fn i3_view_of_unpersisted_epoch() {
    let h = vec![Entry::new(1, 1, view(1, Role::Follower, Some(ep(1, 2))))];
    assert_eq!(kinds(&check_safety(&h)), vec![Invariant::Durability]);
}

#[test]
fn i4_first_view_after_restart_and_old_coordinator_epoch() {
    let h = vec![
        Entry::new(1, 1, persisted(1, Some(ep(1, 1)))),
        Entry::new(1, 1, view(1, Role::Coordinator, Some(ep(1, 1)))),
        Entry::new(2, 1, Record::Started { incarnation: 2 }),
        Entry::new(3, 1, view(1, Role::Coordinator, Some(ep(1, 1)))),
    ];
    assert_eq!(
        kinds(&check_safety(&h)),
        vec![Invariant::Recovery, Invariant::Recovery]
    );
}

#[test]
fn i5_wrong_leader_two_coordinators_and_late_flap() {
    let h = vec![
        Entry::new(1, 1, persisted(1, Some(ep(1, 1)))),
        Entry::new(1, 1, view(1, Role::Coordinator, Some(ep(1, 1)))),
        Entry::new(1, 2, persisted(1, Some(ep(1, 2)))),
        Entry::new(1, 2, view(2, Role::Coordinator, Some(ep(1, 2)))),
    ];
    let expect = Convergence {
        live: vec![1, 2],
        leader: Leader::Node(2),
        deadline_ms: 10,
    };
    assert_eq!(
        kinds(&check_convergence(&h, &expect)),
        vec![Invariant::Convergence]
    );
    let any = Convergence {
        leader: Leader::AnyLive,
        ..expect.clone()
    };
    assert_eq!(
        kinds(&check_convergence(&h, &any)),
        vec![Invariant::Convergence]
    );
    let mut fixed = h.clone();
    fixed.push(Entry::new(5, 1, persisted(1, Some(ep(1, 2)))));
    fixed.push(Entry::new(5, 1, view(1, Role::Follower, Some(ep(1, 2)))));
    assert_eq!(check_convergence(&fixed, &expect), vec![]);
    fixed.push(Entry::new(50, 1, view(1, Role::Candidate, None)));
    assert_eq!(
        kinds(&check_convergence(&fixed, &expect)),
        vec![Invariant::Convergence]
    );
}

/// A list written under epoch 2@3 as version `version`, with these members (`learner`
/// among them a learner).
fn list(version: u64, ids: &[NodeId], learner: Option<NodeId>) -> crate::protocol::Membership {
    use crate::protocol::{ConfigId, Member, Membership, Seat};
    Membership {
        settings: None,
        id: ConfigId {
            stamp: Some(ep(2, 3)),
            version,
        },
        members: ids
            .iter()
            .map(|&id| Member {
                id,
                seat: Seat::Voter,
                learner: learner == Some(id),
                addr: String::new(),
            })
            .collect(),
    }
}

#[test]
fn one_list_per_identity() {
    let mut lists = ListIdentity::new();
    assert_eq!(lists.observe(1, 5, &list(1, &[1, 2, 3], None)), None);
    assert_eq!(lists.observe(2, 6, &list(1, &[1, 2, 3], None)), None);
    let other = lists.observe(3, 7, &list(1, &[1, 2, 3, 4], Some(4)));
    assert_eq!(other.map(|v| v.invariant), Some(Invariant::ListIdentity));
    // Seeded lists differ by design (each node's config file seeds its own).
    let seeded = |ids: &[NodeId]| crate::protocol::Membership {
        id: Default::default(),
        ..list(0, ids, None)
    };
    assert_eq!(lists.observe(1, 8, &seeded(&[1, 2])), None);
    assert_eq!(lists.observe(4, 8, &seeded(&[1, 2, 4])), None);
}

#[test]
fn a_stranger_is_refused_by_rule_a_member_is_flagged() {
    use crate::protocol::Misbehaviour;
    assert!(stranger_refused(Misbehaviour::UnknownPeer, false));
    assert!(!stranger_refused(Misbehaviour::UnknownPeer, true));
    assert!(!stranger_refused(Misbehaviour::ForeignClaim, false));
}

#[test]
fn i5_among_the_members_of_the_list() {
    // 4 is the highest live node but a learner, 5 was removed: 3 must lead, and 5 is
    // not judged.
    let members = list(4, &[1, 3, 4], Some(4));
    let expect = Convergence::among_members(Some(&members), &[1, 3, 4, 5], |_| true, true, 10);
    assert_eq!(expect.live, vec![1, 3, 4]);
    assert_eq!(expect.leader, Leader::Node(3));
    // Without a list, as before lists could change: the highest healthy live node.
    let seeded = Convergence::among_members(None, &[1, 3, 4], |id| id != 4, true, 10);
    assert_eq!(seeded.leader, Leader::Node(3));
    let never = Convergence::among_members(Some(&members), &[1, 3], |_| true, false, 10);
    assert_eq!(never.leader, Leader::AnyLive);
}

#[test]
fn i5_where_no_live_member_may_lead_nobody_may_coordinate() {
    // 4 is a learner and 3 unhealthy: in both preempt modes no leader is owed.
    let members = list(4, &[1, 3, 4], Some(4));
    for highest in [true, false] {
        let expect =
            Convergence::among_members(Some(&members), &[3, 4], |id| id != 3, highest, 200);
        assert_eq!(expect.leader, Leader::Nobody);
    }
    let candidates = vec![
        Entry::new(0, 3, view(3, Role::Candidate, None)),
        Entry::new(0, 4, view(4, Role::Candidate, None)),
    ];
    let nobody = Convergence {
        live: vec![3, 4],
        leader: Leader::Nobody,
        deadline_ms: 200,
    };
    assert_eq!(check_convergence(&candidates, &nobody), vec![]);
    let mut led = candidates.clone();
    led.push(Entry::new(
        300,
        3,
        view(3, Role::Coordinator, Some(ep(2, 3))),
    ));
    let found = check_convergence(&led, &nobody);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!((found[0].node, found[0].at_ms), (3, 300));
}

#[test]
fn i4_a_node_alone_in_its_list_declares_at_once() {
    let h = vec![
        Entry::new(100, 1, Record::Started { incarnation: 2 }),
        Entry::new(100, 1, persisted(1, Some(ep(2, 1)))),
        Entry::new(100, 1, declared(2, 1)),
    ];
    assert_eq!(
        kinds(&check_start_delay(&h, 100)),
        vec![Invariant::Recovery]
    );
    assert_eq!(
        check_start_delay_where(&h, 100, |node, at| (node, at) != (1, 100)),
        vec![]
    );
}
