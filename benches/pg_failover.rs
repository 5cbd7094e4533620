//! bully's PostgreSQL example side by side with Patroni 4.1 + etcd 3.4 and with
//! pg_auto_failover 2.0 (issues 29, 39): the same load and the same faults against
//! each, in one run, and one table: per system and fault the runs, the write gap
//! (median, max), the commits lost and the longest time with two writable primaries.
//!
//! ```text
//! cargo bench --bench pg_failover
//! PG_BENCH_RUNS=3                        runs of each fault (default 3)
//! PG_BENCH_SYSTEMS=bully,bully-patroni-haproxy,patroni-default,patroni-tight,
//!                  patroni-quorum,pgaf-default (default: all)
//! PG_BENCH_FAULTS=kill,pause,cut,restart (default: kill,pause,cut)
//! PG_BENCH_HOLD_MS=3000                  how long a pause or cut lasts
//! ```
//!
//! Each system runs in a temp dir of its own, one after the other: bully as
//! `tests/postgres_failover.rs` sets it up (`tests/common/postgres_bully.rs`), and as
//! `bully-patroni-haproxy` the same cluster written to through Patroni's documented
//! HAProxy section instead of the example's (`examples/postgres-primary/patroni-haproxy/
//! haproxy.cfg`, started by `BullyPg::patroni_haproxy` as
//! `tests/postgres_patroni_routes.rs` starts it: inter 3s fall 3 rise 2, against the
//! example's 100 ms, fall 1 rise 1; issue 50); Patroni 4.1 through
//! `examples/postgres-primary/patroni/patroni.sh` at `--timing default` (ttl 30,
//! loop_wait 10, retry_timeout 10) and `--timing tight` (ttl 20, loop_wait 1,
//! retry_timeout 3), synchronous_mode on (`pg_failover/patroni.rs` says why), and as
//! `patroni-quorum` at `--timing tight` with `synchronous_mode: quorum` (`PT_SYNC_MODE=
//! quorum`, `synchronous_node_count` 1: `ANY 1 (both standbys)`, as bully's servers);
//! pg_auto_failover at its defaults through
//! `examples/postgres-primary/pg_auto_failover/pgaf.sh` (`pg_failover/pgaf.rs`). Each is
//! measured through HAProxy checking its own notion of the primary: bully's and
//! Patroni's health endpoints, and for pg_auto_failover (no REST API) the servers'
//! read-write state as libpq's `target_session_attrs=read-write` reads it. Install
//! Patroni and etcd with `examples/postgres-primary/patroni/install.sh`,
//! pg_auto_failover with `examples/postgres-primary/pg_auto_failover/install.sh`.
//!
//! A system that fails a run (a bound passed, a wait panicked) keeps the figures of its
//! other runs and says why in the table's last column. A system whose programs are
//! missing is skipped, with why in the table. Not part of `cargo test`.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/common/postgres_bully.rs"]
mod postgres_bully;
#[path = "../tests/common/postgres_cluster.rs"]
mod postgres_cluster;
#[path = "../tests/common/postgres_load.rs"]
mod postgres_load;
#[path = "../tests/common/primary.rs"]
mod primary;
#[path = "../tests/common/redis_servers.rs"]
mod redis_servers;
#[path = "../tests/common/resp.rs"]
mod resp;
#[path = "../tests/common/tcp_cut.rs"]
mod tcp_cut;
#[path = "../tests/common/writers.rs"]
mod writers;

#[path = "pg_failover/patroni.rs"]
mod patroni;
#[path = "pg_failover/pgaf.rs"]
mod pgaf;
#[path = "pg_failover/run.rs"]
mod run;
#[path = "pg_failover/scripted.rs"]
mod scripted;
#[path = "pg_failover/system.rs"]
mod system;
#[path = "pg_failover/table.rs"]
mod table;

use futures::FutureExt;
use run::Session;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use system::{Fault, Kind};
use table::Row;

/// What to run, from the environment.
#[derive(Clone)]
struct Plan {
    runs: usize,
    systems: Vec<Kind>,
    faults: Vec<Fault>,
    hold: Duration,
}

