//! A running Patroni 4.1 cluster moved under bully with no data loss and one planned
//! switchover, on real processes: Patroni, etcd and HAProxy as
//! `examples/postgres-primary/patroni/patroni.sh` runs them (three PostgreSQL 15
//! servers, `synchronous_mode: on`), then the cluster of `examples/postgres-primary`
//! (tests/common/postgres_bully.rs) keeping the very same data dirs and ports, taken
//! over with `bully pg adopt` (src/node/postgres/adopt.rs).
//!
//! The procedure, as an operator runs it (docs/patroni.md, "Moving a running Patroni
//! cluster under bully"):
//!  1. Write each host's bully config from its Patroni config: `[postgres] data_dir` =
//!     Patroni's `postgresql.data_dir`, `listen` = its `postgresql.listen` (clients
//!     keep their addresses), the users under `postgresql.authentication` (`postgres`,
//!     `replicator`) with password files (new passwords are fine: adopt sets them).
//!  2. `patronictl -c <node>/patroni.yml pause --wait`: Patroni's maintenance mode, in
//!     which it leaves PostgreSQL alone, also when it stops.
//!  3. Stop every Patroni process (SIGTERM, as `systemctl stop patroni` does); the
//!     servers run on, the primary takes writes.
//!  4. `bully pg adopt --config <node.toml>` on the primary's host first (it stops the
//!     primary, sets the roles' passwords, adds the `pg_hba.conf` lines, names
//!     Patroni's slots), then on each standby's host (each is stopped; its roles come
//!     from the primary).
//!  5. Start the keepers and the bully nodes on every host (HAProxy checks bully's
//!     `[http]` from then on). The member with the newest WAL is elected and its server
//!     promoted onto a new timeline; the others stream from it, rewound if they must
//!     be.
//!  6. Once every standby streams, drop the replication slots Patroni left on each
//!     server: inactive, they keep WAL until dropped. Then stop etcd (and Patroni's
//!     HAProxy): nothing uses them any more.
//!
//! Asserted: Patroni's processes are gone and the servers run after step 3; adopt's
//! answers (the primary's names Patroni's slots); one primary with both others
//! streaming; every row acknowledged under Patroni (20,000 in 1,000 commits) and while
//! no manager ran (100 commits after step 3) on every server; the primary's timeline is
//! Patroni's plus one and the standbys receive that timeline (one promotion: the
//! planned switchover); Patroni's old primary streams again; after step 6 only bully's
//! slots are left; bully's invariants on the event logs. Every process Patroni's
//! script started is killed by its PID at the end (and on a panic), after the servers
//! bully runs.
//!
//! Skips, saying why, without PostgreSQL 15, HAProxy, Patroni 4.1
//! (`examples/postgres-primary/patroni/install.sh`, which `.ci/run` runs), etcd, jq,
//! curl or setpriv.

mod common;
#[path = "common/postgres_bully.rs"]
mod postgres_bully;
#[path = "common/postgres_cluster.rs"]
mod postgres_cluster;
#[path = "common/primary.rs"]
mod primary;
#[path = "common/redis_servers.rs"]
mod redis_servers;
#[path = "common/resp.rs"]
mod resp;
#[path = "common/tcp_cut.rs"]
mod tcp_cut;

use bully::protocol::NodeId;
use bully::signals::{self, Signal};
use postgres_bully::{adopt, joined, load, load_more, wait_tally, BullyPg, Secrets, IDS};
use postgres_cluster::{connect, is_zombie};
use primary::phase;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The superuser's new password (adopt sets it; Patroni's was `postgres`).
const SUPERUSER: &str = "n3w 'super' pass é";
/// The replication role's new password (Patroni's was `replicator`).
const REPLICATION: &str = "n3w:repl#ication";
/// The load under Patroni: this many committed transactions of [`PER`] rows.
const TRANSACTIONS: i64 = 1_000;
/// Rows per transaction.
const PER: i64 = 20;
/// The load while no manager runs (after step 2).
const UNMANAGED: i64 = 100;
/// How long `patroni.sh start` may take (initdb, two base backups, a busy machine).
const PATRONI_START: Duration = Duration::from_secs(240);
/// How long a Patroni process gets to exit on SIGTERM.
const PATRONI_EXIT: Duration = Duration::from_secs(60);

/// The repository's `path`.
fn in_repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// The `patroni` program: `PT_PATRONI`, else the venv `install.sh` makes.
fn patroni_program() -> PathBuf {
    std::env::var_os("PT_PATRONI")
        .map(PathBuf::from)
        .unwrap_or_else(|| in_repo("target/patroni-venv/bin/patroni"))
}

