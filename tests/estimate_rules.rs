//! One test per est(S) rule in the doc comment of `src/protocol/machine/estimate.rs`
//! (docs/design.md#elected-by-data-est), plus the misbehaviour check a ranked sender
//! passes. Each drives a single `Machine` by hand; times are `Timing::default()`:
//! heartbeat 100, D (suspect) 300, T (answer) 100, T' (coordinator) 300.

use bully::protocol::{
    Action, Body, Cells, Epoch, Event, Fact, Machine, MachineConfig, Millis, Mode, NodeId, Role,
};

#[path = "common/drive.rs"]
mod drive;
use drive::{sent, tick};

fn ep(term: u64, leader: NodeId) -> Epoch {
    Epoch { term, leader }
}

fn config(id: NodeId, peers: &[NodeId], mode: Mode) -> MachineConfig {
    drive::rule_member(id, peers).with_mode(mode)
}

/// A connected member of {1, 2, 3} whose estimate source reported `est`, fresh until
/// `fresh_until`.
fn ranked(id: NodeId, mode: Mode, est: u64, fresh_until: Millis) -> Machine {
    let peers: Vec<NodeId> = [1, 2, 3].into_iter().filter(|&p| p != id).collect();
    let mut m = drive::start_connected(config(id, &peers, mode), Cells::default(), 0);
    set_est(&mut m, Some(est), fresh_until, 0);
    m
}

fn set_est(m: &mut Machine, value: Option<u64>, fresh_until: Millis, now: Millis) -> Vec<Action> {
    drive::feed(m, Event::SetEstimate { value, fresh_until }, now)
}

/// A message from `from` whose envelope carries `est`.
fn deliver(
    m: &mut Machine,
    from: NodeId,
    est: Option<u64>,
    body: Body,
    now: Millis,
) -> Vec<Action> {
    let mut event = drive::message(from, 0, body);
    if let Event::Message { msg, .. } = &mut event {
        msg.est = est;
    }
    drive::feed(m, event, now)
}

fn envelopes(actions: &[Action]) -> Vec<Option<u64>> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Send { msg, .. } => Some(msg.est),
            _ => None,
        })
        .collect()
}

fn declared(actions: &[Action]) -> bool {
    actions
        .iter()
        .any(|a| matches!(a, Action::Fact(Fact::Declared { .. })))
}

fn answered(actions: &[Action], to: NodeId) -> bool {
    sent(actions).contains(&(to, Body::Answer))
}

const ELECTION: Body = Body::Election { accepted: None };

#[test]
fn rank() {
    // Own estimate in every envelope while fresh and eligible; 0 once stale or
    // ineligible; no estimate at all without a source.
    let mut plain = drive::start_connected(config(2, &[1, 3], Mode::Classic), Cells::default(), 0);
    let out = tick(&mut plain, 100);
    assert!(envelopes(&out).iter().all(Option::is_none), "{out:?}");

    let mut m = ranked(2, Mode::Classic, 7, 500);
    assert_eq!(m.own_est(), 7);
    assert!(envelopes(&tick(&mut m, 100)).iter().all(|&e| e == Some(7)));
    // Past its freshness bound (a paused node, a hung source): counts as 0.
    let late = deliver(&mut m, 1, Some(3), ELECTION, 501);
    assert_eq!(m.own_est(), 0);
    assert!(!answered(&late, 1), "a stale 7 does not outrank a fresh 3");
    assert_eq!(
        m.estimate(),
        Some((7, false)),
        "status shows the value, stale"
    );
    // Ineligible: 0 as well.
    let mut m = ranked(2, Mode::Classic, 7, Millis::MAX);
    drive::feed(&mut m, Event::SetEligible(false), 10);
    assert_eq!(m.own_est(), 0);
}

#[test]
fn ranked_election() {
    // Classic: node 3 (est 10) elects and asks every peer, not only higher IDs.
    let mut m = ranked(3, Mode::Classic, 10, Millis::MAX);
    let out = tick(&mut m, 100);
    let asked: Vec<NodeId> = sent(&out).into_iter().map(|(to, _)| to).collect();
    assert_eq!(asked, vec![1, 2], "{out:?}");
    assert!(!declared(&out));
    // Node 1 (est 20, lower ID) answers: node 3 waits and does not declare.
    deliver(&mut m, 1, Some(20), Body::Answer, 110);
    let later = tick(&mut m, 200);
    assert!(!declared(&later), "{later:?}");
    assert_eq!(m.view().role, Role::Candidate);

    // Answers go by rank: node 2 (est 5) answers node 1 (est 3) but not node 3 (est 9),
    // nor node 1 with an equal estimate (the ID breaks the tie: 2 > 1 answers).
    let mut m = ranked(2, Mode::Classic, 5, Millis::MAX);
    tick(&mut m, 100);
    assert!(answered(&deliver(&mut m, 1, Some(3), ELECTION, 110), 1));
    assert!(!answered(&deliver(&mut m, 3, Some(9), ELECTION, 111), 3));
    assert!(answered(&deliver(&mut m, 1, Some(5), ELECTION, 112), 1));
    assert!(!answered(&deliver(&mut m, 3, Some(5), ELECTION, 113), 3));
}

#[test]
fn ranked_election_no_defer() {
    // A ranked follower whose leader is suspected elects at once (it cannot know who
    // is above it), asking the other peer.
    let mut m = ranked(1, Mode::Classic, 20, Millis::MAX);
    deliver(
        &mut m,
        3,
        Some(30),
        Body::Coordinator { epoch: ep(1, 3) },
        10,
    );
    assert_eq!(m.view().role, Role::Follower);
    let out = tick(&mut m, 310);
    assert!(
        sent(&out).contains(&(
            2,
            Body::Election {
                accepted: Some(ep(1, 3))
            }
        )),
        "{out:?}"
    );
}

