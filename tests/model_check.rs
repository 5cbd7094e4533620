//! Exhaustive model checking of the real `protocol::Machine` (src/model): every
//! interleaving of a 3-node cluster, in both modes, within the bounds printed with each
//! result, plus a smaller bound for 4 nodes with a witness, membership changes asked by
//! the operator at any point (one change for N = 4, two in a row for N = 3), clients
//! asking any node who leads in every state (`Transition::Query`: a coordinator named
//! must be in office), and sabotaged machines that must be caught with a counterexample.
//! `cargo test --test model_check -- --ignored` runs the deep bounds whose figures are
//! in docs/contributing.md#model-checking-srcmodel-testsmodel_checkrs.

use bully::checker::Invariant;
use bully::model::{Bounds, Exploration, Model, ModelConfig, Transition};
use bully::protocol::{Change, Flaw, Mode, NodeId, Preempt, Seat};
use std::time::Instant;

fn config(ids: &[NodeId], mode: Mode, bounds: Bounds) -> ModelConfig {
    ModelConfig {
        ids: ids.to_vec(),
        mode,
        witness: None,
        preempt: Preempt::Always,
        timing: ModelConfig::small_timing(),
        flaw: None,
        bounds,
        settled_start: std::env::var("MODEL_FRESH").is_err(),
        joining: None,
        changes: Vec::new(),
        estimates: Vec::new(),
        restart_timing: None,
        release_bound_ms: None,
    }
}

/// `MODEL_DEPTH=n` overrides the depth bound of the quick runs (to measure growth).
fn depth(default: usize) -> usize {
    std::env::var("MODEL_DEPTH")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(default)
}

/// N = 3 quick bound: one crash, one partition, one pause, one health flip.
fn quick3() -> Bounds {
    Bounds {
        depth: depth(10),
        time: 14,
        crashes: 1,
        wipes: 0,
        partitions: 1,
        pauses: 1,
        health_flips: 1,
        term: 4,
        liveness_steps: 400,
    }
}

/// N = 4 quick bound: smaller (no pause, no health flip, term ≤ 3).
fn quick4() -> Bounds {
    Bounds {
        depth: depth(10),
        time: 10,
        crashes: 1,
        wipes: 0,
        partitions: 1,
        pauses: 0,
        health_flips: 0,
        term: 3,
        liveness_steps: 400,
    }
}

fn run(name: &str, config: ModelConfig) -> Exploration {
    let started = Instant::now();
    let bounds = config.bounds;
    let outcome = Model::new(config).explore();
    println!(
        "{name}: {} states, {} transitions, depth {}{}, {} liveness checks, {:.1} s; bounds {bounds:?}",
        outcome.states,
        outcome.transitions,
        outcome.max_depth,
        if outcome.depth_limited { " (depth-limited)" } else { " (exhausted)" },
        outcome.liveness_checked,
        started.elapsed().as_secs_f64()
    );
    if outcome.changed > 0 {
        println!(
            "{name}: a change taken in {} of the states, newest list version {}",
            outcome.changed, outcome.newest_version
        );
    }
    outcome
}

fn holds(name: &str, config: ModelConfig) {
    let outcome = run(name, config);
    if let Some(c) = outcome.counterexample {
        panic!("{name}: counterexample\n{c}");
    }
}

/// The N = 3 base runs of the suite: the quick bound one step shallower, depth 9
/// (depth 10 has about 2.7 times the states; see the ignored test below).
fn base3() -> Bounds {
    Bounds {
        depth: depth(9),
        ..quick3()
    }
}

#[test]
fn three_nodes_quorum_every_property_holds() {
    holds("quorum N=3", config(&[1, 2, 3], Mode::Quorum, base3()));
}

#[test]
fn three_nodes_classic_every_property_holds() {
    holds("classic N=3", config(&[1, 2, 3], Mode::Classic, base3()));
}

/// The N = 3 base runs at the full quick bound, depth 10 (the table in docs/contributing.md).
#[test]
#[ignore = "about 200 s more on 2 cores (2.1 M and 1.7 M states); run with --ignored (depth 9 of both modes stays in the suite)"]
fn three_nodes_both_modes_at_depth_10() {
    for mode in [Mode::Quorum, Mode::Classic] {
        holds(
            &format!("{mode} N=3 depth 10"),
            config(&[1, 2, 3], mode, quick3()),
        );
    }
}

