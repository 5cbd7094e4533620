//! One test per rule in the doc comments of `src/protocol/machine/` (its `mod.rs` says
//! which file holds which rule), named after the rule. Each drives a single `Machine`
//! by hand and asserts the exact actions, in order.
//!
//! Timing is `Timing::default()`: heartbeat 100, D (suspect) 300, T (answer) 100,
//! T' (coordinator) 300, preempt delay 0.

use bully::protocol::{
    Action, Body, Cells, Epoch, Event, Machine, MachineConfig, Message, Millis, Misbehaviour, Mode,
    NodeId, Preempt, Role, View,
};

fn ep(term: u64, leader: NodeId) -> Epoch {
    Epoch { term, leader }
}

/// Cells as a machine on default timing writes them (its D is the promise's).
fn cells(term: u64, accepted: Option<Epoch>, incarnation: u64) -> Cells {
    Cells {
        term,
        accepted,
        incarnation,
        promise_ms: bully::protocol::Timing::default().suspect_after_ms,
        recovered: false,
        given_up: false,
        awaits_survivors: false,
    }
}

fn config(id: NodeId, peers: &[NodeId]) -> MachineConfig {
    // The rules below are the classic algorithm's; quorum mode's are in
    // tests/quorum_rules.rs. Empty stores are recovered there (`store_recovery_*`).
    drive::rule_member(id, peers).with_mode(Mode::Classic)
}

#[path = "common/drive.rs"]
mod drive;

/// The actions without the machine's facts (those are checked in tests/quorum_rules.rs).
fn without_facts(actions: Vec<Action>) -> Vec<Action> {
    actions
        .into_iter()
        .filter(|a| !matches!(a, Action::Fact(_)))
        .collect()
}

/// The machine's pending actions, without its facts.
fn drain(m: &mut Machine) -> Vec<Action> {
    without_facts(std::iter::from_fn(|| m.poll_action()).collect())
}

fn send(to: NodeId, term: u64, body: Body) -> Action {
    // A declaration and a heartbeat say the D their sender leads under, in classic
    // mode too (a follower suspects no sooner: `Machine::suspect_span`).
    let leads_under = matches!(body, Body::Coordinator { .. } | Body::Heartbeat { .. });
    Action::Send {
        to,
        msg: Message {
            promise_ms: if leads_under {
                bully::protocol::Timing::default().suspect_after_ms
            } else {
                0
            },
            term,
            config: Default::default(),
            est: None,
            body,
        },
    }
}

/// What a node that is not coordinator answers a probe with: its accepted epoch.
fn probe_reply(accepted: Option<Epoch>) -> Body {
    Body::Ack { accepted, round: 0 }
}

fn persist(term: u64, accepted: Epoch, incarnation: u64) -> Action {
    Action::Persist(cells(term, Some(accepted), incarnation))
}

fn view(id: NodeId, role: Role, epoch: Option<Epoch>, eligible: bool) -> Action {
    Action::ViewChanged(View {
        id,
        role,
        epoch,
        eligible,
        incarnation: 1,
    })
}

fn coordinator_view(id: NodeId, epoch: Epoch) -> Action {
    view(id, Role::Coordinator, Some(epoch), true)
}

/// What a classic declaration of `epoch` by its leader does, in order: persist it (with
/// the node's `incarnation`), tell every peer, then publish the coordinator view.
fn declaration(epoch: Epoch, peers: &[NodeId], incarnation: u64) -> Vec<Action> {
    let mut actions = vec![persist(epoch.term, epoch, incarnation)];
    for &peer in peers {
        actions.push(send(peer, epoch.term, Body::Coordinator { epoch }));
    }
    actions.push(coordinator_view(epoch.leader, epoch));
    actions
}

/// An Ack that carries nothing: only its term matters to the receiver.
fn empty_ack() -> Body {
    Body::Ack {
        accepted: None,
        round: 0,
    }
}

fn follower_view(id: NodeId, epoch: Epoch) -> Action {
    view(id, Role::Follower, Some(epoch), true)
}

fn candidate_view(id: NodeId) -> Action {
    view(id, Role::Candidate, None, true)
}

/// Delivers a message and returns the actions it caused (facts left out).
fn deliver(m: &mut Machine, from: NodeId, term: u64, body: Body, now: Millis) -> Vec<Action> {
    without_facts(drive::feed(m, drive::message(from, term, body), now))
}

fn tick(m: &mut Machine, now: Millis) -> Vec<Action> {
    without_facts(drive::feed(m, Event::Tick, now))
}

