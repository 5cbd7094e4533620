//! `bully chaos` end to end, as a user runs it: short chaos runs on fixed seeds must
//! pass, and deliberately broken builds (the debug-only `BULLY_TEST_FAULT` switches in
//! `src/sabotage.rs`) must be caught by the checker, so a pass means something.
//! Every run is the real binary on 127.0.0.1; its nodes die with it (the runner's
//! cluster kills them by PID on drop) and the whole command is bounded by a timeout.

mod common;

use bully::chaos::plan::{plan, Availability, FaultKind, PlanSpec};
use bully::chaos::report::picture::step_node;
use bully::protocol::{Mode, Timing};
use serde_json::Value;
use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A chaos run's output: exit code, report (JSON) and the human text.
struct ChaosRun {
    code: Option<i32>,
    report: Option<Value>,
    text: String,
}

/// Runs `bully chaos <args> --json <tmp>` with extra environment, killing it after
/// `limit`.
/// One chaos run at a time: four 5-node clusters at once on a 2-core CI machine starve
/// the nodes of CPU (fast timing suspects after 100 ms), which tests the machine, not
/// the protocol.
static ONE_RUN_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn chaos(args: &[&str], env: &[(&str, &str)], limit: Duration) -> ChaosRun {
    let _turn = ONE_RUN_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("report.json");
    let mut command = Command::new(common::binary());
    command
        .arg("chaos")
        .args(args)
        .arg("--dir")
        .arg(dir.path().join("run"))
        .arg("--json")
        .arg(&json)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = command.spawn().expect("run bully chaos");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for bully chaos") {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("bully chaos {args:?} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let output = child.wait_with_output().expect("collect output");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let report = std::fs::read_to_string(&json)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    ChaosRun {
        code: status.code(),
        report,
        text,
    }
}

/// The CI chaos run: 5 nodes, 18 s, fast timing, every fault kind, generous slack.
const NODES: u64 = 5;
const DURATION_MS: u64 = 18_000;
const SLACK_MS: u64 = 1_500;

fn spec(seed: u64, mode: Mode) -> PlanSpec {
    with_faults(seed, mode, &FaultKind::IN_ALL)
}

/// The CI chaos run's spec with these fault kinds.
fn with_faults(seed: u64, mode: Mode, faults: &[FaultKind]) -> PlanSpec {
    PlanSpec {
        nodes: NODES,
        duration_ms: DURATION_MS,
        faults: faults.to_vec(),
        timing: Timing::fast(),
        mode,
        slack_ms: SLACK_MS,
        seed,
    }
}

/// Runs a seeded chaos run in `mode` with every fault kind that must pass; returns its
/// JSON report.
fn passing_run(seed: u64, mode: Mode) -> Value {
    // The seed is fixed; check it really exercises every fault kind and the leader.
    let steps = plan(&spec(seed, mode));
    let kinds: BTreeSet<FaultKind> = steps.iter().filter_map(|p| p.step.fault()).collect();
    assert_eq!(
        kinds.len(),
        FaultKind::IN_ALL.len(),
        "seed {seed} plans only {kinds:?} in {mode} mode"
    );
    let report = passing_run_of(seed, mode, &FaultKind::IN_ALL);
    assert!(
        // The seed's schedule leaves three quiet stretches longer than the I5 bound plus
        // the slack; a busy CI machine may stretch a fault's steps into one of them.
        report["i5_windows_checked"].as_u64().unwrap_or(0) >= 2,
        "too few I5 windows judged:\n{report:#}"
    );
    report
}

/// Runs a seeded chaos run in `mode` with these fault kinds that must pass; returns
/// its JSON report.
fn passing_run_of(seed: u64, mode: Mode, faults: &[FaultKind]) -> Value {
    let steps = plan(&with_faults(seed, mode, faults));
    let seed_arg = seed.to_string();
    let faults_arg: Vec<&str> = faults.iter().map(|f| f.name()).collect();
    let faults_arg = faults_arg.join(",");
    let duration = format!("{DURATION_MS}ms");
    let slack = format!("{SLACK_MS}ms");
    let mode_arg = mode.to_string();
    let args = [
        "--nodes",
        "5",
        "--duration",
        &duration,
        "--seed",
        &seed_arg,
        "--timing",
        "fast",
        "--slack",
        &slack,
        "--mode",
        &mode_arg,
        "--faults",
        &faults_arg,
    ];
    let out = chaos(&args, &[], Duration::from_secs(120));
    let report = out
        .report
        .unwrap_or_else(|| panic!("no JSON report; output:\n{}", out.text));
    assert_eq!(out.code, Some(0), "chaos seed {seed} failed:\n{}", out.text);
    assert_eq!(report["verdict"], "pass");
    assert_eq!(report["params"]["mode"], mode_arg.as_str());
    assert_eq!(report["violations"].as_array().map(Vec::len), Some(0));
    assert_eq!(report["steps"].as_array().map(Vec::len), Some(steps.len()));
    assert!(report["elections"].as_u64().unwrap_or(0) >= 2);
    for figure in ["two_coordinators_ms", "majority_side_leaderless_ms"] {
        assert!(report[figure].is_u64(), "no {figure} in the report");
    }
    assert!(
        out.text.contains("two coordinators") && out.text.contains("majority side"),
        "the rendered report lacks the office figures:\n{}",
        out.text
    );
    report
}

