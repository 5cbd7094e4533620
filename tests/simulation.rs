//! Deterministic simulation: many seeded fault scenarios, zero invariant violations,
//! plus a few hand-written scenarios that read as phases.
//!
//! `cargo test --test simulation` runs 5,000 seeds; `SIM_SEEDS=200000` runs more;
//! `SIM_SEED=n` runs just seed n (and prints its history when run with --nocapture).
//! Seeds start at `SIM_FIRST_SEED` (default 0). `SIM_FINGERPRINT=1` prints a hash of
//! every history, to show a refactoring changed no behaviour. `SIM_CHANGES=none` draws
//! no membership change in any seed (`many`: several in every seed). `SIM_KEEP_GOING=1`
//! lists every failing seed; `SIM_STRICT=1` fails the runs that hit a known gap of the
//! machine (`Gap`), which are otherwise counted.

use bully::checker::{
    check_convergence, check_no_overlap, check_one_per_term, check_safety, check_unique_terms,
    lease_bound_ms, quiet_window, Convergence, Invariant, Leader,
};
use bully::history::{last_fault_ms, tail, Record};
use bully::protocol::{
    Body, ConfigId, DemotionReason, Epoch, Fact, Flaw, MessageKind, Millis, Mode, NodeId, Role,
};
use bully::sim::scenario::{
    asks_for_changes, run_seed, run_seed_changing, run_seed_drawing, run_seed_with, Changes,
    Flavor, Gap, Operator, SeedRun,
};
use bully::sim::{CrashPoint, Sim, SimConfig};
use std::collections::BTreeMap;
use std::time::Instant;

const DEFAULT_SEEDS: u64 = 5_000;

fn env_u64(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    match value.trim().parse() {
        Ok(n) => Some(n),
        Err(_) => panic!("{name}={value:?} is not a number"),
    }
}

/// Coverage counters over all seeds, printed at the end.
#[derive(Default)]
struct Summary {
    runs: u64,
    by_nodes: BTreeMap<usize, u64>,
    fast: u64,
    preempt_delay: u64,
    never: u64,
    ineligible: u64,
    witness: u64,
    slow: u64,
    mixed_timing: u64,
    membership: u64,
    config_roll: u64,
    slow_hooks: u64,
    forced_recovery: u64,
    store_rolled_back: u64,
    /// Runs that hit each known gap of the machine (`SeedRun::known_gaps`), and the
    /// first such seed.
    gaps: BTreeMap<Gap, (u64, u64)>,
    faults: u64,
    max_settle: (u64, u64),
    worst_slack: (i64, u64),
    /// Runs in which each scenario the issue names really happened.
    happened: BTreeMap<&'static str, u64>,
}

/// Which of the named scenarios a run's history shows.
fn scenarios_in(o: &SeedRun) -> Vec<&'static str> {
    let h = &o.history;
    let mut found = Vec::new();
    let top = h.iter().map(|e| e.node).max().unwrap_or(0);
    let mut last_by_node: BTreeMap<NodeId, &Record> = BTreeMap::new();
    let mut elections_at: BTreeMap<Millis, Vec<NodeId>> = BTreeMap::new();
    for e in h {
        match (&e.record, last_by_node.get(&e.node)) {
            (Record::Crashed, Some(Record::Sent { msg, .. })) => match msg.body.kind() {
                MessageKind::Answer => found.push("crash right after Answer"),
                MessageKind::Coordinator => found.push("crash mid Coordinator broadcast"),
                _ => {}
            },
            (Record::Crashed, Some(Record::Persisted(_))) => {
                found.push("crash right after persist")
            }
            (Record::Started { incarnation }, _) if *incarnation > 1 && e.node == top => {
                found.push("restarted highest node")
            }
            (Record::Partitioned { .. }, _) => found.push("partition"),
            (Record::Paused, _) => found.push("pause"),
            (Record::Lossy { .. }, _) => found.push("message loss"),
            (Record::StoreLost, _) => found.push("store lost"),
            (Record::Sent { msg, .. }, _) if matches!(msg.body, Body::Election { .. }) => {
                elections_at.entry(e.at_ms).or_default().push(e.node)
            }
            _ => {}
        }
        last_by_node.insert(e.node, &e.record);
    }
    if o.steps.iter().any(|step| step.contains(" ms  deafen ")) {
        found.push("deaf node");
    }
    let rolled = |kind: &str| o.steps.iter().any(|step| step.contains(kind));
    if rolled(" to restart with D=") {
        found.push("config roll restart");
    }
    if rolled(" (SIGTERM) to restart with ") {
        found.push("config roll, clean stop");
    }
    if rolled("(during the roll)") {
        found.push("config roll, coordinator cut off");
    }
    let released = h.iter().any(|e| {
        matches!(
            e.record,
            Record::Fact(Fact::Demoted {
                reason: bully::protocol::DemotionReason::Stopped
                    | bully::protocol::DemotionReason::Ineligible
                    | bully::protocol::DemotionReason::Yielded { .. },
                ..
            })
        )
    });
    if rolled("slow hooks:") && released {
        found.push("voluntary departure with slow hooks");
    }
    if rolled("on_demoted hangs") && released {
        found.push("voluntary departure, a hook hangs");
    }
    if rolled("refused (exit 2), wiped") {
        found.push("store rolled back while down, refused");
    }
    if rolled("bully recover --force") {
        found.push("forced recovery");
        if h.iter()
            .any(|e| matches!(e.record, Record::Fact(Fact::GivenUp { .. })))
        {
            found.push("forced recovery, the given-up side met the survivors");
        }
    }
    if o.steps.iter().any(|step| step.contains("(to be replaced)")) {
        found.push("lost disk replaced");
    }
    found.extend(list_changes_in(h));
    if elections_at.values().any(|nodes| {
        let mut nodes = nodes.clone();
        nodes.dedup();
        nodes.len() > 1
    }) {
        found.push("concurrent elections");
    }
    found.sort_unstable();
    found.dedup();
    found
}

/// What the membership facts of a history show: changes committed (and what each did
/// to its subject, read off the list the coordinator sent), refused, and members
/// refused as strangers.
fn list_changes_in(h: &[bully::history::Entry]) -> Vec<&'static str> {
    let mut found = Vec::new();
    let mut proposed: BTreeMap<ConfigId, NodeId> = BTreeMap::new();
    let mut lists: BTreeMap<ConfigId, bully::protocol::Membership> = BTreeMap::new();
    for e in h {
        match &e.record {
            Record::Sent { msg, .. } => {
                if let Body::Members { list } = &msg.body {
                    lists.entry(list.id).or_insert_with(|| list.clone());
                }
            }
            Record::Fact(Fact::ChangeProposed { id, subject }) => {
                proposed.insert(*id, *subject);
            }
            Record::Fact(Fact::MembersCommitted { id }) => {
                let Some(subject) = proposed.get(id) else {
                    continue;
                };
                found.push(match lists.get(id).and_then(|l| l.get(*subject)) {
                    None => "member removed",
                    Some(m) if m.learner => "learner added or replaced",
                    Some(_) => "learner promoted",
                });
            }
            Record::Fact(Fact::ChangeRefused { .. }) => found.push("membership change refused"),
            Record::Misbehaved { what, .. } if what.contains("not a configured peer") => {
                found.push("stranger refused")
            }
            _ => {}
        }
    }
    found
}

