//! The rules of the cluster settings (docs/design.md#cluster-settings), one test per
//! rule, each driving single machines by hand: live_by, promise_span and
//! larger_d_across, and the old hold-off rule (`Flaw::HoldoffByNewD`) caught where it
//! now matters: a restart while a lowered D's predecessor still binds.

#[path = "common/drive.rs"]
mod drive;

use bully::protocol::{
    Action, Body, Cells, ClusterSettings, ConfigId, Epoch, Event, Flaw, Machine, Membership,
    Message, Millis, NodeId, Preempt, Role, Timing,
};
use drive::tick;

fn ep(term: u64, leader: NodeId) -> Epoch {
    Epoch { term, leader }
}

/// A message from `from` asking promises of `promise_ms` and showing list `config`.
fn from_peer(from: NodeId, term: u64, config: ConfigId, promise_ms: Millis, body: Body) -> Event {
    Event::Message {
        from,
        msg: Message {
            term,
            config,
            est: None,
            promise_ms,
            body,
        },
    }
}

fn d(ms: Millis) -> Timing {
    Timing {
        suspect_after_ms: ms,
        ..Timing::default()
    }
}

fn persisted(actions: &[Action]) -> Option<Cells> {
    actions.iter().rev().find_map(|a| match a {
        Action::Persist(cells) => Some(*cells),
        _ => None,
    })
}

/// Node 1 of {1, 2, 3} on D = `own`, following node 3's term 1 (accepted, round 0).
fn follower_of_three(own: Millis, asked: Millis, flaw: Option<Flaw>) -> (Machine, Vec<Action>) {
    let config = drive::rule_member(1, &[2, 3])
        .with_timing(d(own))
        .with_flaw(flaw);
    let mut m = drive::start_connected(config, Cells::default(), 0);
    let list = m.members().id;
    let declaration = from_peer(3, 1, list, asked, Body::Coordinator { epoch: ep(1, 3) });
    let actions = drive::feed(&mut m, declaration, 10);
    (m, actions)
}

#[test]
fn promise_span() {
    // A follower on D = 300 acks a coordinator that leases under 3000: it promises 3000
    // and stores that before the ack goes out.
    let (mut m, actions) = follower_of_three(300, 3000, None);
    let stored = persisted(&actions).expect("stored");
    assert_eq!(stored.promise_ms, 3000);
    let persist_at = actions
        .iter()
        .position(|a| matches!(a, Action::Persist(c) if c.promise_ms == 3000));
    let ack_at = actions.iter().position(
        |a| matches!(a, Action::Send { to: 3, msg } if matches!(msg.body, Body::Ack { .. })),
    );
    assert!(persist_at < ack_at, "persist then ack: {actions:?}");
    // Node 2 declares at 1000: under its own D the promise would have ended at 310.
    let list = m.members().id;
    let later = from_peer(2, 2, list, 300, Body::Coordinator { epoch: ep(2, 2) });
    let answered = drive::feed(&mut m, later, 1_000);
    assert!(
        persisted(&answered).is_none(),
        "accepted inside the promise"
    );
    assert_eq!(m.view().epoch, Some(ep(1, 3)));
}

/// The list node 3 writes under term 1 with D = `ms`: the seeded members, version 1.
fn list_with_d(m: &Machine, ms: Millis) -> Membership {
    let mut list = m.members().restamped(ep(1, 3), 1);
    list.settings = Some(ClusterSettings::new(d(ms), Preempt::Always));
    list
}

