//! systemd's service watchdog (`WatchdogSec=`), kept from inside the runtime's loop:
//! [`ServiceWatchdog::due_at`] is one of the deadlines [`super::inputs::Inputs`] waits
//! for, so a runtime that hangs (a deadlock, a stuck await) stops pinging and systemd
//! restarts the node. Waits the runtime makes on purpose (the bounded hold for
//! `on_demoted` and the keepers, see [`super::runtime`]) ping through
//! [`ServiceWatchdog::while_waiting`], so they are not mistaken for a hang.

use crate::boot_clock::{self, BootInstant};
use crate::sd_notify::{self, WATCHDOG};
use std::future::Future;
use std::time::Duration;

/// When the next `WATCHDOG=1` is due, and the interval between two.
#[derive(Debug)]
pub struct ServiceWatchdog {
    interval: Duration,
    next_at: BootInstant,
}

impl ServiceWatchdog {
    /// The watchdog systemd set up for this process (see
    /// [`sd_notify::watchdog_interval`]), its first ping one interval from now; `None`
    /// when there is none.
    pub fn from_env() -> Option<ServiceWatchdog> {
        let interval = sd_notify::watchdog_interval()?;
        tracing::info!(?interval, "systemd watchdog: pinging from the runtime loop");
        Some(ServiceWatchdog::every(interval))
    }

    /// Pings every `interval`, the first one interval from now.
    pub fn every(interval: Duration) -> ServiceWatchdog {
        ServiceWatchdog {
            interval,
            next_at: BootInstant::now() + interval,
        }
    }

    /// When the next ping is due.
    pub fn due_at(&self) -> BootInstant {
        self.next_at
    }

    /// Sends `WATCHDOG=1` and schedules the next one.
    pub fn ping(&mut self) {
        sd_notify::notify(WATCHDOG);
        self.next_at = BootInstant::now() + self.interval;
    }

    /// Runs `wait` to its end, pinging whenever a ping falls due meanwhile (`watchdog`
    /// may be `None`: then it only runs `wait`).
    pub async fn while_waiting<F: Future>(watchdog: Option<&mut Self>, wait: F) -> F::Output {
        let Some(watchdog) = watchdog else {
            return wait.await;
        };
        tokio::pin!(wait);
        loop {
            tokio::select! {
                output = &mut wait => return output,
                _ = boot_clock::sleep_until(watchdog.due_at()) => watchdog.ping(),
            }
        }
    }
}
