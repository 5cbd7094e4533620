//! Standbys that cannot stream lose no acknowledged commit (issue 49, "The durability
//! rule", docs/design.md#the-durability-rule), on real processes: the cluster of
//! `tests/common/postgres_bully.rs` (three nodes in quorum mode, each keeping a
//! PostgreSQL 15 server, keepers, HAProxy), `synchronous = "quorum"`, SCRAM with
//! password files holding a quote, a backslash, a space and non-ASCII.
//!
//! Both tests begin alike ([`refuse_then_kill`]): once every standby streams, the
//! primary's `pg_hba.conf` gets `reject` lines for replication in front (the file is the
//! user's once `initdb` wrote it: docs/postgresql.md, "Passwords and who may log in"),
//! the server rereads it and its WAL senders are ended, so the standbys reconnect and
//! are refused (the primary's server log says so). The primary then acknowledges alone,
//! which it may only once a majority of the members keep a synchronous record saying so
//! (its status note, and its node's log). A writer inserts ids one by one straight into
//! the primary, recording each whose COMMIT returned OK, and the primary's whole host is
//! killed -9 while it writes.
//! - [`the_cluster_waits_for_the_primary_whose_standbys_could_not_stream`]: no standby's
//!   server becomes writable, while the new coordinator says it `waits to promote` (its
//!   status in `bully status --cluster --json`, and its log); once the old host is back
//!   its server is the primary again and holds every acknowledged id (0 lost); with the
//!   `reject` lines gone, every standby streams from it again.
//! - [`accept_loss_promotes_a_standby_that_lacks_the_commits`]: `bully pg failover --to
//!   N` is refused without `--accept-loss`; with it, coordinator N's server is promoted.
//!   The acknowledged ids it lacks (lost, as the flag says) are counted and printed.
//!
//! Skips, saying why, without PostgreSQL 15 (or, as root, without a `postgres` user) or
//! HAProxy.

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
use postgres_bully::{BullyPg, Secrets, AGREE, AWKWARD_SUPERUSER};
use postgres_cluster::{connect_as, role_as, Role};
use primary::{http_get, phase};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The superuser's password: a quote, a backslash, a space, non-ASCII.
const SUPERUSER: &str = AWKWARD_SUPERUSER;
/// The replication role's: the same kinds of characters, another password.
const REPLICATION: &str = r"re\pl'i ca ü漢";
/// The table the writer fills, one row per acknowledged id.
const TABLE: &str = "acknowledged";
/// Put in front of the primary's `pg_hba.conf`: every replication connection refused.
const REJECT: [&str; 2] = [
    "host replication all 0.0.0.0/0 reject",
    "host replication all ::/0 reject",
];
/// What the primary's record and note say once it acknowledges alone
/// (src/postgres_rules/durability.rs, `SyncRecord`'s text).
const ALONE: &str = "acknowledging without a majority";
/// What a coordinator that may not promote says (src/postgres_rules.rs).
const WAITS: &str = "waits to promote";
/// What the primary's server logs when it refuses a standby by `pg_hba.conf`.
const REFUSED: &str = "pg_hba.conf rejects replication connection";
/// Acknowledged ids the writer collects before the primary's host is killed (it goes
/// on writing through the kill).
const ACKED_BEFORE_KILL: usize = 300;
/// How long one INSERT may take before the writer stops.
const INSERT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the survivors are watched once the coordinator said it waits: no server
/// may become writable meanwhile.
const WATCH: Duration = Duration::from_secs(5);

/// The cluster once its primary's host was killed after acknowledging `acked` alone.
/// Fields drop in order: the cluster (every process killed by PID), then the password
/// files.
struct Killed {
    c: BullyPg,
    /// The node whose server was the primary, its host killed.
    old: NodeId,
    /// Every id whose INSERT returned OK, in order.
    acked: Vec<i32>,
    _passwords: tempfile::TempDir,
}

impl Killed {
    /// The members whose hosts still run.
    fn survivors(&self) -> Vec<NodeId> {
        self.c
            .ids()
            .into_iter()
            .filter(|&id| id != self.old)
            .collect()
    }

