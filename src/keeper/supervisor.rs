//! The keeper's loop: follow the node's grants, run the job while the node leads, and
//! stop it (fence command, SIGTERM, SIGKILL) by the deadlines of the last grant heard,
//! whether or not the node is still there to say so.
//!
//! One task, one `select!` over: the node's next grant (or the reconnect timer while it
//! is away), the job's end, the SIGTERM and SIGKILL deadlines, and the keeper's own
//! stop signal. What happens on each is decided in small methods below; every branch is
//! cancellation-safe.

use super::job::{self, Job};
use super::link::{Heard, Link};
use super::plan::{self, Deadlines};
use super::{Outcome, Spec};
use crate::api::keeper::{Grant, Report};
use crate::boot_clock::{sleep_until, BootInstant};
use crate::exact_timer::ExactTimer;
use crate::protocol::Epoch;
use crate::shell::{self, Shell};
use std::future::Future;
use std::time::Duration;

/// How often a keeper whose node is away tries its socket again.
const RECONNECT_EVERY: Duration = Duration::from_millis(200);

/// Between SIGTERM and SIGKILL when the node granted no deadline (a one-node classic
/// cluster) and `--grace` was not given.
const DEFAULT_GRACE: Duration = Duration::from_secs(5);

/// Why a hold ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Why {
    /// The lease's end passed with no renewal.
    LeaseLapsed,
    /// The node granted something else (it left office, or leads a newer epoch).
    OfficeEnded,
    /// The node's connection ended.
    NodeGone,
    /// The keeper was asked to stop.
    Stopping,
}

impl std::fmt::Display for Why {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Why::LeaseLapsed => "the lease was not renewed by its end",
            Why::OfficeEnded => "the node no longer leads this epoch",
            Why::NodeGone => "the node's connection ended",
            Why::Stopping => "the keeper is stopping",
        })
    }
}

/// What is held for one epoch: the job (if one runs) and, once it must end, why.
struct Hold {
    epoch: Epoch,
    grant: Grant,
    job: Option<Job>,
    deadlines: Option<Deadlines>,
    ending: Option<Why>,
    /// SIGKILL instant once ending (the deadline's, or the grace's without one).
    kill_at: Option<BootInstant>,
}

/// The keeper's state.
pub struct Keeper {
    spec: Spec,
    link: Option<Link>,
    /// The node's newest grant; `None` while disconnected (a restarted node numbers
    /// its grants afresh, so a report names none before the first).
    grant: Option<Grant>,
    hold: Option<Hold>,
    /// With `--once`: a job has run, so no other starts.
    ran: bool,
    stopping: bool,
    /// Failed connection attempts in a row, for a quieter log.
    failed_connects: u32,
    /// The SIGTERM and SIGKILL deadlines, on kernel timers of the boot clock: one due
    /// while the host was suspended fires when it wakes (tokio's timer would wait out
    /// its monotonic rest first, `src/exact_timer.rs`).
    term_timer: ExactTimer,
    kill_timer: ExactTimer,
    /// The ending hold's fence command, running beside the job's stop (never delaying
    /// its SIGKILL); the hold is released only once it has ended.
    fence: Option<tokio::task::JoinHandle<()>>,
}

impl Keeper {
    /// A keeper for `spec`, not yet connected.
    pub fn new(spec: Spec) -> Keeper {
        Keeper {
            spec,
            link: None,
            grant: None,
            hold: None,
            ran: false,
            stopping: false,
            failed_connects: 0,
            term_timer: ExactTimer::new(),
            kill_timer: ExactTimer::new(),
            fence: None,
        }
    }

    /// Runs until the job exits by itself, `--once` is done, a fatal error, or `stop`
    /// resolves (then whatever runs is stopped first).
    pub async fn run(mut self, stop: impl Future<Output = ()>) -> Outcome {
        tokio::pin!(stop);
        let mut next_connect = BootInstant::now();
        loop {
            if let Some(outcome) = self.settle().await {
                return outcome;
            }
            let term_at = self.pending_term();
            let kill_at = self.pending_kill();
            let job_running = self.hold.as_ref().is_some_and(|h| h.job.is_some());
            let fencing = self.fence.is_some();
            tokio::select! {
                _ = &mut stop, if !self.stopping => {
                    tracing::info!("stop requested");
                    self.stopping = true;
                    self.end_hold(Why::Stopping).await;
                }
                heard = next_grant(&mut self.link) => self.on_heard(heard).await,
                _ = sleep_until(next_connect), if self.link.is_none() && !self.stopping => {
                    self.try_connect().await;
                    next_connect = BootInstant::now() + RECONNECT_EVERY;
                }
                _ = self.term_timer.sleep_until_boot(term_at.unwrap_or(next_connect)), if term_at.is_some() => {
                    self.end_hold(Why::LeaseLapsed).await;
                }
                _ = self.kill_timer.sleep_until_boot(kill_at.unwrap_or(next_connect)), if kill_at.is_some() => {
                    self.kill_job();
                }
                () = fence_wait(&mut self.fence), if fencing => self.fence = None,
                status = job_wait(&mut self.hold), if job_running => {
                    if let Some(outcome) = self.on_job_exit(status).await {
                        return outcome;
                    }
                }
            }
        }
    }

