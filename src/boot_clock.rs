//! The clock leases and promises run on. tokio's `Instant` is CLOCK_MONOTONIC, which
//! stops while the machine is suspended: a coordinator suspended mid-lease would wake
//! believing its lease, while the others, whose clocks ran, elected a successor.
//! CLOCK_BOOTTIME counts the suspension, so the lease has run out when the node wakes.
//! Where BOOTTIME cannot be read (not Linux, or a kernel without it), the monotonic clock
//! stands in, and the node says so once in its log.
//!
//! The node's machine time ([`crate::node`]'s clock), the deadlines its timer fires
//! ([`crate::exact_timer`]) and the lease end readers compare with the time now
//! ([`crate::api::Status::as_of`]) all read this one clock.

use nix::sys::time::TimeSpec;
use nix::time::{clock_gettime, ClockId};
use std::sync::OnceLock;
use std::time::Duration;

/// A reading of the suspend-counting clock: time since the machine booted (or, on the
/// fallback, since an arbitrary point). Only comparable with other readings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BootInstant(Duration);

/// Which clock this process reads, chosen on first use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// CLOCK_BOOTTIME: counts time suspended.
    Boottime,
    /// CLOCK_MONOTONIC: BOOTTIME could not be read; a suspension stops it.
    Monotonic,
}

impl Source {
    /// The clock to read and to arm timers on.
    pub fn clock_id(self) -> ClockId {
        match self {
            Source::Boottime => ClockId::CLOCK_BOOTTIME,
            Source::Monotonic => ClockId::CLOCK_MONOTONIC,
        }
    }
}

/// The clock of this process: BOOTTIME if it can be read, else monotonic (logged once).
pub fn source() -> Source {
    static SOURCE: OnceLock<Source> = OnceLock::new();
    *SOURCE.get_or_init(|| match clock_gettime(ClockId::CLOCK_BOOTTIME) {
        Ok(_) => Source::Boottime,
        Err(error) => {
            tracing::warn!(
                %error,
                "CLOCK_BOOTTIME is unavailable: leases run on CLOCK_MONOTONIC, which stops \
                 while the machine is suspended"
            );
            Source::Monotonic
        }
    })
}

impl BootInstant {
    /// The clock now.
    pub fn now() -> BootInstant {
        let clock = source().clock_id();
        // The monotonic clock always exists on the systems we build for; if even that
        // read failed there would be no time to go by, and 0 keeps deadlines due.
        let spec = clock_gettime(clock).unwrap_or_else(|_| TimeSpec::new(0, 0));
        BootInstant(Duration::from(spec))
    }

    /// This reading in nanoseconds, to hand to another process on this host (the
    /// keeper channel, `src/api/keeper.rs`): every process reads the same clock.
    pub fn as_nanos(self) -> u64 {
        u64::try_from(self.0.as_nanos()).unwrap_or(u64::MAX)
    }

    /// A reading another process on this host handed over with [`BootInstant::as_nanos`].
    pub fn from_nanos(nanos: u64) -> BootInstant {
        BootInstant(Duration::from_nanos(nanos))
    }

    /// How long after `earlier` this is (zero if it is not after).
    pub fn saturating_duration_since(self, earlier: BootInstant) -> Duration {
        self.0.saturating_sub(earlier.0)
    }

    /// How long ago this was.
    pub fn elapsed(self) -> Duration {
        BootInstant::now().saturating_duration_since(self)
    }

    /// This reading as a timespec on [`source`]'s clock, for an absolute timer.
    pub fn as_timespec(self) -> TimeSpec {
        TimeSpec::from_duration(self.0)
    }
}

impl std::ops::Add<Duration> for BootInstant {
    type Output = BootInstant;

    fn add(self, rhs: Duration) -> BootInstant {
        BootInstant(self.0.saturating_add(rhs))
    }
}

impl std::ops::Sub<Duration> for BootInstant {
    type Output = BootInstant;

    fn sub(self, rhs: Duration) -> BootInstant {
        BootInstant(self.0.saturating_sub(rhs))
    }
}

/// Sleeps until the clock reaches `at` with tokio's timer, checking the clock again on
/// every wake-up: after a suspension tokio's monotonic sleep ends late, never early.
/// For waits that need no timerfd of their own (see [`crate::exact_timer`]).
pub async fn sleep_until(at: BootInstant) {
    loop {
        let left = at.saturating_duration_since(BootInstant::now());
        if left.is_zero() {
            return;
        }
        tokio::time::sleep(left).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_is_boottime_on_linux() {
        assert_eq!(source(), Source::Boottime);
        // A reading lies between two readings of the kernel's CLOCK_BOOTTIME (on a
        // machine never suspended it equals the monotonic clock, hence `source` above).
        let before = Duration::from(clock_gettime(ClockId::CLOCK_BOOTTIME).unwrap());
        let now = BootInstant::now();
        let after = Duration::from(clock_gettime(ClockId::CLOCK_BOOTTIME).unwrap());
        assert!(
            before <= now.0 && now.0 <= after,
            "{before:?} {now:?} {after:?}"
        );
    }

    #[test]
    fn readings_rise_and_add() {
        let a = BootInstant::now();
        std::thread::sleep(Duration::from_millis(2));
        let b = BootInstant::now();
        assert!(b > a);
        assert!(b.saturating_duration_since(a) >= Duration::from_millis(2));
        assert_eq!(a.saturating_duration_since(b), Duration::ZERO);
        assert!(a + Duration::from_secs(1) > b);
    }

    #[tokio::test]
    async fn sleep_until_does_not_wake_early() {
        let at = BootInstant::now() + Duration::from_millis(20);
        tokio::time::timeout(Duration::from_secs(5), sleep_until(at))
            .await
            .expect("a 20 ms sleep ends");
        assert!(BootInstant::now() >= at);
    }
}