#[test]
fn live_by_and_larger_d_across() {
    // On D = 3000, node 1 acked node 3; then node 3 lowers D to 300. Node 1 lives by
    // 300 at once (its own suspicion), but its store keeps 3000 while the old promise
    // may bind, so a restart holds off that long.
    for (flaw, caught) in [(None, false), (Some(Flaw::HoldoffByNewD), true)] {
        let (mut m, _) = follower_of_three(3000, 3000, flaw);
        let lowered = list_with_d(&m, 300);
        let stored_list = drive::feed(
            &mut m,
            from_peer(
                3,
                1,
                lowered.id,
                300,
                Body::Members {
                    list: lowered.clone(),
                },
            ),
            100,
        );
        assert_eq!(m.timing().suspect_after_ms, 300, "lives by the new D");
        assert!(stored_list
            .iter()
            .any(|a| matches!(a, Action::PersistMembers(l) if *l == lowered)));
        // The cells as stored last: still the old D.
        let cells = Cells {
            promise_ms: 3000,
            ..Cells {
                term: 1,
                accepted: Some(ep(1, 3)),
                incarnation: 1,
                ..Cells::default()
            }
        };
        // It crashes at 200 and restarts at 300, on its stored list.
        let config = drive::rule_member(1, &[2, 3])
            .with_timing(d(300))
            .with_flaw(flaw);
        let mut restarted = Machine::start_with(config, cells, Some(lowered.clone()), 300);
        for peer in [2, 3] {
            restarted.handle(Event::PeerUp(peer), 300);
        }
        while restarted.poll_action().is_some() {}
        assert_eq!(restarted.timing().suspect_after_ms, 300);
        let declaration = from_peer(2, 2, lowered.id, 300, Body::Coordinator { epoch: ep(2, 2) });
        let answered = drive::feed(&mut restarted, declaration, 1_300);
        let accepted = persisted(&answered).is_some_and(|c| c.accepted == Some(ep(2, 2)));
        assert_eq!(
            accepted, caught,
            "flaw {flaw:?}: a declaration 1 s after the restart, inside the old D's promise"
        );
    }
}

#[test]
fn larger_d_across_in_office_keeps_the_earned_lease_only() {
    // Node 3 leads {1, 2, 3} on D = 3000; acks of round 0 earn it a lease to 10 + 2940.
    // It lowers D to 300 (its own change): what it earned stands, a round sent before
    // the change counts for the new span only, and new rounds ask 300.
    let config = drive::rule_member(3, &[1, 2]).with_timing(d(3000));
    let mut m = drive::start_connected(config, Cells::default(), 0);
    tick(&mut m, 100);
    let list = m.members().id;
    drive::feed(
        &mut m,
        from_peer(1, 0, list, 0, Body::Vote { term: 1 }),
        101,
    );
    drive::feed(
        &mut m,
        from_peer(
            1,
            1,
            list,
            0,
            Body::Ack {
                accepted: Some(ep(1, 3)),
                round: 0,
            },
        ),
        102,
    );
    assert_eq!(m.view().role, Role::Coordinator);
    let from = m.members().settings.clone().expect("settings");
    let to = ClusterSettings {
        timing: d(300),
        ..from
    };
    // The seeded list is confirmed under term 1 first; node 1 stores it: committed,
    // and the change follows.
    drive::feed(
        &mut m,
        Event::ChangeMembers(bully::protocol::Change::Settings {
            set: vec![("timing.suspect_after_ms".into(), "300".into())],
        }),
        200,
    );
    let confirmed = m.members().id;
    assert_eq!(confirmed.stamp, Some(ep(1, 3)));
    let changed = drive::feed(
        &mut m,
        from_peer(
            1,
            1,
            confirmed,
            0,
            Body::Ack {
                accepted: Some(ep(1, 3)),
                round: 0,
            },
        ),
        201,
    );
    assert!(changed
        .iter()
        .any(|a| matches!(a, Action::PersistMembers(l) if l.settings.as_ref() == Some(&to))));
    assert_eq!(m.timing().suspect_after_ms, 300);
    let beat = tick(&mut m, 2_000);
    let asks: Vec<Millis> = beat
        .iter()
        .filter_map(|a| match a {
            Action::Send { msg, .. } if matches!(msg.body, Body::Heartbeat { .. }) => {
                Some(msg.promise_ms)
            }
            _ => None,
        })
        .collect();
    assert!(
        !asks.is_empty() && asks.iter().all(|&a| a == 300),
        "{asks:?}"
    );
    assert_eq!(
        m.role_at(2_000),
        Role::Coordinator,
        "the earned lease stands"
    );
    assert_eq!(
        m.role_at(101 + 2_940),
        Role::Candidate,
        "and ends where it was earned"
    );
}

#[test]
fn seeded_lists_keep_their_files_settings_until_a_coordinator_writes_one() {
    // A follower seeded with another D lives by the coordinator's once it stores a list
    // the coordinator wrote (any change, settings or members, confirms the list first).
    let (mut f, _) = follower_of_three(300, 900, None);
    assert_eq!(f.timing().suspect_after_ms, 300, "its file's, seeded");
    let confirmed = list_with_d(&f, 900);
    drive::feed(
        &mut f,
        from_peer(3, 1, confirmed.id, 900, Body::Members { list: confirmed }),
        50,
    );
    assert_eq!(f.timing().suspect_after_ms, 900);
}