impl Summary {
    /// Fails unless some run had each of the scenarios `names`.
    fn assert_happened(&self, names: &[&str]) {
        for name in names {
            assert!(
                self.happened.get(name).copied().unwrap_or(0) > 0,
                "no run had: {name}"
            );
        }
    }

    fn add(&mut self, o: &SeedRun) {
        let f: Flavor = o.flavor;
        self.runs += 1;
        *self.by_nodes.entry(f.nodes).or_default() += 1;
        self.fast += f.fast_timing as u64;
        self.preempt_delay += f.preempt_delay as u64;
        self.never += f.preempt_never as u64;
        self.ineligible += f.ineligible as u64;
        self.witness += f.witness as u64;
        self.slow += f.slow_network as u64;
        self.mixed_timing += f.mixed_timing as u64;
        self.membership += f.membership as u64;
        self.config_roll += f.config_roll as u64;
        self.slow_hooks += f.slow_hooks as u64;
        self.forced_recovery += f.forced_recovery as u64;
        self.store_rolled_back += f.store_rolled_back as u64;
        let mut gaps: Vec<Gap> = o.known_gaps.iter().map(|(gap, _)| *gap).collect();
        gaps.dedup();
        for gap in gaps {
            self.gaps.entry(gap).or_insert((0, o.seed)).0 += 1;
        }
        self.faults += f.faults as u64;
        if o.settled_after_ms > self.max_settle.0 {
            self.max_settle = (o.settled_after_ms, o.seed);
        }
        for name in scenarios_in(o) {
            *self.happened.entry(name).or_default() += 1;
        }
        if f.slow_network && f.mode == bully::protocol::Mode::Quorum {
            return; // safety only: no I5 deadline applies
        }
        let allowed = (o.deadline_ms - o.last_fault_ms) as i64;
        let slack = allowed - o.settled_after_ms as i64;
        if self.runs == 1 || slack < self.worst_slack.0 {
            self.worst_slack = (slack, o.seed);
        }
    }
}

/// FNV-1a over every history as JSON (`SIM_FINGERPRINT=1`): a refactoring that keeps
/// behaviour must keep it, whatever the types are called or where they live.
#[derive(Clone, Copy)]
struct Fingerprint(u64);

impl Default for Fingerprint {
    fn default() -> Self {
        Fingerprint(0xcbf2_9ce4_8422_2325)
    }
}

/// How every message of a run without list changes shows its sender's list identity:
/// the seeded list's. Messages carried no list identity before lists could change.
const SEEDED_LIST: &[u8] = br#""config":{"stamp":null,"version":0},"#;

impl Fingerprint {
    fn add(&mut self, history: &[bully::history::Entry]) {
        let json = serde_json::to_vec(history).expect("a history serialises");
        self.add_bytes(&json);
    }

    /// The history as JSON as it was written before messages carried their sender's
    /// list identity (the seeded one's text cut out): a run without list changes must
    /// give the fingerprint it gave then.
    fn add_without_list_ids(&mut self, history: &[bully::history::Entry]) {
        let json = serde_json::to_vec(history).expect("a history serialises");
        let mut rest = &json[..];
        while let Some(at) = rest
            .windows(SEEDED_LIST.len())
            .position(|w| w == SEEDED_LIST)
        {
            self.add_bytes(&rest[..at]);
            rest = &rest[at + SEEDED_LIST.len()..];
        }
        self.add_bytes(rest);
    }