#[test]
fn four_nodes_with_a_witness_quorum_holds() {
    let mut c = config(&[1, 2, 3, 4], Mode::Quorum, quick4());
    c.witness = Some(2);
    holds("quorum N=4 witness 2", c);
}

#[test]
fn four_nodes_classic_holds() {
    let c = config(&[1, 2, 3, 4], Mode::Classic, quick4());
    holds("classic N=4", c);
}

/// Regression: the first quorum run at depth 10 reported a Q6 violation that was the
/// model's own bookkeeping: a heal and a resume done by the liveness check outside
/// `apply` were not counted as reaching a majority, so node 3's declaration, with node
/// 2's vote after the heal, looked like a minority raising the term. The same steps must
/// now end in one coordinator.
#[test]
fn regression_q6_counts_a_majority_reached_after_a_heal() {
    let model = Model::new(config(&[1, 2, 3], Mode::Quorum, quick3()));
    let steps = [
        Transition::Advance(3),
        Transition::Tick(3),
        Transition::Advance(4),
        Transition::Crash(1),
        Transition::Cut(0b0010),
        Transition::Deliver { from: 3, to: 2 },
        Transition::Tick(3),
        Transition::Pause(3),
        Transition::Heal,
        Transition::Deliver { from: 3, to: 2 },
    ];
    let end = model.replay(&steps).expect("no violation on the way");
    if let Err((violation, fair)) = model.converges(&end) {
        panic!("{violation:?} after {fair:?}");
    }
}

fn caught(name: &str, flaw: Flaw, invariant: Invariant) {
    let mut c = config(&[1, 2, 3], Mode::Quorum, quick3());
    c.flaw = Some(flaw);
    caught_in(name, c, invariant);
}

/// Runs a sabotaged `config`, prints the counterexample and checks which property it
/// broke.
fn caught_in(name: &str, config: ModelConfig, invariant: Invariant) {
    let outcome = run(name, config);
    let counterexample = outcome
        .counterexample
        .unwrap_or_else(|| panic!("{name}: the sabotaged machine was not caught"));
    println!("{counterexample}");
    assert_eq!(
        counterexample.violation.invariant, invariant,
        "{counterexample}"
    );
}

/// The deep bound (figures in docs/contributing.md): N = 3, depth 12, both modes. Minutes, not seconds.
#[test]
#[ignore]
fn deep_three_nodes_both_modes() {
    for mode in [Mode::Quorum, Mode::Classic] {
        let mut bounds = quick3();
        bounds.depth = depth(12);
        holds(
            &format!("deep {mode} N=3"),
            config(&[1, 2, 3], mode, bounds),
        );
    }
}

/// N = 3 with one lost store instead of the crash and the pause: the node comes back on
/// an empty store (src/protocol/recovery.rs) anywhere in the bounded schedule.
fn quick3_lost_store() -> Bounds {
    Bounds {
        crashes: 0,
        wipes: 1,
        pauses: 0,
        ..quick3()
    }
}

#[test]
fn three_nodes_quorum_with_a_lost_store_holds() {
    holds(
        "quorum N=3 lost store",
        config(&[1, 2, 3], Mode::Quorum, quick3_lost_store()),
    );
}

#[test]
fn three_nodes_classic_with_a_lost_store_holds() {
    holds(
        "classic N=3 lost store",
        config(&[1, 2, 3], Mode::Classic, quick3_lost_store()),
    );
}

#[test]
fn sabotage_ignoring_the_lease_is_caught() {
    caught("ignore lease", Flaw::IgnoreLease, Invariant::NoOverlap);
}

/// The sabotage `Flaw::FollowerWindow`: a follower asked who leads names the
/// coordinator from its own view (heard within D - 2.5 heartbeats) instead of asking it;
/// the model finds the coordinator crashed or out of office at that moment.
#[test]
fn sabotage_answering_from_the_followers_view_is_caught() {
    caught(
        "follower window",
        Flaw::FollowerWindow,
        Invariant::LeaderAnswer,
    );
}

#[test]
fn sabotage_accepting_an_equal_term_is_caught() {
    caught(
        "accept equal term",
        Flaw::AcceptEqualTerm,
        Invariant::OnePerTerm,
    );
}

// Membership at runtime (docs/design.md#membership): one change in quorum mode, the
// operator's request a transition of its own (`Transition::Ask`) that any up node may
// receive; only a coordinator takes it, the others refuse and nothing changes.

