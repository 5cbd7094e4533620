//! `bully run` on real processes (see `tests/common/keepers.rs`): 3 nodes, a keeper and
//! a singleton job on each, and 32 faults on the coordinator (65 with `--ignored`):
//! kill -9, SIGSTOP of the node only (10; 20), SIGSTOP of the node and its job, the
//! coordinator cut off alone, a clean stop, a step-down. From the jobs' files: no two jobs ever ran at once and
//! tokens rose; after each fault a job ran again; a stalled node's job was dead before
//! the next one started (the margin is printed). The nodes' event logs are checked
//! against I1, I2, I6 and I7.

mod common;
#[path = "common/keepers.rs"]
mod keepers;

use bully::protocol::Timing;
use keepers::{scenario, summary, violations, Fault};
use std::time::Duration;

/// A round of faults: each kind once, and the node-only SIGSTOP twice.
const ROUND: [Fault; 6] = [
    Fault::PauseNode,
    Fault::Kill,
    Fault::PauseNodeAndJob,
    Fault::Partition,
    Fault::PauseNode,
    Fault::CleanStop,
];

/// Five rounds, a step-down after every other one (a handover waits for the keeper's
/// release): 32 faults, 10 of them a node-only SIGSTOP; about half a minute on 2 cores.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_two_jobs_ever_run_at_once_across_thirty_two_faults() {
    no_two_jobs_at_once(5).await;
}

/// The same rounds ten times: 65 faults, 20 of them a node-only SIGSTOP (the figures in
/// docs/bully-run.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "about 100 s; the same rounds as the 32-fault test, twice as many; run with --ignored"]
async fn no_two_jobs_ever_run_at_once_across_sixty_five_faults() {
    no_two_jobs_at_once(10).await;
}

/// `rounds` rounds of [`ROUND`], a step-down after every other one: no two jobs ever
/// ran at once, a job ran again after each fault, a stalled node's job died first.
async fn no_two_jobs_at_once(rounds: usize) {
    let dir = tempfile::Builder::new()
        .prefix("bully-run-")
        .tempdir()
        .expect("temp dir");
    let mut faults: Vec<Fault> = Vec::new();
    for round in 0..rounds {
        faults.extend(ROUND);
        if round % 2 == 1 {
            faults.push(Fault::StepDown);
        }
    }
    let seen = scenario(dir.path(), &faults, Duration::ZERO, Timing::default()).await;

    let t = &seen.timing;
    let bound_ms = (t.suspect_after_ms + 2 * t.answer_timeout_ms + 1000) as f64;
    eprintln!("    {} job runs, {} faults", seen.runs.len(), faults.len());
    summary("fault to the next job's start", &seen.gaps_ms);
    let over = seen.gaps_ms.iter().filter(|&&g| g > bound_ms).count();
    eprintln!("    over D + 2T + 1 s ({bound_ms} ms): {over}");
    summary(
        "node SIGSTOPped: its job's last sign of life to the next job's start",
        &seen.stall_margins_ms,
    );

    let found = violations(&seen.runs);
    assert!(found.is_empty(), "{found:#?}\n{}", seen.keeper_logs);
    assert_eq!(seen.stall_margins_ms.len(), 2 * rounds);
    assert!(
        seen.stall_margins_ms.iter().all(|&m| m > 0.0),
        "a stalled node's job outlived the next start: {:?}",
        seen.stall_margins_ms
    );
    assert_eq!(
        seen.gaps_ms.len(),
        faults.len(),
        "a job ran again after every fault"
    );

    let history = &seen.history;
    let mut broken = bully::checker::check_safety(history);
    let lease = bully::checker::lease_bound_ms(t);
    broken.extend(bully::checker::check_no_overlap(history, lease));
    broken.extend(bully::checker::check_one_per_term(history));
    assert!(broken.is_empty(), "{broken:#?}");
}