    fn add_bytes(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// The fingerprints `SIM_FINGERPRINT=1` prints: every history; every history in the
/// form from before messages carried a list identity; and both over only the seeds that
/// draw no membership change ([`asks_for_changes`]), which must not move when the
/// membership draws change or are turned off (`SIM_CHANGES=none`).
#[derive(Default)]
struct Fingerprints {
    all: Fingerprint,
    all_old_form: Fingerprint,
    unchanged: Fingerprint,
    unchanged_old_form: Fingerprint,
    unchanged_seeds: u64,
}

impl Fingerprints {
    fn add(&mut self, seed: u64, history: &[bully::history::Entry]) {
        self.all.add(history);
        self.all_old_form.add_without_list_ids(history);
        if !asks_for_changes(seed) {
            self.unchanged.add(history);
            self.unchanged_old_form.add_without_list_ids(history);
            self.unchanged_seeds += 1;
        }
    }
}

/// Which membership changes the seeds draw (`SIM_CHANGES=none|some|many`, default some).
fn env_changes() -> Changes {
    match std::env::var("SIM_CHANGES").as_deref() {
        Ok("none") => Changes::None,
        Ok("some") | Err(_) => Changes::Some,
        Ok("many") => Changes::Many,
        Ok(other) => panic!("SIM_CHANGES={other:?} is none of none, some, many"),
    }
}

/// How the seeds draw the operator's faults: `SIM_OPERATOR=none` draws none (every seed
/// runs as before they existed: the fingerprints show it), `always` a config roll in
/// every seed, `two-lost` two stores lost in a row (the open break) in every seed,
/// `forced` a forced recovery in every quorum seed without membership changes.
fn env_operator() -> Operator {
    match std::env::var("SIM_OPERATOR").as_deref() {
        Ok("none") => Operator::None,
        Ok("some") | Err(_) => Operator::Some,
        Ok("always") => Operator::Always,
        Ok("two-lost") => Operator::TwoLost,
        Ok("forced") => Operator::Forced,
        Ok(other) => {
            panic!("SIM_OPERATOR={other:?} is none of none, some, always, two-lost, forced")
        }
    }
}

/// The mode `SIM_SEED` reruns (`SIM_MODE=classic|quorum`, default quorum).
fn env_mode() -> Mode {
    match std::env::var("SIM_MODE").as_deref() {
        Ok("classic") => Mode::Classic,
        Ok("quorum") | Err(_) => Mode::Quorum,
        Ok(other) => panic!("SIM_MODE={other:?} is neither classic nor quorum"),
    }
}

/// Runs the seeds the environment asks for in `mode` and checks every invariant of
/// that mode (I1–I5; quorum also I6 and I7) on each.
fn run_seeds(mode: Mode) {
    if let Some(seed) = env_u64("SIM_SEED") {
        if env_mode() != mode {
            return;
        }
        let outcome = run_seed_drawing(seed, mode, None, env_changes(), env_operator());
        println!("seed {seed}: {}", outcome.description);
        for step in &outcome.steps {
            println!("  {step}");
        }
        println!("{}", bully::history::tail(&outcome.history, usize::MAX));
        for (gap, what) in &outcome.known_gaps {
            println!("known gap {gap:?}: {what}");
        }
        assert!(outcome.passed(), "{}", outcome.report());
        println!("seed {seed} passed; messages sent: {:?}", outcome.sent);
        return;
    }
    let first = env_u64("SIM_FIRST_SEED").unwrap_or(0);
    let count = env_u64("SIM_SEEDS").unwrap_or(DEFAULT_SEEDS);
    let started = Instant::now();
    let mut summary = Summary::default();
    let changes = env_changes();
    let operator = env_operator();
    // `SIM_KEEP_GOING=1`: list every failing seed instead of stopping at the first.
    let keep_going = env_u64("SIM_KEEP_GOING").is_some();
    // `SIM_STRICT=1`: a run that hits a known gap of the machine fails too.
    let strict = env_u64("SIM_STRICT").is_some();
    let mut failed = Vec::new();
    let mut fingerprint = env_u64("SIM_FINGERPRINT").map(|_| Fingerprints::default());
    for seed in first..first + count {
        let outcome = run_seed_drawing(seed, mode, None, changes, operator);
        let passed = outcome.passed() && (!strict || outcome.known_gaps.is_empty());
        if keep_going && !passed {
            failed.push(seed);
            println!("{mode} seed {seed}: {:?}", outcome.violations.first());
        }
        assert!(
            keep_going || passed,
            "{}(mode: rerun with SIM_MODE={mode})",
            outcome.report()
        );
        summary.add(&outcome);
        if let Some(f) = fingerprint.as_mut() {
            f.add(seed, &outcome.history);
        }
    }
    if let Some(f) = fingerprint {
        println!(
            "{mode} mode: fingerprint of seeds {first}..{} (every history as JSON): {:016x}; \
             without list identities in messages: {:016x}; of the {} seeds that draw no \
             membership change: {:016x}, without list identities: {:016x}",
            first + count,
            f.all.0,
            f.all_old_form.0,
            f.unchanged_seeds,
            f.unchanged.0,
            f.unchanged_old_form.0,
        );
    }
    println!(
        "{mode} mode: {} seeds in {:.1} s: nodes {:?}, fast timing {}, preempt delay {}, \
         preempt never {}, ineligible {}, witness {}, slow network {}, mixed timing {}, \
         membership {}, config roll {}, slow hooks {}, forced recovery {}, store rolled back {}, \
         faults {}; slowest \
         settle {} ms (seed {}), least slack to the I5 deadline {} ms (seed {}); runs per \
         scenario: {:?}",
        summary.runs,
        started.elapsed().as_secs_f64(),
        summary.by_nodes,
        summary.fast,
        summary.preempt_delay,
        summary.never,
        summary.ineligible,
        summary.witness,
        summary.slow,
        summary.mixed_timing,
        summary.membership,
        summary.config_roll,
        summary.slow_hooks,
        summary.forced_recovery,
        summary.store_rolled_back,
        summary.faults,
        summary.max_settle.0,
        summary.max_settle.1,
        summary.worst_slack.0,
        summary.worst_slack.1,
        summary.happened,
    );
    if !summary.gaps.is_empty() {
        println!(
            "{mode} mode: runs that hit a known gap of the machine (runs, first seed; \
             SIM_STRICT=1 fails them): {:?}",
            summary.gaps
        );
    }
    assert!(failed.is_empty(), "{mode} mode: seeds failed: {failed:?}");
    assert!(summary.never > 0 && summary.ineligible > 0 && summary.fast > 0);
    assert!(summary.preempt_delay > 0 && summary.slow > 0 && summary.mixed_timing > 0);
    if changes != Changes::None {
        assert!(summary.membership > 0, "no run changed the member list");
    }
    if operator != Operator::None {
        assert!(summary.config_roll > 0, "no run rolled a config change");
    }
    if mode == Mode::Quorum {
        assert!(summary.witness > 0, "no run had a witness");
    }
    if count >= 1_000 {
        summary.assert_happened(&[
            "crash right after Answer",
            "crash mid Coordinator broadcast",
            "crash right after persist",
            "restarted highest node",
            "partition",
            "pause",
            "message loss",
            "concurrent elections",
            "store lost",
            "deaf node",
        ]);
    }
    if count >= 1_000 && operator != Operator::None {
        summary.assert_happened(&[
            "config roll restart",
            "config roll, clean stop",
            "config roll, coordinator cut off",
        ]);
    }
    // The two-lost range draws no hooks (its seeds replay as found).
    if count >= 1_000 && matches!(operator, Operator::Some | Operator::Always) {
        summary.assert_happened(&[
            "voluntary departure with slow hooks",
            "voluntary departure, a hook hangs",
            "store rolled back while down, refused",
        ]);
    }
    let forces = matches!(
        operator,
        Operator::Some | Operator::Always | Operator::Forced
    );
    if count >= 1_000 && mode == Mode::Quorum && forces {
        summary.assert_happened(&[
            "forced recovery",
            "forced recovery, the given-up side met the survivors",
        ]);
    }
    if count >= 1_000 && changes != Changes::None {
        summary.assert_happened(&[
            "learner added or replaced",
            "learner promoted",
            "member removed",
            "membership change refused",
            "stranger refused",
            "lost disk replaced",
        ]);
    }
}

#[test]
fn classic_seeds_keep_i1_to_i5() {
    run_seeds(Mode::Classic);
}

#[test]
fn quorum_seeds_keep_i1_to_i7() {
    run_seeds(Mode::Quorum);
}

#[test]
fn same_seed_same_history() {
    for mode in [Mode::Classic, Mode::Quorum] {
        for seed in [3, 77, 1234] {
            assert_eq!(
                run_seed(seed, mode).history,
                run_seed(seed, mode).history,
                "seed {seed}, {mode} mode"
            );
        }
    }
}

/// A 5-node cluster (IDs 1..5, default timing, 1-20 ms links) converged on node 5.
fn converged_five(seed: u64, mode: Mode) -> Sim {
    let mut sim = Sim::new(SimConfig::new(seed, (1..=5).collect(), mode));
    for id in 1..=5 {
        sim.start(id);
    }
    sim.run_until(1_000);
    for id in 1..=5 {
        assert_eq!(
            sim.view(id).and_then(|v| v.coordinator()),
            Some(5),
            "node {id} after start-up"
        );
    }
    sim
}

/// Runs past the I5 deadline and checks I1–I5 (leader `leader`) over the history.
fn settle_and_check(sim: &mut Sim, leader: NodeId) -> Epoch {
    let timing = sim.config().timing;
    let mode = sim.config().mode;
    let max_delay = sim.config().delay_ms.1;
    let last = last_fault_ms(sim.history()).unwrap_or(0);
    let deadline = last + timing.convergence_bound_in(mode) + 8 * max_delay;
    sim.run_until(deadline + timing.convergence_bound_in(mode));
    let history = sim.history();
    let mut violations = sim.violations().to_vec();
    assert_eq!(check_safety(history), vec![], "offline check disagrees");
    if mode == Mode::Quorum {
        violations.extend(check_no_overlap(history, lease_bound_ms(&timing)));
        violations.extend(check_one_per_term(history));
    }
    violations.extend(check_unique_terms(
        history,
        quiet_window(&timing, max_delay),
    ));
    violations.extend(check_convergence(
        history,
        &Convergence {
            live: sim.live(),
            leader: Leader::Node(leader),
            deadline_ms: deadline,
        },
    ));
    assert!(
        violations.is_empty(),
        "{violations:#?}\n{}",
        tail(history, 200)
    );
    let view = sim.view(leader).expect("leader is up");
    assert_eq!(view.role, Role::Coordinator);
    view.epoch.expect("a coordinator has an epoch")
}

#[test]
fn heir_crashes_after_answer_before_coordinator() {
    // Phase 1: 5 leads. Phase 2: 5 dies; once its last messages have landed (so no
    // stale heartbeat undoes the notice), 1 is told. 4 is armed to die right after its
    // first Answer, so 1..3 hear "I take over" and then nothing.
    let mut sim = converged_five(11, Mode::Classic);
    sim.arm_crash(4, CrashPoint::AfterSend(MessageKind::Answer));
    sim.crash(5);
    let max_delay = sim.config().delay_ms.1;
    sim.run_until(sim.now() + max_delay);
    sim.peer_down(1, 5);
    // 1 elects at once (5 is known down); 4 answers and dies.
    let bound = sim.now() + sim.config().timing.convergence_bound_in(Mode::Classic);
    let crashed = sim.run_until_or(bound, |sim| !sim.is_up(4));
    assert!(crashed, "4 crashed after answering, by {bound} ms");
    // Phase 3: nobody above 3 is alive. 3 declares (after T, or after T' and a new
    // election if 4's Answer reached it first) and everyone follows 3.
    let epoch = settle_and_check(&mut sim, 3);
    assert_eq!(epoch.leader, 3);
}

#[test]
fn restarted_highest_node_bullies_the_lower_coordinator() {
    let mut sim = converged_five(12, Mode::Classic);
    sim.crash(5);
    sim.peer_down(2, 5);
    let first = settle_and_check(&mut sim, 4);
    // 5 comes back with its old cells: it starts as a candidate, probes, and then
    // takes over with an epoch above 4's.
    sim.start(5);
    let view = sim.view(5).expect("5 is up");
    assert_eq!(view.role, Role::Candidate);
    let second = settle_and_check(&mut sim, 5);
    assert!(second > first, "{second} must be above {first}");
}

#[test]
fn partition_heals_to_one_coordinator() {
    // Minority side {4, 5} keeps 5; majority {1, 2, 3} elects 3. After the heal, 5
    // re-declares above 3's epoch and everyone follows it.
    let mut sim = converged_five(13, Mode::Classic);
    sim.partition(&[vec![1, 2, 3], vec![4, 5]]);
    sim.run_until(sim.now() + 2_000);
    assert_eq!(sim.view(3).map(|v| v.role), Some(Role::Coordinator));
    assert_eq!(sim.view(5).map(|v| v.role), Some(Role::Coordinator));
    let three = sim.view(3).and_then(|v| v.epoch).expect("3 leads");
    sim.heal();
    let five = settle_and_check(&mut sim, 5);
    assert!(five > three, "{five} must be above {three}");
}

#[test]
fn eligible_node_never_settles_under_a_lower_leader() {
    // Regression for the Awaiting fix in src/protocol/machine/. Phase 1: 2 and 3 are unhealthy,
    // so 1 leads and both follow it. Phase 2: 3 restarts healthy; while it is still
    // starting, 2 becomes healthy and asks 3, which answers, then dies right after
    // persisting its declaration (nothing revealed). Phase 3: 2 must not settle under
    // 1's heartbeats; after T' it elects again and, as the highest live node, leads.
    let mut sim = Sim::new(SimConfig {
        delay_ms: (5, 5),
        ..SimConfig::new(1, vec![1, 2, 3], Mode::Classic)
    });
    sim.set_eligible(2, false);
    sim.set_eligible(3, false);
    for id in 1..=3 {
        sim.start(id);
    }
    sim.run_until(1_000);
    assert_eq!(sim.view(2).and_then(|v| v.coordinator()), Some(1));
    sim.crash(3);
    sim.set_eligible(3, true);
    sim.run_until(1_010);
    sim.start(3);
    sim.arm_crash(3, CrashPoint::AfterPersist);
    sim.run_until(1_011);
    sim.set_eligible(2, true);
    sim.run_until(1_200);
    assert!(!sim.is_up(3), "3 died while declaring");
    settle_and_check(&mut sim, 2);
}

/// The first seed (of `tries`) on which a machine with `flaw` breaks `invariant`.
fn first_catch(flaw: Flaw, invariant: Invariant, tries: u64) -> Option<(u64, String)> {
    (0..tries).find_map(|seed| {
        let outcome = run_seed_with(seed, Mode::Quorum, Some(flaw));
        outcome
            .violations
            .iter()
            .find(|v| v.invariant == invariant)
            .map(|v| (seed, v.to_string()))
    })
}

#[test]
fn sabotaged_lease_is_caught_as_an_overlap() {
    // A coordinator that keeps its role after its lease, with followers that ignore
    // their promises: two coordinators at once under a partition or pause (I6).
    let caught = first_catch(Flaw::IgnoreLease, Invariant::NoOverlap, 3_000);
    let (seed, violation) = caught.expect("I6 never flagged a machine that ignores its lease");
    println!("ignored lease caught on seed {seed}: {violation}");
}

#[test]
fn sabotaged_term_check_is_caught_as_two_coordinators_per_term() {
    // Accepting a declaration at a term already accepted lets two declarers of one
    // term both gather a majority (I7). Twin declarations are rare now that a follower
    // no longer skips its restarted leader (`restarted_leader_seeds_keep_terms_unique`):
    // the first seed that catches it is 24 889, so 30 000 are tried.
    let caught = first_catch(Flaw::AcceptEqualTerm, Invariant::OnePerTerm, 30_000);
    let (seed, violation) = caught.expect("I7 never flagged a machine that accepts equal terms");
    println!("equal-term acceptance caught on seed {seed}: {violation}");
}

/// The operator's lost disk, step by step (issue 26): in {1, 2, 3}, node 3 wins term 2
/// with node 1's ack while node 2 is cut off; node 1 then loses its store and comes back
/// at once beside node 2, cut off from 3. Returns the run's violations (I1–I7) after the
/// partition heals.
fn lost_store_beside_the_other_side(flaw: Option<Flaw>) -> (Vec<bully::checker::Violation>, Sim) {
    let mut config = SimConfig::new(5, vec![1, 2, 3], Mode::Quorum);
    config.flaw = flaw;
    let mut sim = Sim::new(config);
    for id in 1..=3 {
        sim.start(id);
    }
    sim.run_until(2_000);
    assert_eq!(
        sim.view(1).and_then(|v| v.coordinator()),
        Some(3),
        "start-up"
    );
    // 2 is cut off; 3 restarts and wins term 2 with 1's ack alone.
    sim.partition(&[vec![1, 3], vec![2]]);
    sim.crash(3);
    sim.start(3);
    let timing = sim.config().timing;
    let by = sim.now() + timing.convergence_bound_in(Mode::Quorum);
    let won = sim.run_until_or(by, |sim| {
        sim.view(3)
            .is_some_and(|v| v.role == Role::Coordinator && v.epoch.is_some_and(|e| e.term >= 2))
    });
    assert!(
        won,
        "3 leads a new term with 1's ack\n{}",
        tail(sim.history(), 60)
    );
    // 1 loses its disk and returns at once, now beside 2 and cut off from 3.
    sim.lose_store(1);
    sim.partition(&[vec![1, 2], vec![3]]);
    sim.start(1);
    sim.run_until(sim.now() + 3_000);
    sim.heal();
    sim.run_until(sim.now() + 3_000);
    let history = sim.history();
    let mut violations = sim.violations().to_vec();
    violations.extend(check_no_overlap(history, lease_bound_ms(&timing)));
    violations.extend(check_one_per_term(history));
    (violations, sim)
}

#[test]
fn lost_store_never_gives_one_term_two_holders() {
    let (violations, mut sim) = lost_store_beside_the_other_side(None);
    assert!(
        violations.is_empty(),
        "{violations:#?}\n{}",
        tail(sim.history(), 200)
    );
    // While cut off from 3, 1 could not hear enough terms to vote: 2 never led.
    assert!(
        !sim.history().iter().any(|e| e.node == 2
            && matches!(
                e.record,
                Record::Fact(bully::protocol::Fact::Established { .. })
            )),
        "2 led with the vote of a store that forgot term 2\n{}",
        tail(sim.history(), 200)
    );
    // After the heal everyone follows 3 again, and 1 recovered its term.
    settle_and_check(&mut sim, 3);
    assert!(sim.history().iter().any(|e| e.node == 1
        && matches!(e.record, Record::Fact(bully::protocol::Fact::Recovered { term }) if term >= 2)));
}

#[test]
fn sabotaged_store_recovery_is_caught_as_two_holders_of_one_term() {
    // Without the recovery rule the empty store votes at once: 2 declares term 2 with
    // its vote while 3 still holds term 2.
    let (violations, sim) = lost_store_beside_the_other_side(Some(Flaw::SkipStoreRecovery));
    assert!(
        violations
            .iter()
            .any(|v| v.invariant == Invariant::OnePerTerm),
        "I7 did not flag two holders of one term: {violations:#?}\n{}",
        tail(sim.history(), 200)
    );
}

/// Terms that more than one node declared in `history`, with the declarers.
fn shared_terms(history: &[bully::history::Entry]) -> BTreeMap<u64, Vec<NodeId>> {
    let mut by_term: BTreeMap<u64, Vec<NodeId>> = BTreeMap::new();
    for (_, node, epoch) in bully::checker::declarations(history) {
        let nodes = by_term.entry(epoch.term).or_default();
        if !nodes.contains(&node) {
            nodes.push(node);
        }
    }
    by_term.retain(|_, nodes| nodes.len() > 1);
    by_term
}

/// Seeds beyond the range CI runs that broke the soft half of I2 (issue 26): a follower
/// skipped its restarted leader as silent although the leader had probed it since its
/// last heartbeat, sent it no Election, and declared the term the leader declared too
/// (classic: nodes 4 and 2, term 5, 4 ms apart; quorum: nodes 34 and 11, term 4). See
/// `suspect_spares_a_live_leader` in tests/protocol_rules.rs. These replays depend on
/// the scenario generator in src/sim/scenario/; the sweep below does not.
#[test]
fn restarted_leader_seeds_keep_terms_unique() {
    for (seed, mode) in [(9_200_061, Mode::Classic), (9_175_459, Mode::Quorum)] {
        let outcome = run_seed(seed, mode);
        assert!(outcome.passed(), "{}", outcome.report());
    }
}

#[test]
fn restarted_leader_never_shares_a_term_with_a_follower() {
    // Quorum, {1, 2, 3} led by 3: 3 crashes at every millisecond of a heartbeat period
    // and restarts 1 to 40 ms later, so its pre-vote (after the restart hold-off, D)
    // and its follower 2's (D after the last heartbeat) cross. With 2 skipping its
    // restarted leader, one of these 500 runs had 2 and 3 both declare term 2.
    for crash_at in 1_000..1_100 {
        for restart_after in [1, 5, 10, 20, 40] {
            let mut sim = Sim::new(SimConfig::new(crash_at, vec![1, 2, 3], Mode::Quorum));
            for id in 1..=3 {
                sim.start(id);
            }
            sim.run_until(crash_at);
            assert_eq!(sim.view(3).and_then(|v| v.coordinator()), Some(3));
            sim.crash(3);
            sim.run_until(crash_at + restart_after);
            sim.start(3);
            sim.run_until(crash_at + 3_000);
            assert_eq!(
                shared_terms(sim.history()),
                BTreeMap::new(),
                "crash at {crash_at} ms, restart {restart_after} ms later\n{}",
                tail(sim.history(), 200)
            );
            assert_eq!(sim.view(3).and_then(|v| v.coordinator()), Some(3));
        }
    }
}

/// One-way links: coordinator 5 of a 5-node quorum cluster goes deaf (a firewall rule
/// drops what comes in; what it sends still arrives) for 4 s. Returns how steady
/// leadership stayed over those 4 s, and the history.
fn deaf_coordinator(flaw: Option<Flaw>) -> (bully::chaos::office::Stability, Sim) {
    let mut config = SimConfig::new(21, (1..=5).collect(), Mode::Quorum);
    config.flaw = flaw;
    let mut sim = Sim::new(config);
    for id in 1..=5 {
        sim.start(id);
    }
    sim.run_until(1_000);
    assert_eq!(
        sim.view(1).and_then(|v| v.coordinator()),
        Some(5),
        "start-up"
    );
    let from = sim.now();
    sim.deafen(5);
    sim.run_until(from + 4_000);
    let timing = sim.config().timing;
    let offices = bully::checker::offices(sim.history(), Some(lease_bound_ms(&timing)));
    let stability = bully::chaos::office::stability(&offices, from, sim.now());
    (stability, sim)
}

#[test]
fn deaf_coordinator_leaves_one_steady_coordinator() {
    // Its lease lapses (no acks reach it) and the others elect 4; 5's pre-votes show
    // no heartbeat of 4's, so 4 never hands over: one change of coordinator.
    let (stability, mut sim) = deaf_coordinator(None);
    eprintln!("deaf coordinator, 4 s: {stability:?}");
    let report = || tail(sim.history(), 120);
    assert!(stability.offices_begun <= 2, "{stability:?}\n{}", report());
    assert!(
        stability.longest_leaderless_ms <= 1_000,
        "{stability:?}\n{}",
        report()
    );
    let history = sim.history();
    let mut violations = check_no_overlap(history, lease_bound_ms(&sim.config().timing));
    violations.extend(check_one_per_term(history));
    assert_eq!(violations, vec![], "{}", report());
    // Heard again, 5 takes over once (Bully order) and everyone follows it.
    sim.heal();
    settle_and_check(&mut sim, 5);
}

#[test]
fn sabotaged_deaf_handover_is_caught_as_flapping() {
    // Without the rule, 4 hands its office to the deaf 5 at every pre-vote.
    let (stability, sim) = deaf_coordinator(Some(Flaw::DeafHandover));
    eprintln!("deaf coordinator, sabotaged, 4 s: {stability:?}");
    assert!(
        stability.offices_begun > 2,
        "the flapping went unnoticed: {stability:?}\n{}",
        tail(sim.history(), 120)
    );
}

/// Seeds the 10⁶-seed runs from offset 40000000 failed on, each with its cause; these
/// replays depend on the scenario generator in src/sim/scenario/.
/// - 40803703 classic: a coordinator that followed a newer claim after a partition
///   healed went silent towards its followers; one suspected it D later, skipped it as
///   silent and declared the term it declared too (`gave_way` in
///   tests/protocol_rules.rs).
/// - 40220982 quorum, nodes with their own heartbeat: node 56 (heartbeat 100) was
///   judged by node 15's 55 ms lease margin, a 3 ms false overlap (the judge now bounds
///   each node's office by its own lease).
/// - 40249918 quorum: a coordinator cut off from its majority at 786 ms and paused at
///   907 ms was judged in office until pause + lease bound (1112 ms), past the promises
///   its successor waited out; its lease had run out at ~986 ms (the simulator now
///   records it, `Record::PausedLease`).
///
/// Three more of the classic million run from 7,000,000 (this round's faults), each the
/// judge's mistake, not the node's (the histories are unchanged):
/// - 7156709: the one voter left was made ineligible; I5 demanded a coordinator nobody
///   could be (`Leader::Nobody` in src/checker/convergence.rs).
/// - 7512363: a store recovering under the seeded list with its third member down waits
///   for that member by the rule; the judge excused it only under a written list.
/// - 7746024: a coordinator crashed while seating a learner; the node that lost the list
///   skipped the learner, which took itself for a voter, and both declared term 3 (the
///   lost list now opens a stale-view window, src/checker/uniqueness.rs).
///
/// And two of the quorum run from 0 after this round's leader-answer work:
/// - 228623, a flaw of the node: a term one survivor of a forced recovery saw alone was
///   declared again by the others (`a_term_one_survivor_saw_alone_is_never_declared_again`).
/// - 845427, the judge's: a lone survivor recovered beside the old majority, and each
///   side declared term 3 before they met; I2's soft check now runs per side, as I6
///   and I7 did (`sides` in src/sim/scenario/judge.rs).
/// - 665150 (classic, the leader-answer run), the judge's: an Election lost under
///   message loss just before the heal; its sender, still in its start-up wait,
///   declared after the heal beside the node that should have answered it. I2's soft
///   check now counts a lost Election or Answer as a disturbance for `T + 3D`
///   (`quiet_window` in src/checker/uniqueness.rs).
#[test]
fn seeds_of_the_million_run_pass() {
    for (seed, mode) in [
        (40_803_703, Mode::Classic),
        (40_220_982, Mode::Quorum),
        (40_249_918, Mode::Quorum),
        (7_156_709, Mode::Classic),
        (7_512_363, Mode::Classic),
        (7_746_024, Mode::Classic),
        (228_623, Mode::Quorum),
        (845_427, Mode::Quorum),
        (665_150, Mode::Classic),
    ] {
        let outcome = run_seed(seed, mode);
        assert!(outcome.passed(), "{}", outcome.report());
        // They replay as found: no file edit was drawn then (src/sim/scenario/file_edits.rs).
        assert!(
            !outcome.flavor.file_edit,
            "seed {seed} now draws a file edit"
        );
    }
    assert!(run_seed(40_220_982, Mode::Quorum).flavor.mixed_timing);
}

#[test]
#[ignore = "seed 735049 no longer reaches the race since the first coordinator confirms its \
            seeded list at once (issue 47); a seed that does is still to be found"]
fn a_coordinator_that_stores_a_newer_list_gives_way() {
    // Classic seed 735049 of the leader-answer million run: 2@4 (cut off with node 29)
    // wrote v0; after the heal node 29 spread it to coordinator 2@3, which had written
    // v1 under 2@3 already. Kept in office (Flaw::KeepsOfficeOverNewerList), 2@3 then
    // confirmed v0@2@4 as v0 under its own epoch and proposed v1 again, with other
    // members: two lists of one identity. On the rule (newer_list,
    // src/protocol/machine/membership.rs) it gives way as for any newer epoch.
    let (seed, mode) = (735_049, Mode::Classic);
    let old = run_seed_with(seed, mode, Some(Flaw::KeepsOfficeOverNewerList));
    let caught = first_violation_of(&old, Invariant::ListIdentity);
    assert!(
        caught.is_some(),
        "the old rule passes seed {seed}:\n{}",
        old.report()
    );
    let new = run_seed_with(seed, mode, None);
    assert!(new.passed(), "{}", new.report());
    // The coordinator of 2@3 (term 2, node 3) itself gives way, after the heal.
    let gave_way = new.history.iter().any(|e| {
        e.node == 3
            && e.at_ms >= 4_000
            && matches!(
                e.record,
                Record::Fact(Fact::Demoted {
                    epoch,
                    reason: DemotionReason::NewerEpoch,
                    ..
                }) if epoch.term == 2 && epoch.leader == 3
            )
    });
    assert!(
        gave_way,
        "seed {seed}: coordinator 2@3 did not give way after the heal"
    );
}

/// Seeds with several membership changes each ([`Changes::Many`], both modes) on which
/// a machine built with `flaw` breaks an invariant the same seed keeps without it: the
/// first such seed of `tries` if any, and in how many runs the flaw changed anything.
fn first_membership_catch(flaw: Flaw, tries: u64) -> (Option<(u64, Mode, String)>, u64) {
    let mut changed = 0;
    for seed in 0..tries {
        for mode in [Mode::Quorum, Mode::Classic] {
            let flawed = run_seed_changing(seed, mode, Some(flaw), Changes::Many);
            let honest = run_seed_changing(seed, mode, None, Changes::Many);
            changed += u64::from(flawed.history != honest.history);
            let new = flawed
                .violations
                .iter()
                .find(|v| !honest.violations.iter().any(|h| h.invariant == v.invariant));
            if let Some(v) = new {
                return (Some((seed, mode, v.to_string())), changed);
            }
        }
    }
    (None, changed)
}

/// A coordinator that starts its next membership change once a majority of the list
/// before the last one stored it (`Flaw::OldMajorityOnly`). Not caught: in 20 000 seeds
/// per mode with six to ten changes each, the flaw changed about a quarter of the runs
/// and broke nothing. Each change moves one member in or out of the voters, so any
/// majority of the list before it meets any majority after it (src/protocol/
/// membership.rs, `Change`): a list stored by a majority of the old voters is already
/// held by someone in every majority of the new ones, who refuses a candidate with an
/// older list (`up_to_date`, src/protocol/machine/membership.rs). Ignored until a
/// scenario shows the second majority matters; `SIM_SEEDS` sets how many seeds to try.
#[test]
#[ignore = "OldMajorityOnly is not caught (see the comment)"]
fn sabotaged_membership_commit_is_caught() {
    let tries = env_u64("SIM_SEEDS").unwrap_or(2_000);
    let (caught, changed) = first_membership_catch(Flaw::OldMajorityOnly, tries);
    println!("OldMajorityOnly changed {changed} of {} runs", 2 * tries);
    let (seed, mode, violation) = caught.expect("no seed caught OldMajorityOnly");
    println!("OldMajorityOnly caught on {mode} seed {seed}: {violation}");
}

/// Runs the simulator once found broken under membership changes, each with what it
/// showed and what mended it; they must now pass with no known gap.
/// - classic 60: removed while down, node 60 restarted with its old list and led a
///   cluster of one: a member now sends its list to a node outside it that shows an
///   older one (`tell_stranger`, src/protocol/machine/membership.rs).
/// - classic 1298, quorum 1298, classic 897: a node on an empty store counted term
///   reports against the list it started with (stuck forever after a removal, or with a
///   learner counted as a voter): recovery now counts the voters of the list it holds
///   (`Recovery::relist`, src/protocol/recovery.rs).
/// - quorum 4883 (many changes): the same count the other way let node 2 recover on one
///   report where two were needed and vote into a term it had held (I7). Now it waits
///   for both other voters; one of them is down for good at the end, so no leader is
///   owed and the judge counts no gap (src/sim/scenario/judge.rs, `reporters_down`).
/// - classic 1600 (many changes): a lost `Members` message left a learner unpromoted;
///   classic followers now ack while they are learners or hold another list, so the
///   coordinator sends it again.
#[test]
fn membership_runs_the_simulator_found_broken_now_hold() {
    for (seed, mode, changes) in [
        (60, Mode::Classic, Changes::Some),
        (897, Mode::Classic, Changes::Some),
        (1_298, Mode::Classic, Changes::Some),
        (1_298, Mode::Quorum, Changes::Some),
        (4_883, Mode::Quorum, Changes::Many),
        (1_600, Mode::Classic, Changes::Many),
    ] {
        let outcome = run_seed_changing(seed, mode, None, changes);
        assert!(
            outcome.passed() && outcome.known_gaps.is_empty(),
            "{mode}, {changes:?} changes:\n{}",
            outcome.report()
        );
    }
}

/// The first violation of `invariant` in `outcome`, in words.
fn first_violation_of(outcome: &SeedRun, invariant: Invariant) -> Option<String> {
    let mut found = outcome
        .violations
        .iter()
        .filter(|v| v.invariant == invariant);
    found.next().map(ToString::to_string)
}

/// A sabotage the simulator must catch, and its fix: of the seeds `0..tries` drawn as
/// `operator`, those on which a machine with `flaw` shows `broken` (its words); at least
/// `at_least` of them, each passing without the flaw and showing `fixed` there.
fn caught_then_fixed(
    what: &str,
    operator: Operator,
    flaw: Flaw,
    (tries, at_least): (u64, usize),
    broken: impl Fn(&SeedRun) -> Option<String>,
    fixed: impl Fn(&SeedRun) -> bool,
) {
    let run = |seed: u64, flaw: Option<Flaw>| {
        run_seed_drawing(seed, Mode::Quorum, flaw, Changes::Some, operator)
    };
    let caught: Vec<(u64, String)> = (0..tries)
        .filter_map(|seed| broken(&run(seed, Some(flaw))).map(|v| (seed, v)))
        .collect();
    assert!(
        caught.len() >= at_least,
        "{what}: caught on {} of {tries} seeds only",
        caught.len()
    );
    println!(
        "{what}: caught on {} of {tries} seeds, first {}: {}",
        caught.len(),
        caught[0].0,
        caught[0].1
    );
    for (seed, _) in caught {
        let outcome = run(seed, None);
        assert!(outcome.passed(), "{}", outcome.report());
        assert!(
            fixed(&outcome),
            "{what}: seed {seed} does not show the fix at work"
        );
    }
}

#[test]
fn a_timing_change_under_faults_keeps_every_invariant() {
    // Issue 38's first break was a rolling restart to a shorter D. The timing is cluster
    // state since issue 47: the roll's file edits count for nothing, and the change goes
    // through `bully config set` (src/sim/scenario/operator.rs). Every seed of this range
    // draws both, under the other faults. The old hold-off rule (Flaw::HoldoffByNewD) is
    // no longer reached by these seeds (a restart must now fall inside the old D's
    // earned lease after an online change); tests/settings_rules.rs catches it on the
    // machine (`live_by_and_larger_d_across`) and tests/rolling_d_sabotage.rs on real
    // processes.
    for seed in 0..200 {
        let outcome = run_seed_drawing(seed, Mode::Quorum, None, Changes::Some, Operator::Always);
        assert!(outcome.passed(), "{}", outcome.report());
    }
}

#[test]
fn a_follower_suspects_its_coordinator_no_sooner_than_the_coordinators_d() {
    // Found by this session's 10⁶-seed classic run (issue 47): a node that lost its
    // store restarted from a file edited to D = 2400 with a slower heartbeat and led
    // the others, which still lived by the seeded D = 300 (no `bully config set` had
    // committed): heartbeats 200 ms apart against a 300 ms suspicion, and the
    // followers flapped past I5. Every declaration and heartbeat now says the D its
    // sender leads under, and a follower suspects no sooner (`Machine::suspect_span`).
    // The old rule (Flaw::SuspectByOwnD) must fail these seeds on I5; they pass on the
    // new one.
    for seed in [72_779, 366_054, 529_955, 535_231, 687_641] {
        fails_i5_on_the_old_rule_only(seed, Mode::Classic, Flaw::SuspectByOwnD);
    }
}

/// Seed `seed` in `mode` fails I5 on a machine with `flaw` (the rule before a liveness
/// fix) and passes on the machine as it is.
fn fails_i5_on_the_old_rule_only(seed: u64, mode: Mode, flaw: Flaw) {
    let old = run_seed_with(seed, mode, Some(flaw));
    let caught = first_violation_of(&old, Invariant::Convergence);
    assert!(caught.is_some(), "the old rule passes {mode} seed {seed}");
    let new = run_seed(seed, mode);
    assert!(new.passed(), "{}", new.report());
}

#[test]
fn a_higher_follower_takes_over_when_a_lower_node_bullies_its_coordinator() {
    // Found by this session's 10⁶-seed quorum run (issue 47): the operator set
    // `preempt=always` online while node 5, the highest, followed coordinator 3; node 4
    // restarted into the bully rule, asked node 5 (answered: it is alive and higher),
    // and waited for it to take over, which a follower never did ("answer, don't run"),
    // so node 4 elected forever past I5. A follower above its coordinator that
    // preempts now takes over (`on_election`). The old rule
    // (Flaw::WaitsOverLowerLeader) must fail the seed on I5; it passes on the new one.
    fails_i5_on_the_old_rule_only(843_935, Mode::Quorum, Flaw::WaitsOverLowerLeader);
}

#[test]
#[ignore = "seed 53110 no longer reaches the break since the roll's file edits stopped \
            splitting the cluster by D (issue 47); a seed that does is still to be found"]
fn two_stores_lost_in_a_row_no_longer_vouch_for_each_other() {
    // Issue 38: a second store lost while the first node still recovered. The two
    // recovering nodes answered each other's term queries with their own (forgotten)
    // terms and counted them, and a term both had acked was declared again. Seed 53110
    // of the SIM_OPERATOR=two-lost range shows it on the old rule (Flaw::
    // EmptyStoreVouches) and passes on the new one (src/protocol/recovery.rs, rules 4
    // and 5). Found by searching 48,000 seeds of that range; 3 others still reuse a
    // term on the new rule, when every member that remembered it was lost or down and
    // the recovering nodes took the cluster for a fresh one
    // (docs/design.md#store-recovery: a limit, seed 43484).
    let seed = 53110;
    let old = run_seed_drawing(
        seed,
        Mode::Quorum,
        Some(Flaw::EmptyStoreVouches),
        Changes::Some,
        Operator::TwoLost,
    );
    let caught = old
        .violations
        .iter()
        .find(|v| v.invariant == Invariant::OnePerTerm);
    assert!(
        caught.is_some(),
        "the old rule went unnoticed on seed {seed}"
    );
    println!("old report rule caught on seed {seed}: {}", caught.unwrap());
    let new = run_seed_drawing(seed, Mode::Quorum, None, Changes::Some, Operator::TwoLost);
    assert!(new.passed(), "{}", new.report());
}

#[test]
fn a_forced_recovery_meeting_the_old_majority_leaves_one_side_leading() {
    // Issue 38: `bully recover --force` on a minority while the rest, a majority of the
    // old list, still ran (cut off, then healed, or in plain reach). Both sides led for
    // as long as they ran: the survivors refused the old side as strangers and nothing
    // acted on it. The old rule (Flaw::IgnoresGivenUp) must be caught as a given-up
    // node leading after it met a survivor; the same seeds pass on the new rule (the
    // survivors refuse it as given up, and it stands down for good:
    // src/protocol/machine/given_up.rs).
    caught_then_fixed(
        "the old rule (both sides lead)",
        Operator::Forced,
        Flaw::IgnoresGivenUp,
        (200, 5),
        |o| {
            let v = o.violations.iter();
            let mut v = v.filter(|v| v.explanation.contains("given up by the forced recovery"));
            v.next().map(ToString::to_string)
        },
        |o| {
            o.history
                .iter()
                .any(|e| matches!(e.record, Record::Fact(Fact::GivenUp { .. })))
        },
    );
}

#[test]
fn a_term_one_survivor_saw_alone_is_never_declared_again() {
    // Seed 228623 of the leader-answer run: node 7 declared 2@7, acked only by members
    // the forced recovery of {6, 7, 8} then left out; 6 and 8 never saw term 2, so each
    // stamped its list at 2 and node 8 declared 2@8 while 7 was cut off. The old rule
    // (Flaw::SurvivorsTrustOwnTerms: a survivor votes and leads on its own terms) must
    // be caught as two coordinators of one term; the same seeds pass on the new one
    // (each survivor waits for every other's term first, src/protocol/recovery.rs).
    caught_then_fixed(
        "a survivor on its own terms",
        Operator::Forced,
        Flaw::SurvivorsTrustOwnTerms,
        (SURVIVOR_TRIES, 3),
        |o| {
            let mut v = o.violations.iter();
            v.find(|v| v.invariant == Invariant::OnePerTerm)
                .map(ToString::to_string)
        },
        |o| {
            o.history
                .iter()
                .any(|e| matches!(e.record, Record::Fact(Fact::Recovered { .. })))
        },
    );
}

const SURVIVOR_TRIES: u64 = 3000;

#[test]
fn a_mode_edited_in_files_under_a_cut_never_counts() {
    // Issue 47's second break, on real processes: {1, 2} cut off and restarted with
    // `mode = "classic"` led beside the quorum side's coordinator for 8.6 s. The
    // simulator's operator does the same to a minority (src/sim/scenario/file_edits.rs).
    // The old rule (Flaw::FileModeCounts: each start runs its file's mode) must be
    // caught as two coordinators; on the same seeds the start is refused (exit 2) and
    // nothing else changes.
    caught_then_fixed(
        "a mode taken from edited files",
        Operator::Some,
        Flaw::FileModeCounts,
        (FILE_EDIT_TRIES, 3),
        |o| two_coordinators_after(o, "file naming mode"),
        |o| said(o, "refused, exit 2"),
    );
}

/// The first I6 or I7 violation of a seed whose steps say `words` (a file edit).
fn two_coordinators_after(o: &SeedRun, words: &str) -> Option<String> {
    let mut v = o.violations.iter();
    let two = v.find(|v| matches!(v.invariant, Invariant::NoOverlap | Invariant::OnePerTerm));
    two.filter(|_| said(o, words)).map(ToString::to_string)
}

/// Whether the seed's steps say `words`.
fn said(o: &SeedRun, words: &str) -> bool {
    o.steps.iter().any(|s| s.contains(words))
}

/// Seeds of the default range tried for file edits: one in ten draws one (those that
/// lose or roll back no store, src/sim/scenario/file_edits.rs).
const FILE_EDIT_TRIES: u64 = 3000;

#[test]
fn a_member_list_edited_in_files_under_a_cut_never_counts() {
    // Issue 47's first break, on real processes: {1, 2} cut off from {3, 4, 5} and
    // restarted with files naming only each other counted a majority of two and led
    // beside node 5. The simulator's operator now does the same to a minority of any
    // cluster (src/sim/scenario/file_edits.rs). The old rule (Flaw::FileListCounts: a
    // start takes the file's list until a membership change) must be caught as two
    // coordinators; the same seeds pass with the list stored at the first start.
    let edited = |o: &SeedRun| said(o, "file naming only");
    caught_then_fixed(
        "a member list taken from edited files",
        Operator::Some,
        Flaw::FileListCounts,
        (FILE_EDIT_TRIES, 3),
        |o| two_coordinators_after(o, "file naming only"),
        edited,
    );
}

#[test]
fn a_store_rolled_back_while_down_is_refused_not_used() {
    // Issue 38's third break: a node killed, its store handed back older, started on the
    // older term and voted again in terms it had voted in. The store check refuses such a
    // store (src/storage/check.rs), and the operator wipes it; the simulator's rule before
    // the check (Flaw::TrustsDamagedStore) must be caught, and the same seeds pass with it.
    caught_then_fixed(
        "a store used after it went back",
        Operator::Always,
        Flaw::TrustsDamagedStore,
        (300, 5),
        |o| {
            let v = o.violations.first().filter(|_| said(o, "used as current"));
            v.map(ToString::to_string)
        },
        |o| said(o, "refused (exit 2), wiped"),
    );
}
