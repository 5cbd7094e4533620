//! Stopping a PostgreSQL server by signals, from its data dir alone: the node's
//! manager (src/node/postgres/) stops its server this way, and so does the keeper's
//! fence (src/keeper/supervisor.rs), which must work when the node is stalled or gone.
//!
//! Nothing is signalled on the word of `postmaster.pid` alone: the process it names
//! must be shown to be a postmaster of this data dir (`identity`: its /proc cwd, exe
//! and start time against the file), and is held by a pidfd (`held`), so a PID reused
//! by a stranger is never signalled and never taken for a running server. It is checked
//! again before each signal. SIGINT is PostgreSQL's fast shutdown (clients are cut off,
//! no new commit is taken); once the deadline passes, the postmaster is stopped
//! (SIGSTOP, so it starts nothing more) and every process it started gets SIGKILL: each
//! of PostgreSQL's children leads a session of its own, so one process group does not
//! hold them, and they are found by their parent in /proc while the postmaster is
//! verified. Its process group is killed only when the verified postmaster leads it.

mod held;
mod identity;
mod pid_file;

pub use identity::{
    find, is_postgres, judge, running, Found, Mismatch, Postmaster, Seen, START_TOLERANCE,
};
pub use pid_file::PidFile;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::path::Path;
use std::time::{Duration, Instant};

/// How often a stop looks whether the postmaster is gone: a sleep, not a spin.
const POLL: Duration = Duration::from_millis(10);

/// How long a stop waits for a `postmaster.pid` it cannot read to become readable (one
/// being written by a starting postmaster) before it gives up.
const SETTLE: Duration = Duration::from_secs(1);

/// What a stop found and did.
#[derive(Debug)]
pub enum Stopped {
    /// No postmaster of this data dir ran: what was found instead.
    NotRunning(Found),
    /// The postmaster (this PID) stopped by the fast shutdown in time.
    Fast(i32),
    /// The postmaster (this PID) did not stop in time and was killed, all of it.
    Killed(i32),
}

/// Stops the postmaster of `data_dir` fast (SIGINT); once `timeout` passed, SIGKILLs
/// the whole server ([`kill_server`]). An error when it could not be signalled
/// (EPERM: never taken for stopped), or when whether one runs cannot be told.
pub async fn stop(data_dir: &Path, timeout: Duration) -> Result<Stopped, String> {
    let start = Instant::now();
    let deadline = start + timeout;
    let postmaster = match settled(data_dir, start + timeout.min(SETTLE)).await {
        Found::Running(postmaster) => postmaster,
        Found::Unreadable(why) => {
            return Err(format!(
                "cannot tell whether a postmaster of {} runs: {why}",
                data_dir.display()
            ))
        }
        doubtful @ Found::Doubtful { .. } => return Err(doubtful.describe()),
        other => return Ok(Stopped::NotRunning(other)),
    };
    let pid = postmaster.pid();
    if !postmaster.signal(Signal::SIGINT)? {
        return Ok(Stopped::Fast(pid));
    }
    loop {
        if !postmaster.alive() {
            return Ok(Stopped::Fast(pid));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        tokio::time::sleep(left.min(POLL)).await;
    }
    kill_server(&postmaster)?;
    Ok(Stopped::Killed(pid))
}

/// What the pid file leads to, read again (without spinning) while it cannot be read,
/// until `until`.
async fn settled(data_dir: &Path, until: Instant) -> Found {
    loop {
        let found = find(data_dir);
        if !matches!(found, Found::Unreadable(_)) || Instant::now() >= until {
            return found;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// SIGKILLs the postmaster's children (those found before it is stopped, and after,
/// each held so that no stranger is hit), its process group if it leads one, then the
/// postmaster: nothing of the server can take a commit after this, even a backend that
/// was itself stopped (SIGSTOP). The first refusal (EPERM) is the error.
pub fn kill_server(postmaster: &Postmaster) -> Result<(), String> {
    let before = postmaster.children();
    let mut refused = postmaster.signal(Signal::SIGSTOP).err();
    let after = postmaster.children();
    for child in before.iter().chain(&after) {
        if let Err(e) = child.signal(Signal::SIGKILL) {
            refused.get_or_insert(e);
        }
    }
    if postmaster.leads_its_group() {
        let _ = killpg(Pid::from_raw(postmaster.pid()), Signal::SIGKILL);
    }
    if let Err(e) = postmaster.signal(Signal::SIGKILL) {
        refused.get_or_insert(e);
    }
    refused.map_or(Ok(()), Err)
}

/// Removes a `postmaster.pid` that names no postmaster of `data_dir` (stale, or naming
/// a stranger: PostgreSQL would refuse to start over a live PID), before a start.
/// Never while a verified postmaster runs (an error then), nor when it cannot be told.
pub fn clear_stale(data_dir: &Path) -> Result<(), String> {
    let found = find(data_dir);
    match &found {
        Found::NoFile => Ok(()),
        Found::Stale { .. } | Found::Foreign { .. } => {
            let path = data_dir.join(pid_file::NAME);
            std::fs::remove_file(&path).or_else(|e| match e.kind() {
                std::io::ErrorKind::NotFound => Ok(()),
                _ => Err(format!("cannot remove {}: {e}", path.display())),
            })?;
            tracing::warn!("{}: removed", found.describe());
            Ok(())
        }
        Found::Running(_) => Err(format!("{}: not starting another", found.describe())),
        Found::Doubtful { .. } => Err(found.describe()),
        Found::Unreadable(why) => Err(format!(
            "{why}: postmaster.pid left in place (remove it by hand if no postmaster of {} runs)",
            data_dir.display()
        )),
    }
}
