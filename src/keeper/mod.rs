//! The keeper: the process that fences this host for its node without trusting the
//! node's process (`bully run`). It learns from the node, over the unix socket in the
//! data dir (`src/api/keeper.rs`), whether the node leads and until when, runs a job
//! (a command) only while it does, and stops it (the fence command, SIGTERM, SIGKILL)
//! by the deadlines it was last given, so the job is dead before any other node can
//! take office, even when the node is stalled (SIGSTOP, swap, a hung disk), killed -9
//! or gone. On a voluntary handover the node waits for the keeper's release before it
//! resigns (`src/node/serve/keepers.rs`).
//!
//! - `plan`: the SIGTERM and SIGKILL instants a grant gives (pure).
//! - `job`: the command, in a process group of its own; `guard`: the process that leads
//!   that group and kills it when the keeper dies.
//! - `link`: the connection to the node.
//! - `supervisor`: the loop that ties them together.

pub mod guard;
mod job;
mod link;
pub mod plan;
mod supervisor;

use std::path::PathBuf;
use std::time::Duration;

/// What a keeper runs, and where its node is.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The node's keeper socket (`<data_dir>/keeper.sock`).
    pub socket: PathBuf,
    /// The job: program and arguments. Empty: hold the epoch only, to run the fence
    /// command when it ends.
    pub command: Vec<String>,
    /// Run with `sh -c` when a hold ends, before the SIGKILL instant (`[fence] command`).
    pub fence_command: Option<String>,
    /// The data dir of the PostgreSQL server the node keeps (`[postgres]`): when a hold
    /// ends, that server gets a fast shutdown, and SIGKILL for its whole process group
    /// at the SIGKILL instant (src/postmaster.rs).
    pub fence_postgres: Option<PathBuf>,
    /// The least time between SIGTERM and SIGKILL the job needs; `None`: what the lease
    /// leaves (see `plan`).
    pub grace: Option<Duration>,
    /// Exit once the first job has stopped instead of waiting for the next leadership.
    pub once: bool,
    /// Where the job and the fence command run.
    pub workdir: PathBuf,
    /// The `bully` binary, which runs the job under its guard (`bully run-guard`).
    pub guard: PathBuf,
}

impl Spec {
    /// The job as one line, for logs and the node's table.
    pub fn what(&self) -> String {
        match self.command.is_empty() {
            true => match (&self.fence_command, &self.fence_postgres) {
                (Some(command), _) => format!("fence: {command}"),
                (None, Some(data_dir)) => format!("fence: postgres at {}", data_dir.display()),
                (None, None) => "fence: -".into(),
            },
            false => self.command.join(" "),
        }
    }
}

/// How a keeper ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The job exited by itself with this code (128 + N for signal N).
    JobExited(i32),
    /// With `--once`: the job was stopped because its node's office ended.
    OfficeEnded,
    /// Asked to stop; whatever ran was stopped first.
    Stopped,
    /// It could not go on (a job that cannot start, a grace the lease cannot give).
    Failed(String),
}

impl Outcome {
    /// The exit code of `bully run`: the job's own, 0 after a requested stop, 1 when
    /// `--once` ended with the office, 2 on an error.
    pub fn exit_code(&self) -> u8 {
        match self {
            Outcome::JobExited(code) => u8::try_from(*code).unwrap_or(1),
            Outcome::Stopped => 0,
            Outcome::OfficeEnded => 1,
            Outcome::Failed(_) => 2,
        }
    }
}

/// Runs a keeper for `spec` until it is done or `stop` resolves.
pub async fn run(spec: Spec, stop: impl std::future::Future<Output = ()>) -> Outcome {
    supervisor::Keeper::new(spec).run(stop).await
}
