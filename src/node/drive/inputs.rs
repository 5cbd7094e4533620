//! Everything the runtime waits for, in one place and in one priority order: a stop
//! request, systemd's watchdog ping (right after the stop, so a busy runtime is never
//! mistaken for a hung one), transport events, commands (from the API and the handle),
//! health verdicts, finished `on_elected` runs, finished releases of an office, the
//! eligibility policy's next deadline and the machine's.

use super::service_watchdog::ServiceWatchdog;
use crate::boot_clock::{self, BootInstant};
use crate::exact_timer::ExactTimer;
use crate::node::commands::health::Verdict;
use crate::node::shared::mailbox::{Command, ElectedHookDone};
use crate::protocol::Epoch;
use crate::shutdown::{Shutdown, TripOnDrop};
use crate::transport::TransportEvent;
use tokio::sync::mpsc;

/// The receivers the runtime selects over.
pub struct Inputs {
    /// Tripped by [`crate::node::NodeHandle::shutdown`] or by dropping the handle:
    /// either stops the node (the crate's one stop signal, src/shutdown.rs).
    pub stop_requested: Shutdown,
    /// Trips the handle's [`crate::node::NodeHandle::ended`] when the runtime that
    /// owns these inputs is gone, however it ended.
    pub _ended: TripOnDrop,
    pub transport: mpsc::Receiver<TransportEvent>,
    pub commands: mpsc::Receiver<Command>,
    /// The health check's verdict changes (never yields without a `[health]` section).
    pub health_verdicts: mpsc::Receiver<Verdict>,
    /// Finished `on_elected` runs, to mark an epoch ready or resign.
    pub elected_hooks: mpsc::UnboundedReceiver<ElectedHookDone>,
    /// Finished releases of an office (`on_demoted` and the keepers done).
    pub released: mpsc::UnboundedReceiver<Epoch>,
    /// Wakes the runtime for the machine's deadline once, when it is due (see
    /// [`crate::exact_timer`]: a coordinator waits for its next heartbeat here).
    pub tick_timer: ExactTimer,
    /// systemd's watchdog, when the service has one (`WatchdogSec=`).
    pub service_watchdog: Option<ServiceWatchdog>,
}

/// The next thing the runtime handles.
pub enum Input {
    /// Stop: asked to, or the transport is gone.
    Stop,
    /// systemd's watchdog wants its `WATCHDOG=1` now.
    WatchdogPing,
    Transport(TransportEvent),
    Command(Command),
    HealthVerdict(Verdict),
    ElectedHook(ElectedHookDone),
    /// The office of this epoch has been released: the machine may resign it.
    Released(Epoch),
    /// The eligibility policy's deadline has come.
    PolicyDeadline,
    /// The machine's deadline has come.
    Tick,
}

impl Inputs {
    /// Waits for the next input, in the priority order of the module docs;
    /// `policy_at` and `tick_at` are the deadlines to wake for, on the machine's clock
    /// (see [`crate::boot_clock`]).
    pub async fn next(&mut self, policy_at: Option<BootInstant>, tick_at: BootInstant) -> Input {
        // Every branch is cancellation-safe: the stop signal, mpsc receivers and sleeps
        // lose nothing when another branch wins.
        let ping_at = self.service_watchdog.as_ref().map(ServiceWatchdog::due_at);
        tokio::select! {
            biased;
            _ = self.stop_requested.tripped() => Input::Stop,
            _ = sleep_until_some(ping_at) => Input::WatchdogPing,
            event = self.transport.recv() => match event {
                Some(event) => Input::Transport(event),
                None => Input::Stop,
            },
            Some(command) = self.commands.recv() => Input::Command(command),
            Some(verdict) = self.health_verdicts.recv() => Input::HealthVerdict(verdict),
            Some(done) = self.elected_hooks.recv() => Input::ElectedHook(done),
            Some(epoch) = self.released.recv() => Input::Released(epoch),
            _ = sleep_until_some(policy_at) => Input::PolicyDeadline,
            _ = self.tick_timer.sleep_until_boot(tick_at) => Input::Tick,
        }
    }
}

impl Inputs {
    /// While a stopping node releases its office: only the transport (acks keep its
    /// lease), the release and the machine's deadline; `Stop` once the transport is
    /// gone.
    pub async fn next_while_stopping(&mut self, tick_at: BootInstant) -> Input {
        tokio::select! {
            biased;
            event = self.transport.recv() => match event {
                Some(event) => Input::Transport(event),
                None => Input::Stop,
            },
            Some(epoch) = self.released.recv() => Input::Released(epoch),
            _ = self.tick_timer.sleep_until_boot(tick_at) => Input::Tick,
        }
    }
}

/// Sleeps until `at`, or forever when there is nothing to wait for.
async fn sleep_until_some(at: Option<BootInstant>) {
    match at {
        Some(at) => boot_clock::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
