//! Signals to processes this program started, through `nix`: the one place the crate
//! sends process signals, and one of the crate's few documented `unsafe` blocks (the
//! others register [`crate::exact_timer`]'s timerfd with tokio's reactor, make the
//! watchdog device's ioctls, `src/node/drive/watchdog_device.rs`, and install the
//! keeper guard's signal handlers, `src/keeper/guard.rs`; `src/lib.rs` lists them).

pub use nix::sys::signal::Signal;
use nix::sys::signal::{self, SigHandler};
use nix::unistd::Pid;

/// Sends `signal` to process `pid`, which the caller spawned and has not reaped (so
/// the PID cannot belong to an unrelated process). `Err` says why the kernel refused.
pub fn send(pid: u32, signal: Signal) -> std::io::Result<()> {
    signal::kill(to_pid(pid)?, signal).map_err(std::io::Error::from)
}

/// Sends `signal` to the process group led by `pid` (a child started with
/// `process_group(0)`, whose group ID is its PID), reaching the commands it started.
pub fn send_group(pid: u32, signal: Signal) -> std::io::Result<()> {
    signal::killpg(to_pid(pid)?, signal).map_err(std::io::Error::from)
}

/// The exit code a finished child's status stands for, the shell's way: its code, or
/// 128 + the signal that ended it (what `bully run` and its guard exit with).
pub fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}

/// Whether process `pid` exists (signal 0 checks without delivering anything).
pub fn exists(pid: u32) -> bool {
    to_pid(pid).is_ok_and(|pid| signal::kill(pid, None).is_ok())
}

fn to_pid(pid: u32) -> std::io::Result<Pid> {
    i32::try_from(pid)
        .ok()
        .filter(|&p| p > 0)
        .map(Pid::from_raw)
        .ok_or_else(|| std::io::Error::other(format!("{pid} is not a process ID")))
}

/// Lets the process die quietly of SIGPIPE when its stdout reader goes away
/// (`bully status | head -1`), like other Unix tools, instead of panicking in
/// `println!`. Only for commands that own no children and no sockets to other
/// processes' streams: a node (which writes to HTTP clients) keeps Rust's default of
/// ignoring SIGPIPE so a vanished client is an error, not a death.
pub fn die_quietly_on_sigpipe() {
    // SAFETY: installing SIG_DFL runs no handler code, so none of signal(2)'s
    // async-signal-safety conditions apply; it is called before the command starts
    // any thread. No safe call serves: std sets SIGPIPE to ignored before `main` and
    // offers no stable way back, and nix's `signal` is unsafe for every disposition.
    unsafe {
        let _ = signal::signal(Signal::SIGPIPE, SigHandler::SigDfl);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;
    use std::process::ExitStatus;

    #[test]
    fn exit_codes_read_the_shell_way() {
        assert_eq!(exit_code(ExitStatus::from_raw(7 << 8)), 7);
        assert_eq!(
            exit_code(ExitStatus::from_raw(9)),
            128 + 9,
            "killed by SIGKILL"
        );
        assert_eq!(
            exit_code(ExitStatus::from_raw(15)),
            128 + 15,
            "killed by SIGTERM"
        );
    }

    #[test]
    fn refuses_pids_that_would_mean_a_group_or_everyone() {
        assert!(send(0, Signal::SIGTERM).is_err());
        assert!(send(u32::MAX, Signal::SIGTERM).is_err());
        assert!(!exists(0));
    }

    #[test]
    fn a_live_child_exists_until_reaped() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn sleep");
        assert!(exists(child.id()));
        send(child.id(), Signal::SIGKILL).expect("kill our own child");
        let status = child.wait().expect("reap");
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(Signal::SIGKILL as i32));
    }
}
