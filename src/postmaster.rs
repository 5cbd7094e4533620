//! Stopping a PostgreSQL server by signals, from its data dir alone: the node's
//! manager (src/node/postgres/) stops its server this way, and so does the keeper's
//! fence (src/keeper/supervisor.rs), which must work when the node is stalled or gone.
//! SIGINT is PostgreSQL's fast shutdown (clients are cut off, no new commit is taken);
//! once the deadline passes, the postmaster and every process it started get SIGKILL
//! (each of PostgreSQL's children leads a session of its own, so one process group
//! does not hold them: they are found by their parent in /proc).

use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::{getpgid, Pid};
use std::path::Path;
use std::time::{Duration, Instant};

/// The postmaster's PID from `postmaster.pid` in `data_dir`, if the file is readable.
pub fn pid(data_dir: &Path) -> Option<i32> {
    let text = std::fs::read_to_string(data_dir.join("postmaster.pid")).ok()?;
    text.lines().next()?.trim().parse().ok()
}

/// Stops the postmaster `pid` fast (SIGINT); once `timeout` passed, SIGKILLs the whole
/// server ([`kill_server`]).
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
    kill_server(pid);
    Err(format!(
        "the server did not stop within {timeout:?}; killed"
    ))
}

/// SIGKILLs the postmaster's children (found before it dies, while they are still its
/// children), then the postmaster, then its process group: nothing of the server can
/// take a commit after this, even a backend that was itself stopped (SIGSTOP).
pub fn kill_server(pid: Pid) {
    let children = children_of(pid);
    let _ = kill(pid, Signal::SIGSTOP);
    for child in children_of(pid).into_iter().chain(children) {
        let _ = kill(child, Signal::SIGKILL);
    }
    let _ = kill(pid, Signal::SIGKILL);
    if getpgid(Some(pid)) == Ok(pid) {
        let _ = killpg(pid, Signal::SIGKILL);
    }
}

/// The processes whose parent is `pid`, from /proc (empty when /proc is unreadable).
fn children_of(pid: Pid) -> Vec<Pid> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let child: i32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            // pid (comm) state ppid ...: the comm may hold spaces, so read after ')'.
            let after = stat.rsplit(')').next()?;
            let ppid: i32 = after.split_whitespace().nth(1)?.parse().ok()?;
            (ppid == pid.as_raw()).then_some(Pid::from_raw(child))
        })
        .collect()
}
