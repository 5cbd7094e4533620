//! The command line: one binary, `bully`, with a subcommand per job.
//! Exit codes: 0 success, 1 "no" (e.g. no leader known), 2 bad input or unreachable.

mod certs;
mod chaos;
mod cluster_status;
mod docs;
mod endpoints;
mod history;
mod history_words;
mod leader;
mod local;
mod local_board;
pub mod logging;
mod member;
mod node;
mod pause;
mod pg;
mod query;
mod recover;
mod run;
mod run_dir;
mod settings;
mod switch_time;
mod table;

pub use certs::CertsCommand;

use crate::config::duration::{self, BareUnit, DurationError};
use crate::protocol::{NodeId, Timing};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Leader election for small clusters: the Bully algorithm over QUIC with mutual TLS.
/// The highest live node ID leads; its epoch is a fencing token.
#[derive(Debug, Parser)]
#[command(name = "bully", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Commands,
    /// Log lines on stderr: text (coloured only on a terminal) or json (one object
    /// per line). The level comes from BULLY_LOG (default info,quinn=warn,rustls=warn).
    #[arg(long, global = true, value_enum, default_value_t = logging::LogFormat::Text)]
    pub log_format: logging::LogFormat,
}

/// Every subcommand.
#[derive(Debug, Subcommand)]
pub enum Commands {
    /// Make a cluster CA, add nodes and clients to it, list certificates.
    Certs {
        #[command(subcommand)]
        action: CertsCommand,
    },
    /// Run a node until SIGTERM or Ctrl-C.
    ///
    /// SIGHUP (`systemctl reload`) re-reads the config file and applies hooks, health,
    /// http and tls without leaving the cluster; id, listen, data_dir, witness, preempt,
    /// timing and peers need a restart, and the mode is the cluster's (--change-mode).
    /// Under systemd (`Type=notify`) the node reports ready once it knows a coordinator.
    Node {
        /// The node's TOML config (see config/node1.toml).
        #[arg(long, short)]
        config: PathBuf,
        /// The first start of a new cluster: an empty store votes at once instead of first
        /// hearing the current term from M - q + 1 other members. Only needed to start a
        /// new cluster with fewer members up than that; UNSAFE on a node that lost its
        /// data dir (it could vote twice in one term). Ignored once the store holds a term.
        #[arg(long)]
        new_cluster: bool,
        /// The mode in the config file replaces the one this node's store was first
        /// started in. The mode is the cluster's: stop every node, set the new mode in
        /// every file, then start each once with this flag. Without it a node whose file
        /// names another mode refuses to start.
        #[arg(long)]
        change_mode: bool,
    },
    /// Print the coordinator, as it says itself under its lease: all endpoints asked at
    /// once (with --config the node and its peers), and a follower asks the coordinator
    /// for us, so any member's address will do. Quorum mode names no coordinator that
    /// did not confirm; classic mode names a follower's view younger than D. Exit 0:
    /// known, 1: none or only an unconfirmed view, 2: no answer.
    Leader(QueryArgs),
    /// Print a node's role, epoch, coordinator and peers; with --cluster one row per
    /// member.
    Status {
        #[command(flatten)]
        query: QueryArgs,
        /// One row per member: ask every endpoint (with --config: the node and all its
        /// peers) and list role, epoch, coordinator, eligibility, peers up and lag.
        #[arg(long)]
        cluster: bool,
    },
    /// Print one line per coordinator change until interrupted.
    Watch(QueryArgs),
    /// One timeline merged from every member's event log (with --config: the node and
    /// all its peers; else every --endpoints): elections, declarations, demotions with
    /// their reasons, hook runs, eligibility changes, restarts, in time order; members
    /// that did not answer are named. Exit 0: one or more answered, 2: none.
    History {
        #[command(flatten)]
        query: QueryArgs,
        /// How far back, e.g. 1h, 30m or 90s (a bare number: seconds).
        #[arg(long, value_parser = parse_duration, default_value = "1h")]
        since: Duration,
    },
    /// Ask the coordinator to stop leading for a while so the next highest takes over,
    /// or with --to N hand over to node N (switchover), now or with --at TIME later;
    /// --cancel drops a scheduled one. Any member will do: one that does not lead passes
    /// it on to the coordinator, and the answer names who acted.
    StepDown {
        #[command(flatten)]
        query: QueryArgs,
        /// How long the node stays ineligible, e.g. 60s, 500ms or 1h (a bare number: seconds).
        #[arg(long = "for", value_parser = parse_duration, default_value = "60s")]
        for_: Duration,
        /// Hand over to this node: members above it stand aside for the same period (or
        /// until it stops leading). Refused, with the reason, if it cannot take over
        /// (unknown, witness, unreachable, ineligible).
        #[arg(long, value_name = "N")]
        to: Option<NodeId>,
        /// With --to: hand over at TIME, not now. TIME is +DURATION from now (+10m,
        /// +90s) or a UTC time in RFC 3339 (2026-11-26T15:00:00Z). The coordinator
        /// checks N now and again at TIME; it holds the schedule in memory while it
        /// leads (dropped, and logged, if it stops leading first). See `status`.
        #[arg(long, value_name = "TIME", requires = "to", value_parser = switch_time::parse)]
        at: Option<switch_time::SwitchTime>,
        /// Drop the coordinator's scheduled switchover.
        #[arg(long, conflicts_with_all = ["to", "at"])]
        cancel: bool,
    },
    /// The PostgreSQL server a node keeps (`[postgres]`): `reinit N` clones node N's
    /// server afresh from the primary (its old data dir kept aside), `restart N` stops
    /// and starts it in the role it has, `reload N` has it reread its configuration.
    Pg {
        #[command(subcommand)]
        verb: pg::PgCommand,
    },
    /// Maintenance pause: no automatic failover or preemption until `bully resume`.
    /// The coordinator keeps its role while its lease holds; if it goes, the cluster
    /// stays without one (and says so in `status`). Written to every member that
    /// answers (each keeps it across restarts; one that did not answer learns it from
    /// the first peer it reaches). Hooks do not run for the pause itself. Exit 0: kept
    /// by a majority, 1: not (or no coordinator to keep), 2: no member answered.
    Pause(QueryArgs),
    /// End a maintenance pause: automatic failover and preemption are on again; with no
    /// coordinator, one election follows. Exit codes as for `pause`.
    Resume(QueryArgs),
    /// See and change the member list at runtime: list, add, remove, replace. A change
    /// goes to any member, which passes it to the coordinator; one change at a time,
    /// each committed by a majority of the members before and after it.
    Member {
        #[command(subcommand)]
        action: member::MemberAction,
    },
    /// See and change the cluster settings (timing, preemption, PostgreSQL's synchronous
    /// mode and parameters) at runtime: show, set
    /// KEY=VALUE, edit. They live in the replicated member list: a host's config file
    /// seeds a new cluster only, and a change goes to any member, which passes it to
    /// the coordinator; every member lives by it once it is committed, with no restart.
    Config {
        #[command(subcommand)]
        action: settings::ConfigAction,
    },
    /// Recovery from a lost majority, on a stopped survivor: its store is made to hold
    /// a new member list of the --members only, stamped and with a term above every
    /// term it has seen, so a plain `bully node` start leads with them alone. Without
    /// --force: prints what it would write and what can be lost, changes nothing,
    /// exits 1. The lost members must never start again on their old data dirs: wipe
    /// them and add them back with `bully member add`. Exit 0: written, 2: refused.
    Recover(recover::RecoverArgs),
    /// Run a job only while the local node leads, and stop it before any other node
    /// could lead: SIGTERM at the lease's end, SIGKILL before the earliest takeover,
    /// even when the node is stalled or killed. E.g. `bully run -c node.toml -- ./job`.
    /// Without a job, runs the fence command (--fence, `[fence] command`) when the
    /// office ends here. Exit: the job's code, 1 when --once ended with the office,
    /// 0 after SIGTERM, 2 on an error.
    Run(run::RunArgs),
    /// Internal: what `bully run` starts in place of its job, so the job's whole
    /// process group dies with the keeper (`src/keeper/guard.rs`).
    #[command(name = "run-guard", hide = true)]
    RunGuard {
        /// The job and its arguments.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Run a whole cluster of real node processes on loopback with a live view.
    /// Type `kill K`, `start K`, `pause K`, `resume K`, `status` or `quit`; change the
    /// member list with `add K`, `remove K` or `replace K` (a lost disk: the node is
    /// killed, its data dir wiped, made a learner and started empty).
    Local(LocalArgs),
    /// Kill, pause, partition and restart real nodes on a seeded schedule (and, with
    /// `--faults all,membership`, add, remove and replace members), check the
    /// invariants I1–I5 (I6, I7 in quorum mode) and report failover times. Exit 0: no
    /// violation, 1: violations.
    Chaos(chaos::ChaosArgs),
    /// Print a shell completion script, e.g.
    /// `bully completions bash > /etc/bash_completion.d/bully`.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), e.g. `bully man > /usr/local/share/man/man1/bully.1`.
    Man,
}

impl Commands {
    /// Whether the command only prints and owns no child processes, so it may die of
    /// SIGPIPE when its reader goes away (see [`crate::signals::die_quietly_on_sigpipe`]).
    pub fn only_prints(&self) -> bool {
        !matches!(
            self,
            Commands::Node { .. }
                | Commands::Local(_)
                | Commands::Chaos(_)
                | Commands::Run(_)
                | Commands::RunGuard { .. }
        )
    }
}

/// How a query finds and authenticates to a node.
#[derive(Debug, Args, Clone)]
pub struct QueryArgs {
    /// A node's config: its listen address (for `leader` and --cluster also its
    /// peers') and the client certificate beside its CA file (never the node's own key).
    #[arg(long, short, conflicts_with = "endpoints")]
    pub config: Option<PathBuf>,
    /// Nodes to ask, comma separated HOST:PORT (names or IPs), e.g.
    /// db-1:7001,db-2:7001,db-3:7001; all are asked at once (`leader` prefers the
    /// coordinator's own answer, `status` shows the first).
    /// Read from BULLY_ENDPOINTS when not given.
    #[arg(
        long,
        short,
        alias = "endpoint",
        env = "BULLY_ENDPOINTS",
        value_delimiter = ','
    )]
    pub endpoints: Vec<String>,
    /// Directory with ca.pem, client.pem and client.key (as made by `bully certs init`).
    /// Read from BULLY_CERTS when not given.
    #[arg(long, env = "BULLY_CERTS", default_value = "certs")]
    pub certs: PathBuf,
    /// The cluster CA certificate (overrides --certs).
    #[arg(long)]
    pub ca: Option<PathBuf>,
    /// The client certificate (overrides --certs).
    #[arg(long)]
    pub cert: Option<PathBuf>,
    /// The client key (overrides --certs).
    #[arg(long)]
    pub key: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// How long to wait for the node, e.g. 2s or 500ms (a bare number: seconds).
    #[arg(long, value_parser = parse_duration, default_value = "2s")]
    pub timeout: Duration,
}

