//! `bully run [--config F | --socket P] [--once] [--grace D] [--fence CMD] -- CMD ARGS`:
//! the keeper (`src/keeper/`). Runs CMD only while the local node leads and stops it
//! by the lease's deadlines, even when the node stalls or dies; without CMD it only
//! runs the fence command when the office ends here, or, for a node with `[postgres]`,
//! stops its PostgreSQL server (src/postmaster.rs).

use super::parse_duration;
use crate::keeper::{self, Outcome, Spec};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// `bully run ...`
#[derive(Debug, Args, Clone)]
pub struct RunArgs {
    /// The local node's config: the keeper socket in its data_dir, and its `[fence]`
    /// table (command, grace_ms). The job and the fence command run beside it.
    #[arg(long, short, required_unless_present = "socket")]
    pub config: Option<PathBuf>,
    /// The node's keeper socket (`<data_dir>/keeper.sock`), instead of --config.
    #[arg(long, conflicts_with = "config")]
    pub socket: Option<PathBuf>,
    /// Exit (code 1) once the job was stopped because the node stopped leading,
    /// instead of starting it again on the next leadership.
    #[arg(long)]
    pub once: bool,
    /// The least time the job needs between SIGTERM and SIGKILL, e.g. 150ms. Default:
    /// what the lease leaves (about 74 ms with the default timing). Refused when a
    /// healthy node's lease cannot give it.
    #[arg(long, value_parser = parse_duration)]
    pub grace: Option<Duration>,
    /// Run with `sh -c` whenever the office ends on this host, before any other node
    /// could lead (overrides `[fence] command`).
    #[arg(long, value_name = "CMD")]
    pub fence: Option<String>,
    /// The job and its arguments, after `--`. It gets BULLY_TOKEN, BULLY_TERM,
    /// BULLY_COORDINATOR, BULLY_NODE_ID and BULLY_DATA_DIR, runs in its own process
    /// group, and the whole group dies with the keeper.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// Runs the keeper until the job exits by itself (its exit code), `--once` is done
/// (1), SIGTERM or Ctrl-C (0, after stopping the job), or an error (2).
pub async fn run(args: &RunArgs) -> ExitCode {
    let spec = match spec(args) {
        Ok(spec) => spec,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    tracing::info!(socket = %spec.socket.display(), what = %spec.what(), "keeper starting");
    let outcome = keeper::run(spec, super::sigterm_or_ctrl_c()).await;
    if let Outcome::Failed(why) = &outcome {
        eprintln!("error: {why}");
    }
    ExitCode::from(outcome.exit_code())
}

/// The keeper's settings from the flags and, with --config, the node's config.
fn spec(args: &RunArgs) -> Result<Spec, String> {
    let (socket, fence, workdir, postgres) = match (&args.config, &args.socket) {
        (Some(path), _) => {
            let config = crate::config::load(path).map_err(|e| e.to_string())?;
            let workdir = crate::config::directory_of(path).to_path_buf();
            let postgres = config.postgres.as_ref().map(|p| p.data_dir.clone());
            (config.keeper_socket(), config.fence, workdir, postgres)
        }
        (None, Some(socket)) => (socket.clone(), Default::default(), PathBuf::from("."), None),
        (None, None) => return Err("give --config or --socket".into()),
    };
    let fence_command = args.fence.clone().or(fence.command);
    if args.command.is_empty() && fence_command.is_none() && postgres.is_none() {
        return Err(
            "nothing to keep: give a job after `--`, a fence command (--fence or [fence] \
             command), or a config with [postgres]"
                .into(),
        );
    }
    let grace = args
        .grace
        .or((fence.grace_ms > 0).then(|| Duration::from_millis(fence.grace_ms)));
    let guard = std::env::current_exe()
        .map_err(|e| format!("cannot find the bully binary to run the job's guard: {e}"))?;
    Ok(Spec {
        socket,
        command: args.command.clone(),
        fence_command,
        fence_postgres: postgres,
        grace,
        once: args.once,
        workdir,
        guard,
    })
}