/// A freshly started machine (first incarnation, empty cells) with its start-up
/// actions drained.
fn started(config: MachineConfig, now: Millis) -> Machine {
    drive::start_connected(config, Cells::default(), now)
}

/// Node 2 of {1, 2, 3}, following epoch 1@3 since t = 10.
fn follower_of_3() -> Machine {
    let mut m = started(config(2, &[1, 3]), 0);
    let epoch = ep(1, 3);
    assert_eq!(
        deliver(&mut m, 3, 1, Body::Coordinator { epoch }, 10),
        vec![persist(1, epoch, 1), follower_view(2, epoch)]
    );
    m
}

/// Node 3 of {1, 2, 3}, coordinator of epoch 1@3 since t = 100.
fn coordinator_3() -> Machine {
    let mut m = started(config(3, &[1, 2]), 0);
    assert_eq!(m.next_deadline(), 100);
    assert_eq!(tick(&mut m, 100), declaration(ep(1, 3), &[1, 2], 1));
    m
}

#[test]
fn start() {
    // Loaded cells say this node led epoch 4@2 before it crashed: it still comes up
    // as a candidate (I4), persists the next incarnation and probes every peer.
    let loaded = cells(4, Some(ep(4, 2)), 1);
    let mut m = Machine::start(config(2, &[1, 3]), loaded, 1000);
    assert_eq!(
        drain(&mut m),
        vec![
            Action::Persist(cells(4, Some(ep(4, 2)), 2)),
            send(1, 4, Body::Probe),
            send(3, 4, Body::Probe),
            Action::ViewChanged(View {
                id: 2,
                role: Role::Candidate,
                epoch: None,
                eligible: true,
                incarnation: 2,
            }),
        ]
    );
    // It waits max(T, preempt delay) before the first election, and (startup_wait)
    // until its higher peer has been up, 3D at most.
    assert_eq!(m.next_deadline(), 1900);
    m.handle(Event::PeerUp(3), 1050);
    assert_eq!(drain(&mut m), vec![send(3, 4, Body::Probe)]);
    assert_eq!(m.next_deadline(), 1100);
    assert_eq!(tick(&mut m, 1099), vec![]);
    assert_eq!(
        tick(&mut m, 1100),
        vec![send(
            3,
            4,
            Body::Election {
                accepted: Some(ep(4, 2)),
            }
        )]
    );

    let mut slow = config(2, &[1, 3]);
    slow.timing.preempt_delay_ms = 250;
    let m = drive::start_connected(slow, loaded, 1000);
    assert_eq!(m.next_deadline(), 1250);

    // A node without peers has nobody to wait for.
    let mut alone = started(config(7, &[]), 5);
    assert_eq!(alone.next_deadline(), 5);
    assert_eq!(
        tick(&mut alone, 5),
        vec![persist(1, ep(1, 7), 1), coordinator_view(7, ep(1, 7))]
    );
}

#[test]
fn startup_wait() {
    // A higher peer the transport could not reach yet may be starting too: wait for it
    // (a failed dial does not end the wait), but no longer than 3D.
    let mut m = Machine::start(config(2, &[1, 3]), Cells::default(), 0);
    drain(&mut m);
    m.handle(Event::PeerDown(3), 300);
    assert_eq!(drain(&mut m), vec![]);
    assert_eq!(m.next_deadline(), 900);
    assert_eq!(tick(&mut m, 899), vec![]);
    // At the end it elects without waiting for the unreached peer's Answer.
    assert_eq!(
        tick(&mut m, 900),
        vec![
            persist(1, ep(1, 2), 1),
            send(1, 1, Body::Coordinator { epoch: ep(1, 2) }),
            send(3, 1, Body::Coordinator { epoch: ep(1, 2) }),
            coordinator_view(2, ep(1, 2)),
        ]
    );
    // While higher peers keep coming up the cluster is still starting: D after the last.
    let mut m = Machine::start(config(2, &[1, 3, 4]), Cells::default(), 0);
    drain(&mut m);
    m.handle(Event::PeerUp(3), 500);
    drain(&mut m);
    assert_eq!(
        m.next_deadline(),
        900,
        "3D from the start already covers 500 + D"
    );
    m.handle(Event::PeerUp(3), 800);
    drain(&mut m);
    assert_eq!(
        m.next_deadline(),
        1000,
        "800 + D, capped at 3D after the probe window"
    );
    // Every higher peer is up: it elects at once.
    m.handle(Event::PeerUp(4), 900);
    let elected = drain(&mut m);
    assert!(
        elected.contains(&send(3, 0, Body::Election { accepted: None }))
            && elected.contains(&send(4, 0, Body::Election { accepted: None })),
        "{elected:?}"
    );
    // A running coordinator it will not follow (a lower one) ends the wait after T.
    let mut m = Machine::start(config(3, &[1, 2, 4]), Cells::default(), 0);
    drain(&mut m);
    let lower = ep(5, 2);
    let heartbeat = Body::Heartbeat {
        epoch: lower,
        round: 0,
    };
    assert_eq!(deliver(&mut m, 2, 5, heartbeat, 20), vec![]);
    assert_eq!(m.next_deadline(), 100);
    assert_eq!(
        tick(&mut m, 100),
        vec![send(4, 5, Body::Election { accepted: None })]
    );
}

