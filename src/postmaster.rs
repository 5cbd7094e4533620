//! Stopping a PostgreSQL server by signals, from its data dir alone: the node's
//! manager (src/node/postgres/) stops its server this way, and so does the keeper's
//! fence (src/keeper/supervisor.rs), which must work when the node is stalled or gone.
//! SIGINT is PostgreSQL's fast shutdown (clients are cut off, no new commit is taken);
//! once the deadline passes, the server's whole process group (the postmaster and every
//! backend, as the manager starts it) gets SIGKILL.

use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::{getpgid, Pid};
use std::path::Path;
use std::time::{Duration, Instant};

/// The postmaster's PID from `postmaster.pid` in `data_dir`, if the file is readable.
pub fn pid(data_dir: &Path) -> Option<i32> {
    let text = std::fs::read_to_string(data_dir.join("postmaster.pid")).ok()?;
    text.lines().next()?.trim().parse().ok()
}

/// Stops the postmaster `pid` fast (SIGINT); once `timeout` passed, SIGKILLs its group.
/// `Ok` when it stopped in time (or was not running).
pub async fn stop(pid: i32, timeout: Duration) -> Result<(), String> {
    let pid = Pid::from_raw(pid);
    if kill(pid, Signal::SIGINT).is_err() {
        return Ok(());
    }
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if kill(pid, None).is_err() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    kill_group(pid);
    Err(format!(
        "the server did not stop within {timeout:?}; killed"
    ))
}

/// SIGKILLs the server's process group when the postmaster leads one, else the
/// postmaster alone (a server someone else started).
pub fn kill_group(pid: Pid) {
    match getpgid(Some(pid)) {
        Ok(group) if group == pid => {
            let _ = killpg(group, Signal::SIGKILL);
        }
        _ => {
            let _ = kill(pid, Signal::SIGKILL);
        }
    }
}