/// `bully local ...`
#[derive(Debug, Args, Clone)]
pub struct LocalArgs {
    /// How many nodes (IDs 1..=N).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub nodes: u64,
    /// Timing profile: default (heartbeat 100 ms, suspect 300 ms) or fast.
    #[arg(long, value_enum, default_value_t = TimingProfile::Default)]
    pub timing: TimingProfile,
    /// Election mode: quorum (never two coordinators; a minority side has none) or
    /// classic (the plain Bully algorithm: one coordinator per side of a partition).
    #[arg(long, value_enum, default_value_t = ModeArg::Quorum)]
    pub mode: ModeArg,
    /// Keep the cluster's folder (certs, configs, data, logs) after quitting.
    #[arg(long)]
    pub keep_dir: bool,
    /// Where to put the cluster's files (default: a new temp folder).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// On quit, write the session as one self-contained HTML timeline to this file
    /// (the same picture as `bully chaos --html`).
    #[arg(long)]
    pub html: Option<PathBuf>,
}

/// The `--mode` choices of `local` and `chaos`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    Quorum,
    Classic,
}

impl ModeArg {
    /// The protocol mode this choice names.
    pub fn mode(self) -> crate::protocol::Mode {
        match self {
            ModeArg::Quorum => crate::protocol::Mode::Quorum,
            ModeArg::Classic => crate::protocol::Mode::Classic,
        }
    }
}