#[test]
fn classic_chaos_seed_3_has_no_violation() {
    passing_run(3, Mode::Classic);
}

#[test]
fn classic_chaos_seed_18_has_no_violation() {
    passing_run(18, Mode::Classic);
}

/// Quorum mode judges I6 and I7 too (a pass means no overlap was found); the report's
/// own figure must agree, and a partition of the coordinator must have cost the
/// majority side some time without one (the failover), which the figure shows.
#[test]
fn quorum_chaos_has_no_violation_and_never_two_coordinators() {
    let steps = plan(&spec(QUORUM_SEED, Mode::Quorum));
    let cut_leader = steps
        .iter()
        .any(|p| p.step == bully::chaos::plan::Step::Partition(vec![NODES]));
    assert!(cut_leader, "seed {QUORUM_SEED} never cuts node {NODES} off");
    let report = passing_run(QUORUM_SEED, Mode::Quorum);
    assert_eq!(report["two_coordinators_ms"], 0, "{report:#}");
    assert!(
        report["majority_side_leaderless_ms"].as_u64().unwrap_or(0) > 0,
        "cutting the coordinator off cost the majority side nothing? {report:#}"
    );
}

/// Member changes among the faults (src/chaos/plan.rs): the first seed whose 18 s plan
/// has four fault kinds or more and adds, removes and replaces a member, one of them while a
/// node is down or cut off, must pass in quorum mode (an added node's links go through
/// the relay's doors).
#[test]
fn quorum_chaos_with_member_changes_has_no_violation() {
    let faults = [FaultKind::IN_ALL.as_slice(), &[FaultKind::Membership]].concat();
    let exercises = |seed: u64| {
        let mut model = Availability::default();
        let (mut names, mut kinds, mut during_faults) = (BTreeSet::new(), BTreeSet::new(), false);
        for p in plan(&with_faults(seed, Mode::Quorum, &faults)) {
            kinds.extend(p.step.fault());
            if p.step.fault() == Some(FaultKind::Membership) {
                names.insert(p.step.name());
                during_faults |= model.unavailable() > 0;
            }
            model.apply(&p.step);
        }
        names.len() == 3 && kinds.len() >= 4 && during_faults
    };
    first_quorum_run_that("exercises them all", &faults, exercises);
}

/// Runs the first seed (below 5000) whose quorum-mode plan with `faults` satisfies
/// `wanted` on real processes: it must pass, with no time with two coordinators.
/// Returns its report.
fn first_quorum_run_that(what: &str, faults: &[FaultKind], wanted: impl Fn(u64) -> bool) -> Value {
    let seed = (1..5000)
        .find(|&s| wanted(s))
        .unwrap_or_else(|| panic!("no seed {what}"));
    eprintln!("chaos seed {seed}: {what}");
    let report = passing_run_of(seed, Mode::Quorum, faults);
    assert_eq!(report["two_coordinators_ms"], 0, "{report:#}");
    report
}

/// The operator's faults on real processes (issue 38): the first seed whose 18 s plan
/// damages a store twice, once the coordinator's, with slow `on_demoted` hooks on every
/// node, must pass in quorum mode, and every damaged store must have been refused
/// (exit 2) rather than used.
#[test]
fn quorum_chaos_with_damaged_stores_and_slow_hooks_has_no_violation() {
    let faults = [
        FaultKind::Kill,
        FaultKind::Restart,
        FaultKind::Store,
        FaultKind::SlowHooks,
    ];
    let damages = |seed: u64| {
        let mut model = Availability::default();
        let (mut count, mut leader_hit) = (0, false);
        for p in plan(&with_faults(seed, Mode::Quorum, &faults)) {
            if let bully::chaos::plan::Step::Damage(n) = p.step {
                count += 1;
                leader_hit |= model.expected_leader(NODES, Mode::Quorum) == Some(n);
            }
            model.apply(&p.step);
        }
        count >= 2 && leader_hit
    };
    let report = first_quorum_run_that("damages two stores", &faults, damages);
    let damaged = report["faults"]["damage"].as_u64().unwrap_or(0);
    assert!(damaged >= 2, "{report:#}");
    assert_eq!(
        report["faults"]["damage refused"].as_u64(),
        Some(damaged),
        "a damaged store was not refused: {report:#}"
    );
}

