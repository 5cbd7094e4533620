//! `bully chaos ...` and `bully chaos --bench failover ...`: argument handling, the
//! run's folder, and the exit code (0 no violation, 1 violations or anomalies, 2 bad
//! arguments or a cluster that could not be set up, 130 interrupted).

use super::run_dir::RunDir;
use super::{parse_duration, ModeArg, TimingProfile};
use crate::chaos::progress::Mode;
use crate::chaos::{self, BenchConfig, ChaosConfig, FaultKind, Report, RunSetup};
use clap::{Args, ValueEnum};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// `bully chaos ...`
#[derive(Debug, Args, Clone)]
pub struct ChaosArgs {
    /// How many nodes (IDs 1..=N); at least 3 for chaos, 2 for --bench.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(2..=64))]
    pub nodes: u64,
    /// How long to inject faults, e.g. 60s or 2m (with --bench idle: how long to measure).
    #[arg(long, value_parser = parse_duration, default_value = "60s")]
    pub duration: Duration,
    /// Seed of the fault schedule; the same seed repeats the same faults
    /// (default: taken from the clock and printed).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Fault kinds to inject, comma separated: kill, pause, restart, partition, one-way
    /// (a node that hears no one while it is still heard), membership (add a spare node,
    /// remove a member, or replace one whose disk is lost: killed, data dir wiped,
    /// `bully member replace`, started empty later; also during partitions and kills,
    /// every link of an added node through the relay), store (a node's `db` cut to half
    /// while it is down: its start must refuse it, exit 2, then it recovers on an empty
    /// store), slow-hooks (every node's `on_demoted` sleeps 0 to 3 D), config (rolling
    /// restarts onto another timing, D 10 times and back, SIGTERM or kill -9, with
    /// kills and cuts in between); `all` is the first five: ask for the others by name
    /// (`all,membership,store,slow-hooks,config`).
    #[arg(
        long,
        value_delimiter = ',',
        value_parser = parse_faults,
        default_value = "kill,pause,restart,partition,one-way"
    )]
    pub faults: Vec<Vec<FaultKind>>,
    /// Timing profile of the nodes.
    #[arg(long, value_enum, default_value_t = TimingProfile::Default)]
    pub timing: TimingProfile,
    /// Election mode of the nodes: quorum (I6 and I7 are judged too) or classic (the
    /// plain Bully algorithm; time with two coordinators is reported, not judged).
    #[arg(long, value_enum, default_value_t = ModeArg::Quorum)]
    pub mode: ModeArg,
    /// Also write the report as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Also write the run as one self-contained HTML timeline to this file.
    #[arg(long)]
    pub html: Option<PathBuf>,
    /// Keep the run's folder (certs, configs, data, event logs, node logs); a failed
    /// run always keeps it.
    #[arg(long)]
    pub keep_dir: bool,
    /// Where to put the run's files (default: a new temp folder).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Time allowed on top of the I5 bound (of the chosen mode) before convergence is
    /// judged, for scheduling on a busy machine (default: the bound itself).
    #[arg(long, value_parser = parse_duration)]
    pub slack: Option<Duration>,
    /// Run a benchmark instead of a chaos run.
    #[arg(long, value_enum)]
    pub bench: Option<BenchKind>,
    /// Rounds of the benchmark.
    #[arg(
        long,
        default_value_t = 50,
        requires = "bench",
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub runs: u32,
}

/// What the arguments ask for: a benchmark or a chaos run.
enum Workload {
    Bench(BenchKind, BenchConfig),
    Chaos(ChaosConfig),
}

/// Benchmarks `--bench` can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BenchKind {
    /// Kill -9 the coordinator, wait for the others to agree, restart it; repeat
    /// --runs times. Prints failover and reclaim times, messages and declarations per
    /// kill, and the start-up declarations.
    Failover,
    /// The same loop as failover (it measures reclaim after each restart).
    Reclaim,
    /// The same loop as failover (it counts the messages of each election).
    Messages,
    /// Start the cluster, let it settle, then measure CPU, memory and messages per
    /// node over --duration (60 s by default) and time `bully leader`.
    Idle,
}