/// Named timing presets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TimingProfile {
    Default,
    Fast,
}

impl TimingProfile {
    /// The timing this profile stands for.
    pub fn timing(self) -> Timing {
        match self {
            TimingProfile::Default => Timing::default(),
            TimingProfile::Fast => Timing::fast(),
        }
    }
}

/// Parses a command-line duration: `500ms`, `2s`, `1m30s`, `1h`, `1.5s`, or a bare
/// number of seconds (see [`crate::config::duration`], the one parser).
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    duration::parse(text, BareUnit::Seconds)
}

/// Runs a parsed command line and returns the process exit code.
pub fn run(cli: Cli) -> ExitCode {
    // The guard is a plain process: a few system calls and a wait, no runtime.
    if let Commands::RunGuard { command } = &cli.command {
        return crate::keeper::guard::run(command);
    }
    // A node handles a few messages per heartbeat: one thread does it with no
    // cross-thread wake-ups, which were most of an idle node's CPU time. A query or
    // command is one short exchange, where starting worker threads and waking them
    // cost more than the exchange on two cores (benches/query_latency.rs). `run` too:
    // its guard's parent-death signal (PR_SET_PDEATHSIG) follows the thread that
    // started it, which must live as long as the keeper. Only the commands that drive
    // whole clusters (local, chaos) get two workers.
    let mut builder = match cli.command {
        Commands::Local(_) | Commands::Chaos(_) => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(2);
            b
        }
        _ => tokio::runtime::Builder::new_current_thread(),
    };
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let code = runtime.block_on(async move {
        match cli.command {
            Commands::Certs { action } => certs::run(&action),
            Commands::Node {
                config,
                new_cluster,
                change_mode,
            } => node::run(&config, new_cluster, change_mode).await,
            Commands::Leader(args) => leader::run(&args).await,
            Commands::Status { query, cluster } => match cluster {
                true => cluster_status::run(&query).await,
                false => query::status(&query).await,
            },
            Commands::Watch(args) => query::watch(&args).await,
            Commands::History { query, since } => history::run(&query, since).await,
            Commands::Pause(args) => pause::run(&args, true).await,
            Commands::Resume(args) => pause::run(&args, false).await,
            Commands::StepDown {
                query,
                for_,
                to,
                at,
                cancel,
            } => match cancel {
                true => query::cancel_switch_over(&query).await,
                false => query::step_down(&query, for_, to, at).await,
            },
            Commands::Member { action } => member::run(action).await,
            Commands::Config { action } => settings::run(action).await,
            Commands::Pg { verb } => pg::run(&verb).await,
            Commands::Recover(args) => recover::run(&args),
            Commands::Run(args) => run::run(&args).await,
            Commands::Local(args) => local::run(&args).await,
            Commands::Chaos(args) => chaos::run(&args).await,
            Commands::Completions { shell } => docs::completions(shell),
            Commands::Man => docs::man(),
            // Handled before the runtime starts; the same call here keeps the match whole.
            Commands::RunGuard { command } => crate::keeper::guard::run(&command),
        }
    });
    // Not a plain drop, which waits for every blocking task: a read of stdin (`local`'s
    // commands) blocks until a line comes, so SIGTERM stopped the nodes and then hung.
    // The command's own work is done; what it awaited has ended.
    runtime.shutdown_timeout(BLOCKING_TASKS_AT_EXIT);
    code
}

