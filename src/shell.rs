//! Runs one user command (a node's hook or health check, a keeper's fence command) with
//! `sh -c`, with a timeout that kills the command's whole process group, so a hook that
//! started children (a `redis-cli` in a pipeline, a `sleep`) cannot outlive its timeout.
//!
//! Cancellation-safe in the sense that matters here: dropping the future (the node
//! shutting down) kills the shell through tokio's `kill_on_drop`. A command can also be
//! cancelled on purpose ([`run_until`]): its whole process group is killed at once.

use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How a shell command ended (named apart from the API's answers and the machine's
/// outcomes: this is only ever a child process's end).
#[derive(Debug)]
pub enum ShellExit {
    /// Exit status 0.
    Success,
    /// A non-zero exit status or a signal.
    Failed(ExitStatus),
    /// Still running at the timeout; its process group was killed.
    TimedOut,
    /// Cancelled by the caller (e.g. an `on_elected` whose epoch ended); its process
    /// group was killed.
    Cancelled,
    /// `sh` could not be started or waited for.
    Error(std::io::Error),
}

impl ShellExit {
    /// Whether the command succeeded.
    pub fn is_success(&self) -> bool {
        matches!(self, ShellExit::Success)
    }
}

impl std::fmt::Display for ShellExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ShellExit::Success => f.write_str("succeeded"),
            ShellExit::Failed(status) => write!(f, "failed ({status})"),
            ShellExit::TimedOut => f.write_str("timed out and was killed"),
            ShellExit::Cancelled => f.write_str("was cancelled and killed"),
            ShellExit::Error(e) => write!(f, "could not run: {e}"),
        }
    }
}

/// A command to run: the shell text, where, with which extra environment.
#[derive(Debug, Clone)]
pub struct Shell<'a> {
    pub command: &'a str,
    pub dir: &'a Path,
    pub env: &'a [(String, String)],
    pub timeout: Duration,
    /// Discard the command's stdout (health checks run often); stderr always goes to
    /// the node's stderr so failures can be read in its log.
    pub quiet: bool,
}

/// Runs the command to completion or timeout; returns how it ended and how long it took.
pub async fn run(shell: &Shell<'_>) -> (ShellExit, Duration) {
    run_until(shell, std::future::pending()).await
}

/// Like [`run`], but kills the command's process group as soon as `cancel` completes
/// (at once if it already has).
pub async fn run_until(
    shell: &Shell<'_>,
    cancel: impl std::future::Future<Output = ()>,
) -> (ShellExit, Duration) {
    let started = Instant::now();
    let (outcome, _) = run_inner(shell, cancel, false).await;
    (outcome, started.elapsed())
}

/// The most of a command's stdout [`run_capture_until`] keeps.
pub const CAPTURE_LIMIT: u64 = 4096;

/// Like [`run_until`], and returns what the command printed on stdout (its first
/// [`CAPTURE_LIMIT`] bytes; `quiet` is ignored): a health check's `est=N` line, an
/// estimate command's number (src/node/commands/estimate.rs). A command that leaves a
/// child holding its stdout open runs into its timeout.
pub async fn run_capture_until(
    shell: &Shell<'_>,
    cancel: impl std::future::Future<Output = ()>,
) -> (ShellExit, Duration, Vec<u8>) {
    let started = Instant::now();
    let (outcome, out) = run_inner(shell, cancel, true).await;
    (outcome, started.elapsed(), out)
}

async fn run_inner(
    shell: &Shell<'_>,
    cancel: impl std::future::Future<Output = ()>,
    capture: bool,
) -> (ShellExit, Vec<u8>) {
    use tokio::io::AsyncReadExt;
    let mut command = tokio::process::Command::new("sh");
    command
        .arg("-c")
        .arg(shell.command)
        .current_dir(shell.dir)
        .envs(shell.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(if capture {
            Stdio::piped()
        } else if shell.quiet {
            Stdio::null()
        } else {
            Stdio::inherit()
        })
        .stderr(Stdio::inherit())
        // Its own process group, so the timeout can kill everything it started.
        .process_group(0)
        .kill_on_drop(true);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => return (ShellExit::Error(e), Vec::new()),
    };
    let pid = child.id();
    let mut stdout = child.stdout.take();
    let mut out = Vec::new();
    let read = async {
        if let Some(stdout) = stdout.as_mut() {
            let _ = stdout.take(CAPTURE_LIMIT).read_to_end(&mut out).await;
        }
    };
    let ended = tokio::select! {
        // Cancellation first: a cancel that is already due wins over a finished child.
        biased;
        _ = cancel => ShellExit::Cancelled,
        waited = tokio::time::timeout(shell.timeout, async {
            tokio::join!(child.wait(), read).0
        }) => match waited {
            Ok(Ok(status)) if status.success() => ShellExit::Success,
            Ok(Ok(status)) => ShellExit::Failed(status),
            Ok(Err(e)) => ShellExit::Error(e),
            Err(_) => ShellExit::TimedOut,
        },
    };
    if matches!(ended, ShellExit::Cancelled | ShellExit::TimedOut) {
        if let Some(pid) = pid {
            kill_group(pid);
        }
        let _ = child.kill().await;
    }
    (ended, out)
}

/// SIGKILLs the process group led by `pid` (the shell we started with
/// `process_group(0)`), so the commands it started go too.
fn kill_group(pid: u32) {
    if let Err(e) = crate::signals::send_group(pid, crate::signals::Signal::SIGKILL) {
        tracing::debug!(pid, "cannot kill the command's process group: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shell<'a>(command: &'a str, env: &'a [(String, String)], timeout_ms: u64) -> Shell<'a> {
        Shell {
            command,
            dir: Path::new("/"),
            env,
            timeout: Duration::from_millis(timeout_ms),
            quiet: true,
        }
    }

    #[tokio::test]
    async fn exit_status_and_environment() {
        let env = [("BULLY_TEST_VALUE".to_string(), "7".to_string())];
        let (ok, _) = run(&shell(
            "test \"$BULLY_TEST_VALUE\" = 7 && test \"$PWD\" = /",
            &env,
            5000,
        ))
        .await;
        assert!(ok.is_success(), "{ok}");
        let (failed, _) = run(&shell("exit 3", &[], 5000)).await;
        assert!(
            matches!(failed, ShellExit::Failed(s) if s.code() == Some(3)),
            "{failed}"
        );
    }

    #[tokio::test]
    async fn cancel_kills_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("late");
        let command = format!("(sleep 1; touch {}) & sleep 5", marker.display());
        let cancel = tokio::time::sleep(Duration::from_millis(200));
        let (outcome, took) = run_until(&shell(&command, &[], 10_000), cancel).await;
        assert!(matches!(outcome, ShellExit::Cancelled), "{outcome}");
        assert!(took < Duration::from_secs(3), "took {took:?}");
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(!marker.exists(), "a child of the cancelled hook lived on");
    }

    #[tokio::test]
    async fn timeout_kills_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("late");
        // A background grandchild that would write the marker after the timeout.
        let command = format!("(sleep 1; touch {}) & sleep 5", marker.display());
        let (outcome, took) = run(&shell(&command, &[], 200)).await;
        assert!(matches!(outcome, ShellExit::TimedOut), "{outcome}");
        assert!(took < Duration::from_secs(3), "took {took:?}");
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(!marker.exists(), "a child of the hook outlived its timeout");
    }
}
