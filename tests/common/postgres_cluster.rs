//! The PostgreSQL servers the bully nodes of `examples/postgres-primary` keep
//! (`[postgres]`), with what a test needs around them: where PostgreSQL's programs
//! are, why a test must skip, kill -9 / SIGSTOP of a server's whole process group, and
//! a bounded SQL probe. Shared by `tests/postgres_failover.rs` and
//! `benches/pg_failover.rs`. Every server still running is killed by its PID on drop,
//! also when a test panics. Included with `#[path =
//! "common/postgres_cluster.rs"] mod postgres_cluster;` next to `primary.rs`.
#![allow(dead_code)]

use bully::protocol::NodeId;
use bully::signals::{self, Signal};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// How long one SQL probe may take: a frozen or cut-off server never answers.
pub const PROBE: Duration = Duration::from_millis(500);

/// The example's directory.
pub fn example_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/postgres-primary")
}

/// PostgreSQL's program directory, found the way the test always found it
/// (`$PG_BIN`, the directory of `pg_ctl` on the PATH with symlinks resolved, Debian's
/// `/usr/lib/postgresql/15/bin`), if it holds what the example runs.
pub fn pg_bin() -> Option<PathBuf> {
    let from_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("pg_ctl"))
            .find(|p| p.is_file())
            .and_then(|p| std::fs::canonicalize(p).ok())
            .and_then(|p| p.parent().map(Path::to_path_buf))
    });
    let dir = std::env::var_os("PG_BIN")
        .map(PathBuf::from)
        .or(from_path)
        .unwrap_or_else(|| PathBuf::from("/usr/lib/postgresql/15/bin"));
    let needed = [
        "pg_ctl",
        "initdb",
        "postgres",
        "pg_rewind",
        "pg_basebackup",
        "psql",
    ];
    needed.iter().all(|p| dir.join(p).is_file()).then_some(dir)
}

/// Whether this process runs as root (then the servers run as the `postgres` user).
pub fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    // /proc/self belongs to the process's effective user.
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// As root, hands `path` (and all below it) to `postgres`, the user the servers and
/// their programs run as; otherwise nothing: they run as this process's user.
pub fn give_to_servers(path: &Path) {
    if !is_root() {
        return;
    }
    let status = Command::new("chown")
        .args(["-R", "postgres"])
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success(), "chown -R postgres {}", path.display());
}

/// PostgreSQL's program `name` from `bin` with `args`, run to its end as the servers'
/// user (`postgres` when root, through `runuser`); its output.
pub fn run_as_servers(bin: &Path, name: &str, args: &[&std::ffi::OsStr]) -> std::process::Output {
    let program = bin.join(name);
    let mut command = match is_root() {
        true => {
            let mut runuser = Command::new("runuser");
            runuser.args(["-u", "postgres", "--"]).arg(program);
            runuser
        }
        false => Command::new(program),
    };
    command
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {name}: {e}"))
}

/// The system identifier in the control file of the data dir at `data_dir`
/// (PostgreSQL's `ControlFileData.system_identifier`, native byte order).
pub fn system_id(data_dir: &Path) -> Option<u64> {
    let bytes = std::fs::read(data_dir.join("global/pg_control")).ok()?;
    Some(u64::from_ne_bytes(bytes.get(..8)?.try_into().ok()?))
}

/// Where the oldest WAL segment the server behind `client` keeps begins.
pub async fn oldest_wal(client: &tokio_postgres::Client) -> u64 {
    let row = client
        .query_one(
            "SELECT ('x' || substr(m, 1, 8))::bit(32)::bigint * 4294967296 \
                    + ('x' || substr(m, 9, 8))::bit(32)::bigint \
                    * (SELECT setting::bigint FROM pg_settings WHERE name = 'wal_segment_size') \
             FROM (SELECT min(substr(name, 9)) AS m FROM pg_ls_waldir() \
                   WHERE name ~ '^[0-9A-F]{24}$') AS w",
            &[],
        )
        .await
        .unwrap();
    row.get::<_, i64>(0) as u64
}