/// How long a command's leftover blocking tasks get at its exit (a read of stdin
/// cannot be cancelled; nothing the command needs runs there by then).
const BLOCKING_TASKS_AT_EXIT: Duration = Duration::from_millis(200);

/// Prints one value as a JSON line (every `--json` output).
fn print_json(value: &impl serde::Serialize) {
    match serde_json::to_string(value) {
        Ok(text) => println!("{text}"),
        Err(e) => eprintln!("error: cannot encode JSON: {e}"),
    }
}

/// Resolves on SIGTERM or Ctrl-C (SIGINT).
pub async fn sigterm_or_ctrl_c() {
    let ctrl_c = tokio::signal::ctrl_c();
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = ctrl_c.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units_and_bare_seconds() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("5h"), Ok(Duration::from_secs(5 * 3600)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("5 parsecs").is_err());
    }

    #[test]
    fn a_bad_duration_flag_is_refused_naming_it() {
        use clap::Parser;
        let err = Cli::try_parse_from(["bully", "step-down", "--for", "5x", "-e", "h:1"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("--for"), "{err}");
        assert!(err.contains("unknown duration unit `x` in `5x`"), "{err}");
        let ok = Cli::try_parse_from(["bully", "step-down", "--for", "1m30s", "-e", "h:1"]);
        match ok.map(|cli| cli.command) {
            Ok(Commands::StepDown { for_, .. }) => assert_eq!(for_, Duration::from_secs(90)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_command_line_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