    /// Starts a job when the node leads and nothing is held; releases a hold whose job
    /// has ended. `Some` when the keeper is done.
    async fn settle(&mut self) -> Option<Outcome> {
        if self
            .hold
            .as_ref()
            .is_some_and(|h| h.ending.is_some() && h.job.is_none() && self.fence.is_none())
        {
            let hold = self.hold.take()?;
            self.release(&hold).await;
            if self.spec.once && self.ran && hold.ending != Some(Why::Stopping) {
                return Some(Outcome::OfficeEnded);
            }
        }
        if self.stopping {
            return self.hold.is_none().then_some(Outcome::Stopped);
        }
        if self.hold.is_none() {
            return self.maybe_start().await;
        }
        None
    }

    /// The SIGTERM instant of a hold not yet ending.
    fn pending_term(&self) -> Option<BootInstant> {
        let hold = self.hold.as_ref()?;
        hold.ending.is_none().then_some(())?;
        hold.deadlines.map(|d| d.term_at)
    }

    /// The SIGKILL instant of a held job not yet killed: its ending's, or else its
    /// deadlines' (armed from the start, a belt under the SIGTERM timer, which comes
    /// first).
    fn pending_kill(&self) -> Option<BootInstant> {
        let hold = self.hold.as_ref()?;
        let job = hold.job.as_ref()?;
        (!job.killed()).then_some(())?;
        hold.kill_at.or(hold.deadlines.map(|d| d.kill_at))
    }

    /// Starts holding the node's epoch if it leads with time left (the job too, if
    /// there is one).
    async fn maybe_start(&mut self) -> Option<Outcome> {
        let grant = self.grant?;
        let epoch = grant.epoch?;
        if self.spec.once && self.ran {
            return None;
        }
        let deadlines = match plan::deadlines(&grant, self.spec.grace) {
            Ok(d) => d,
            Err(e) => return Some(Outcome::Failed(e.to_string())),
        };
        if deadlines.is_some_and(|d| d.term_at <= BootInstant::now()) {
            return None; // the grant is already over; wait for a fresh one
        }
        let job = match self.spec.command.is_empty() {
            true => None,
            false => match Job::start(
                &self.spec.command,
                &self.spec.workdir,
                &self.env(&grant, epoch),
                &self.spec.guard,
            ) {
                Ok(job) => Some(job),
                Err(e) => {
                    let what = self.spec.what();
                    return Some(Outcome::Failed(format!("cannot start `{what}`: {e}")));
                }
            },
        };
        match &job {
            Some(job) => {
                tracing::info!(pid = job.pid(), %epoch, token = epoch.token(), "job started")
            }
            None => {
                tracing::info!(%epoch, "holding the epoch: the fence command runs when it ends")
            }
        }
        self.ran = true;
        self.hold = Some(Hold {
            epoch,
            grant,
            job,
            deadlines,
            ending: None,
            kill_at: None,
        });
        self.report().await;
        None
    }

    /// A grant, the link's end, or garbage from the node.
    async fn on_heard(&mut self, heard: Heard) {
        match heard {
            Heard::Grant(grant) => {
                let epoch_changed = self.grant.map(|g| g.epoch) != Some(grant.epoch);
                self.grant = Some(grant);
                self.on_grant(grant).await;
                // The node waits for this before it resigns (src/node/serve/keepers.rs).
                if epoch_changed {
                    self.report().await;
                }
            }
            Heard::Closed => self.lose_link("closed by the node").await,
            Heard::Broken(why) => self.lose_link(&why).await,
        }
    }