/// Why the example cannot run here, if it cannot: PostgreSQL's programs missing, or
/// running as root without a `postgres` user to run the servers as.
pub fn cannot_run() -> Option<String> {
    let Some(bin) = pg_bin() else {
        return Some(
            "PostgreSQL 15 not found (apt-get install postgresql-15, or set PG_BIN; \
             .ci/run installs it)"
                .into(),
        );
    };
    let version = Command::new(bin.join("postgres")).arg("--version").output();
    if !version.is_ok_and(|o| o.status.success()) {
        return Some(format!("{}/postgres does not run", bin.display()));
    }
    let user_exists = Command::new("id")
        .arg("postgres")
        .output()
        .is_ok_and(|o| o.status.success());
    if is_root() && !user_exists {
        return Some("running as root and there is no postgres user to run PostgreSQL as".into());
    }
    None
}

/// The servers the bully nodes keep (`[postgres]`): where their data directories are
/// (under `root`) and where they listen (`addrs`), for the test's kill -9 and SIGSTOP
/// of a server and for its probes. The nodes create, start and stop them; the test
/// only kills them, and every one still running on drop.
pub struct PgServers {
    pub root: PathBuf,
    pub addrs: BTreeMap<NodeId, SocketAddr>,
    pub bin: PathBuf,
    /// Data dirs elsewhere than `root` ([`PgServers::set_data_dir`]).
    moved: BTreeMap<NodeId, PathBuf>,
}

