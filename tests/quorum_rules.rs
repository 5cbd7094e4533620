//! One test per quorum-mode rule in the doc comments of `src/protocol/machine/`
//! (`quorum.rs`, `handover.rs`), named after the rule, plus the start-up and shutdown
//! rules both modes share. Each drives a single `Machine` by hand; times are
//! `Timing::default()`: heartbeat 100, D (suspect) 300, T (answer) 100, T'
//! (coordinator) 300.

use bully::protocol::{
    Action, Body, Cells, DemotionReason, Epoch, Event, Fact, Heard, Machine, MachineConfig, Millis,
    Mode, NodeId, Preempt, Role,
};

fn ep(term: u64, leader: NodeId) -> Epoch {
    Epoch { term, leader }
}

fn config(id: NodeId, peers: &[NodeId]) -> MachineConfig {
    drive::rule_member(id, peers)
}

fn start(config: MachineConfig, cells: Cells, now: Millis) -> Machine {
    drive::start_connected(config, cells, now)
}

fn drain(m: &mut Machine) -> Vec<Action> {
    std::iter::from_fn(|| m.poll_action()).collect()
}

#[path = "common/drive.rs"]
mod drive;
use drive::{sent, tick};

fn deliver(m: &mut Machine, from: NodeId, term: u64, body: Body, now: Millis) -> Vec<Action> {
    drive::feed(m, drive::message(from, term, body), now)
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

fn persisted(actions: &[Action]) -> bool {
    actions.iter().any(|a| matches!(a, Action::Persist(_)))
}

fn fresh() -> Cells {
    Cells::default()
}

/// Node 3 of {1, 2, 3} established at term 1, with both followers' acks of round 0.
fn coordinator_three() -> Machine {
    let mut m = start(config(3, &[1, 2]), fresh(), 0);
    let asked = tick(&mut m, 100);
    assert!(sent(&asked).contains(&(1, pre_vote(1))));
    let declared = deliver(&mut m, 1, 0, Body::Vote { term: 1 }, 101);
    assert!(persisted(&declared));
    assert_eq!(facts(&declared), vec![Fact::Declared { epoch: ep(1, 3) }]);
    let established = deliver(&mut m, 1, 1, ack(ep(1, 3), 0), 102);
    assert_eq!(
        facts(&established),
        vec![Fact::Established { epoch: ep(1, 3) }]
    );
    m
}

/// A pre-vote from a candidate that has heard no coordinator's heartbeat.
fn pre_vote(term: u64) -> Body {
    Body::PreVote { term, heard: None }
}

/// A pre-vote from a candidate that heard round `round` of `epoch`'s coordinator.
fn pre_vote_hearing(term: u64, epoch: Epoch, round: u64) -> Body {
    Body::PreVote {
        term,
        heard: Some(Heard { epoch, round }),
    }
}

fn ack(epoch: Epoch, round: u64) -> Body {
    Body::Ack {
        accepted: Some(epoch),
        round,
    }
}

#[test]
fn prevote() {
    // Q6: the highest node asks before it persists anything; without a majority it
    // never raises its term.
    let mut m = start(config(3, &[1, 2, 4, 5]), fresh(), 0);
    tick(&mut m, 100); // Election to 4 and 5
    let asked = tick(&mut m, 200);
    assert!(
        !persisted(&asked),
        "nothing is persisted before a majority says yes"
    );
    assert_eq!(sent(&asked).len(), 4, "a pre-vote to every peer: {asked:?}");
    let one = deliver(&mut m, 1, 0, Body::Vote { term: 1 }, 201);
    assert!(!persisted(&one), "2 of 5 is no majority");
    let gave_up = tick(&mut m, 200 + 300);
    assert!(!persisted(&gave_up));
    assert_eq!(m.cells().term, 0, "a minority node never raises the term");
    let two = deliver(&mut m, 2, 0, Body::Vote { term: 1 }, 501);
    assert!(
        !persisted(&two),
        "a late vote for an abandoned round counts for nothing"
    );
}

#[test]
fn one_per_term() {
    // Q1: a declaration is accepted only above the term cell.
    let mut m = start(config(1, &[2, 3]), fresh(), 0);
    let accepted = deliver(&mut m, 2, 1, Body::Coordinator { epoch: ep(1, 2) }, 10);
    assert!(persisted(&accepted));
    assert_eq!(sent(&accepted), vec![(2, ack(ep(1, 2), 0))]);
    let other = deliver(&mut m, 3, 1, Body::Coordinator { epoch: ep(1, 3) }, 20);
    assert!(
        !persisted(&other),
        "a second declaration of term 1 is refused"
    );
    assert_eq!(
        sent(&other),
        vec![(
            3,
            Body::Ack {
                accepted: Some(ep(1, 2)),
                round: 0
            }
        )],
        "the refused declarer learns what we hold"
    );
}

#[test]
fn established() {
    // Q2: a declarer is coordinator only once a majority persisted its acceptance.
    let mut m = start(config(3, &[1, 2, 4, 5]), fresh(), 0);
    m.handle(Event::Tick, 100);
    drain(&mut m);
    tick(&mut m, 200);
    deliver(&mut m, 1, 0, Body::Vote { term: 1 }, 201);
    let declared = deliver(&mut m, 2, 0, Body::Vote { term: 1 }, 202);
    assert!(persisted(&declared));
    assert_eq!(
        m.view().role,
        Role::Candidate,
        "declared is not established"
    );
    deliver(&mut m, 1, 1, ack(ep(1, 3), 0), 203);
    assert_eq!(m.view().role, Role::Candidate, "itself and one ack: 2 of 5");
    let est = deliver(&mut m, 2, 1, ack(ep(1, 3), 0), 204);
    assert_eq!(facts(&est), vec![Fact::Established { epoch: ep(1, 3) }]);
    assert_eq!(m.view().role, Role::Coordinator);
}

#[test]
fn lease() {
    // Q3: the role lasts until s + D - heartbeat of the newest majority-acked send,
    // is read against it (Q4), and ends with a demotion that dates the office's end.
    let mut m = coordinator_three();
    assert_eq!(m.lease_until(), Some(101 + 200), "declared at 101");
    tick(&mut m, 201); // heartbeat round 1
    deliver(&mut m, 2, 1, ack(ep(1, 3), 1), 205);
    assert_eq!(m.lease_until(), Some(201 + 200));
    assert_eq!(m.role_at(400), Role::Coordinator);
    assert_eq!(
        m.role_at(401),
        Role::Candidate,
        "a reader never sees a stale lease"
    );
    tick(&mut m, 301); // round 2: nobody acks it
    let lost = tick(&mut m, 401);
    assert!(
        facts(&lost).contains(&Fact::Demoted {
            epoch: ep(1, 3),
            reason: DemotionReason::LeaseLost,
            office_ended_at: 401,
        }),
        "{lost:?}"
    );
    assert!(
        !sent(&lost)
            .iter()
            .any(|(_, b)| matches!(b, Body::Heartbeat { .. })),
        "no heartbeat for a term whose lease ran out"
    );

    // A follower that acked leader 3 at 10 accepts nobody else's declaration before 310.
    let mut f = start(config(1, &[2, 3]), fresh(), 0);
    deliver(&mut f, 3, 1, Body::Coordinator { epoch: ep(1, 3) }, 10);
    let early = deliver(&mut f, 2, 2, Body::Coordinator { epoch: ep(2, 2) }, 300);
    assert!(!persisted(&early), "promised to 3 until 310");
    let late = deliver(&mut f, 2, 2, Body::Coordinator { epoch: ep(2, 2) }, 310);
    assert!(persisted(&late));
}

#[test]
fn restart_holdoff() {
    // Q5: a restarted node that had accepted something acks no declaration for D, but
    // follows an established coordinator's heartbeat at once.
    let before = Cells {
        term: 1,
        accepted: Some(ep(1, 3)),
        incarnation: 1,
        promise_ms: 0,
        recovered: false,
        given_up: false,
        awaits_survivors: false,
    };
    let mut m = start(config(1, &[2, 3]), before, 1_000);
    let declaration = deliver(&mut m, 2, 2, Body::Coordinator { epoch: ep(2, 2) }, 1_200);
    assert!(!persisted(&declaration), "in its hold-off until 1300");
    let beat = deliver(
        &mut m,
        3,
        1,
        Body::Heartbeat {
            epoch: ep(1, 3),
            round: 7,
        },
        1_210,
    );
    assert_eq!(sent(&beat), vec![(3, ack(ep(1, 3), 7))]);
    assert_eq!(m.view().role, Role::Follower);
    // A fresh node promised nothing in an earlier life: no hold-off.
    let mut fresh_node = start(config(1, &[2, 3]), fresh(), 1_000);
    let accepted = deliver(
        &mut fresh_node,
        2,
        1,
        Body::Coordinator { epoch: ep(1, 2) },
        1_001,
    );
    assert!(persisted(&accepted));
}

#[test]
fn handover() {
    // Q7: asked by a higher node, the coordinator demotes first, then resigns, then
    // votes; a follower holding its promise defers its vote until the Resign.
    let mut m = start(config(3, &[1, 2, 4]), fresh(), 0);
    tick(&mut m, 100); // Election to 4, which is not up yet
    tick(&mut m, 200); // pre-vote
    deliver(&mut m, 1, 0, Body::Vote { term: 1 }, 201);
    deliver(&mut m, 2, 0, Body::Vote { term: 1 }, 202);
    deliver(&mut m, 1, 1, ack(ep(1, 3), 0), 203);
    deliver(&mut m, 2, 1, ack(ep(1, 3), 0), 204);
    assert_eq!(m.view().role, Role::Coordinator);
    let asked = deliver(&mut m, 4, 1, pre_vote_hearing(2, ep(1, 3), 0), 250);
    let demoted = asked
        .iter()
        .position(|a| matches!(a, Action::Fact(Fact::Demoted { .. })))
        .expect("demoted");
    let view = asked
        .iter()
        .position(|a| matches!(a, Action::ViewChanged(v) if v.role == Role::Candidate))
        .expect("published as a candidate");
    let resign = asked
        .iter()
        .position(
            |a| matches!(a, Action::Send { msg, .. } if matches!(msg.body, Body::Resign { .. })),
        )
        .expect("resigned");
    let vote = asked
        .iter()
        .position(
            |a| matches!(a, Action::Send { to: 4, msg } if msg.body == Body::Vote { term: 2 }),
        )
        .expect("voted for 4");
    assert!(
        demoted < view && view < resign && resign < vote,
        "{asked:?}"
    );

    let mut f = start(config(1, &[2, 3, 4]), fresh(), 0);
    deliver(&mut f, 3, 1, Body::Coordinator { epoch: ep(1, 3) }, 10);
    let held = deliver(&mut f, 4, 1, pre_vote(2), 20);
    assert!(sent(&held).is_empty(), "promised to 3: no vote yet");
    let released = deliver(&mut f, 3, 1, Body::Resign { epoch: ep(1, 3) }, 25);
    assert_eq!(sent(&released), vec![(4, Body::Vote { term: 2 })]);
}

#[test]
fn handover_only_to_a_node_that_hears_us() {
    // One-way links: node 4 sends but hears nothing (a deaf node). Its pre-votes show
    // no recent heartbeat of ours, so coordinator 3 keeps office and heartbeats it
    // instead of handing over, however often it asks.
    let mut m = start(config(3, &[1, 2, 4]), fresh(), 0);
    tick(&mut m, 100);
    tick(&mut m, 200);
    for voter in [1, 2] {
        deliver(&mut m, voter, 0, Body::Vote { term: 1 }, 201);
    }
    for voter in [1, 2] {
        deliver(&mut m, voter, 1, ack(ep(1, 3), 0), 203);
    }
    assert_eq!(m.view().role, Role::Coordinator);
    let office = ep(1, 3);
    let mut now = 203;
    let mut round = 0;
    for step in 0..12 {
        // Keep the lease: nodes 1 and 2 ack every round.
        now = m.next_deadline();
        tick(&mut m, now);
        round += 1;
        for voter in [1, 2] {
            deliver(&mut m, voter, 1, ack(office, round), now + 1);
        }
        if step < 6 {
            continue;
        }
        let asked = step;
        let deaf = [
            pre_vote(asked),
            pre_vote_hearing(asked, ep(0, 4), 0),
            // It heard us once, more than D (three rounds) ago.
            pre_vote_hearing(asked, office, round.saturating_sub(4)),
        ];
        for body in deaf {
            let reply = deliver(&mut m, 4, asked - 1, body.clone(), now + 2);
            assert_eq!(m.view().role, Role::Coordinator, "handed over on {body:?}");
            assert!(
                matches!(sent(&reply)[..], [(4, Body::Heartbeat { epoch, .. })] if epoch == office),
                "{reply:?}"
            );
        }
    }
    // A candidate that heard our latest round gets the office.
    deliver(&mut m, 4, 12, pre_vote_hearing(12, office, round), now + 3);
    assert_eq!(m.view().role, Role::Candidate);
}

#[test]
fn deferred_vote() {
    // Node 2 acked leader 4 at 10 (promise until 310). Node 3, the highest survivor,
    // suspects 4 first and asks at 305: node 2 answers the moment its promise runs out
    // instead of dropping the request (which cost 3 a T' retry).
    let mut f = start(config(2, &[1, 3, 4]), fresh(), 0);
    deliver(&mut f, 4, 1, Body::Coordinator { epoch: ep(1, 4) }, 10);
    let held = deliver(&mut f, 3, 1, pre_vote(2), 305);
    assert!(sent(&held).is_empty(), "promised to 4 until 310: {held:?}");
    assert_eq!(f.next_deadline(), 310);
    let released = tick(&mut f, 310);
    assert_eq!(sent(&released), vec![(3, Body::Vote { term: 2 })]);
    // A fresh heartbeat of the leader renews the promise: a request held then waits
    // for the new end.
    let mut g = start(config(2, &[1, 3, 4]), fresh(), 0);
    deliver(&mut g, 4, 1, Body::Coordinator { epoch: ep(1, 4) }, 10);
    deliver(&mut g, 3, 1, pre_vote(2), 200);
    let heartbeat = Body::Heartbeat {
        epoch: ep(1, 4),
        round: 1,
    };
    deliver(&mut g, 4, 1, heartbeat, 250);
    assert!(
        sent(&tick(&mut g, 310)).is_empty(),
        "promise renewed until 550"
    );
    // At 550 the suspicion fires too: it defers to node 3 (sending nothing), then votes.
    assert_eq!(sent(&tick(&mut g, 550)), vec![(3, Body::Vote { term: 2 })]);
}

#[test]
fn start_wait_never_holds_up_a_failover() {
    // Both modes: a node in a long start-up wait (preempt delay 2 s) answers no
    // Election, so the lower node goes ahead instead of waiting for it.
    for mode in [Mode::Quorum, Mode::Classic] {
        let mut c = config(5, &[1, 2, 3, 4]);
        c.mode = mode;
        c.timing.preempt_delay_ms = 2_000;
        let mut m = start(c, fresh(), 0);
        let early = deliver(&mut m, 4, 0, Body::Election { accepted: None }, 100);
        assert!(sent(&early).is_empty(), "{mode}: silent at 100 of 2000");
        let late = deliver(&mut m, 4, 0, Body::Election { accepted: None }, 1_950);
        assert_eq!(
            sent(&late),
            vec![(4, Body::Answer)],
            "{mode}: it runs within T"
        );
    }
}

#[test]
fn shutdown() {
    // Both modes: a coordinator that stops demotes itself, then resigns.
    let mut m = coordinator_three();
    m.handle(Event::Shutdown, 150);
    let stopping = drain(&mut m);
    assert_eq!(
        facts(&stopping),
        vec![Fact::Demoted {
            epoch: ep(1, 3),
            reason: DemotionReason::Stopped,
            office_ended_at: 150,
        }]
    );
    assert_eq!(
        sent(&stopping),
        vec![
            (1, Body::Resign { epoch: ep(1, 3) }),
            (2, Body::Resign { epoch: ep(1, 3) })
        ]
    );
    let mut classic = config(2, &[1]);
    classic.mode = Mode::Classic;
    let mut c = start(classic, fresh(), 0);
    tick(&mut c, 100);
    assert_eq!(c.view().role, Role::Coordinator);
    c.handle(Event::Shutdown, 120);
    let stopping = drain(&mut c);
    assert!(facts(&stopping).iter().any(|f| matches!(
        f,
        Fact::Demoted {
            reason: DemotionReason::Stopped,
            ..
        }
    )));
    assert_eq!(sent(&stopping), vec![(1, Body::Resign { epoch: ep(1, 2) })]);
}

#[test]
fn newer_news_with_preempt_never_follows_instead_of_redeclaring() {
    // A stale classic coordinator (preempt never) told of a newer epoch steps down and
    // waits for its leader rather than re-declaring above it.
    let mut c = config(3, &[1, 2]);
    c.mode = Mode::Classic;
    c.preempt = Preempt::Never;
    let mut m = start(c, fresh(), 0);
    tick(&mut m, 300);
    assert_eq!(m.view().role, Role::Coordinator);
    let told = deliver(
        &mut m,
        1,
        5,
        Body::Ack {
            accepted: Some(ep(5, 2)),
            round: 0,
        },
        310,
    );
    assert!(!persisted(&told), "no re-declaration: {told:?}");
    assert_eq!(m.view().role, Role::Candidate);
    let beat = deliver(
        &mut m,
        2,
        5,
        Body::Heartbeat {
            epoch: ep(5, 2),
            round: 0,
        },
        320,
    );
    assert!(persisted(&beat));
    assert_eq!(m.view().coordinator(), Some(2));
}

#[test]
fn witness_never_leads_but_votes() {
    let mut c = config(3, &[1, 2]);
    c.witness = true;
    let mut m = start(c, fresh(), 0);
    m.handle(Event::SetEligible(true), 10);
    let elected = tick(&mut m, 100);
    assert!(!persisted(&elected), "a witness never declares");
    let vote = deliver(&mut m, 2, 0, pre_vote(1), 110);
    assert_eq!(sent(&vote), vec![(2, Body::Vote { term: 1 })]);
    // Lower nodes send it no Election.
    let mut low = config(2, &[1, 3]);
    low.witnesses = vec![3];
    let mut l = start(low, fresh(), 0);
    let electing = tick(&mut l, 100);
    assert!(
        !sent(&electing)
            .iter()
            .any(|(to, b)| *to == 3 && matches!(b, Body::Election { .. })),
        "{electing:?}"
    );
}

#[test]
fn one_vote() {
    let votes = |actions: &[Action]| -> Vec<(NodeId, Body)> {
        sent(actions)
            .into_iter()
            .filter(|(_, b)| matches!(b, Body::Vote { .. }))
            .collect()
    };
    // Node 1 votes for 4 at term 1; 3 asking for the same term within T' gets nothing,
    // after T' the vote no longer binds (4 may have died) and 3 gets it.
    let mut m = start(config(1, &[2, 3, 4]), fresh(), 0);
    let to_4 = deliver(&mut m, 4, 0, pre_vote(1), 10);
    assert_eq!(votes(&to_4), vec![(4, Body::Vote { term: 1 })]);
    assert_eq!(votes(&deliver(&mut m, 3, 0, pre_vote(1), 20)), vec![]);
    assert_eq!(
        votes(&deliver(&mut m, 3, 0, pre_vote(1), 311)),
        vec![(3, Body::Vote { term: 1 })]
    );

    // A running higher node answers a lower candidate at once, asks for the term above
    // the one the lower candidate asked for, and declares the term it was voted for.
    let mut m = start(config(3, &[1, 2]), fresh(), 0);
    let answered = deliver(&mut m, 2, 0, pre_vote(1), 10);
    assert_eq!(sent(&answered), vec![(2, Body::Answer)]);
    let asked = tick(&mut m, 100);
    assert!(sent(&asked).contains(&(1, pre_vote(2))), "{asked:?}");
    let declared = deliver(&mut m, 1, 1, Body::Vote { term: 2 }, 110);
    assert_eq!(facts(&declared), vec![Fact::Declared { epoch: ep(2, 3) }]);
}

/// Node 1 of {1, 2, 3} started at t = 0 on an empty store that must be recovered.
fn recovering_one() -> Machine {
    let config = MachineConfig::new(1, vec![2, 3]);
    let mut m = Machine::start(config, fresh(), 0);
    let started = drain(&mut m);
    assert!(
        facts(&started).contains(&Fact::RecoveryStarted {
            needed: 2,
            survivors: false
        }),
        "an empty store announces its recovery: {started:?}"
    );
    m.handle(Event::PeerUp(2), 0);
    m.handle(Event::PeerUp(3), 0);
    drain(&mut m);
    m
}

#[test]
fn store_recovery_accepts_and_votes_nothing_before_enough_peers_reported() {
    // A node on an empty store may have lost the term it acked: until D has passed and
    // M - q + 1 = 2 other members have reported their terms it neither follows, acks,
    // votes, answers nor declares.
    let mut m = recovering_one();
    let declared = deliver(&mut m, 3, 4, Body::Coordinator { epoch: ep(4, 3) }, 10);
    assert!(!persisted(&declared), "{declared:?}");
    assert!(
        sent(&declared).is_empty(),
        "no ack while recovering: {declared:?}"
    );
    let beat = deliver(
        &mut m,
        3,
        4,
        Body::Heartbeat {
            epoch: ep(4, 3),
            round: 1,
        },
        20,
    );
    assert!(sent(&beat).is_empty(), "no heartbeat ack either: {beat:?}");
    assert!(sent(&deliver(&mut m, 2, 4, pre_vote(5), 30)).is_empty());
    assert_eq!(m.recovery_progress(), Some((0, 2)));
    // A report that answers no query of ours counts for nothing.
    deliver(&mut m, 2, 4, Body::TermReport, 40);
    assert_eq!(m.recovery_progress(), Some((0, 2)));
    // D after start the query goes to every peer; it is repeated every T'.
    assert!(m.next_deadline() <= 300);
    let asked = tick(&mut m, 300);
    assert!(sent(&asked).contains(&(2, Body::TermQuery)), "{asked:?}");
    assert!(sent(&asked).contains(&(3, Body::TermQuery)), "{asked:?}");
    let one = deliver(&mut m, 2, 3, Body::TermReport, 310);
    assert!(!persisted(&one), "one report of two is not enough");
    assert_eq!(m.role_at(310), Role::Candidate);
    let again = tick(&mut m, 300 + 300);
    assert!(
        sent(&again).contains(&(3, Body::TermQuery)),
        "asked again: {again:?}"
    );
    let two = deliver(&mut m, 3, 4, Body::TermReport, 610);
    assert!(
        two.contains(&Action::Persist(Cells {
            term: 4,
            accepted: None,
            incarnation: 1,
            promise_ms: bully::protocol::Timing::default().suspect_after_ms,
            recovered: true,
            given_up: false,
            awaits_survivors: false,
        })),
        "the highest reported term becomes the term cell, and the store is marked \
         recovered: {two:?}"
    );
    assert!(
        facts(&two).contains(&Fact::Recovered { term: 4 }),
        "{two:?}"
    );
    assert_eq!(m.recovery_progress(), None);
    // From now on only terms above the cell are accepted (Q1).
    let old = deliver(&mut m, 2, 4, Body::Coordinator { epoch: ep(4, 2) }, 620);
    assert!(!persisted(&old), "term 4 may be held already: {old:?}");
    let new = deliver(&mut m, 2, 5, Body::Coordinator { epoch: ep(5, 2) }, 630);
    assert!(persisted(&new));
    assert_eq!(sent(&new), vec![(2, ack(ep(5, 2), 0))]);
}

/// A pre-vote that reached the node while its store recovered went unanswered; the
/// node's own pre-vote afterwards asks above that term, not for it, so the two
/// candidates never declare one term (seed 914415 of the leader-answer run), while its
/// term cell stays the highest reported (the other candidate's declaration is still
/// accepted).
#[test]
fn store_recovery_asks_above_a_term_asked_of_it_meanwhile() {
    let mut m = recovering_one();
    assert!(sent(&deliver(&mut m, 2, 4, pre_vote(5), 30)).is_empty());
    tick(&mut m, 300);
    deliver(&mut m, 2, 3, Body::TermReport, 310);
    let recovered = deliver(&mut m, 3, 3, Body::TermReport, 320);
    assert!(
        facts(&recovered).contains(&Fact::Recovered { term: 4 }),
        "the term cell: the highest term reported or seen in a claim, not the one asked: {recovered:?}"
    );
    // Nobody answers: in time it asks for a term of its own (bounded: 10 s of ticks).
    let asked = (330..10_000).step_by(10).find_map(|now| {
        sent(&tick(&mut m, now))
            .into_iter()
            .find_map(|(_, body)| match body {
                Body::PreVote { term, .. } => Some(term),
                _ => None,
            })
    });
    assert_eq!(asked, Some(6), "it asks above the unanswered PreVote(5)");
}

#[test]
fn store_recovery_follows_the_coordinator_of_the_reported_term() {
    // The highest term reported is usually the running coordinator's: it accepted no
    // declaration at that term, so its heartbeats are followed (and acked) at once.
    let mut m = recovering_one();
    tick(&mut m, 300);
    deliver(&mut m, 2, 4, Body::TermReport, 310);
    deliver(&mut m, 3, 4, Body::TermReport, 311);
    let beat = deliver(
        &mut m,
        3,
        4,
        Body::Heartbeat {
            epoch: ep(4, 3),
            round: 7,
        },
        350,
    );
    assert!(persisted(&beat), "{beat:?}");
    assert_eq!(sent(&beat), vec![(3, ack(ep(4, 3), 7))]);
    assert_eq!(m.role_at(351), Role::Follower);
}

#[test]
fn store_recovery_is_only_for_an_empty_store() {
    // A store that holds a term knows what it promised (Q5 covers the rest).
    let config = MachineConfig::new(1, vec![2, 3]);
    let m = Machine::start(
        config,
        Cells {
            term: 3,
            accepted: Some(ep(3, 3)),
            incarnation: 2,
            promise_ms: 0,
            recovered: false,
            given_up: false,
            awaits_survivors: false,
        },
        0,
    );
    assert_eq!(m.recovery_progress(), None);
    // A lone node has nobody to ask, and nobody to disagree with.
    let alone = Machine::start(MachineConfig::new(1, vec![]), fresh(), 0);
    assert_eq!(alone.recovery_progress(), None);
}

#[test]
fn store_recovery_in_classic_mode_declares_only_afterwards() {
    // Classic mode leads alone, but not on a store that may have forgotten a term it
    // declared: the same reports first.
    let config = MachineConfig::new(3, vec![1, 2]).with_mode(Mode::Classic);
    let mut m = Machine::start(config, fresh(), 0);
    m.handle(Event::PeerUp(1), 0);
    m.handle(Event::PeerUp(2), 0);
    drain(&mut m);
    let early = tick(&mut m, 100);
    assert!(
        !persisted(&early),
        "no declaration before the reports: {early:?}"
    );
    tick(&mut m, 300);
    deliver(&mut m, 1, 6, Body::TermReport, 310);
    deliver(&mut m, 2, 2, Body::TermReport, 311);
    let mut declared = None;
    for now in (311..2000).step_by(10) {
        let actions = tick(&mut m, now);
        if let Some(Fact::Declared { epoch }) = facts(&actions)
            .into_iter()
            .find(|f| matches!(f, Fact::Declared { .. }))
        {
            declared = Some(epoch);
            break;
        }
    }
    assert_eq!(declared, Some(ep(7, 3)), "declares above the reported 6");
}

#[test]
fn store_recovery_a_lost_store_that_has_seen_a_term_vouches_for_nothing() {
    // Two stores lost in a row (src/protocol/recovery.rs): a node still recovering a
    // store that never completed a recovery, once it has seen an epoch claimed, answers
    // a query with TermUnknown; and a report of 0 no longer counts once a term is known.
    let mut m = recovering_one();
    tick(&mut m, 300);
    let fresh = deliver(&mut m, 2, 0, Body::TermQuery, 305);
    assert_eq!(
        sent(&fresh),
        vec![(2, Body::TermReport)],
        "nothing seen: a fresh cluster's answer"
    );
    // A report of 0 counts while nothing is known...
    deliver(&mut m, 2, 0, Body::TermReport, 310);
    assert_eq!(m.recovery_progress(), Some((1, 2)));
    // A term seen in a query (or a pre-vote) alone proves nothing was accepted...
    let still = deliver(&mut m, 3, 4, Body::TermQuery, 315);
    assert_eq!(sent(&still), vec![(3, Body::TermReport)]);
    // ...a claim does: the recovering node no longer vouches.
    deliver(
        &mut m,
        3,
        4,
        Body::Heartbeat {
            epoch: ep(4, 3),
            round: 1,
        },
        318,
    );
    let unknown = deliver(&mut m, 3, 4, Body::TermQuery, 320);
    assert_eq!(sent(&unknown), vec![(3, Body::TermUnknown)]);
    // A TermUnknown counts for nothing, and the earlier report of 0 no longer does:
    // one report of the term is one of two.
    deliver(&mut m, 3, 4, Body::TermUnknown, 330);
    let one = deliver(&mut m, 3, 4, Body::TermReport, 340);
    assert!(
        !persisted(&one),
        "the report of 0 stopped counting: {one:?}"
    );
    tick(&mut m, 600);
    let two = deliver(&mut m, 2, 4, Body::TermReport, 610);
    assert!(
        facts(&two).contains(&Fact::Recovered { term: 4 }),
        "{two:?}"
    );
}

#[test]
fn store_recovery_a_recovered_store_vouches_while_it_recovers_again() {
    // A store that completed a recovery at term 0 (nothing accepted since) restarts:
    // it recovers again (its cells hold no term), but its answers still vouch.
    let config = MachineConfig::new(1, vec![2, 3]);
    let cells = Cells {
        recovered: true,
        given_up: false,
        ..Cells::default()
    };
    let mut m = Machine::start(config, cells, 0);
    assert!(m.recovery_progress().is_some());
    let answer = deliver(&mut m, 2, 4, Body::TermQuery, 10);
    assert!(sent(&answer).contains(&(2, Body::TermReport)), "{answer:?}");
    assert!(
        !sent(&answer).contains(&(2, Body::TermUnknown)),
        "{answer:?}"
    );
}

/// Node 3 of {1, 2, 3} established at term 1, waiting up to `bound` ms for a release.
fn releasing_coordinator(bound: Millis) -> Machine {
    let mut cfg = config(3, &[1, 2]);
    cfg.release_bound_ms = Some(bound);
    let mut m = start(cfg, fresh(), 0);
    tick(&mut m, 100);
    deliver(&mut m, 1, 0, Body::Vote { term: 1 }, 101);
    let established = deliver(&mut m, 1, 1, ack(ep(1, 3), 0), 102);
    assert_eq!(
        facts(&established),
        vec![Fact::Established { epoch: ep(1, 3) }]
    );
    m
}

#[test]
fn release_a_voluntary_departure_keeps_office_until_released() {
    // release (src/protocol/machine/release.rs): a stop, an ineligibility or a handover
    // asks for the release first; the coordinator stays in office and heartbeats (its
    // followers' promises hold) until Released, then leaves and resigns as before.
    for why in [Event::Shutdown, Event::SetEligible(false)] {
        let mut m = releasing_coordinator(5_000);
        m.handle(why.clone(), 150);
        let asked = drain(&mut m);
        assert!(
            asked.contains(&Action::AwaitRelease { epoch: ep(1, 3) })
                && facts(&asked).is_empty()
                && sent(&asked).is_empty(),
            "{why:?}: only the request, no demotion, no Resign: {asked:?}"
        );
        assert_eq!(m.view().role, Role::Coordinator);
        let next = m.next_deadline();
        let beat = tick(&mut m, next);
        assert!(
            sent(&beat)
                .iter()
                .any(|(_, b)| matches!(b, Body::Heartbeat { .. })),
            "{why:?}: it heartbeats while released: {beat:?}"
        );
        deliver(&mut m, 1, 1, ack(ep(1, 3), 1), 260);
        m.handle(Event::Released { epoch: ep(1, 3) }, 400);
        let left = drain(&mut m);
        assert!(
            facts(&left)
                .iter()
                .any(|f| matches!(f, Fact::Demoted { .. })),
            "{why:?}: {left:?}"
        );
        assert!(
            sent(&left).contains(&(1, Body::Resign { epoch: ep(1, 3) })),
            "{why:?}: {left:?}"
        );
        assert_ne!(m.view().role, Role::Coordinator);
    }
}

#[test]
fn release_a_release_that_never_comes_ends_at_the_bound() {
    // A hook that hangs: the machine leaves office at its bound without the release.
    let mut m = releasing_coordinator(1_000);
    m.handle(Event::Shutdown, 150);
    drain(&mut m);
    let mut now = 150;
    while m.view().role == Role::Coordinator && now < 2_000 {
        now = m.next_deadline();
        let acted = tick(&mut m, now);
        // Acks keep the lease: only the bound may end the office.
        for id in [1, 2] {
            let round = sent(&acted).iter().find_map(|(to, b)| match b {
                Body::Heartbeat { round, .. } if *to == id => Some(*round),
                _ => None,
            });
            if let Some(round) = round {
                deliver(&mut m, id, 1, ack(ep(1, 3), round), now + 1);
            }
        }
    }
    assert_ne!(m.view().role, Role::Coordinator);
    assert!(
        (1_150..1_300).contains(&now),
        "left office at {now} ms, the bound is 1150"
    );
}

#[test]
fn given_up_a_coordinator_refused_as_given_up_persists_the_mark_then_leaves_office() {
    // given_up (src/protocol/machine/given_up.rs): the mark is persisted before anything
    // else; the coordinator leaves through the release like any departure.
    let mut m = releasing_coordinator(5_000);
    m.handle(Event::GivenUp { by: 1 }, 150);
    let acted = drain(&mut m);
    let first = acted.first().cloned();
    assert!(
        matches!(first, Some(Action::Persist(c)) if c.given_up),
        "the mark first: {acted:?}"
    );
    assert!(
        facts(&acted).contains(&Fact::GivenUp { by: 1 }),
        "{acted:?}"
    );
    assert!(
        acted.contains(&Action::AwaitRelease { epoch: ep(1, 3) }),
        "{acted:?}"
    );
    assert!(!m.view().eligible);
    m.handle(Event::Released { epoch: ep(1, 3) }, 200);
    let left = drain(&mut m);
    assert!(
        sent(&left).contains(&(1, Body::Resign { epoch: ep(1, 3) })),
        "{left:?}"
    );
    // A second refusal writes nothing.
    m.handle(Event::GivenUp { by: 2 }, 250);
    assert!(drain(&mut m).is_empty());
}

#[test]
fn given_up_a_given_up_node_never_acks_votes_or_leads_again_also_after_a_restart() {
    let given_up = Cells {
        term: 4,
        accepted: Some(ep(4, 5)),
        incarnation: 2,
        given_up: true,
        ..Cells::default()
    };
    let mut m = start(config(3, &[1, 2, 4, 5]), given_up, 0);
    let mut now = 0;
    let mut all = Vec::new();
    assert_eq!(m.next_deadline(), Millis::MAX, "nothing to time");
    while now < 5_000 {
        now += 50;
        all.extend(tick(&mut m, now));
        let prevote = Body::PreVote {
            term: 5,
            heard: None,
        };
        all.extend(deliver(&mut m, 5, 4, prevote, now));
        all.extend(deliver(
            &mut m,
            5,
            5,
            Body::Coordinator { epoch: ep(5, 5) },
            now,
        ));
        all.extend(deliver(
            &mut m,
            1,
            4,
            Body::Election { accepted: None },
            now,
        ));
        all.extend(deliver(&mut m, 5, 5, Body::TermQuery, now));
    }
    assert!(!m.view().eligible);
    assert_ne!(m.view().role, Role::Coordinator);
    let answered: Vec<(NodeId, Body)> = sent(&all)
        .into_iter()
        .filter(|(_, b)| !matches!(b, Body::Probe))
        .collect();
    assert!(
        answered.is_empty(),
        "a given-up node sends nothing but its start-up probe: {answered:?}"
    );
    assert!(
        !facts(&all)
            .iter()
            .any(|f| matches!(f, Fact::Declared { .. } | Fact::ElectionStarted)),
        "{all:?}"
    );
}

#[test]
fn given_up_a_new_member_on_an_empty_store_is_not_given_up() {
    // A wiped node re-added under a given-up ID dials the survivors before its addition
    // commits: it took part in no old term, so the refusal does not mark it.
    let mut m = start(config(2, &[1]), fresh(), 0);
    drain(&mut m);
    m.handle(Event::GivenUp { by: 1 }, 10);
    let acted = drain(&mut m);
    assert!(
        !acted
            .iter()
            .any(|a| matches!(a, Action::Persist(c) if c.given_up)),
        "{acted:?}"
    );
    assert!(!facts(&acted).contains(&Fact::GivenUp { by: 1 }));
}

#[test]
fn a_forced_recoverys_survivor_waits_for_every_other_survivors_term() {
    // Seed 228623 (src/protocol/recovery.rs): survivors {1, 2, 3}; node 3 alone saw
    // term 6. Node 1, recovered to term 3, must neither vote nor declare until both
    // others reported, one report (a majority with itself) is not enough, and its
    // term cell then holds the highest: its next declaration is above term 6.
    let survivor = Cells {
        term: 3,
        accepted: Some(ep(2, 2)),
        incarnation: 1,
        awaits_survivors: true,
        ..Cells::default()
    };
    let mut m = Machine::start(config(1, &[2, 3]), survivor, 0);
    m.handle(Event::PeerUp(2), 0);
    m.handle(Event::PeerUp(3), 0);
    let mut all = drain(&mut m);
    assert!(
        facts(&all).contains(&Fact::RecoveryStarted {
            needed: 2,
            survivors: true
        }),
        "{all:?}"
    );
    let asked = tick(&mut m, 1);
    assert!(
        sent(&asked).contains(&(2, Body::TermQuery))
            && sent(&asked).contains(&(3, Body::TermQuery)),
        "asks at once: {asked:?}"
    );
    let mut now = 1;
    while now < 3_000 {
        now += 50;
        all.extend(tick(&mut m, now));
        all.extend(deliver(&mut m, 2, 3, Body::TermReport, now));
        all.extend(deliver(&mut m, 2, 3, pre_vote(4), now));
    }
    assert!(
        !sent(&all)
            .iter()
            .any(|(_, b)| matches!(b, Body::Vote { .. })),
        "no vote before every survivor reported: {all:?}"
    );
    assert!(
        !facts(&all)
            .iter()
            .any(|f| matches!(f, Fact::Declared { .. } | Fact::Recovered { .. })),
        "{all:?}"
    );
    let done = deliver(&mut m, 3, 6, Body::TermReport, now);
    assert!(
        done.iter()
            .any(|a| matches!(a, Action::Persist(c) if c.term == 6 && !c.awaits_survivors)),
        "the highest term, persisted with the wait over: {done:?}"
    );
    assert!(
        facts(&done).contains(&Fact::Recovered { term: 6 }),
        "{done:?}"
    );
}
