//! The job a keeper runs while its node leads: one command in a process group of its
//! own (so SIGTERM and SIGKILL reach everything it started), told its epoch through
//! `BULLY_*` variables, started under the guard (`super::guard`), which kills the whole
//! group if the keeper dies. Whatever of the group outlives the job is killed when the
//! job is reaped ([`Job::wait`]), so nothing it started runs on after a release.

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
    /// Starts `command` (program and arguments) in `dir` with `env` (see
    /// [`environment`]), under the guard: `bully` (the binary at `guard`) `run-guard --
    /// command`, which leads the job's process group.
    pub fn start(
        command: &[String],
        dir: &Path,
        env: &[(String, String)],
        guard: &Path,
    ) -> std::io::Result<Job> {
        if command.is_empty() {
            return Err(std::io::Error::other("no command to run"));
        }
        let mut cmd = tokio::process::Command::new(guard);
        cmd.arg(super::guard::SUBCOMMAND)
            .arg("--")
            .args(command)
            .current_dir(dir)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .env(super::guard::KEEPER_PID, std::process::id().to_string())
            .stdin(Stdio::null())
            .process_group(0)
            .kill_on_drop(true);
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

    /// Waits for the job to end (cancellation-safe), then SIGKILLs whatever of its
    /// group is left (a child that ignored SIGTERM, a background process).
    pub async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        let status = self.child.wait().await;
        // The group outlives its leader while any member lives; ESRCH: none does.
        let _ = signals::send_group(self.pid, Signal::SIGKILL);
        status
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

    #[test]
    fn the_environment_names_the_epoch_and_the_data_dir() {
        let epoch = Epoch { term: 6, leader: 2 };
        let grant = Grant {
            epoch: Some(epoch),
            ..Grant::none(2)
        };
        let env = environment(&grant, epoch, Path::new("/var/lib/bully"));
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("BULLY_TOKEN"), Some(epoch.token().to_string().as_str()));
        assert_eq!(get("BULLY_TERM"), Some("6"));
        assert_eq!(get("BULLY_COORDINATOR"), Some("2"));
        assert_eq!(get("BULLY_NODE_ID"), Some("2"));
        assert_eq!(get("BULLY_DATA_DIR"), Some("/var/lib/bully"));
    }
}