/// N = 4 with a change: the N = 4 quick bound (a crash, a partition, term <= 3) at
/// depth 8. The lists, the operator's step and the change's messages make each depth
/// dearer: at depth 9 the four-member runs need some 10 GB; `MODEL_DEPTH` goes deeper.
fn quick4_change() -> Bounds {
    Bounds {
        depth: depth(8),
        ..quick4()
    }
}

/// N = 3 with changes: the N = 3 quick bound at depth 8 (two removals reach their
/// second list at depth 6).
fn quick3_change() -> Bounds {
    Bounds {
        depth: depth(8),
        ..quick3()
    }
}

/// Members 1, 2 and 3 plus process 4, which is in none of their lists: its own config
/// names all four, as a new node's file would (harmless: the others refuse it until
/// they store a list with it). The operator asks for it to be added as a voter; the
/// coordinator's learner-then-promote follows by itself. Within the depth bound the
/// search gets as far as the learner's list; the promotion comes in the fair schedules
/// of the liveness check, whose every step is checked too.
#[test]
fn membership_adding_a_fourth_node_holds() {
    let bounds = Bounds {
        depth: depth(9),
        ..quick4()
    };
    let mut c = config(&[1, 2, 3, 4], Mode::Quorum, bounds);
    c.joining = Some(4);
    c.changes = vec![Change::Add {
        id: 4,
        addr: String::new(),
        seat: Seat::Voter,
    }];
    holds("quorum N=3 + add 4", c);
}

/// Four members; the operator asks for member 1 to be removed (the coordinator of the
/// settled start is 4, so 1 is never the coordinator asked to remove itself).
#[test]
fn membership_removing_a_member_holds() {
    let mut c = config(&[1, 2, 3, 4], Mode::Quorum, quick4_change());
    c.changes = vec![Change::Remove { id: 1 }];
    holds("quorum N=4 remove 1", c);
}

/// Four members; member 3 (next in line after the coordinator 4) is replaced: it loses
/// its vote and earns it back once caught up.
#[test]
#[ignore = "about 25-50 s more; run with --ignored (the remove and lost-store runs cover the same rules by default)"]
fn membership_replacing_a_member_holds() {
    let mut c = config(&[1, 2, 3, 4], Mode::Quorum, quick4_change());
    c.changes = vec![Change::Replace { id: 3 }];
    holds("quorum N=4 replace 3", c);
}

/// N = 3 and two changes in a row: remove 1, then remove 2. The lists before the first
/// and after the second ({1, 2, 3} and {3}) are two members apart and their majorities
/// ({1, 2} and {3}) do not meet, so only the commit rule between the two changes keeps
/// {1, 2} from electing a second coordinator.
fn two_removals(flaw: Option<Flaw>) -> ModelConfig {
    let mut c = config(&[1, 2, 3], Mode::Quorum, quick3_change());
    c.changes = vec![Change::Remove { id: 1 }, Change::Remove { id: 2 }];
    c.flaw = flaw;
    c
}

#[test]
#[ignore = "about 30-60 s more; run with --ignored (the single removal, the add and the TwoAtOnce sabotage on two removals stay in the suite)"]
fn membership_two_removals_in_a_row_hold() {
    holds("quorum N=3 remove 1 then 2", two_removals(None));
}

/// The sabotage `Flaw::TwoAtOnce`: each change counts as committed once written, so
/// the coordinator removes 1 and then 2 before anyone stored either list. On {3} it is
/// its own majority, while 1 and 2, still on {1, 2, 3}, are a majority of theirs: each
/// side elects a coordinator of the same term.
#[test]
fn sabotage_two_changes_at_once_is_caught() {
    caught_in(
        "two changes at once",
        two_removals(Some(Flaw::TwoAtOnce)),
        Invariant::OnePerTerm,
    );
}

/// N = 3: replace 1 (it keeps its seat in the list as a learner, and its acks still
/// reach the coordinator), then remove 2: the script on which `Flaw::OldMajorityOnly`
/// changes what happens. With it, the first change is committed once 1 and 3 stored it
/// (a majority of {1, 2, 3}) though the list after it, {2, 3}, needs 2 as well. (On two
/// removals the flaw changes nothing: the removed member's acks are refused, so a
/// majority of the list before without it is already one of the list after.)
fn replace_then_remove(flaw: Option<Flaw>) -> ModelConfig {
    let mut c = config(&[1, 2, 3], Mode::Quorum, quick3_change());
    c.changes = vec![Change::Replace { id: 1 }, Change::Remove { id: 2 }];
    c.flaw = flaw;
    c
}