#[test]
fn startup_answer() {
    // The start-up wait outlasted the probe window because higher peers were still
    // coming up: the election that ends it gives them T' (300), not T, to answer.
    let mut m = Machine::start(config(2, &[1, 3, 4]), Cells::default(), 0);
    drain(&mut m);
    m.handle(Event::PeerUp(3), 250);
    drain(&mut m);
    m.handle(Event::PeerUp(4), 400);
    let elected = drain(&mut m);
    assert!(
        elected.contains(&send(4, 0, Body::Election { accepted: None })),
        "{elected:?}"
    );
    assert_eq!(m.next_deadline(), 700, "400 + T'");
    assert_eq!(tick(&mut m, 699), vec![]);
    assert_eq!(
        tick(&mut m, 700),
        declaration(ep(1, 2), &[1, 3, 4], 1),
        "no Answer within T': declare"
    );
    // Peers that were up by the end of the probe window get the usual T.
    let mut m = started(config(2, &[1, 3]), 0);
    tick(&mut m, 100);
    assert_eq!(m.next_deadline(), 200);
}

#[test]
fn election() {
    // Election goes to every higher ID only, then the node waits T.
    let mut m = started(config(2, &[1, 3]), 0);
    assert_eq!(
        tick(&mut m, 100),
        vec![send(3, 0, Body::Election { accepted: None })]
    );
    assert_eq!(m.next_deadline(), 200);
    assert_eq!(m.view().role, Role::Candidate);
    // With no higher ID the node declares at once (see coordinator_3).
    let m = coordinator_3();
    assert_eq!(m.view().role, Role::Coordinator);
    assert_eq!(m.next_deadline(), 200);
}

#[test]
fn answer_timeout() {
    let mut m = started(config(2, &[1, 3]), 0);
    assert_eq!(
        tick(&mut m, 100),
        vec![send(3, 0, Body::Election { accepted: None })]
    );
    // Any message raises the highest seen term; the declaration goes above it.
    assert_eq!(deliver(&mut m, 1, 7, empty_ack(), 150), vec![]);
    assert_eq!(tick(&mut m, 199), vec![]);
    assert_eq!(tick(&mut m, 200), declaration(ep(8, 2), &[1, 3], 1));
}

#[test]
fn coordinator_timeout() {
    let mut m = started(config(2, &[1, 3]), 0);
    tick(&mut m, 100);
    // An Answer: wait T' for the Coordinator message instead of declaring.
    assert_eq!(deliver(&mut m, 3, 0, Body::Answer, 120), vec![]);
    assert_eq!(m.next_deadline(), 420);
    assert_eq!(tick(&mut m, 200), vec![]);
    assert_eq!(tick(&mut m, 419), vec![]);
    // No Coordinator came: elect again.
    assert_eq!(
        tick(&mut m, 420),
        vec![send(3, 0, Body::Election { accepted: None })]
    );
    assert_eq!(m.next_deadline(), 520);
}

#[test]
fn answer_lower() {
    // A follower answers but, having heard its leader within D, starts no election of
    // its own (the textbook Bully would: O(N^2) messages per failover).
    let mut m = follower_of_3();
    let accepted = Some(ep(1, 3));
    assert_eq!(
        deliver(&mut m, 1, 1, Body::Election { accepted }, 50),
        vec![send(1, 1, Body::Answer)]
    );
    assert_eq!(m.view().role, Role::Follower);
    // Electing itself: just answer.
    let mut m = started(config(2, &[1, 3]), 0);
    tick(&mut m, 100);
    assert_eq!(
        deliver(&mut m, 1, 1, Body::Election { accepted }, 110),
        vec![send(1, 1, Body::Answer)]
    );

    // A coordinator answers and re-sends its epoch to a sender that knows no newer term.
    let mut c = coordinator_3();
    let epoch = ep(1, 3);
    assert_eq!(
        deliver(&mut c, 1, 1, Body::Election { accepted }, 150),
        vec![
            send(1, 1, Body::Answer),
            send(1, 1, Body::Coordinator { epoch })
        ]
    );
    // ... and re-declares above a newer term the sender knows.
    let newer = ep(6, 3);
    assert_eq!(
        deliver(&mut c, 1, 5, Body::Election { accepted }, 160),
        vec![
            send(1, 5, Body::Answer),
            persist(6, newer, 1),
            send(1, 6, Body::Coordinator { epoch: newer }),
            send(2, 6, Body::Coordinator { epoch: newer }),
            coordinator_view(3, newer),
        ]
    );
}

