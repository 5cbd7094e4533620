//! A clone that failed is not tried again at once: the next try waits 1 s, then twice
//! as long after each further failure, up to a minute ([`retry_after_ms`]). Without it
//! a member that cannot clone (a password its primary refuses, a full disk, a source
//! that keeps dying mid-copy) started a fresh `pg_basebackup` at every look, each one
//! asking the primary for a checkpoint and a full copy. A clone that worked starts the
//! count over; a failure is dated when it ends (a clone can run for hours). The engine
//! holds the clones and reinits it decides back ([`hold`]) until their time; the
//! operator's `bully pg reinit` is not held (its failure counts all the same); the
//! simulator runs the same engine.

use super::{Act, Decision, Memory};

/// The wait after the first failure.
pub const FIRST_RETRY_MS: u64 = 1_000;
/// The longest wait between two tries.
pub const LONGEST_RETRY_MS: u64 = 60_000;

/// How long to wait after the `failures`-th failure in a row (1 s, 2 s, 4 s, ... 60 s).
pub fn retry_after_ms(failures: u32) -> u64 {
    let doublings = failures.saturating_sub(1).min(16);
    (FIRST_RETRY_MS << doublings).min(LONGEST_RETRY_MS)
}

/// `decision`, or a wait when it is a clone or a reinit due later than `now_ms`.
pub fn hold(decision: Decision, memory: &Memory, now_ms: u64) -> Decision {
    let copies = matches!(decision.act, Act::Clone { .. } | Act::Reinit { .. });
    let Some((failures, at_ms, why)) = &memory.copy_failed else {
        return decision;
    };
    if !copies || now_ms >= *at_ms {
        return decision;
    }
    Decision {
        act: Act::Wait(format!(
            "the last clone failed ({why}); {failures} in a row: the next try in {:.1} s",
            (at_ms - now_ms) as f64 / 1000.0
        )),
        eligible: decision.eligible,
    }
}

#[cfg(test)]
mod tests {
    use super::super::Copier;
    use super::*;

    #[test]
    fn the_wait_doubles_up_to_a_minute() {
        let waits: Vec<u64> = (1..=8).map(retry_after_ms).collect();
        assert_eq!(
            waits,
            [1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000]
        );
        assert_eq!(retry_after_ms(u32::MAX), LONGEST_RETRY_MS);
    }

    #[test]
    fn only_a_copy_is_held_and_only_until_its_time() {
        let clone = Decision {
            act: Act::Clone {
                from: 3,
                by: Copier::BaseBackup,
            },
            eligible: false,
        };
        let fresh = Memory::default();
        assert_eq!(hold(clone.clone(), &fresh, 0), clone, "no failure yet");
        let failed = Memory {
            copy_failed: Some((2, 5_000, "pg_basebackup failed".into())),
            ..Memory::default()
        };
        let held = hold(clone.clone(), &failed, 4_000);
        assert!(
            matches!(&held.act, Act::Wait(why) if why.contains("2 in a row") && why.contains("1.0 s")),
            "{held:?}"
        );
        assert_eq!(hold(clone.clone(), &failed, 5_000), clone, "its time came");
        let start = Decision {
            act: Act::StartStandby { upstream: Some(3) },
            eligible: false,
        };
        assert_eq!(hold(start.clone(), &failed, 0), start, "not a copy");
    }
}