/// The sabotage `Flaw::OldMajorityOnly` is not caught, and cannot be: a change still
/// needs a majority of the list before it, and a node holding a newer list refuses
/// every candidate whose list is older (up_to_date, src/protocol/machine/membership.rs).
/// So once a change from list A is committed, every majority of A holds a node that
/// refuses a candidate still on A, whatever the list after it says; by induction only
/// the newest committed list and the one change under way can elect, and those are one
/// member apart. This run checks that claim where the flaw bites: on the path below the
/// flawed coordinator counts the replacement committed on 1's ack alone and goes on to
/// the next change (1's promotion, 1 having caught up), where the honest one waits for 2.
#[test]
#[ignore = "about 30 s more; a demonstration that the flaw breaks nothing, run with --ignored"]
fn sabotage_old_majority_only_is_harmless() {
    let path = [
        Transition::Ask(3), // replace 1: first the list under 3's epoch
        Transition::Deliver { from: 3, to: 1 },
        Transition::Deliver { from: 1, to: 3 }, // confirmed by {1, 3}; replace 1 written
        Transition::Deliver { from: 3, to: 1 },
        Transition::Deliver { from: 1, to: 3 }, // stored by {1, 3}, not by 2
        Transition::Ask(3),                     // remove 2: refused while a change is under way
    ];
    let second_change = |flaw| {
        let model = Model::new(replace_then_remove(flaw));
        let end = model.replay(&path).expect("no violation on the way");
        model
            .describe(&end)
            .contains("n3 coordinator 1@3 [1,2,3]v2")
    };
    assert!(!second_change(None), "the honest machine waits for 2");
    assert!(
        second_change(Some(Flaw::OldMajorityOnly)),
        "the flaw goes on"
    );
    holds(
        "old majority only, replace 1 then remove 2",
        replace_then_remove(Some(Flaw::OldMajorityOnly)),
    );
}

/// Two changes with a lost store instead of the crash and the pause: replace 1, then
/// remove 2, any node's store lost anywhere in the schedule (it restarts on its seed
/// list and recovers its terms, src/protocol/recovery.rs).
#[test]
#[ignore = "about 25-50 s more; run with --ignored (the remove and lost-store runs cover the same rules by default)"]
fn membership_two_changes_with_a_lost_store_hold() {
    let bounds = Bounds {
        depth: depth(8),
        ..quick3_lost_store()
    };
    let mut c = config(&[1, 2, 3], Mode::Quorum, bounds);
    c.changes = vec![Change::Replace { id: 1 }, Change::Remove { id: 2 }];
    holds("quorum N=3 lost store, replace 1 then remove 2", c);
}

/// A liveness bug (I5) this model found, fixed: node 2 loses its store and restarts on
/// its seed list {1, 2, 3}, so its recovery waits for `M - q + 1 = 2` peers' term
/// reports; meanwhile the operator removes 1 and 2 stores {2, 3}. It asked only 3 and
/// still waited for two reports, so 3 could never lead {2, 3} without it. A recovery now
/// counts from the list the node holds (src/protocol/recovery.rs `relist`).
#[test]
fn membership_removal_during_a_store_recovery_converges() {
    let bounds = Bounds {
        depth: depth(8),
        ..quick3_lost_store()
    };
    let mut c = config(&[1, 2, 3], Mode::Quorum, bounds);
    c.changes = vec![Change::Remove { id: 1 }, Change::Remove { id: 2 }];
    holds("lost store, remove 1 then 2", c);
}

/// est(S) (docs/design.md#elected-by-data-est): the lowest ID holds the freshest data,
/// the highest ID the stalest, so the ID order and the election order disagree most.
fn by_data(mode: Mode, flaw: Option<Flaw>) -> ModelConfig {
    // Depth 8: estimates in the messages about double the states of each depth.
    let bounds = Bounds {
        depth: depth(8),
        ..quick3()
    };
    let mut c = config(&[1, 2, 3], mode, bounds);
    c.estimates = vec![2, 1, 0];
    c.flaw = flaw;
    c
}

/// Every property, I8 included: an election run in the prompt schedule is won by the
/// live eligible node of highest (estimate, id).
#[test]
fn three_nodes_by_data_quorum_holds() {
    holds("quorum N=3 estimates 2,1,0", by_data(Mode::Quorum, None));
}

