//! The job a keeper runs while its node leads: one command in a process group of its
//! own (so SIGTERM and SIGKILL reach everything it started), told its epoch through
//! `BULLY_*` variables, and killed by the kernel if the keeper itself dies
//! (`PR_SET_PDEATHSIG`), so no job outlives the process that fences it.

use crate::api::keeper::Grant;
use crate::protocol::Epoch;
use crate::signals::{self, Signal};
use std::path::Path;
use std::process::{ExitStatus, Stdio};

/// A running job.
#[derive(Debug)]
pub struct Job {
    child: tokio::process::Child,
    pid: u32,
    terminated: bool,
    killed: bool,
}

impl Job {
    /// Starts `command` (program and arguments) in `dir` for the epoch `grant` leads,
    /// with `env` (see [`environment`]).
    pub fn start(command: &[String], dir: &Path, env: &[(String, String)]) -> std::io::Result<Job> {
        let (program, args) = command
            .split_first()
            .ok_or_else(|| std::io::Error::other("no command to run"))?;
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(args)
            .current_dir(dir)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .process_group(0)
            .kill_on_drop(true);
        // SAFETY: the closure runs in the forked child before exec and only makes the
        // prctl system call, which is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                nix::sys::prctl::set_pdeathsig(Some(Signal::SIGKILL)).map_err(std::io::Error::from)
            });
        }
        let child = cmd.spawn()?;
        let pid = child
            .id()
            .ok_or_else(|| std::io::Error::other("the job exited before it was seen"))?;
        Ok(Job {
            child,
            pid,
            terminated: false,
            killed: false,
        })
    }

    /// The process ID (and group ID) of the job.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Sends SIGTERM to the job's process group, once.
    pub fn terminate(&mut self) {
        if !std::mem::replace(&mut self.terminated, true) {
            self.signal(Signal::SIGTERM);
        }
    }

    /// Sends SIGKILL to the job's process group, once (a stopped process dies too).
    pub fn kill(&mut self) {
        if !std::mem::replace(&mut self.killed, true) {
            self.signal(Signal::SIGKILL);
        }
    }

    /// Whether SIGKILL was sent.
    pub fn killed(&self) -> bool {
        self.killed
    }

    /// Waits for the job's process to end (cancellation-safe).
    pub async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        self.child.wait().await
    }

    fn signal(&self, signal: Signal) {
        if let Err(e) = signals::send_group(self.pid, signal) {
            tracing::debug!(
                pid = self.pid,
                ?signal,
                "cannot signal the job's group: {e}"
            );
        }
    }
}

/// The exit code a status stands for, the shell's way: the code, or 128 + the signal.
pub fn exit_code(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}

/// What the job (and the fence command) is told: `BULLY_TOKEN`, `BULLY_TERM`,
/// `BULLY_COORDINATOR` (the node leading, this one), `BULLY_NODE_ID` and, as hooks get
/// it, `BULLY_DATA_DIR` (where the node's socket is).
pub fn environment(grant: &Grant, epoch: Epoch, data_dir: &Path) -> Vec<(String, String)> {
    vec![
        ("BULLY_TOKEN".into(), epoch.token().to_string()),
        ("BULLY_TERM".into(), epoch.term.to_string()),
        ("BULLY_COORDINATOR".into(), epoch.leader.to_string()),
        ("BULLY_NODE_ID".into(), grant.node.to_string()),
        ("BULLY_DATA_DIR".into(), data_dir.display().to_string()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const EPOCH: Epoch = Epoch { term: 6, leader: 2 };

    fn grant() -> Grant {
        Grant {
            epoch: Some(EPOCH),
            ..Grant::none(2)
        }
    }

    fn sh(script: &str) -> Vec<String> {
        vec!["sh".into(), "-c".into(), script.into()]
    }

    #[tokio::test]
    async fn the_job_sees_its_epoch_and_its_exit_code_comes_back() {
        let dir = tempfile::tempdir().unwrap();
        let script = format!(
            "test \"$BULLY_TOKEN\" = {} && test \"$BULLY_TERM\" = 6 && test \"$BULLY_COORDINATOR\" = 2 && test \"$BULLY_DATA_DIR\" = {} && exit 7",
            EPOCH.token(),
            dir.path().display()
        );
        let env = environment(&grant(), EPOCH, dir.path());
        let mut job = Job::start(&sh(&script), dir.path(), &env).unwrap();
        let status = tokio::time::timeout(Duration::from_secs(10), job.wait())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(exit_code(status), 7);
    }

    #[tokio::test]
    async fn sigkill_reaches_the_whole_group_even_a_stopped_one() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("late");
        let script = format!(
            "(sleep 1; touch {}) & kill -STOP $$; sleep 5",
            marker.display()
        );
        let env = environment(&grant(), EPOCH, dir.path());
        let mut job = Job::start(&sh(&script), dir.path(), &env).unwrap();
        let stopped = || {
            let stat = std::fs::read_to_string(format!("/proc/{}/stat", job.pid()));
            stat.is_ok_and(|s| {
                s.rsplit(')')
                    .next()
                    .is_some_and(|r| r.trim_start().starts_with('T'))
            })
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !stopped() {
            assert!(
                std::time::Instant::now() < deadline,
                "the job never stopped itself"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        job.kill();
        assert!(job.killed());
        let status = tokio::time::timeout(Duration::from_secs(10), job.wait())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(exit_code(status), 128 + 9);
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(!marker.exists(), "a child of the job outlived the kill");
    }

    #[test]
    fn an_empty_command_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let err = rt
            .block_on(async { Job::start(&[], dir.path(), &[]) })
            .unwrap_err();
        assert_eq!(err.to_string(), "no command to run");
    }
}