#[test]
fn accept() {
    let mut m = started(config(1, &[2, 3]), 0);
    let epoch = ep(4, 3);
    // A newer claim from a node we may follow: persist first, then follow.
    assert_eq!(
        deliver(&mut m, 3, 4, Body::Coordinator { epoch }, 20),
        vec![persist(4, epoch, 1), follower_view(1, epoch)]
    );
    // The same epoch again (a heartbeat): restart the suspicion timer. The ack would
    // tell the leader nothing it does not know, so none goes out...
    assert_eq!(
        deliver(&mut m, 3, 4, Body::Heartbeat { epoch, round: 0 }, 100),
        vec![]
    );
    assert_eq!(m.next_deadline(), 400);
    // ... unless we have seen a newer term (from anyone): then the ack carries it.
    assert_eq!(
        deliver(&mut m, 2, 7, Body::Probe, 110),
        vec![send(
            2,
            7,
            Body::Ack {
                accepted: Some(epoch),
                round: 0
            }
        )]
    );
    assert_eq!(
        deliver(&mut m, 3, 4, Body::Heartbeat { epoch, round: 0 }, 120),
        vec![send(
            3,
            7,
            Body::Ack {
                accepted: Some(epoch),
                round: 0,
            }
        )]
    );
    assert_eq!(m.next_deadline(), 420);
    // A newer epoch by heartbeat: persist, follow (no ack: it is the newest term).
    let newer = ep(8, 3);
    let heartbeat = Body::Heartbeat {
        epoch: newer,
        round: 0,
    };
    assert_eq!(
        deliver(&mut m, 3, 8, heartbeat, 150),
        vec![persist(8, newer, 1), follower_view(1, newer)]
    );
}

#[test]
fn bully() {
    // A coordinator hears a newer claim from a lower node: re-declare above it.
    let mut c = coordinator_3();
    let upstart = ep(2, 1);
    let above = ep(3, 3);
    assert_eq!(
        deliver(&mut c, 1, 2, Body::Coordinator { epoch: upstart }, 150),
        vec![
            persist(3, above, 1),
            send(1, 3, Body::Coordinator { epoch: above }),
            send(2, 3, Body::Coordinator { epoch: above }),
            coordinator_view(3, above),
        ]
    );
    // A follower hears a newer claim from a lower node: hold an election.
    let mut f = follower_of_3();
    assert_eq!(
        deliver(
            &mut f,
            1,
            2,
            Body::Heartbeat {
                epoch: upstart,
                round: 0
            },
            50
        ),
        vec![
            send(
                3,
                2,
                Body::Election {
                    accepted: Some(ep(1, 3)),
                }
            ),
            candidate_view(2),
        ]
    );
}

#[test]
fn bully_waits_out_the_preempt_delay() {
    // Node 3 starts with a preempt delay but ineligible (a health check, the config
    // hello), follows the lower coordinator 1@2, and turns eligible at once: it keeps
    // following until the delay has run from its start, then bullies (CI found it
    // taking over ~300 ms after its start with a 1500 ms delay).
    let mut cfg = config(3, &[1, 2]);
    cfg.timing.preempt_delay_ms = 1_000;
    let mut m = started(cfg, 0);
    m.handle(Event::SetEligible(false), 0);
    drain(&mut m);
    let epoch = ep(1, 2);
    let claim = Body::Coordinator { epoch };
    assert_eq!(
        deliver(&mut m, 2, 1, claim, 10),
        vec![
            persist(1, epoch, 1),
            view(3, Role::Follower, Some(epoch), false)
        ]
    );
    m.handle(Event::SetEligible(true), 20);
    assert_eq!(drain(&mut m), vec![follower_view(3, epoch)]);
    let heartbeat = Body::Heartbeat { epoch, round: 0 };
    for at in [200, 400, 600, 800] {
        assert_eq!(deliver(&mut m, 2, 1, heartbeat.clone(), at), vec![]);
        let suspect_at = at + 300;
        assert_eq!(
            m.next_deadline(),
            suspect_at.min(1_000),
            "following at {at}"
        );
    }
    assert_eq!(tick(&mut m, 1_000), declaration(ep(2, 3), &[1, 2], 1));
}