/// The same in classic mode.
#[test]
#[ignore = "about 25-60 s more; run with --ignored (the quorum run and the IdOrder sabotage in both modes stay in the suite)"]
fn three_nodes_by_data_classic_holds() {
    holds("classic N=3 estimates 2,1,0", by_data(Mode::Classic, None));
}

/// The sabotage `Flaw::IdOrder`: ranks compared by ID alone, voters ignore estimates.
/// Node 3, the stalest, wins an election node 1 could have answered: I8.
#[test]
fn sabotage_id_order_is_caught() {
    for mode in [Mode::Quorum, Mode::Classic] {
        caught_in(
            &format!("{mode} id order"),
            by_data(mode, Some(Flaw::IdOrder)),
            Invariant::ElectedByData,
        );
    }
}

/// A rolling restart onto a lower D (issue 38): every restart's file names D = 3
/// instead of 8 (heartbeat 1); a node lives by its stored list's settings where it has
/// them, and nodes on different D talk (the hello no longer refuses them, issue 47). Two restarts, no other fault: the two restarted nodes form a majority on the
/// new D while the coordinator still counts on their promises made under the old one.
/// (Its sabotage, `Flaw::HoldoffByNewD`, is not reached within this bound: the
/// start-up wait keeps the restarted pair from electing until the old lease has run
/// out; the simulator and tests/rolling_d_sabotage.rs catch it.)
fn lower_d_restarts() -> ModelConfig {
    let bounds = Bounds {
        depth: depth(11),
        time: 24,
        crashes: 2,
        wipes: 0,
        partitions: 0,
        pauses: 0,
        health_flips: 0,
        term: 3,
        liveness_steps: 400,
    };
    let mut c = config(&[1, 2, 3], Mode::Quorum, bounds);
    // The old D is long against the new one, as in the roll (3000 -> 300 ms):
    // the coordinator's lease (D - heartbeat = 6) outlasts a hold-off of the new D.
    c.timing = bully::protocol::Timing {
        suspect_after_ms: 8,
        ..ModelConfig::small_timing()
    };
    c.restart_timing = Some(bully::protocol::Timing {
        heartbeat_ms: 1,
        suspect_after_ms: 3,
        ..ModelConfig::small_timing()
    });
    c
}

#[test]
fn three_nodes_restarted_onto_a_lower_d_keep_their_promises() {
    holds("quorum N=3 restarts onto a lower D", lower_d_restarts());
}

/// Issue 47: a timing change through the protocol (`bully config set`) in flight among
/// a crash, a partition, a pause and a health flip, N = 3: the coordinator confirms its
/// list, then writes the one with the new D, and every interleaving of its spreading
/// and commit is explored. Every hold-off and lease across it must use the larger D
/// (promise_span, larger_d_across: docs/design.md#cluster-settings). A member change
/// queued behind it lies beyond this depth (depth 10 needs more than the 24 GB of this
/// machine); member changes in flight are the `membership_*` runs'.
fn timing_change(d_from: u64, d_to: u64) -> ModelConfig {
    let mut c = config(&[1, 2, 3], Mode::Quorum, quick3_change());
    c.timing = bully::protocol::Timing {
        suspect_after_ms: d_from,
        ..ModelConfig::small_timing()
    };
    c.changes = vec![Change::Settings {
        set: vec![("timing.suspect_after_ms".into(), d_to.to_string())],
    }];
    c
}

#[test]
fn a_lower_d_in_flight_keeps_every_property() {
    holds("quorum N=3 D 10 -> 6 in flight", timing_change(10, 6));
}

#[test]
fn a_higher_d_in_flight_keeps_every_property() {
    holds("quorum N=3 D 6 -> 10 in flight", timing_change(6, 10));
}

/// Hooks that take time (issue 38): a voluntary departure (here a failing health check)
/// asks for its release, and `on_demoted` ends at any moment before the machine's
/// bound, or never. Every property holds, among a crash, a partition and a pause.
#[test]
fn three_nodes_with_a_slow_on_demoted_keep_every_property() {
    let bounds = Bounds {
        depth: depth(8),
        ..quick3()
    };
    let mut c = config(&[1, 2, 3], Mode::Quorum, bounds);
    c.release_bound_ms = Some(8);
    holds("quorum N=3 slow on_demoted", c);
}
