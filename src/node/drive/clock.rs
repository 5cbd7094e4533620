//! The runtime's clock: milliseconds since the node started, the machine's notion of
//! `now`, and the two conversions its times need (a deadline to sleep until, a
//! wall-clock time for the event log and the status). It reads [`crate::boot_clock`],
//! which keeps counting while the machine is suspended, so a lease or a promise that
//! ran out during a suspension has run out when the node wakes.

use crate::boot_clock::BootInstant;
use crate::protocol::Millis;
use crate::wall_clock::wall_ms;
use std::time::Duration;

/// Milliseconds since the node started.
pub struct Clock {
    origin: BootInstant,
    /// Wall-clock ms (Unix) at `origin`, to put machine times into the event log.
    wall_origin: Millis,
}

impl Clock {
    /// A clock starting at 0 now.
    pub fn new() -> Clock {
        Clock {
            origin: BootInstant::now(),
            wall_origin: wall_ms(),
        }
    }

    /// A machine time as wall-clock ms, the event log's clock.
    pub fn wall(&self, at: Millis) -> Millis {
        self.wall_origin + at
    }

    /// The machine time now.
    pub fn now(&self) -> Millis {
        self.origin.elapsed().as_millis() as Millis
    }

    /// A reading of the boot clock as a machine time (0 before the node started): an
    /// estimate's freshness bound, measured by the health task.
    pub fn at(&self, instant: BootInstant) -> Millis {
        instant.saturating_duration_since(self.origin).as_millis() as Millis
    }

    /// A machine time as a reading of the same clock, to sleep until (see
    /// [`crate::exact_timer::ExactTimer::sleep_until_boot`]) or to compare with
    /// [`BootInstant::now`].
    pub fn instant(&self, at: Millis) -> BootInstant {
        self.origin + Duration::from_millis(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_time_and_instants_are_on_the_boot_clock() {
        let clock = Clock::new();
        let before = BootInstant::now();
        std::thread::sleep(Duration::from_millis(5));
        let now = clock.now();
        assert!(now >= 5, "{now}");
        // An instant from machine time compares with readings of the boot clock.
        assert!(clock.instant(now) >= before);
        assert!(clock.instant(now) <= BootInstant::now());
        assert_eq!(
            crate::boot_clock::source(),
            crate::boot_clock::Source::Boottime
        );
    }
}