    /// Follows a renewal, or ends the hold when the node no longer leads its epoch.
    async fn on_grant(&mut self, grant: Grant) {
        let Some(hold) = self.hold.as_mut() else {
            return;
        };
        if hold.ending.is_some() {
            return;
        }
        if grant.epoch != Some(hold.epoch) {
            self.end_hold(Why::OfficeEnded).await;
            return;
        }
        match plan::deadlines(&grant, self.spec.grace) {
            Ok(deadlines) => {
                hold.grant = grant;
                hold.deadlines = deadlines;
            }
            Err(e) => {
                tracing::error!("{e}");
                self.end_hold(Why::OfficeEnded).await;
            }
        }
    }

    /// The node went away: what it held ends now, by the last deadlines heard.
    async fn lose_link(&mut self, why: &str) {
        tracing::warn!("node connection lost: {why}");
        self.link = None;
        self.grant = None;
        self.end_hold(Why::NodeGone).await;
    }

    /// Tries the node's socket once; says hello with what this keeper holds.
    async fn try_connect(&mut self) {
        match Link::connect(&self.spec.socket).await {
            Ok(link) => {
                tracing::info!(socket = %self.spec.socket.display(), "connected to the node");
                self.link = Some(link);
                self.failed_connects = 0;
                self.report().await;
            }
            Err(e) => {
                if self.failed_connects % 25 == 0 {
                    tracing::warn!(
                        socket = %self.spec.socket.display(),
                        "cannot reach the node (is `bully node` running with this data_dir?): {e}"
                    );
                }
                self.failed_connects += 1;
            }
        }
    }

    /// Ends the hold for `why`: the fence command runs (due by the SIGKILL instant,
    /// see [`fence`]), the job gets SIGTERM at once and SIGKILL at that instant.
    async fn end_hold(&mut self, why: Why) {
        let grace = self.spec.grace.unwrap_or(DEFAULT_GRACE);
        let Some(hold) = self.hold.as_mut() else {
            return;
        };
        if hold.ending.is_some() {
            return;
        }
        // The job may use the time up to the SIGKILL its deadlines allow; a successor
        // may take over soon after, so never longer.
        let kill_at = match hold.deadlines {
            Some(d) => d.kill_at,
            None => BootInstant::now() + grace,
        };
        hold.ending = Some(why);
        hold.kill_at = Some(kill_at);
        tracing::info!(epoch = %hold.epoch, "stopping: {why}");
        if let Some(job) = hold.job.as_mut() {
            job.terminate();
        }
        let (grant, epoch) = (hold.grant, hold.epoch);
        self.fence = match (&self.spec.fence_command, &self.spec.fence_postgres) {
            (Some(command), _) => {
                let env = self.env(&grant, epoch);
                let dir = self.spec.workdir.clone();
                Some(tokio::spawn(fence(command.clone(), dir, env, kill_at)))
            }
            (None, Some(data_dir)) => Some(tokio::spawn(fence_postgres(data_dir.clone(), kill_at))),
            (None, None) => None,
        };
        if BootInstant::now() >= kill_at {
            self.kill_job();
        }
    }

    /// The `BULLY_*` variables of the job and the fence command for `epoch`.
    fn env(&self, grant: &Grant, epoch: Epoch) -> Vec<(String, String)> {
        let data_dir = self
            .spec
            .socket
            .parent()
            .unwrap_or(std::path::Path::new("."));
        job::environment(grant, epoch, data_dir)
    }

    /// SIGKILLs the ending hold's job.
    fn kill_job(&mut self) {
        if let Some(job) = self.hold.as_mut().and_then(|h| h.job.as_mut()) {
            tracing::warn!(pid = job.pid(), "the job outlived its grace: SIGKILL");
            job.kill();
        }
    }

    /// The job ended: reaped after a stop, or by itself (then the keeper is done).
    async fn on_job_exit(
        &mut self,
        status: std::io::Result<std::process::ExitStatus>,
    ) -> Option<Outcome> {
        let hold = self.hold.as_mut()?;
        let job = hold.job.take()?;
        let code = match status {
            Ok(status) => crate::signals::exit_code(status),
            Err(e) => {
                tracing::error!("cannot wait for the job: {e}");
                1
            }
        };
        let margin = hold
            .deadlines
            .map(|d| d.kill_at + plan::KILL_MARGIN)
            .map(|fence_by| fence_by.saturating_duration_since(BootInstant::now()));
        if hold.ending.is_some() {
            tracing::info!(pid = job.pid(), code, margin_before_fence_deadline = ?margin, "job stopped");
            return None;
        }
        // Like `consul lock`: the job's own end ends the keeper (no fence: the node
        // still leads, and nothing of the job runs on, `Job::wait`).
        tracing::info!(pid = job.pid(), code, "job exited by itself");
        let hold = self.hold.take()?;
        self.release(&hold).await;
        Some(Outcome::JobExited(code))
    }