#[test]
fn gave_way() {
    // Coordinator 3 of {1, 2, 3, 4} hears a newer claim from 4 (after a partition
    // healed): it leaves office, resigns 1@3 and follows 4, so 1 and 2 elect at once
    // and ask it (simulator, classic seed 40803703: a follower that suspected it D
    // later skipped it as silent, and both declared term 4).
    let mut m = started(config(3, &[1, 2, 4]), 0);
    tick(&mut m, 100);
    assert_eq!(tick(&mut m, 200), declaration(ep(1, 3), &[1, 2, 4], 1));
    let newer = ep(2, 4);
    let resign = Body::Resign { epoch: ep(1, 3) };
    assert_eq!(
        deliver(
            &mut m,
            4,
            2,
            Body::Heartbeat {
                epoch: newer,
                round: 0
            },
            250
        ),
        vec![
            candidate_view(3),
            send(1, 2, resign.clone()),
            send(2, 2, resign.clone()),
            send(4, 2, resign.clone()),
            persist(2, newer, 1),
            follower_view(3, newer),
        ]
    );
}

#[test]
fn bully_while_awaiting() {
    // Node 2 followed 1@1 while unhealthy. Healthy again, it elects; 3 answers. While
    // it waits for 3's Coordinator, 1's heartbeat (the epoch 2 accepted) must not make
    // it settle under a lower leader (the Awaiting fix in src/protocol/machine/).
    let mut cfg = config(2, &[1, 3]);
    cfg.eligible = false;
    let mut m = started(cfg, 0);
    let low = ep(1, 1);
    deliver(&mut m, 1, 1, Body::Coordinator { epoch: low }, 10);
    m.handle(Event::SetEligible(true), 20);
    assert_eq!(
        drain(&mut m),
        vec![
            send(
                3,
                1,
                Body::Election {
                    accepted: Some(low)
                }
            ),
            candidate_view(2),
        ]
    );
    assert_eq!(deliver(&mut m, 3, 1, Body::Answer, 30), vec![]);
    assert_eq!(
        deliver(
            &mut m,
            1,
            1,
            Body::Heartbeat {
                epoch: low,
                round: 0
            },
            100
        ),
        vec![]
    );
    assert_eq!(m.view().role, Role::Candidate);
    // No Coordinator from 3 within T': elect again.
    assert_eq!(
        tick(&mut m, 330),
        vec![send(
            3,
            1,
            Body::Election {
                accepted: Some(low)
            }
        )]
    );
}

#[test]
fn stale_claim() {
    let loaded = cells(5, Some(ep(5, 3)), 0);
    let mut m = Machine::start(config(2, &[1, 3]), loaded, 0);
    drain(&mut m);
    // An older claim gets an Ack carrying the newer epoch, and nothing else.
    assert_eq!(
        deliver(&mut m, 1, 4, Body::Coordinator { epoch: ep(4, 1) }, 10),
        vec![send(
            1,
            5,
            Body::Ack {
                accepted: Some(ep(5, 3)),
                round: 0,
            }
        )]
    );
    assert_eq!(m.cells().accepted, Some(ep(5, 3)));
}

#[test]
fn newer_news() {
    // The highest node, as coordinator, learns of a newer epoch: re-declares above it.
    let mut c = coordinator_3();
    let above = ep(5, 3);
    assert_eq!(
        deliver(
            &mut c,
            2,
            4,
            Body::Ack {
                accepted: Some(ep(4, 2)),
                round: 0,
            },
            150
        ),
        vec![
            persist(5, above, 1),
            send(1, 5, Body::Coordinator { epoch: above }),
            send(2, 5, Body::Coordinator { epoch: above }),
            coordinator_view(3, above),
        ]
    );
    // A coordinator with a higher peer leaves office, tells its followers (which may
    // have missed the newer epoch, and would otherwise skip it, alive, as a silent
    // leader), then holds an election.
    let mut m = started(config(2, &[1, 3]), 0);
    tick(&mut m, 100);
    let mine = ep(1, 2);
    assert_eq!(tick(&mut m, 200), declaration(mine, &[1, 3], 1));
    assert_eq!(
        deliver(&mut m, 1, 3, empty_ack(), 250),
        vec![
            candidate_view(2),
            send(1, 3, Body::Resign { epoch: mine }),
            send(3, 3, Body::Resign { epoch: mine }),
            send(
                3,
                3,
                Body::Election {
                    accepted: Some(mine)
                }
            ),
        ]
    );
}