/// `program` on the PATH, if there.
fn which(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// Whether this test cannot run here: [`postgres_bully::skipped`]'s reasons, or what
/// `patroni.sh` needs (Patroni 4.1 and patronictl, etcd, jq, curl, python3, setpriv);
/// then says so, `SKIPPED: <why>`.
fn skipped() -> bool {
    let what = "a Patroni 4.1 cluster taken over by bully";
    if postgres_bully::skipped(what) {
        return true;
    }
    let mut missing: Vec<String> = ["etcd", "jq", "curl", "python3", "setpriv"]
        .into_iter()
        .filter(|p| which(p).is_none())
        .map(String::from)
        .collect();
    let patroni = patroni_program();
    let version = std::process::Command::new(&patroni)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    if !version.starts_with("patroni 4.1.") {
        missing.push(format!(
            "{} (Patroni 4.1; found {version:?})",
            patroni.display()
        ));
    }
    if !patroni.with_file_name("patronictl").is_file() {
        missing.push(patroni.with_file_name("patronictl").display().to_string());
    }
    if !missing.is_empty() {
        eprintln!(
            "SKIPPED: {} missing (examples/postgres-primary/patroni/install.sh; apt-get \
             install -y jq curl); this test runs {what}",
            missing.join(", ")
        );
    }
    !missing.is_empty()
}

/// The Patroni cluster `patroni.sh` runs, in a temp dir of its own (`PT_BASE`), its
/// PostgreSQL servers on the ports given, everything else on free ports. On drop,
/// `patroni.sh stop --kill` kills by PID whatever the script started and still runs.
/// Declared before the bully cluster, it drops after it: the servers bully runs are
/// killed first, by the harness.
struct Patroni {
    env: Vec<(String, String)>,
    dir: tempfile::TempDir,
}

impl Patroni {
    /// `patroni.sh start --timing tight` (Patroni's tightest accepted timing: pause
    /// and health are seen within a second) with its servers on `pg`'s ports; returns
    /// once the script found the cluster healthy (one leader, a sync standby, a
    /// replica, a write through its HAProxy).
    async fn start(pg: &BTreeMap<NodeId, SocketAddr>) -> Patroni {
        let dir = tempfile::Builder::new()
            .prefix("bully-patroni-")
            .tempdir()
            .unwrap();
        {
            // As root Patroni runs as `postgres`, which must reach the base dir.
            use std::os::unix::fs::PermissionsExt;
            let open = std::fs::Permissions::from_mode(0o711);
            std::fs::set_permissions(dir.path(), open).unwrap();
        }
        let names = [
            "PT_HAPROXY_PORT",
            "PT_ETCD_PORT",
            "PT_ETCD_PEER_PORT",
            "PT_API_PORT1",
            "PT_API_PORT2",
            "PT_API_PORT3",
            "PT_PROXY_PORT1",
            "PT_PROXY_PORT2",
            "PT_PROXY_PORT3",
        ];
        let ports = bully::ports::free_tcp_addrs(names.len()).unwrap();
        let mut env: Vec<(String, String)> = names
            .iter()
            .zip(ports)
            .map(|(name, addr)| (name.to_string(), addr.port().to_string()))
            .collect();
        for (id, addr) in pg {
            env.push((format!("PT_PG_PORT{id}"), addr.port().to_string()));
        }
        env.push(("PT_BASE".into(), dir.path().display().to_string()));
        let secs = PATRONI_START.as_secs().to_string();
        env.push(("PT_START_TIMEOUT".into(), secs));
        env.push(("PT_PATRONI".into(), patroni_program().display().to_string()));
        env.push(("PT_DCS".into(), "etcd3".into()));
        env.push(("PT_SYNC_MODE".into(), "on".into()));
        let patroni = Patroni { env, dir };
        let out = patroni
            .sh(&["start", "--timing", "tight"], PATRONI_START * 2)
            .await;
        eprintln!("{}", out.trim_end());
        patroni
    }

    /// The base dir (`PT_BASE`).
    fn base(&self) -> &Path {
        self.dir.path()
    }

    /// Node `id`'s PostgreSQL data dir, as Patroni's config names it.
    fn data_dir(&self, id: NodeId) -> PathBuf {
        self.base().join(format!("node{id}/data"))
    }

    /// Node `id`'s `patroni.yml`.
    fn config(&self, id: NodeId) -> PathBuf {
        self.base().join(format!("node{id}/patroni.yml"))
    }

    /// Where the script recorded the PID of `name` (`patroni1`, `etcd`, ...).
    fn pid_file(&self, name: &str) -> PathBuf {
        self.base().join(format!("pids/{name}.pid"))
    }

    /// The PID the script recorded for `name`, if any.
    fn pid(&self, name: &str) -> Option<u32> {
        let text = std::fs::read_to_string(self.pid_file(name)).ok()?;
        text.trim().parse().ok()
    }

    /// Runs `patroni.sh ARGS` with this cluster's variables, killed (by its PID) after
    /// `within`; its stdout, or a panic with what it said and the node logs.
    async fn sh(&self, args: &[&str], within: Duration) -> String {
        let mut command =
            tokio::process::Command::new(in_repo("examples/postgres-primary/patroni/patroni.sh"));
        command.args(args).envs(self.env.clone());
        self.bounded(command, "patroni.sh", args, within).await
    }

    /// Runs `patronictl -c <node id's patroni.yml> ARGS` (bounded); its stdout.
    async fn ctl(&self, id: NodeId, args: &[&str], within: Duration) -> String {
        let program = patroni_program().with_file_name("patronictl");
        let mut command = tokio::process::Command::new(program);
        command.arg("-c").arg(self.config(id)).args(args);
        self.bounded(command, "patronictl", args, within).await
    }

    /// Runs `command` (`name ARGS`), killed by its PID after `within`; its stdout, or a
    /// panic with what it said and the node logs.
    async fn bounded(
        &self,
        mut command: tokio::process::Command,
        name: &str,
        args: &[&str],
        within: Duration,
    ) -> String {
        command.kill_on_drop(true);
        let out = tokio::time::timeout(within, command.output())
            .await
            .unwrap_or_else(|_| panic!("{name} {args:?}: no end within {within:?}"))
            .unwrap_or_else(|e| panic!("run {name}: {e}"));
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            out.status.success(),
            "{name} {args:?}: {stdout}{}\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.logs()
        );
        stdout
    }

    /// Step 2 for node `id`: SIGTERM to its Patroni, a bounded wait until it is gone,
    /// and its PID record dropped (as `patroni.sh stop` drops it: a PID the kernel
    /// hands out again must not look like Patroni's later).
    fn stop_patroni(&self, id: NodeId) {
        let name = format!("patroni{id}");
        let pid = self.pid(&name).expect("a Patroni PID recorded");
        signals::send(pid, Signal::SIGTERM).expect("SIGTERM to Patroni");
        let deadline = Instant::now() + PATRONI_EXIT;
        while !is_zombie(pid) {
            assert!(
                Instant::now() < deadline,
                "Patroni {id} (PID {pid}) did not exit within {PATRONI_EXIT:?}\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        std::fs::remove_file(self.pid_file(&name)).unwrap();
    }

    /// The PIDs of the processes the script started that may still run: etcd, the cut
    /// proxies, HAProxy and any Patroni.
    fn recorded(&self) -> Vec<(String, u32)> {
        let mut names = vec!["etcd".to_string(), "haproxy".into()];
        for id in IDS {
            names.push(format!("proxy{id}"));
            names.push(format!("patroni{id}"));
        }
        names
            .into_iter()
            .filter_map(|name| self.pid(&name).map(|pid| (name, pid)))
            .collect()
    }

    /// Step 6, and the end: `patroni.sh stop --kill` (by the PIDs it recorded), then
    /// asserts every one of them is gone.
    async fn stop(&self) {
        let recorded = self.recorded();
        let out = self.sh(&["stop", "--kill"], Duration::from_secs(120)).await;
        eprintln!("{}", out.trim_end());
        for (name, pid) in recorded {
            assert!(
                is_zombie(pid),
                "{name} (PID {pid}) still runs after patroni.sh stop"
            );
        }
    }

    /// The tail of every Patroni log and etcd's, for failures.
    fn logs(&self) -> String {
        let mut text = String::new();
        let mut paths: Vec<PathBuf> = IDS
            .iter()
            .map(|id| self.base().join(format!("node{id}/patroni.log")))
            .collect();
        paths.push(self.base().join("etcd/etcd.log"));
        for path in paths {
            let log = std::fs::read_to_string(&path).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            text += &format!(
                "--- {}\n{}\n",
                path.display(),
                lines[lines.len().saturating_sub(10)..].join("\n")
            );
        }
        text
    }
}

impl Drop for Patroni {
    /// `patroni.sh stop --kill`: kills by PID whatever the script started and still
    /// runs (a panic's leftovers; nothing after [`Patroni::stop`]).
    fn drop(&mut self) {
        let _ = std::process::Command::new(in_repo("examples/postgres-primary/patroni/patroni.sh"))
            .args(["stop", "--kill"])
            .env("PT_BASE", self.dir.path())
            .output();
    }
}

/// Whether the server at `addr` answers SQL, and as a primary (`Some(true)`) or a
/// standby (`Some(false)`); `None` if it does not answer.
async fn is_primary(addr: SocketAddr) -> Option<bool> {
    let client = connect(addr, Duration::from_secs(5)).await?;
    let row = client
        .query_one("SELECT NOT pg_is_in_recovery()", &[])
        .await
        .ok()?;
    Some(row.get(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_patroni_cluster_moves_under_bully_with_nothing_lost() {
    if skipped() {
        return;
    }
    let began = Instant::now();
    let secrets = tempfile::tempdir().unwrap();
    let superuser = secrets.path().join("pg-superuser");
    let replication = secrets.path().join("pg-replication");
    std::fs::write(&superuser, format!("{SUPERUSER}\n")).unwrap();
    std::fs::write(&replication, format!("{REPLICATION}\n")).unwrap();
    // The roles Patroni's config names (patroni.sh: postgresql.authentication).
    let roles = |_: NodeId, pg: &mut bully::config::postgres::PostgresConfig| {
        pg.superuser.user = "postgres".into();
        pg.replication.user = "replicator".into();
    };

    phase("a Patroni 4.1 cluster (patroni.sh start), on the ports bully's servers will keep");
    let mut p = BullyPg::prepare_with(Secrets::Files(superuser, replication), roles).await;
    let pg_addrs = p.pg.addrs.clone();
    let patroni = Patroni::start(&pg_addrs).await;
    // Declared after `patroni`, the cluster drops first: its servers die before
    // patroni.sh stop runs.
    let mut started = None;
    let patroni_up = began.elapsed();
    let out = patroni
        .sh(&["primary", "--wait", "30"], Duration::from_secs(60))
        .await;
    let old_primary: NodeId = out.trim().parse().expect("patroni.sh primary: a node");
    eprintln!("=== Patroni's primary: node {old_primary} ({patroni_up:.1?} to start)");

    phase("rows loaded through Patroni's primary, in many committed transactions");
    let client = connect(pg_addrs[&old_primary], Duration::from_secs(10))
        .await
        .expect("a login on Patroni's primary");
    let under_patroni = load(&client, TRANSACTIONS, PER).await;
    let before = postgres_bully::timeline(&client).await.expect("a timeline");
    let system = postgres_bully::system_identifier(&client).await;
    let slots = slots_of(&client).await;
    eprintln!("=== timeline {before}, system {system}; Patroni's slots: {slots:?}");

    phase("1. bully's configs: Patroni's data dirs, listen addresses and users");
    // The configs were written with Patroni's ports and users (`roles`); the data dirs
    // now, so the harness finds these servers too (its kills, its drop).
    for id in IDS {
        p.use_data_dir(id, patroni.data_dir(id));
    }

    phase("2. patronictl pause --wait: Patroni leaves PostgreSQL alone");
    let out = patroni
        .ctl(old_primary, &["pause", "--wait"], Duration::from_secs(120))
        .await;
    eprintln!("{}", out.trim_end());

    phase("3. every Patroni stopped by its PID; the servers run on, the primary takes writes");
    let postmasters: BTreeMap<NodeId, u32> = IDS
        .iter()
        .map(|&id| (id, p.pg.pid(id).expect("Patroni's server runs")))
        .collect();
    for id in IDS {
        patroni.stop_patroni(id);
    }
    for id in IDS {
        assert_eq!(
            p.pg.pid(id),
            Some(postmasters[&id]),
            "node {id}'s server did not outlive its Patroni in pause mode\n{}",
            patroni.logs()
        );
        let expected = Some(id == old_primary);
        assert_eq!(
            is_primary(pg_addrs[&id]).await,
            expected,
            "node {id}'s server"
        );
    }
    let unmanaged = load_more(&client, under_patroni.max, UNMANAGED, PER).await;
    let acknowledged = joined(under_patroni, unmanaged);
    drop(client);

    phase("4. bully pg adopt: the primary's host first, then each standby's");
    let standbys: Vec<NodeId> = IDS.into_iter().filter(|&id| id != old_primary).collect();
    for id in std::iter::once(old_primary).chain(standbys.iter().copied()) {
        let out = adopt(&p.config(id)).await;
        let said = String::from_utf8_lossy(&out.stdout).to_string();
        eprintln!("--- node {id}:\n{}", common::text(&out).trim_end());
        assert!(
            out.status.success(),
            "adopt on node {id}: {}",
            common::text(&out)
        );
        let stopped = format!("Stopped its server (PID {}) cleanly", postmasters[&id]);
        assert!(said.contains(&stopped), "{said}");
        let roles = match id == old_primary {
            true => "both roles' passwords are set",
            false => "A standby's data dir",
        };
        assert!(said.contains(roles), "{said}");
        if id == old_primary {
            for (slot, _) in &slots {
                assert!(
                    said.contains(slot.as_str()),
                    "Patroni's slot {slot} unnamed: {said}"
                );
            }
        }
        assert!(
            is_zombie(postmasters[&id]),
            "node {id}'s server runs after adopt"
        );
    }

    phase("5. the keepers and bully nodes start: one promotion, the others stream from it");
    let takeover = Instant::now();
    let c: &BullyPg = started.insert(p.start());
    let primary = c.wait_all_streaming(&|_| SUPERUSER.to_string()).await;
    eprintln!(
        "=== node {primary}'s server promoted {:.1?} after the nodes started (Patroni's was \
         node {old_primary})",
        takeover.elapsed()
    );
    for id in c.ids() {
        wait_tally(c, id, Some(SUPERUSER), acknowledged).await;
    }
    let login = |id: NodeId| {
        let addr = c.local(id);
        async move {
            postgres_cluster::connect_as(addr, Duration::from_secs(5), Some(SUPERUSER))
                .await
                .unwrap_or_else(|| panic!("no login to node {id}'s server"))
        }
    };
    let client = login(primary).await;
    assert_eq!(postgres_bully::system_identifier(&client).await, system);
    let after = postgres_bully::timeline(&client).await;
    assert_eq!(
        after,
        Some(before + 1),
        "one planned switchover: one promotion, one new timeline\n{}",
        c.logs()
    );
    let histories: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_ls_dir('pg_wal') f WHERE f LIKE '%.history'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    let slots = slots_of(&client).await;
    eprintln!(
        "=== timeline {before} -> {after:?} ({histories} history files); slots now: {slots:?}"
    );
    for &id in standbys
        .iter()
        .chain([&old_primary])
        .filter(|&&id| id != primary)
    {
        let client = login(id).await;
        assert_eq!(postgres_bully::system_identifier(&client).await, system);
        assert_eq!(
            postgres_bully::timeline(&client).await,
            after,
            "node {id}'s server receives the new timeline"
        );
    }
    if primary != old_primary {
        let dir = c.pg.data_dir(old_primary);
        let how = match common::set_aside(&dir) {
            Some(aside) => format!("cloned (its old dir kept aside at {})", aside.display()),
            None => "rewound or followed in place".to_string(),
        };
        let log = std::fs::read_to_string(c.t.cluster.log_path(old_primary)).unwrap_or_default();
        let rewinds = log.lines().filter(|l| l.contains("pg_rewind")).count();
        eprintln!(
            "=== Patroni's old primary, node {old_primary}, streams again: {how}; its node \
             log names pg_rewind on {rewinds} lines"
        );
    }

    phase("6. Patroni's slots dropped on every server: only bully's are left");
    for id in c.ids() {
        let client = login(id).await;
        let leftovers: Vec<String> = client
            .query(
                "SELECT slot_name::text FROM pg_replication_slots \
                 WHERE NOT active AND slot_name NOT LIKE 'bully\\_%' ORDER BY 1",
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        for slot in &leftovers {
            client
                .execute("SELECT pg_drop_replication_slot($1)", &[slot])
                .await
                .unwrap();
        }
        eprintln!("=== node {id}: dropped Patroni's slots {leftovers:?}");
    }
    let left: Vec<String> = login(primary)
        .await
        .query(
            "SELECT slot_name::text FROM pg_replication_slots ORDER BY 1",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let others: Vec<String> = IDS
        .into_iter()
        .filter(|&id| id != primary)
        .map(|id| format!("bully_{id}"))
        .collect();
    assert_eq!(left, others, "the primary's slots after step 6");

    phase("bully's invariants on the event logs");
    let c = started.as_mut().unwrap();
    common::stop_all_and_assert_invariants(&mut c.t);

    phase("6. bully's cluster gone; then etcd, the cut proxies and Patroni's HAProxy, by PID");
    drop(started.take());
    patroni.stop().await;
    eprintln!("wall time {:.1} s", began.elapsed().as_secs_f64());
}

/// The server's replication slots behind `client`, by name, with whether each is in use.
async fn slots_of(client: &tokio_postgres::Client) -> Vec<(String, bool)> {
    client
        .query(
            "SELECT slot_name, active FROM pg_replication_slots ORDER BY 1",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}
