//! The guard (`bully run-guard -- CMD`, hidden): the process a keeper starts in place of
//! its job, so the whole job dies with the keeper. The kernel's parent-death signal
//! (`PR_SET_PDEATHSIG`) reaches only the keeper's direct child and is cleared in
//! anything that child forks; a job's own children (a wrapper script's daemon) would
//! outlive a killed keeper. The guard leads the job's process group, asks for SIGUSR2
//! when the keeper dies, and answers it by SIGKILLing the whole group, itself included.
//!
//! It runs the job in its own group, waits for it and exits with its code; SIGTERM from
//! the keeper reaches the job through the group, and the guard itself ignores it (by a
//! handler, not `SIG_IGN`, which the job would inherit). No async runtime: a few
//! system calls and a wait.

use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
use std::process::ExitCode;

/// The variable carrying the keeper's PID: a guard whose parent is already someone
/// else (the keeper died before the guard asked for its death signal) kills its group.
pub const KEEPER_PID: &str = "BULLY_KEEPER_PID";

/// The hidden subcommand's name.
pub const SUBCOMMAND: &str = "run-guard";

/// SIGKILL to the caller's whole process group; async-signal-safe (one system call).
extern "C" fn kill_group(_: nix::libc::c_int) {
    // kill(2) is async-signal-safe, and nix's wrapper allocates nothing; PID 0 names
    // the caller's process group.
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(0), Signal::SIGKILL);
}

/// SIGTERM is for the job; the guard waits for the job to end.
extern "C" fn ignore(_: nix::libc::c_int) {}

/// Runs `command` under the guard; the exit code is the job's (128 + N for signal N),
/// or 2 when the job cannot be started.
pub fn run(command: &[String]) -> ExitCode {
    let Some((program, args)) = command.split_first() else {
        eprintln!("error: run-guard needs a command");
        return ExitCode::from(2);
    };
    if let Err(e) = arm() {
        eprintln!("error: run-guard: {e}");
        return ExitCode::from(2);
    }
    let mut child = match std::process::Command::new(program).args(args).spawn() {
        Ok(child) => child,
        Err(e) => {
            eprintln!("error: cannot start `{}`: {e}", command.join(" "));
            return ExitCode::from(127);
        }
    };
    match child.wait() {
        Ok(status) => ExitCode::from(u8::try_from(crate::signals::exit_code(status)).unwrap_or(1)),
        Err(e) => {
            eprintln!("error: run-guard: cannot wait for the job: {e}");
            ExitCode::from(1)
        }
    }
}

/// Installs the handlers, asks for SIGUSR2 on the keeper's death, and checks the
/// keeper is still the parent (else the group dies now).
fn arm() -> nix::Result<()> {
    let handler = |f| SigAction::new(SigHandler::Handler(f), SaFlags::SA_RESTART, SigSet::empty());
    // SAFETY: both handlers only make async-signal-safe calls (none, or kill(2)).
    // No safe call serves: a handler of our own is the point (`SIG_IGN` would be
    // inherited by the job, and the keeper's death must kill the group even while the
    // guard blocks in wait(2)); std has no signal API, nix's `sigaction` is unsafe
    // because the handler runs in signal context, and tokio's signals need a runtime
    // this process does not have.
    unsafe {
        sigaction(Signal::SIGUSR2, &handler(kill_group))?;
        sigaction(Signal::SIGTERM, &handler(ignore))?;
    }
    nix::sys::prctl::set_pdeathsig(Some(Signal::SIGUSR2))?;
    let keeper = std::env::var(KEEPER_PID)
        .ok()
        .and_then(|p| p.parse::<i32>().ok());
    if keeper.is_some_and(|pid| nix::unistd::getppid().as_raw() != pid) {
        kill_group(0);
    }
    Ok(())
}