/// Runs `bully chaos` and maps the outcome to the exit code.
pub async fn run(args: &ChaosArgs) -> ExitCode {
    let (run_dir, setup) = match prepare(args) {
        Ok(prepared) => prepared,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let workload = match workload(args, setup) {
        Ok(workload) => workload,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    // Ctrl-C drops the run: the cluster's drop kills every node by PID, no orphans.
    let run = async {
        match &workload {
            Workload::Bench(BenchKind::Idle, config) => {
                chaos::bench_idle(config, args.duration).await
            }
            Workload::Bench(_, config) => chaos::bench_failover(config).await,
            Workload::Chaos(config) => chaos::run(config).await,
        }
    };
    let outcome = tokio::select! {
        outcome = run => outcome,
        _ = super::sigterm_or_ctrl_c() => {
            eprintln!("\ninterrupted: every node stopped; no verdict");
            return ExitCode::from(130);
        }
    };
    // A failed run keeps its folder: the node logs and event logs are the evidence.
    let failed = !matches!(&outcome, Ok(report) if report.passed());
    let kept = (args.keep_dir || failed || !run_dir.is_temporary()).then(|| run_dir.keep());
    match outcome {
        Ok(mut report) => {
            report.params.dir = kept.map(|d| d.display().to_string());
            finish(&report, args.json.as_deref(), args.html.as_deref())
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// The run's folder (a temp dir unless `--dir` is given) and its settings.
fn prepare(args: &ChaosArgs) -> Result<(RunDir, RunSetup), String> {
    let timing = args.timing.timing();
    let mode = args.mode.mode();
    let run_dir = RunDir::new(args.dir.as_deref(), "bully-chaos-")
        .map_err(|e| format!("cannot make a temp folder: {e}"))?;
    let binary =
        std::env::current_exe().map_err(|e| format!("cannot find the bully executable: {e}"))?;
    let setup = RunSetup {
        nodes: args.nodes,
        seed: args.seed.unwrap_or_else(crate::wall_clock::wall_ms),
        timing_profile: format!("{:?}", args.timing).to_lowercase(),
        timing,
        mode,
        slack_ms: args
            .slack
            .map_or(timing.convergence_bound_in(mode), |d| d.as_millis() as u64),
        binary,
        dir: run_dir.path().to_path_buf(),
        progress: Mode::detect(),
    };
    Ok((run_dir, setup))
}

/// The benchmark or chaos run the arguments ask for, checked before anything starts.
fn workload(args: &ChaosArgs, setup: RunSetup) -> Result<Workload, String> {
    match args.bench {
        Some(kind) => {
            let config = BenchConfig {
                setup,
                runs: args.runs,
            };
            config.validate()?;
            Ok(Workload::Bench(kind, config))
        }
        None => {
            let config = ChaosConfig {
                setup,
                duration: args.duration,
                faults: dedup(&args.faults.concat()),
            };
            config.plan_spec().validate()?;
            Ok(Workload::Chaos(config))
        }
    }
}

/// Prints the report, writes the JSON and the HTML, and picks the exit code.
fn finish(report: &Report, json: Option<&Path>, html: Option<&Path>) -> ExitCode {
    print!("{}", report.render());
    if let Some(path) = html {
        if let Err(e) = chaos::picture::write(report, path) {
            eprintln!("error: cannot write {}: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    if let Some(path) = json {
        let text = match serde_json::to_string_pretty(report) {
            Ok(text) => text,
            Err(e) => {
                eprintln!("error: cannot encode the report: {e}");
                return ExitCode::from(2);
            }
        };
        if let Err(e) = std::fs::write(path, text + "\n") {
            eprintln!("error: cannot write {}: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    if report.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// One `--faults` item: a kind, or `all` for every kind in [`FaultKind::IN_ALL`] (the
/// kinds in [`FaultKind::BY_NAME_ONLY`] are asked for by name: `all,membership`).
fn parse_faults(text: &str) -> Result<Vec<FaultKind>, String> {
    match text.trim() {
        "all" => Ok(FaultKind::IN_ALL.to_vec()),
        one => Ok(vec![one.parse()?]),
    }
}

/// The fault kinds without repeats, in `--faults` order.
fn dedup(faults: &[FaultKind]) -> Vec<FaultKind> {
    let mut out: Vec<FaultKind> = Vec::new();
    for &f in faults {
        if !out.contains(&f) {
            out.push(f);
        }
    }
    out
}