#[test]
fn suspect() {
    // No heartbeat for D after the last claim (t = 10): the silent leader counts as
    // unreachable, and with no other higher peer node 2 declares at once.
    let declares = vec![
        persist(2, ep(2, 2), 1),
        send(1, 2, Body::Coordinator { epoch: ep(2, 2) }),
        send(3, 2, Body::Coordinator { epoch: ep(2, 2) }),
        coordinator_view(2, ep(2, 2)),
    ];
    let mut m = follower_of_3();
    assert_eq!(m.next_deadline(), 310);
    assert_eq!(tick(&mut m, 309), vec![]);
    assert_eq!(tick(&mut m, 310), declares);
    // Told the coordinator is down: the same at once; another peer down changes nothing.
    let mut m = follower_of_3();
    m.handle(Event::PeerDown(1), 20);
    assert_eq!(drain(&mut m), vec![]);
    m.handle(Event::PeerDown(3), 20);
    assert_eq!(drain(&mut m), declares);
    // defer: node 2 of {1, 2, 3, 4} following 4 lets node 3 (reachable) run first and
    // waits T for its declaration; only then does it elect itself.
    let mut m = started(config(2, &[1, 3, 4]), 0);
    let epoch = ep(1, 4);
    deliver(&mut m, 4, 1, Body::Coordinator { epoch }, 10);
    assert_eq!(tick(&mut m, 310), vec![candidate_view(2)]);
    assert_eq!(m.next_deadline(), 410);
    assert_eq!(
        tick(&mut m, 410),
        vec![send(
            3,
            1,
            Body::Election {
                accepted: Some(epoch)
            }
        )]
    );
    // An Answer ends the election wait as before; a higher peer that goes down while
    // we wait for its Answer ends it too: with none left, declare at once.
    let mut m = started(config(2, &[1, 3, 4]), 0);
    deliver(&mut m, 4, 1, Body::Coordinator { epoch }, 10);
    tick(&mut m, 310);
    tick(&mut m, 410);
    m.handle(Event::PeerDown(3), 420);
    assert_eq!(
        drain(&mut m),
        vec![
            persist(2, ep(2, 2), 1),
            send(1, 2, Body::Coordinator { epoch: ep(2, 2) }),
            send(3, 2, Body::Coordinator { epoch: ep(2, 2) }),
            send(4, 2, Body::Coordinator { epoch: ep(2, 2) }),
            coordinator_view(2, ep(2, 2)),
        ]
    );
}

#[test]
fn suspect_spares_a_live_leader() {
    // Node 2 follows 1@3 since t = 10; at 50 node 3 restarts and probes it. No heartbeat
    // follows (3 is a candidate now), yet 3 is alive: at 310 node 2 defers to it like any
    // reachable higher peer and then sends it an Election, instead of declaring the
    // term 3 is about to declare too (simulator seed 9200061, classic).
    let epoch = ep(1, 3);
    let mut m = follower_of_3();
    assert_eq!(
        deliver(&mut m, 3, 1, Body::Probe, 50),
        vec![send(3, 1, probe_reply(Some(epoch)))]
    );
    assert_eq!(tick(&mut m, 310), vec![candidate_view(2)]);
    assert_eq!(m.next_deadline(), 410);
    assert_eq!(
        tick(&mut m, 410),
        vec![send(
            3,
            1,
            Body::Election {
                accepted: Some(epoch)
            }
        )]
    );
    // A heartbeat after the probe makes the leader's later silence count again: with
    // no heartbeat for D it is skipped, and node 2 declares at once.
    let mut m = follower_of_3();
    deliver(&mut m, 3, 1, Body::Probe, 50);
    deliver(&mut m, 3, 1, Body::Heartbeat { epoch, round: 0 }, 60);
    assert_eq!(
        tick(&mut m, 360),
        vec![
            persist(2, ep(2, 2), 1),
            send(1, 2, Body::Coordinator { epoch: ep(2, 2) }),
            send(3, 2, Body::Coordinator { epoch: ep(2, 2) }),
            coordinator_view(2, ep(2, 2)),
        ]
    );
}