#[test]
fn higher_id_lower_est_is_not_elected() {
    // The case, both modes: node 3 has the higher ID, node 1 the fresher data.
    // Node 3 never declares while node 1 answers; node 1, asked by 3, declares.
    for mode in [Mode::Classic, Mode::Quorum] {
        let mut low = ranked(3, mode, 10, Millis::MAX);
        let mut high = ranked(1, mode, 20, Millis::MAX);
        let asks = tick(&mut low, 100);
        assert!(sent(&asks).contains(&(1, ELECTION)), "{mode}: {asks:?}");
        let answer = deliver(&mut high, 3, Some(10), ELECTION, 101);
        assert!(answered(&answer, 3), "{mode}: {answer:?}");
        deliver(&mut low, 1, Some(20), Body::Answer, 102);
        for t in [200, 300, 400] {
            assert!(
                !declared(&tick(&mut low, t)),
                "{mode}: node 3 declared at {t}"
            );
        }
        // Node 1's own election: node 3 (lower rank) stays silent; node 1 runs.
        let own = tick(&mut high, 100);
        let asked: Vec<NodeId> = sent(&own).into_iter().map(|(to, _)| to).collect();
        assert_eq!(asked, vec![2, 3], "{mode}");
        assert!(!answered(&deliver(&mut low, 1, Some(20), ELECTION, 401), 1));
        let ran = tick(&mut high, 200);
        match mode {
            Mode::Classic => assert!(declared(&ran), "{ran:?}"),
            Mode::Quorum => assert!(
                sent(&ran)
                    .iter()
                    .any(|(_, b)| matches!(b, Body::PreVote { .. })),
                "{ran:?}"
            ),
        }
    }
}

#[test]
fn kept() {
    // A ranked follower with the higher ID and the higher estimate does not bully a
    // live lower coordinator (estimates order elections only), in either mode; nor does
    // a classic coordinator re-declare over newer news.
    let mut m = ranked(3, Mode::Classic, 50, Millis::MAX);
    let out = deliver(
        &mut m,
        1,
        Some(10),
        Body::Coordinator { epoch: ep(1, 1) },
        10,
    );
    assert_eq!(m.view().role, Role::Follower, "{out:?}");
    let mut m = ranked(3, Mode::Quorum, 50, Millis::MAX);
    let out = deliver(
        &mut m,
        1,
        Some(10),
        Body::Heartbeat {
            epoch: ep(1, 1),
            round: 1,
        },
        10,
    );
    assert_eq!(m.view().role, Role::Follower, "{out:?}");
    assert!(!sent(&out)
        .iter()
        .any(|(_, b)| matches!(b, Body::Election { .. })));
}

#[test]
fn est_up_to_date() {
    // Quorum: voter 2 (est 0, ineligible to outrank anyone) heard node 1 at est 20; it
    // refuses candidate 3 at est 10 while that is fresh (within D), votes once node 1
    // goes down or its news is older than D.
    let prevote = Body::PreVote {
        term: 1,
        heard: None,
    };
    let voted = |out: &[Action]| sent(out).contains(&(3, Body::Vote { term: 1 }));
    let mut v = ranked(2, Mode::Quorum, 0, Millis::MAX);
    deliver(&mut v, 1, Some(20), ELECTION, 10);
    assert!(!voted(&deliver(&mut v, 3, Some(10), prevote.clone(), 20)));
    assert!(voted(&deliver(&mut v, 3, Some(10), prevote.clone(), 310)));
    let mut v = ranked(2, Mode::Quorum, 0, Millis::MAX);
    deliver(&mut v, 1, Some(20), ELECTION, 10);
    drive::feed(&mut v, Event::PeerDown(1), 15);
    assert!(voted(&deliver(&mut v, 3, Some(10), prevote.clone(), 20)));
    // A candidate at least as fresh gets the vote at once.
    let mut v = ranked(2, Mode::Quorum, 0, Millis::MAX);
    deliver(&mut v, 1, Some(20), ELECTION, 10);
    assert!(voted(&deliver(&mut v, 3, Some(20), prevote, 20)));
}

#[test]
fn ranked_sender_is_no_misbehaviour() {
    // An Election from a higher ID or an Answer from a lower one is misbehaviour only
    // from a sender without estimates.
    let mut m = drive::start_connected(config(2, &[1, 3], Mode::Classic), Cells::default(), 0);
    let out = deliver(&mut m, 3, Some(1), ELECTION, 10);
    assert!(
        !out.iter().any(|a| matches!(a, Action::Misbehaved { .. })),
        "{out:?}"
    );
    let out = deliver(&mut m, 3, None, ELECTION, 11);
    assert!(
        out.iter().any(|a| matches!(a, Action::Misbehaved { .. })),
        "{out:?}"
    );
}

#[test]
fn without_estimates_nothing_changes() {
    // No SetEstimate: Elections go to higher IDs only and envelopes carry no estimate.
    for mode in [Mode::Classic, Mode::Quorum] {
        let mut m = drive::start_connected(config(2, &[1, 3], mode), Cells::default(), 0);
        let out = tick(&mut m, 100);
        assert_eq!(sent(&out), vec![(3, ELECTION)], "{mode}");
        assert_eq!(m.estimate(), None);
    }
}