    /// Tells the node the hold is over.
    async fn release(&mut self, hold: &Hold) {
        tracing::info!(epoch = %hold.epoch, "released");
        self.report().await;
    }

    /// Tells the node what is held now, if it is connected.
    async fn report(&mut self) {
        let holding = self.hold.as_ref().map(|h| h.epoch);
        let grace = self
            .hold
            .as_ref()
            .and_then(|h| h.deadlines)
            .map(|d| d.kill_at.saturating_duration_since(BootInstant::now()))
            .or(self.spec.grace)
            .unwrap_or(DEFAULT_GRACE);
        let report = Report {
            pid: std::process::id(),
            what: self.spec.what(),
            grace_ms: grace.as_millis() as u64,
            holding,
            seen: self.grant.map_or(0, |g| g.seq),
        };
        if let Some(link) = self.link.as_mut() {
            if let Err(e) = link.report(&report).await {
                tracing::warn!("cannot report to the node: {e}");
            }
        }
    }
}

/// The next thing the node says, or never while disconnected.
async fn next_grant(link: &mut Option<Link>) -> Heard {
    match link {
        Some(link) => link.next().await,
        None => std::future::pending().await,
    }
}

/// How long a fence command may run past the SIGKILL instant before it is killed.
/// A successor may lead from that instant on, so a fence still running then is late,
/// and logged as such; but killing it halfway would leave the database it was stopping
/// running (a late fence still ends a split brain, a killed one never does).
const FENCE_OVERRUN: Duration = Duration::from_secs(10);

/// Runs the fence command in `dir` with `env`, due by `kill_at` and killed
/// [`FENCE_OVERRUN`] after it; logs how it ended, and an error when it ended late.
async fn fence(
    command: String,
    dir: std::path::PathBuf,
    env: Vec<(String, String)>,
    kill_at: BootInstant,
) {
    let shell = Shell {
        command: &command,
        dir: &dir,
        env: &env,
        timeout: kill_at.saturating_duration_since(BootInstant::now()) + FENCE_OVERRUN,
        quiet: false,
    };
    let (exit, took) = shell::run(&shell).await;
    let late = BootInstant::now().saturating_duration_since(kill_at);
    if !late.is_zero() {
        tracing::error!(
            late_ms = late.as_millis() as u64,
            "the fence command ended after the earliest takeover: a successor may have \
             led while this node's service still ran"
        );
    }
    match exit.is_success() {
        true => tracing::info!(?took, "fence command succeeded"),
        false => tracing::error!(?took, "fence command {exit}"),
    }
}

/// Stops the node's PostgreSQL server: a fast shutdown now, SIGKILL for all of it at
/// `kill_at` (the earliest instant another node could lead) if it still runs. Only a
/// verified postmaster of `data_dir` is signalled (src/postmaster.rs), never a
/// stranger a stale `postmaster.pid` names.
async fn fence_postgres(data_dir: std::path::PathBuf, kill_at: BootInstant) {
    let left = kill_at.saturating_duration_since(BootInstant::now());
    match crate::postmaster::stop(&data_dir, left).await {
        Ok(crate::postmaster::Stopped::NotRunning(found)) => tracing::info!(
            data_dir = %data_dir.display(),
            "fence: no postgres server runs ({})",
            found.describe()
        ),
        Ok(crate::postmaster::Stopped::Fast(pid)) => {
            tracing::info!(pid, "fence: the postgres server stopped (fast shutdown)")
        }
        Ok(crate::postmaster::Stopped::Killed(pid)) => {
            tracing::warn!(
                pid,
                "fence: the postgres server was killed (no fast shutdown in time)"
            )
        }
        Err(e) => tracing::error!(
            data_dir = %data_dir.display(),
            "fence: cannot stop the postgres server: {e}"
        ),
    }
}

/// The running fence command's end, or never without one.
async fn fence_wait(fence: &mut Option<tokio::task::JoinHandle<()>>) {
    match fence.as_mut() {
        Some(fence) => {
            let _ = fence.await;
        }
        None => std::future::pending().await,
    }
}

/// The held job's end, or never without one.
async fn job_wait(hold: &mut Option<Hold>) -> std::io::Result<std::process::ExitStatus> {
    match hold.as_mut().and_then(|h| h.job.as_mut()) {
        Some(job) => job.wait().await,
        None => std::future::pending().await,
    }
}
