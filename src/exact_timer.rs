//! A one-shot timer on the kernel's clock (a Linux timerfd in tokio's reactor), for the
//! idle node's long waits: the coordinator's next heartbeat and the silence watch.
//!
//! Why not `tokio::time::sleep`: tokio's timer wheel keeps a deadline more than 64 ms
//! ahead in a coarser level and wakes the thread once at the start of that level's
//! slot, only to move the entry down, then again when it is due. A coordinator waiting
//! 100 ms for its next heartbeat thus woke twice per heartbeat, and on this class of
//! machine a wake-up costs about 100 µs, more than sending the heartbeats. The kernel
//! timer wakes the thread once, when the deadline comes.
//!
//! The timer runs on [`crate::boot_clock`]'s clock (CLOCK_BOOTTIME on Linux), with
//! absolute deadlines: one due while the machine was suspended fires when it wakes,
//! where a monotonic timer would wait out the rest of its time again.

use crate::boot_clock::{self, BootInstant, Source};
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use std::io;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::time::Instant;

/// One reusable deadline: [`ExactTimer::sleep_until`] re-arms the kernel timer only
/// when the deadline changes, so a loop that waits for the same deadline again and
/// again (while other inputs arrive) costs no system call.
#[derive(Debug)]
pub struct ExactTimer {
    /// `None` when no timerfd could be made or it failed: tokio's timer stands in.
    kernel: Option<AsyncFd<Kernel>>,
    /// The deadline the kernel timer is set for, if any.
    armed: Option<BootInstant>,
}

impl ExactTimer {
    /// A disarmed timer; must be called inside a tokio runtime (it registers with its
    /// reactor). Out of file descriptors, it warns and uses tokio's timer: a wait
    /// that costs one more wake-up is better than a node that does not start.
    #[allow(clippy::new_without_default)] // needs a runtime; `Default` would hide that
    pub fn new() -> Self {
        let kernel = Kernel::register().map_err(|error| {
            tracing::warn!(%error, "no kernel timer; waits use tokio's timer");
        });
        Self {
            kernel: kernel.ok(),
            armed: None,
        }
    }

    /// Completes `at - now` from now on the boot clock (at once if `at` has passed),
    /// for waits measured with tokio's `Instant`.
    pub async fn sleep_until(&mut self, at: Instant) {
        let left = at.saturating_duration_since(Instant::now());
        self.sleep_until_boot(BootInstant::now() + left).await
    }

    /// Completes when the boot clock reaches `at` (at once if it has passed).
    /// Cancellation-safe: dropped before the deadline, the timer stays armed for the
    /// next call.
    pub async fn sleep_until_boot(&mut self, at: BootInstant) {
        let Some(kernel) = &self.kernel else {
            return boot_clock::sleep_until(at).await;
        };
        if let Err(error) = wait_until(kernel, &mut self.armed, at).await {
            // Not expected once the timerfd exists; the caller's loop must go on.
            tracing::warn!(%error, "kernel timer failed; waits use tokio's timer");
            self.kernel = None;
            boot_clock::sleep_until(at).await;
        }
    }
}

async fn wait_until(
    kernel: &AsyncFd<Kernel>,
    armed: &mut Option<BootInstant>,
    at: BootInstant,
) -> io::Result<()> {
    loop {
        if at <= BootInstant::now() {
            return Ok(());
        }
        if *armed != Some(at) {
            // Absolute, on the clock `at` was read from; never zero (that would disarm
            // the timer), since `at` is after a reading of that clock.
            kernel.get_ref().0.set(
                Expiration::OneShot(at.as_timespec()),
                TimerSetTimeFlags::TFD_TIMER_ABSTIME,
            )?;
            *armed = Some(at);
        }
        let mut ready = kernel.readable().await?;
        // Readiness can be stale (from a deadline set before this one): a read that
        // would block clears it and the loop waits again.
        if let Ok(read) = ready.try_io(|fd| fd.get_ref().0.wait().map_err(io::Error::from)) {
            read?;
            // The expiry is consumed, so the fd is not readable until the next one.
            ready.clear_ready();
            *armed = None;
            // The kernel fired at or after `at` on the clock `BootInstant` reads: the
            // check at the top of the loop returns.
        }
    }
}

/// The timerfd as tokio's reactor takes it (nix gives it `AsFd` only).
#[derive(Debug)]
struct Kernel(TimerFd);

