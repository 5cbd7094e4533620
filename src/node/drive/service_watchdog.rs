//! systemd's service watchdog (`WatchdogSec=`), kept from inside the runtime's loop:
//! [`ServiceWatchdog::due_at`] is one of the deadlines [`super::inputs::Inputs`] waits
//! for, so a runtime that hangs (a deadlock, a stuck await) stops pinging and systemd
//! restarts the node. The runtime makes no long wait of its own: a release of the
//! office (`on_demoted`, the keepers) runs in a task while the loop goes on.

use crate::boot_clock::BootInstant;
use crate::sd_notify::{self, WATCHDOG};
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
}