    /// The acknowledged ids node `id`'s server does not hold; panics with the logs if it
    /// cannot be asked.
    async fn lost_on(&self, id: NodeId) -> Vec<i32> {
        let client = login(&self.c, id)
            .await
            .unwrap_or_else(|| panic!("no session on node {id}'s server\n{}", self.c.logs()));
        let rows = client
            .query(&format!("SELECT id FROM {TABLE}"), &[])
            .await
            .unwrap_or_else(|e| panic!("reading {TABLE} on node {id}: {e}"));
        let held: HashSet<i32> = rows.iter().map(|r| r.get(0)).collect();
        self.acked
            .iter()
            .copied()
            .filter(|id| !held.contains(id))
            .collect()
    }

    /// `bully ARGS --config <a survivor's config>`: its exit code and what it printed.
    fn bully(&self, args: &[&str]) -> (Option<i32>, String) {
        let config = self.c.t.cluster.config_path(self.survivors()[0]);
        let mut all = args.to_vec();
        all.extend(["--config", config.to_str().unwrap()]);
        let out = common::bully(&all);
        (out.status.code(), common::text(&out))
    }

    /// Waits until a survivor coordinates and says it waits to promote, watching that no
    /// survivor's server is writable meanwhile and for [`WATCH`] after; returns that
    /// coordinator. Panics with the logs.
    async fn wait_for_waiting_coordinator(&self) -> NodeId {
        let survivors = self.survivors();
        let began = Instant::now();
        let mut waiting: Option<(NodeId, Instant)> = None;
        loop {
            for &id in &survivors {
                let role = role_as(self.c.local(id), Some(SUPERUSER)).await;
                assert!(
                    !role.as_ref().is_some_and(Role::writable),
                    "node {id}'s server was promoted without the old primary's commits \
                     ({} ms after the kill)\n{}",
                    began.elapsed().as_millis(),
                    self.c.logs()
                );
                let note = note(&self.c, id).await.unwrap_or_default();
                if waiting.is_none() && note.contains(WAITS) {
                    eprintln!(
                        "=== node {id} waits, {} ms after the kill: {note}",
                        began.elapsed().as_millis()
                    );
                    waiting = Some((id, Instant::now()));
                }
            }
            match waiting {
                Some((id, since)) if since.elapsed() > WATCH => return id,
                None if began.elapsed() > AGREE => panic!(
                    "no survivor said `{WAITS}` within {AGREE:?}\n{}",
                    self.c.logs()
                ),
                _ => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }
}

/// A superuser session on node `id`'s server, or `None`.
async fn login(c: &BullyPg, id: NodeId) -> Option<tokio_postgres::Client> {
    connect_as(c.local(id), Duration::from_secs(2), Some(SUPERUSER)).await
}

/// Node `id`'s manager's note (what it did last or waits for), if the node answers.
async fn note(c: &BullyPg, id: NodeId) -> Option<String> {
    let status = primary::status(&c.t, id).await?;
    status.postgres.map(|p| p.note)
}

/// Runs `sql` on node `id`'s server; panics with the logs if it fails.
async fn execute(c: &BullyPg, id: NodeId, sql: &str) {
    let client = login(c, id)
        .await
        .unwrap_or_else(|| panic!("no session on node {id}'s server\n{}", c.logs()));
    let done = tokio::time::timeout(Duration::from_secs(10), client.batch_execute(sql)).await;
    if !matches!(done, Ok(Ok(()))) {
        panic!("{sql} on node {id}: {done:?}\n{}", c.logs());
    }
}

/// Node `id`'s `pg_hba.conf` with the [`REJECT`] lines in front (`true`) or without them
/// (`false`), then reread by its server.
async fn refuse_replication(c: &BullyPg, id: NodeId, refuse: bool) {
    let path = c.pg.data_dir(id).join("pg_hba.conf");
    let text = std::fs::read_to_string(&path).unwrap();
    let kept: Vec<&str> = text.lines().filter(|l| !REJECT.contains(l)).collect();
    let mut lines: Vec<&str> = if refuse { REJECT.to_vec() } else { Vec::new() };
    lines.extend(kept);
    // Rewritten in place: the file keeps its owner (the server's user) and mode.
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    execute(c, id, "SELECT pg_reload_conf()").await;
}

/// Inserts ids 1, 2, ... one by one on `client` until an INSERT fails or takes longer
/// than [`INSERT_TIMEOUT`]; pushes each id whose COMMIT returned OK to `acked`.
async fn write_ids(client: tokio_postgres::Client, acked: Arc<Mutex<Vec<i32>>>) {
    let insert = format!("INSERT INTO {TABLE} (id) VALUES ($1)");
    for id in 1..=i32::MAX {
        match tokio::time::timeout(INSERT_TIMEOUT, client.execute(&insert, &[&id])).await {
            Ok(Ok(_)) => acked.lock().unwrap().push(id),
            _ => return,
        }
    }
}

/// The start both tests share: every standby streaming, then refused by the primary's
/// `pg_hba.conf`; the primary acknowledging alone (its record committed first); a writer
/// on it; its host killed -9 while it writes. `None`: skipped.
async fn refuse_then_kill() -> Option<Killed> {
    if postgres_bully::skipped("standbys that cannot stream") {
        return None;
    }
    let passwords = tempfile::tempdir().unwrap();
    let superuser = passwords.path().join("pg-superuser");
    let replication = passwords.path().join("pg-replication");
    std::fs::write(&superuser, format!("{SUPERUSER}\n")).unwrap();
    std::fs::write(&replication, format!("{REPLICATION}\n")).unwrap();
    let mut c = BullyPg::start_with(Secrets::Files(superuser, replication)).await;
    let old = c.wait_all_streaming(&|_| SUPERUSER.to_string()).await;

    phase("the table, replayed by every standby");
    execute(
        &c,
        old,
        &format!("CREATE TABLE {TABLE} (id integer PRIMARY KEY)"),
    )
    .await;
    let client = login(&c, old).await.expect("a session on the primary");
    let lsn: String = client
        .query_one("SELECT pg_current_wal_lsn()::text", &[])
        .await
        .unwrap()
        .get(0);
    let standbys = c.ids().len() as i64 - 1;
    primary::wait_logged(&c.t, "every standby replaying the table", AGREE, || async {
        let row = client
            .query_one(
                "SELECT count(*) FROM pg_stat_replication WHERE replay_lsn >= $1::text::pg_lsn",
                &[&lsn],
            )
            .await
            .ok()?;
        (row.get::<_, i64>(0) == standbys).then_some(())
    })
    .await;

    phase("the primary's pg_hba.conf refuses replication; its WAL senders ended");
    refuse_replication(&c, old, true).await;
    let server_log = c.t.cluster.data_dir(old).join("postgres.log");
    let began = Instant::now();
    loop {
        // A standby that reconnected before the server reread its hba is ended again.
        client
            .batch_execute("SELECT pg_terminate_backend(pid) FROM pg_stat_replication")
            .await
            .unwrap();
        let refused = std::fs::read_to_string(&server_log).is_ok_and(|l| l.contains(REFUSED));
        let alone = note(&c, old).await.is_some_and(|n| n.contains(ALONE));
        let streaming: i64 = client
            .query_one("SELECT count(*) FROM pg_stat_replication", &[])
            .await
            .unwrap()
            .get(0);
        if refused && alone && streaming == 0 {
            break;
        }
        assert!(
            began.elapsed() < AGREE,
            "the primary does not acknowledge alone with its standbys refused \
             (refused {refused}, alone {alone}, walsenders {streaming})\n{}",
            c.logs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!(
        "=== node {old} acknowledges alone {} ms after its standbys were refused: {}",
        began.elapsed().as_millis(),
        note(&c, old).await.unwrap_or_default()
    );
    let log = std::fs::read_to_string(c.t.cluster.log_path(old)).unwrap_or_default();
    assert!(
        log.lines()
            .any(|l| l.contains("synchronous record committed") && l.contains(ALONE)),
        "node {old} acknowledges alone without a committed record saying so\n{}",
        c.logs()
    );

    phase("a writer on the primary; its host killed -9 while it writes");
    let acked = Arc::new(Mutex::new(Vec::new()));
    let writer = tokio::spawn(write_ids(client, Arc::clone(&acked)));
    primary::wait_logged(&c.t, "the writer's first acknowledgements", AGREE, || {
        let enough = acked.lock().unwrap().len() >= ACKED_BEFORE_KILL;
        async move { enough.then_some(()) }
    })
    .await;
    c.kill_host(old);
    // Its connection is gone with the server: the next INSERT fails.
    let ended = tokio::time::timeout(INSERT_TIMEOUT * 2, writer).await;
    assert!(ended.is_ok(), "the writer did not stop after the kill");
    let acked = acked.lock().unwrap().clone();
    eprintln!("=== {} ids acknowledged by node {old} alone", acked.len());
    Some(Killed {
        c,
        old,
        acked,
        _passwords: passwords,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_waits_for_the_primary_whose_standbys_could_not_stream() {
    let Some(mut s) = refuse_then_kill().await else {
        return;
    };
    phase("no standby promoted: the coordinator waits and says why");
    let waiting = s.wait_for_waiting_coordinator().await;
    let (code, status) = s.bully(&["status", "--cluster", "--json", "--timeout", "2s"]);
    assert_eq!(code, Some(0), "{status}");
    assert!(status.contains(WAITS), "status --cluster: {status}");
    let log = std::fs::read_to_string(s.c.t.cluster.log_path(waiting)).unwrap_or_default();
    assert!(
        log.lines().any(|l| l.contains(WAITS)),
        "node {waiting}'s log does not say it waits\n{}",
        s.c.logs()
    );

    phase("the old primary's host back: its server is the primary, nothing lost");
    let back = Instant::now();
    s.c.restart_host(s.old);
    let ids = s.c.ids();
    let c = &s.c;
    let leader = primary::wait_logged(
        &c.t,
        "a ready coordinator with a writable server",
        AGREE,
        || async {
            for &id in &ids {
                let ready = matches!(http_get(c.http[&id], "/coordinator").await, Ok((200, _)));
                let role = role_as(c.local(id), Some(SUPERUSER)).await;
                if ready && role.is_some_and(|r| r.writable()) {
                    return Some(id);
                }
            }
            None
        },
    )
    .await;
    eprintln!(
        "=== node {leader}'s server is the primary {} ms after node {}'s host came back",
        back.elapsed().as_millis(),
        s.old
    );
    let lost = s.lost_on(leader).await;
    eprintln!(
        "=== acknowledged ids lost: {} of {}",
        lost.len(),
        s.acked.len()
    );
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged ids lost on node {leader}'s server (first {:?})\n{}",
        lost.len(),
        s.acked.len(),
        &lost[..lost.len().min(10)],
        s.c.logs()
    );
    assert_eq!(
        leader,
        s.old,
        "only the old primary's server held its commits\n{}",
        s.c.logs()
    );

    phase("the reject lines removed: every standby streams again");
    refuse_replication(&s.c, leader, false).await;
    let streams = s.c.wait_all_streaming(&|_| SUPERUSER.to_string()).await;
    assert_eq!(streams, leader);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accept_loss_promotes_a_standby_that_lacks_the_commits() {
    let Some(s) = refuse_then_kill().await else {
        return;
    };
    let waiting = s.wait_for_waiting_coordinator().await;
    let to = waiting.to_string();

    phase("bully pg failover without --accept-loss: refused");
    let (code, text) = s.bully(&["pg", "failover", "--to", &to]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("--accept-loss"), "{text}");
    let role = role_as(s.c.local(waiting), Some(SUPERUSER)).await;
    assert!(
        !role.is_some_and(|r| r.writable()),
        "node {waiting}'s server promoted without --accept-loss"
    );

    phase("bully pg failover --accept-loss: the coordinator's server promoted");
    let asked = Instant::now();
    let (code, text) = s.bully(&["pg", "failover", "--to", &to, "--accept-loss"]);
    assert_eq!(code, Some(0), "{text}\n{}", s.c.logs());
    eprintln!(
        "=== bully pg failover --to {to} --accept-loss: {}",
        text.trim()
    );
    let c = &s.c;
    primary::wait_logged(&c.t, "the coordinator's server writable", AGREE, || async {
        role_as(c.local(waiting), Some(SUPERUSER))
            .await
            .is_some_and(|r| r.writable())
            .then_some(())
    })
    .await;
    eprintln!(
        "=== node {waiting}'s server promoted {} ms after --accept-loss",
        asked.elapsed().as_millis()
    );
    let lost = s.lost_on(waiting).await;
    eprintln!(
        "=== accept-loss: {} of {} acknowledged ids lost (the flag's price)",
        lost.len(),
        s.acked.len()
    );
}