impl Plan {
    fn from_env() -> Result<Plan, String> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let pick = |name: &str, default: &str, names: &[&str]| -> Result<Vec<usize>, String> {
            let value = var(name).unwrap_or_else(|| default.to_string());
            value
                .split(',')
                .map(|w| {
                    names
                        .iter()
                        .position(|n| *n == w.trim())
                        .ok_or_else(|| format!("{name}: {w:?} is not one of {names:?}"))
                })
                .collect()
        };
        let number = |name: &str, default: u64| -> Result<u64, String> {
            var(name).map_or(Ok(default), |v| {
                v.parse()
                    .map_err(|_| format!("{name}: {v:?} is not a number"))
            })
        };
        let system_names = Kind::ALL.map(Kind::name);
        let fault_names = Fault::ALL.map(Fault::name);
        Ok(Plan {
            runs: number("PG_BENCH_RUNS", 3)? as usize,
            systems: pick("PG_BENCH_SYSTEMS", &system_names.join(","), &system_names)?
                .into_iter()
                .map(|i| Kind::ALL[i])
                .collect(),
            faults: pick("PG_BENCH_FAULTS", "kill,pause,cut", &fault_names)?
                .into_iter()
                .map(|i| Fault::ALL[i])
                .collect(),
            hold: Duration::from_millis(number("PG_BENCH_HOLD_MS", 3000)?),
        })
    }
}

/// Why `kind` cannot run here, if it cannot.
fn cannot_run(kind: Kind) -> Option<String> {
    let mut missing: Vec<String> = postgres_cluster::cannot_run().into_iter().collect();
    if !common::installed("haproxy") {
        missing.push("haproxy not installed (apt-get install haproxy)".into());
    }
    missing.extend(kind.cannot_run());
    (!missing.is_empty()).then(|| missing.join("; "))
}

/// Runs every fault `plan.runs` times on `kind`, adding each run to `rows` (one per
/// fault of the plan, in its order) as it ends. A run that fails (a bound passed, a
/// wait panicked) may leave the system broken: the next run gets a new one.
async fn measure(kind: Kind, plan: Plan, rows: Arc<Mutex<Vec<Row>>>) {
    let mut session: Option<Session> = None;
    for (i, &fault) in plan.faults.iter().enumerate() {
        for n in 1..=plan.runs {
            let result = match session.take() {
                Some(s) => Ok(s),
                None => caught(Session::open(kind)).await,
            };
            let result = match result {
                Ok(mut s) => match caught(s.run(fault, plan.hold)).await {
                    Ok(figures) => {
                        session = Some(s);
                        Ok(figures)
                    }
                    Err(e) => Err(e),
                },
                Err(e) => Err(format!("starting: {e}")),
            };
            eprintln!("=== {} {} run {n}: {result:?}", kind.name(), fault.name());
            rows.lock().unwrap()[i].add(result);
        }
    }
}

/// `work`'s outcome, with a panic (the bully cluster's bounded waits panic with the
/// logs) as an error.
async fn caught<T>(work: impl Future<Output = Result<T, String>>) -> Result<T, String> {
    match AssertUnwindSafe(work).catch_unwind().await {
        Ok(result) => result,
        Err(panic) => Err(format!("panicked: {}", table::panic_message(&*panic))),
    }
}

fn main() {
    let plan = match Plan::from_env() {
        Ok(plan) => plan,
        Err(e) => {
            eprintln!("pg_failover: {e}");
            std::process::exit(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let load_before = table::load();
    let mut rows = Vec::new();
    for &kind in &plan.systems {
        if let Some(why) = cannot_run(kind) {
            println!("SKIPPED {}: {why}", kind.name());
            rows.push(Row::skipped(kind, &why));
            continue;
        }
        let mine: Vec<Row> = plan.faults.iter().map(|&f| Row::new(kind, f)).collect();
        let mine = Arc::new(Mutex::new(mine));
        runtime.block_on(measure(kind, plan.clone(), Arc::clone(&mine)));
        let mut mine = std::mem::take(&mut *mine.lock().unwrap());
        rows.append(&mut mine);
        // So far, in case a later system never ends.
        eprintln!("{}", table::render(&rows, plan.hold));
    }
    if rows.iter().all(Row::is_skipped) {
        println!("SKIPPED: no system could run");
    }
    println!("{}", table::render(&rows, plan.hold));
    println!(
        "load average before: {load_before}; after: {}",
        table::load()
    );
}