#[test]
fn ineligible() {
    let mut cfg = config(2, &[1, 3]);
    cfg.eligible = false;
    let mut m = started(cfg, 0);
    assert!(!m.view().eligible);
    // Does not answer Elections.
    assert_eq!(
        deliver(&mut m, 1, 0, Body::Election { accepted: None }, 10),
        vec![]
    );
    // Asks the higher nodes to take over, but never declares; asks again after T'.
    assert_eq!(
        tick(&mut m, 100),
        vec![send(3, 0, Body::Election { accepted: None })]
    );
    assert_eq!(m.next_deadline(), 400);
    assert_eq!(
        tick(&mut m, 400),
        vec![send(3, 0, Body::Election { accepted: None })]
    );
    assert_eq!(m.view().role, Role::Candidate);
    // Eligible again: elects at once.
    m.handle(Event::SetEligible(true), 450);
    assert_eq!(
        drain(&mut m),
        vec![
            send(3, 0, Body::Election { accepted: None }),
            candidate_view(2),
        ]
    );
    assert_eq!(m.next_deadline(), 550);
    // Ineligible, it follows even a lower node's claim.
    m.handle(Event::SetEligible(false), 460);
    drain(&mut m);
    let epoch = ep(1, 1);
    assert_eq!(
        deliver(&mut m, 1, 1, Body::Coordinator { epoch }, 470),
        vec![
            persist(1, epoch, 1),
            view(2, Role::Follower, Some(epoch), false),
        ]
    );
}

#[test]
fn resign() {
    // A coordinator that becomes ineligible resigns so the others elect at once.
    let mut c = coordinator_3();
    let epoch = ep(1, 3);
    c.handle(Event::SetEligible(false), 150);
    assert_eq!(
        drain(&mut c),
        vec![
            send(1, 1, Body::Resign { epoch }),
            send(2, 1, Body::Resign { epoch }),
            view(3, Role::Candidate, None, false),
        ]
    );
    // A follower of that epoch elects on the Resign...
    let mut f = follower_of_3();
    assert_eq!(
        deliver(&mut f, 3, 1, Body::Resign { epoch }, 160),
        vec![
            send(
                3,
                1,
                Body::Election {
                    accepted: Some(epoch)
                }
            ),
            candidate_view(2),
        ]
    );
    // ... but not on a Resign for an epoch it does not follow.
    let mut f = follower_of_3();
    assert_eq!(
        deliver(&mut f, 3, 2, Body::Resign { epoch: ep(2, 3) }, 160),
        vec![]
    );
}

#[test]
fn probe() {
    // The coordinator answers a Probe with a Heartbeat; anyone else with an Ack.
    let mut c = coordinator_3();
    assert_eq!(
        deliver(&mut c, 1, 0, Body::Probe, 150),
        vec![send(
            1,
            1,
            Body::Heartbeat {
                epoch: ep(1, 3),
                round: 0
            }
        )]
    );
    let mut f = follower_of_3();
    assert_eq!(
        deliver(&mut f, 1, 0, Body::Probe, 150),
        vec![send(
            1,
            1,
            Body::Ack {
                accepted: Some(ep(1, 3)),
                round: 0,
            }
        )]
    );
}

#[test]
fn preempt_never() {
    let claim = ep(5, 1);
    // preempt = always: a starting high node ignores a lower coordinator's claim.
    let mut always = started(config(3, &[1, 2]), 0);
    assert_eq!(
        deliver(
            &mut always,
            1,
            5,
            Body::Heartbeat {
                epoch: claim,
                round: 0
            },
            10
        ),
        vec![]
    );
    // preempt = never: it follows it (no ack: the ack would tell nothing new)...
    let mut cfg = config(3, &[1, 2]);
    cfg.preempt = Preempt::Never;
    let mut never = started(cfg, 0);
    assert_eq!(
        deliver(
            &mut never,
            1,
            5,
            Body::Heartbeat {
                epoch: claim,
                round: 0
            },
            10
        ),
        vec![persist(5, claim, 1), follower_view(3, claim)]
    );
    // ... and, as a follower, answers a lower Election without starting its own.
    assert_eq!(
        deliver(
            &mut never,
            2,
            5,
            Body::Election {
                accepted: Some(claim)
            },
            20
        ),
        vec![send(2, 5, Body::Answer)]
    );
}

#[test]
fn misbehaviour_foreign_claim() {
    let mut m = follower_of_3();
    let epoch = ep(9, 3);
    for body in [
        Body::Coordinator { epoch },
        Body::Heartbeat { epoch, round: 0 },
        Body::Resign { epoch },
    ] {
        assert_eq!(
            deliver(&mut m, 1, 9, body, 50),
            vec![Action::Misbehaved {
                peer: 1,
                what: Misbehaviour::ForeignClaim
            }]
        );
    }
    assert_eq!(m.view().epoch, Some(ep(1, 3)));
}

