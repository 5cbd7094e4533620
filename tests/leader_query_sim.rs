//! `bully leader` through any member, as the simulator and the model checker ask it
//! (docs/design.md#asking-who-leads): every node is asked every 10 virtual ms, and every
//! answer naming X at time t must lie within X's office (`Invariant::LeaderAnswer`). The
//! sabotage `Flaw::FollowerWindow` (a follower answers from its own view while its last
//! ack is at most D - 2.5 heartbeats old, the rule before) must be caught.
//!
//! `LEADER_SEEDS=n` runs n seeds per mode (default 1,000: well under a minute), from
//! `LEADER_FIRST_SEED` (default 0), in both modes or the one `LEADER_MODE` names
//! (`quorum` or `classic`); the million-seed run of the issue is this test with
//! `LEADER_SEEDS=1000000` in release (figures in docs/performance.md).

use bully::checker::Invariant;
use bully::protocol::{Flaw, Mode};
use bully::sim::scenario::run_seed_with;
use std::time::Instant;

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.trim().parse().ok()
}

/// Runs the seeds per mode: none may break any invariant, and the queries must have
/// been answered (named a coordinator) on nearly every seed.
#[test]
fn every_answer_naming_a_coordinator_lies_within_its_office() {
    let first = env_u64("LEADER_FIRST_SEED").unwrap_or(0);
    let count = env_u64("LEADER_SEEDS").unwrap_or(1_000);
    // `LEADER_MODE=quorum|classic` runs one mode only (a long run split in parts).
    let modes = match std::env::var("LEADER_MODE").as_deref() {
        Err(_) => vec![Mode::Quorum, Mode::Classic],
        Ok("quorum") => vec![Mode::Quorum],
        Ok("classic") => vec![Mode::Classic],
        Ok(other) => panic!("LEADER_MODE={other:?} is neither quorum nor classic"),
    };
    for mode in modes {
        let started = Instant::now();
        let (mut answered_seeds, mut answers) = (0u64, 0u64);
        for seed in first..first + count {
            let outcome = run_seed_with(seed, mode, None);
            assert!(outcome.passed(), "{}", outcome.report());
            let named = outcome.leader_answers;
            answers += named as u64;
            answered_seeds += u64::from(named > 0);
        }
        println!(
            "{mode}: {count} seeds, {answers} answers naming a coordinator, in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        assert!(
            answered_seeds * 10 >= count * 9,
            "{mode}: only {answered_seeds} of {count} seeds had an answer naming a coordinator"
        );
    }
}

/// The old window: a follower names the coordinator it heard within D - 2.5 heartbeats,
/// without asking it. A coordinator that dies (or loses its lease) inside that window
/// is named outside its office.
#[test]
fn sabotaged_follower_window_is_caught() {
    let caught = (0..2_000).find_map(|seed| {
        let outcome = run_seed_with(seed, Mode::Quorum, Some(Flaw::FollowerWindow));
        let v = outcome
            .violations
            .iter()
            .find(|v| v.invariant == Invariant::LeaderAnswer)?;
        Some((seed, v.to_string()))
    });
    let (seed, violation) = caught.expect("no answer from the old window was flagged");
    println!("the old window caught on seed {seed}: {violation}");
}