impl PgServers {
    /// The servers' root under `dir/pg`, empty. As root, `dir` is opened for traversal
    /// and `dir/pg` handed to `postgres` (the servers run as that user).
    pub fn new(dir: &Path, addrs: BTreeMap<NodeId, SocketAddr>) -> PgServers {
        let root = dir.join("pg");
        std::fs::create_dir_all(&root).unwrap();
        if is_root() {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711)).unwrap();
        }
        give_to_servers(&root);
        PgServers {
            root,
            addrs,
            bin: pg_bin().expect("PostgreSQL (check cannot_run first)"),
            moved: BTreeMap::new(),
        }
    }

    /// A fresh `initdb` of another cluster at `data_dir` (as the servers' user);
    /// returns its system identifier.
    pub fn initdb_stranger(&self, data_dir: &Path) -> u64 {
        let mut args: Vec<&std::ffi::OsStr> = vec!["-D".as_ref(), data_dir.as_os_str()];
        args.extend(["-U", "stranger", "--auth=trust", "--no-sync"].map(std::ffi::OsStr::new));
        let out = run_as_servers(&self.bin, "initdb", &args);
        assert!(
            out.status.success(),
            "initdb: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        system_id(data_dir).expect("the stranger's control file")
    }

    /// Node `id`'s data directory.
    pub fn data_dir(&self, id: NodeId) -> PathBuf {
        match self.moved.get(&id) {
            Some(dir) => dir.clone(),
            None => self.root.join(format!("node{id}")),
        }
    }

    /// Node `id`'s server lives in `dir`, not under `root`: a data dir bully adopts
    /// from another manager (tests/postgres_patroni_takeover.rs), so the kills and
    /// probes, and the kill on drop, find its postmaster there.
    pub fn set_data_dir(&mut self, id: NodeId, dir: PathBuf) {
        self.moved.insert(id, dir);
    }

    /// The PID of node `id`'s running postmaster.
    pub fn pid(&self, id: NodeId) -> Option<u32> {
        let text = std::fs::read_to_string(self.data_dir(id).join("postmaster.pid")).ok()?;
        let pid: u32 = text.lines().next()?.trim().parse().ok()?;
        (!is_zombie(pid)).then_some(pid)
    }

    /// kill -9 of node `id`'s server, all of it (the postmaster and its children), and
    /// a bounded wait until the postmaster is gone.
    pub fn kill(&self, id: NodeId) {
        let Some(pid) = self.pid(id) else { return };
        for p in server_pids(pid) {
            let _ = signals::send(p, Signal::SIGKILL);
        }
        let started = Instant::now();
        while Path::new(&format!("/proc/{pid}")).exists() && !is_zombie(pid) {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "server {id} did not die"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// What an operator's `pg_ctl stop -m fast` does to node `id`'s server: SIGINT to
    /// its postmaster, then a bounded wait until it is gone.
    pub fn stop_by_hand(&self, id: NodeId) {
        let Some(pid) = self.pid(id) else { return };
        let _ = signals::send(pid, Signal::SIGINT);
        let started = Instant::now();
        while Path::new(&format!("/proc/{pid}")).exists() && !is_zombie(pid) {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "server {id} did not stop"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// SIGSTOP of node `id`'s whole server, postmaster first: it keeps its connections
    /// and answers nothing, as a hung host would.
    pub fn pause(&self, id: NodeId) {
        let pid = self.pid(id).expect("a running server to pause");
        for p in server_pids(pid) {
            let _ = signals::send(p, Signal::SIGSTOP);
        }
    }

    /// SIGCONT of node `id`'s server, postmaster first: it acts on the signals that
    /// waited (a fence's shutdown) before any backend runs again.
    pub fn resume(&self, id: NodeId) {
        if let Some(pid) = self.pid(id) {
            for p in server_pids(pid) {
                let _ = signals::send(p, Signal::SIGCONT);
            }
        }
    }

    /// Kills every server still running.
    fn kill_all(&self) {
        for &id in self.addrs.keys() {
            self.resume(id);
            self.kill(id);
        }
    }
}

impl Drop for PgServers {
    /// Twice, a moment apart: a manager that was acting when its node died may still
    /// have started a server.
    fn drop(&mut self) {
        self.kill_all();
        std::thread::sleep(Duration::from_millis(300));
        self.kill_all();
    }
}

/// The postmaster `pid` first, then its children (from /proc).
pub fn server_pids(pid: u32) -> Vec<u32> {
    let mut pids = vec![pid];
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(child) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // pid (comm) state ppid ...: the comm may hold spaces, so read after the ')'.
        let ppid = stat
            .rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(pid) {
            pids.push(child);
        }
    }
    pids
}

/// Whether process `pid` is a zombie, or gone.
pub fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}

/// A client of the server at `addr` (trust auth, user postgres), or `None` if it does
/// not answer within `timeout`. Its connection runs on a task of its own.
pub async fn connect(addr: SocketAddr, timeout: Duration) -> Option<tokio_postgres::Client> {
    connect_as(addr, timeout, None).await
}

/// The login of the tests' sessions: user postgres, database postgres, connecting
/// within `connect_timeout`, over whatever connector the caller picks.
pub fn login(addr: SocketAddr, connect_timeout: Duration) -> tokio_postgres::Config {
    let mut config = tokio_postgres::Config::new();
    config
        .host(addr.ip().to_string())
        .port(addr.port())
        .user("postgres")
        .dbname("postgres")
        .application_name("bully-test")
        .connect_timeout(connect_timeout);
    config
}

/// A client of the server at `addr` as user postgres, with `password` (SCRAM) or
/// without (trust), or `None` if it does not answer within `timeout`. Its connection
/// runs on a task of its own.
pub async fn connect_as(
    addr: SocketAddr,
    timeout: Duration,
    password: Option<&str>,
) -> Option<tokio_postgres::Client> {
    let mut config = login(addr, Duration::from_secs(2));
    if let Some(password) = password {
        config.password(password);
    }
    let (client, connection) = tokio::time::timeout(timeout, config.connect(tokio_postgres::NoTls))
        .await
        .ok()?
        .ok()?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Some(client)
}

/// What one server says about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Role {
    /// `pg_is_in_recovery()`.
    pub standby: bool,
    /// `default_transaction_read_only`.
    pub read_only: bool,
    /// A standby's WAL receiver: its status and the port it streams from.
    pub receiver: Option<(String, u16)>,
    /// `bully.epoch` (0 if unset).
    pub epoch: u64,
}

impl Role {
    /// A server that takes writes: a primary, not read-only.
    pub fn writable(&self) -> bool {
        !self.standby && !self.read_only
    }

    /// A standby streaming from the server on `port`.
    pub fn streams_from(&self, port: u16) -> bool {
        self.standby
            && self
                .receiver
                .as_ref()
                .is_some_and(|(s, p)| s == "streaming" && *p == port)
    }
}

/// The role query [`role`] runs. The receiver's status is `streaming` only once it
/// heard from its upstream or ran 3 s, as the manager reads it (src/node/postgres/sql.rs,
/// `DESCRIBE`): PostgreSQL shows `streaming` from the walreceiver's start, before the
/// upstream accepted it, so one refused again and again would pass between refusals.
pub const ROLE_SQL: &str = "SELECT pg_is_in_recovery(), \
     current_setting('default_transaction_read_only') = 'on', \
     (SELECT CASE WHEN r.status = 'streaming' \
         AND r.last_msg_send_time IS NOT DISTINCT FROM r.last_msg_receipt_time \
         AND a.backend_start >= now() - interval '3 s' THEN 'starting' ELSE r.status END \
      FROM pg_stat_wal_receiver r LEFT JOIN pg_stat_activity a ON a.pid = r.pid), \
     (SELECT sender_port FROM pg_stat_wal_receiver), \
     coalesce(nullif(current_setting('bully.epoch', true), ''), '0')";

/// Reads the role of the server `client` is connected to, bounded by [`PROBE`].
pub async fn role_of(client: &tokio_postgres::Client) -> Option<Role> {
    let row = tokio::time::timeout(PROBE, client.query_one(ROLE_SQL, &[]))
        .await
        .ok()?
        .ok()?;
    let status: Option<String> = row.get(2);
    let port: Option<i32> = row.get(3);
    let epoch: String = row.get(4);
    Some(Role {
        standby: row.get(0),
        read_only: row.get(1),
        receiver: status.zip(port.and_then(|p| u16::try_from(p).ok())),
        epoch: epoch.parse().unwrap_or(0),
    })
}

/// The role of the server at `addr` (one connection), or `None` if it does not answer.
pub async fn role(addr: SocketAddr) -> Option<Role> {
    role_as(addr, None).await
}

/// [`role`], logging in with `password` (SCRAM) or without (trust).
pub async fn role_as(addr: SocketAddr, password: Option<&str>) -> Option<Role> {
    let client = connect_as(addr, PROBE, password).await?;
    role_of(&client).await
}

/// How the primary at `addr` counts the standby connected as `application_name`
/// (`pg_stat_replication.sync_state`: `quorum` once named in an `ANY k` list, `async`
/// otherwise), or `None` if none is connected or the server does not answer.
pub async fn sync_state(addr: SocketAddr, application_name: &str) -> Option<String> {
    let client = connect(addr, PROBE).await?;
    let row = tokio::time::timeout(
        PROBE,
        client.query_opt(
            "SELECT sync_state FROM pg_stat_replication WHERE application_name = $1",
            &[&application_name],
        ),
    )
    .await
    .ok()?
    .ok()??;
    Some(row.get(0))
}

/// Node `id`'s WAL receiver PID on its server at `addr` (the lagging-standby fault
/// SIGSTOPs it).
pub async fn walreceiver_pid(addr: SocketAddr) -> Option<u32> {
    let client = connect(addr, PROBE).await?;
    let row = client
        .query_opt("SELECT pid FROM pg_stat_wal_receiver", &[])
        .await
        .ok()??;
    let pid: i32 = row.get(0);
    u32::try_from(pid).ok()
}

/// The WAL position of the server at `addr` as a number (received or replayed on a
/// standby, written on a primary), as the manager reads it for the estimate.
pub async fn wal_position(addr: SocketAddr) -> Option<i64> {
    let client = connect(addr, PROBE).await?;
    let row = tokio::time::timeout(
        PROBE,
        client.query_one(
            "SELECT pg_wal_lsn_diff(CASE WHEN pg_is_in_recovery() THEN \
             greatest(coalesce(pg_last_wal_receive_lsn(), '0/0'), \
                      coalesce(pg_last_wal_replay_lsn(), '0/0')) \
             ELSE pg_current_wal_lsn() END, '0/0')::bigint",
            &[],
        ),
    )
    .await
    .ok()?
    .ok()?;
    Some(row.get(0))
}