#[test]
fn misbehaviour_election_from_higher() {
    let mut m = follower_of_3();
    assert_eq!(
        deliver(&mut m, 3, 1, Body::Election { accepted: None }, 50),
        vec![Action::Misbehaved {
            peer: 3,
            what: Misbehaviour::ElectionFromHigher
        }]
    );
}

#[test]
fn misbehaviour_answer_from_lower() {
    let mut m = started(config(2, &[1, 3]), 0);
    tick(&mut m, 100);
    assert_eq!(
        deliver(&mut m, 1, 0, Body::Answer, 120),
        vec![Action::Misbehaved {
            peer: 1,
            what: Misbehaviour::AnswerFromLower
        }]
    );
    // Not counted as an Answer: the node still declares after T.
    assert_eq!(tick(&mut m, 200)[0], persist(1, ep(1, 2), 1));
}

#[test]
fn misbehaviour_unknown_peer() {
    let mut m = follower_of_3();
    assert_eq!(
        deliver(&mut m, 9, 40, Body::Probe, 50),
        vec![Action::Misbehaved {
            peer: 9,
            what: Misbehaviour::UnknownPeer
        }]
    );
    // Its term is not believed either.
    assert_eq!(m.seen_term(), 1);
}

#[test]
fn misbehaviour_term_overflow() {
    // term_jump: a peer that sends a term near u64::MAX would leave no term to declare
    // (or wrap it to 0, breaking I1/I2). It is refused; the term is not raised and
    // elections go on.
    let mut c = coordinator_3();
    let forged = Body::Ack {
        accepted: None,
        round: 0,
    };
    assert_eq!(
        deliver(&mut c, 2, u64::MAX, forged, 150),
        vec![Action::Misbehaved {
            peer: 2,
            what: Misbehaviour::TermJump
        }]
    );
    let forged_epoch = Body::Coordinator {
        epoch: ep(u64::MAX - 1, 2),
    };
    assert!(matches!(
        deliver(&mut c, 2, 1, forged_epoch, 160)[..],
        [Action::Misbehaved {
            what: Misbehaviour::TermJump,
            ..
        }]
    ));
    assert_eq!(c.seen_term(), 1);
    assert_eq!(c.cells().accepted, Some(ep(1, 3)));
    // A large but possible jump (a node that missed many elections) is news, not abuse.
    let far = 1 + bully::protocol::MAX_TERM_JUMP;
    let news = Body::Ack {
        accepted: Some(ep(far, 2)),
        round: 0,
    };
    let actions = deliver(&mut c, 2, far, news, 170);
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, Action::Misbehaved { .. })),
        "{actions:?}"
    );
    assert!(c.seen_term() >= far);
}

#[test]
fn misbehaviour_does_not_raise_the_term() {
    let mut m = follower_of_3();
    let foreign = Body::Coordinator { epoch: ep(50, 3) };
    assert!(matches!(
        deliver(&mut m, 1, 50, foreign, 50)[..],
        [Action::Misbehaved { .. }]
    ));
    assert_eq!(
        m.seen_term(),
        1,
        "a refused message must not raise the term"
    );
}

#[test]
fn peer_up() {
    // Starting: the probe sent before the link was up was dropped; send it again.
    let mut m = started(config(2, &[1, 3]), 0);
    m.handle(Event::PeerUp(3), 5);
    assert_eq!(drain(&mut m), vec![send(3, 0, Body::Probe)]);
    // Electing: repeat the Election to a higher peer only.
    tick(&mut m, 100);
    m.handle(Event::PeerUp(3), 110);
    assert_eq!(
        drain(&mut m),
        vec![send(3, 0, Body::Election { accepted: None })]
    );
    // To a lower peer it repeats what its probe would have got: our accepted epoch.
    m.handle(Event::PeerUp(1), 111);
    assert_eq!(drain(&mut m), vec![send(1, 0, probe_reply(None))]);
    // Follower: the same, so a restarted peer learns the term even when its probe's
    // answer was dropped before our link to it was up.
    let mut f = follower_of_3();
    f.handle(Event::PeerUp(1), 50);
    assert_eq!(drain(&mut f), vec![send(1, 1, probe_reply(Some(ep(1, 3))))]);
    // Coordinator: tell a reconnected peer the epoch at once.
    let mut c = coordinator_3();
    c.handle(Event::PeerUp(1), 150);
    assert_eq!(
        drain(&mut c),
        vec![send(
            1,
            1,
            Body::Heartbeat {
                epoch: ep(1, 3),
                round: 0
            }
        )]
    );
}
