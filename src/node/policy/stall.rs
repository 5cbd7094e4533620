//! When a node must treat what it learned before as stale because it did not run: a
//! process woken far past the deadline it slept for was stopped (SIGSTOP, a VM pause)
//! or starved. Its lease has lapsed by then (the machine notices), but its health
//! verdict is as old as the stall, and the world it judged may have changed under it:
//! after D the others elect, and a new primary takes writes. A node that declared on
//! the old verdict would promote a database its own check would now refuse
//! (`src/node/drive/runtime.rs` re-checks first; it also does after any lapse of its
//! lease, stalled or cut off, since another node may lead by then).

use crate::protocol::Timing;
use std::time::Duration;

/// Whether waking `late` after the machine's deadline is a stall: later than D, after
/// which the others may have suspected the node and elected another.
pub fn stalled(late: Duration, timing: &Timing) -> bool {
    late > Duration::from_millis(timing.suspect_after_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_wake_later_than_d_is_a_stall() {
        let t = Timing::default();
        let ms = Duration::from_millis;
        assert!(!stalled(ms(5), &t), "jitter");
        assert!(!stalled(ms(300), &t));
        assert!(stalled(ms(301), &t));
        assert!(stalled(ms(3000), &t), "a 3 s SIGSTOP");
    }
}