/// The faults of the rolling-timing runs: kills and cuts fall between a roll's steps.
const ROLL_FAULTS: [FaultKind; 3] = [FaultKind::Kill, FaultKind::Partition, FaultKind::Config];

/// How long the rolling-timing runs last: a roll's steps are spaced for D = 1000 ms.
const ROLL_DURATION_MS: u64 = 40_000;

/// Whether the seed's quorum plan (with [`ROLL_FAULTS`], [`ROLL_DURATION_MS`]) is issue
/// 38's first break: the coordinator, on the long D, is cut off with a minority, and
/// within half that D a member on the other side is restarted onto the short D and
/// gives the short D its majority (later, the coordinator's lease has nearly run out
/// and even the old hold-off keeps the offices apart), and no step touches the
/// coordinator for a long D after (a restart would end its office first). That
/// member's last promise to the coordinator was made under the long D; the
/// coordinator, not hearing its refused hello, leads on.
fn cuts_the_coordinator_off_as_the_majority_rolls(seed: u64) -> bool {
    use bully::chaos::plan::{rolled_timing, Step};
    let spec = PlanSpec {
        duration_ms: ROLL_DURATION_MS,
        ..with_faults(seed, Mode::Quorum, &ROLL_FAULTS)
    };
    let long_d = rolled_timing(&spec.timing).suspect_after_ms;
    let steps = plan(&spec);
    let mut model = Availability::default();
    // The coordinator cut off on the long D, its side and when.
    let mut cut: Option<(bully::protocol::NodeId, Vec<bully::protocol::NodeId>, u64)> = None;
    let on_long_d = |model: &Availability| {
        (model.members(NODES).into_iter())
            .filter(|&m| model.is_rolled(m))
            .count()
    };
    for (i, p) in steps.iter().enumerate() {
        match &p.step {
            Step::Partition(side) => {
                let leader = model.expected_leader(NODES, Mode::Quorum);
                cut = leader
                    .filter(|&l| side.contains(&l) && model.is_rolled(l))
                    .map(|l| (l, side.clone(), p.at_ms));
            }
            Step::Heal => cut = None,
            Step::Reconfigure(n) => {
                if let Some((leader, side, at)) = &cut {
                    let mut after = model.clone();
                    after.apply(&p.step);
                    let flips = 2 * on_long_d(&model) > NODES as usize
                        && 2 * on_long_d(&after) < NODES as usize;
                    // The old coordinator must lead on, not be stopped, meanwhile.
                    let left_alone = steps[i + 1..]
                        .iter()
                        .take_while(|q| q.at_ms < p.at_ms + long_d)
                        .all(|q| step_node(&q.step) != Some(*leader));
                    if flips && !side.contains(n) && p.at_ms < at + long_d / 2 && left_alone {
                        return true;
                    }
                }
            }
            _ => {}
        }
        model.apply(&p.step);
    }
    false
}

/// The args of a 5-node quorum run of `seed` with [`ROLL_FAULTS`] for
/// [`ROLL_DURATION_MS`], fast timing.
fn rolling_run_args(seed: u64) -> Vec<String> {
    let faults: Vec<&str> = ROLL_FAULTS.iter().map(|f| f.name()).collect();
    [
        "--nodes",
        "5",
        "--duration",
        &format!("{ROLL_DURATION_MS}ms"),
        "--seed",
        &seed.to_string(),
        "--timing",
        "fast",
        "--slack",
        &format!("{SLACK_MS}ms"),
        "--mode",
        "quorum",
        "--faults",
        &faults.join(","),
    ]
    .map(String::from)
    .to_vec()
}

/// The first seed below 5000 that [`cuts_the_coordinator_off_as_the_majority_rolls`].
fn rolling_seed() -> u64 {
    let seed = (1..5000)
        .find(|&s| cuts_the_coordinator_off_as_the_majority_rolls(s))
        .expect("a seed that cuts the coordinator off as the majority rolls");
    eprintln!("chaos seed {seed}: cuts the coordinator off as the majority rolls");
    seed
}