impl Kernel {
    /// A timerfd on the clock [`BootInstant`] reads, registered with tokio's reactor.
    fn register() -> io::Result<AsyncFd<Kernel>> {
        let clock = match boot_clock::source() {
            Source::Boottime => ClockId::CLOCK_BOOTTIME,
            Source::Monotonic => ClockId::CLOCK_MONOTONIC,
        };
        let timer = TimerFd::new(clock, TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC)?;
        // SAFETY: `Kernel` owns the timerfd and closes it only when dropped, which is
        // when the `AsyncFd` holding it is dropped; `as_raw_fd` always returns that fd.
        // No safe call serves: nix's `TimerFd` (used above) is safe, but registering
        // any fd with tokio's reactor is `unsafe` in the tokio Cargo.lock pins (its
        // safe `AsyncFd::with_interest` is deprecated there as unsound: nothing ties
        // the fd's lifetime to the registration).
        unsafe { AsyncFd::register_with_interest(Kernel(timer), Interest::READABLE) }
            .map_err(io::Error::from)
    }
}

impl AsRawFd for Kernel {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_new_timer_waits_on_the_kernel_clock() {
        assert!(
            ExactTimer::new().kernel.is_some(),
            "fell back to tokio's timer"
        );
    }

    #[tokio::test]
    async fn the_kernel_timer_counts_suspension() {
        // /proc/self/fdinfo shows a timerfd's clock: 7 is CLOCK_BOOTTIME.
        let timer = ExactTimer::new();
        let fd = timer.kernel.as_ref().expect("a kernel timer").as_raw_fd();
        let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).unwrap();
        let clockid = info.lines().find_map(|l| l.strip_prefix("clockid:"));
        let boottime = nix::libc::CLOCK_BOOTTIME.to_string();
        assert_eq!(clockid.map(str::trim), Some(boottime.as_str()), "{info}");
    }

    #[tokio::test]
    async fn a_boot_clock_deadline_fires_then_not_before() {
        let mut timer = ExactTimer::new();
        let at = BootInstant::now() + Duration::from_millis(30);
        tokio::time::timeout(Duration::from_secs(5), timer.sleep_until_boot(at))
            .await
            .expect("a 30 ms deadline fires");
        assert!(BootInstant::now() >= at);
    }

    #[tokio::test]
    async fn fires_at_the_deadline_not_before() {
        let mut timer = ExactTimer::new();
        let start = Instant::now();
        let at = start + Duration::from_millis(30);
        timer.sleep_until(at).await;
        let woke = Instant::now();
        assert!(woke >= at, "woke {:?} early", at - woke);
        assert!(
            woke - start < Duration::from_secs(5),
            "took {:?}",
            woke - start
        );
    }

    #[tokio::test]
    async fn a_past_deadline_completes_at_once() {
        let mut timer = ExactTimer::new();
        let past = Instant::now() - Duration::from_millis(5);
        tokio::time::timeout(Duration::from_secs(5), timer.sleep_until(past))
            .await
            .expect("a passed deadline must not wait");
    }

    #[tokio::test]
    async fn a_cancelled_wait_then_an_earlier_deadline_fires_at_the_new_one() {
        let mut timer = ExactTimer::new();
        let start = Instant::now();
        let far = start + Duration::from_secs(60);
        // Dropped before the deadline, as a select! loop does when another input wins.
        let cancelled =
            tokio::time::timeout(Duration::from_millis(20), timer.sleep_until(far)).await;
        assert!(cancelled.is_err(), "a 60 s deadline cannot have fired");
        let near = Instant::now() + Duration::from_millis(20);
        tokio::time::timeout(Duration::from_secs(5), timer.sleep_until(near))
            .await
            .expect("re-armed for the nearer deadline");
        assert!(Instant::now() >= near);
    }

    #[tokio::test]
    async fn a_fired_but_unread_deadline_does_not_end_the_next_wait_early() {
        let mut timer = ExactTimer::new();
        let first = Instant::now() + Duration::from_millis(10);
        timer.sleep_until(first).await;
        // Arm, let it fire in the kernel without reading it, then ask for a later one.
        let second = Instant::now() + Duration::from_millis(5);
        let _ = tokio::time::timeout(Duration::from_millis(1), timer.sleep_until(second)).await;
        std::thread::sleep(Duration::from_millis(10));
        let third = Instant::now() + Duration::from_millis(40);
        timer.sleep_until(third).await;
        assert!(
            Instant::now() >= third,
            "the stale expiry ended the wait early"
        );
    }
}