/// A rolling change of timing on real processes (issue 38's first break): the first
/// seed that cuts the coordinator off as the majority rolls to the other D (10 D up,
/// then down) must pass in quorum mode with no time with two coordinators.
#[test]
fn quorum_chaos_with_a_rolling_timing_change_has_no_violation() {
    let seed = rolling_seed();
    let args = rolling_run_args(seed);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = chaos(&args, &[], Duration::from_secs(180));
    let report = out
        .report
        .unwrap_or_else(|| panic!("seed {seed}: no report\n{}", out.text));
    assert_eq!(out.code, Some(0), "seed {seed}:\n{}", out.text);
    assert_eq!(report["two_coordinators_ms"], 0, "{report:#}");
    assert!(
        report["faults"]["reconfigure"].as_u64().unwrap_or(0) >= NODES,
        "{report:#}"
    );
}

/// The same run on a node built with the old hold-off (`holdoff_by_new_d`, see
/// src/sabotage.rs): the checker must catch it as overlapping offices.
#[cfg(debug_assertions)]
#[test]
#[ignore = "since the timing is cluster state (issue 47) the roll's restarts no longer \
            change D, and its config set lowers D online, where the old hold-off matters \
            only inside the old D's earned lease: caught by tests/settings_rules.rs and \
            tests/rolling_d_sabotage.rs, not yet by this seed"]
fn sabotaged_rolling_hold_off_is_caught_by_a_config_chaos_run() {
    let seed = rolling_seed();
    let args = rolling_run_args(seed);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = chaos(
        &args,
        &[(bully::sabotage::ENV, "holdoff_by_new_d")],
        Duration::from_secs(180),
    );
    assert_eq!(
        out.code,
        Some(1),
        "seed {seed}: sabotage not caught:\n{}",
        out.text
    );
    assert!(
        broken_invariants(&out).contains("I6 no overlap"),
        "seed {seed}:\n{}",
        out.text
    );
}

/// A seed whose quorum-mode plan has every fault kind and cuts the coordinator (node 5)
/// off alone.
const QUORUM_SEED: u64 = 852;

/// A 3-node classic chaos run (seed 7, fast timing) of a node built with `sabotage`,
/// which the checker must catch (exit 1).
#[cfg(debug_assertions)]
fn sabotaged_run(sabotage: &str, duration: &str, faults: &str) -> ChaosRun {
    let args = [
        "--nodes",
        "3",
        "--duration",
        duration,
        "--seed",
        "7",
        "--faults",
        faults,
        "--timing",
        "fast",
        "--mode",
        "classic",
    ];
    let out = chaos(
        &args,
        &[(bully::sabotage::ENV, sabotage)],
        Duration::from_secs(90),
    );
    assert_eq!(out.code, Some(1), "sabotage not caught:\n{}", out.text);
    out
}

/// The invariants a sabotaged run broke, from its JSON report.
#[cfg(debug_assertions)]
fn broken_invariants(out: &ChaosRun) -> BTreeSet<String> {
    out.report
        .as_ref()
        .and_then(|r| r["violations"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|v| v["invariant"].as_str().map(str::to_string))
        .collect()
}

/// Without the flush, a kill -9 rolls the cells back: the restarted node persists an
/// older epoch and term than it had revealed (I1, I2; the cause is an I3 break).
#[cfg(debug_assertions)]
#[test]
fn a_build_that_skips_the_flush_is_caught() {
    let out = sabotaged_run("skip_flush", "6s", "restart");
    let broken = broken_invariants(&out);
    assert!(broken.contains("I1 fencing"), "{broken:?}\n{}", out.text);
    let report = out.report.expect("a report");
    let history = report["violations"][0]["history"]
        .as_array()
        .expect("history");
    assert!(
        history
            .iter()
            .any(|l| l.as_str().is_some_and(|l| l.contains("CRASHED"))),
        "the excerpt shows the kill: {history:?}"
    );
}

/// Lower nodes that ignore a higher coordinator never converge (I5).
#[cfg(debug_assertions)]
#[test]
fn a_build_that_ignores_higher_coordinators_is_caught() {
    let out = sabotaged_run("ignore_higher_coordinator", "5s", "pause");
    let broken = broken_invariants(&out);
    assert!(
        broken.contains("I5 convergence"),
        "{broken:?}\n{}",
        out.text
    );
}

#[test]
fn bad_arguments_exit_2() {
    for args in [
        &["--nodes", "2", "--duration", "5s"][..],
        &["--faults", "flood"][..],
        &["--duration", "1s"][..],
        &["--runs", "3"][..],
        &["--mode", "raft"][..],
        &["--bench", "failover", "--nodes", "2"][..],
    ] {
        let out = chaos(args, &[], Duration::from_secs(30));
        assert_eq!(out.code, Some(2), "{args:?}:\n{}", out.text);
        assert!(out.report.is_none(), "{args:?} wrote a report");
    }
}
