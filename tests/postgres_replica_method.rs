//! Replicas from backups and WAL from an archive (issue 50), on real processes: the
//! cluster of `tests/common/postgres_bully.rs` (three nodes, each keeping a PostgreSQL
//! 15 server, keepers, HAProxy) with every server archiving its WAL
//! (`archive_command` copies each segment into a shared directory), reading it back
//! (`restore_command`), retention made small (`wal_keep_size = 0`,
//! `max_slot_wal_keep_size = "32MB"`), and `[postgres] replica_method` a script that
//! copies a backup directory into the empty data dir (as pgBackRest's `restore` would).
//! Members added at runtime get the same settings (`Prepared::tune_more`). The method
//! only fills the empty data dir of a member that never held data; a reinit is always
//! `pg_basebackup` (src/postgres_rules/replica_method.rs).
//!
//! - **An old backup, bridged by the archive.** The test takes a backup with
//!   `pg_basebackup`, writes past it until the primary no longer holds the WAL the
//!   backup needs, then adds node 4 (`bully member add`): its clone is the method
//!   restoring that backup (told where the primary is), it replays the missing WAL from
//!   the archive, streams from the primary and holds every row; no `pg_basebackup` ran
//!   for it.
//! - **`bully pg reinit` never uses the method.** With that good backup still in place,
//!   the reinit of an original standby copies with `pg_basebackup` (its answer says so,
//!   the method is not called), keeps the old data dir aside, and streams again with
//!   every row.
//! - **A backup of another cluster.** The backup directory then holds a fresh `initdb`
//!   (a wrong stanza): node 5 is added, its method restores that, bully refuses it by
//!   its system identifier, and `pg_basebackup` makes the copy instead: node 5 holds
//!   the cluster's system identifier and every row.
//! - **Down past retention, back through the archive.** A standby's host is killed
//!   while the primary writes past what its slot may keep; back up, it replays from the
//!   archive and streams again without a copy (no data dir set aside).
//!
//! bully's invariants are checked on the event logs at the end. Skips, saying why,
//! without PostgreSQL 15 (or, as root, without a `postgres` user) or HAProxy.

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
use postgres_bully::{joined, load, load_more, wait_tally, BullyPg, Secrets, Tally, AGREE};
use postgres_cluster::{connect, give_to_servers, oldest_wal, run_as_servers, system_id};
use postgres_cluster::{wal_position, PROBE};
use primary::phase;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// At most this many rounds of writes, segment switches and checkpoints to push WAL
/// out of the primary.
const ROUNDS: usize = 40;

/// The test's replica method: notes the call in `$2`, then copies the backup in `$1`
/// (refusing an empty one) into `$PGDATA`.
const METHOD: &str = r#"#!/bin/sh
echo "$BULLY_PRIMARY_HOST:$BULLY_PRIMARY_PORT" >> "$2"
[ -f "$1/PG_VERSION" ] || { echo "no backup in $1" >&2; exit 1; }
exec cp -R "$1/." "$PGDATA/"
"#;

/// Where the test keeps the archive, the backup, the method and its call log.
struct Files {
    archive: PathBuf,
    backup: PathBuf,
    calls: PathBuf,
    method: PathBuf,
}

impl Files {
    /// Under the servers' root (theirs as root), the method executable by anyone.
    fn new(pg_root: &Path) -> Files {
        let files = Files {
            archive: pg_root.join("archive"),
            backup: pg_root.join("backup"),
            calls: pg_root.join("method-calls"),
            method: pg_root.join("restore-backup.sh"),
        };
        std::fs::create_dir_all(&files.archive).unwrap();
        std::fs::create_dir_all(&files.backup).unwrap();
        std::fs::write(&files.method, METHOD).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::Permissions::from_mode(0o755);
        std::fs::set_permissions(&files.method, mode).unwrap();
        give_to_servers(&files.archive);
        give_to_servers(&files.backup);
        files
    }

    /// How many times the method ran.
    fn calls(&self) -> usize {
        std::fs::read_to_string(&self.calls).map_or(0, |t| t.lines().count())
    }

    /// The primary (`host:port`) the method's last call was told to restore for.
    fn last_call(&self) -> Option<String> {
        let text = std::fs::read_to_string(&self.calls).ok()?;
        text.lines().last().map(str::to_string)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_restore_from_backups_and_replay_from_the_archive() {
    if postgres_bully::skipped("replicas from backups") {
        return;
    }
    let mut prepared = BullyPg::prepare_with(Secrets::Trust, |_, _| {}).await;
    let files = Files::new(&prepared.pg.root);
    let archive = files.archive.display().to_string();
    let method = [&files.method, &files.backup, &files.calls].map(|p| p.display().to_string());
    prepared.tune_more(move |_, pg| {
        let parameters = [
            ("archive_mode", "on".to_string()),
            (
                "archive_command",
                format!("test ! -f {archive}/%f && cp %p {archive}/%f"),
            ),
            ("restore_command", format!("cp {archive}/%f %p")),
            ("wal_keep_size", "0".into()),
        ];
        for (name, value) in parameters {
            pg.parameters.insert(name.into(), value);
        }
        pg.max_slot_wal_keep_size = 32 << 20;
        pg.replica_method = method.to_vec();
    });
    let mut c = prepared.start();
    let leader = c.wait_all_streaming(&|_| String::new()).await;
    let standbys: Vec<NodeId> = c.ids().into_iter().filter(|&id| id != leader).collect();
    let (first, second) = (standbys[0], standbys[1]);
    let primary_seen = c.cuts[&leader].addr;
    let client = connect(c.local(leader), PROBE * 4)
        .await
        .expect("the primary");
    let mut rows = load(&client, 20, 10).await;

    phase("a backup, then writes until the primary no longer holds its WAL");
    let backup_from = take_backup(&c, leader, &files.backup);
    rows = push_wal_past(&client, backup_from, rows).await;

    phase("node 4 added: the method restores the old backup; the archive bridges it");
    let calls = files.calls();
    c.add_member(4, leader).await;
    wait_log(
        &c,
        4,
        &format!("copied (the replica method); streams from {primary_seen}"),
    )
    .await;
    assert_eq!(files.calls(), calls + 1, "the method ran once, for node 4");
    assert_eq!(
        files.last_call().as_deref(),
        Some(primary_seen.to_string().as_str()),
        "the method was told where the primary is"
    );
    c.wait_rejoined(4, leader).await;
    wait_tally(&c, 4, None, rows).await;
    assert!(
        restored(&c, 4) > 0,
        "node 4 replayed nothing from the archive"
    );
    let log = node_log(&c, 4);
    assert!(
        !log.contains("cloning (pg_basebackup)"),
        "node 4 was copied by pg_basebackup too:\n{log}"
    );
    assert_eq!(asides(&c.pg.data_dir(4)), 0, "node 4 set no data dir aside");
    assert_eq!(files.calls(), calls + 1, "the method ran once, for node 4");

    phase("bully pg reinit of a standby is pg_basebackup, the good backup in place");
    let calls = files.calls();
    let aside_before = asides(&c.pg.data_dir(second));
    let methods = |log: &str| log.matches("restoring with the replica method").count();
    let clones = |log: &str| log.matches("cloning (pg_basebackup)").count();
    let (methods_before, clones_before) = {
        let log = node_log(&c, second);
        (methods(&log), clones(&log))
    };
    let out = reinit(&c, second);
    assert!(
        out.contains("copied afresh (pg_basebackup)") && out.contains("kept aside"),
        "node {second}'s reinit: {out}\n{}",
        c.logs()
    );
    assert_eq!(files.calls(), calls, "the reinit ran the method");
    let log = node_log(&c, second);
    assert_eq!(
        methods(&log),
        methods_before,
        "node {second} restored a backup"
    );
    assert_eq!(
        clones(&log),
        clones_before + 1,
        "node {second}: one pg_basebackup"
    );
    assert_eq!(
        asides(&c.pg.data_dir(second)),
        aside_before + 1,
        "node {second}'s old data dir set aside"
    );
    c.wait_rejoined(second, leader).await;
    rows = joined(rows, load_more(&client, rows.max, 10, 10).await);
    wait_tally(&c, second, None, rows).await;
    assert_eq!(files.calls(), calls, "the method ran after the reinit");

    phase("node 5 added: a backup of another cluster is refused; pg_basebackup copies");
    std::fs::remove_dir_all(&files.backup).unwrap();
    let stranger = c.pg.initdb_stranger(&files.backup);
    let cluster_system = system_id(&c.pg.data_dir(leader)).expect("the primary's system");
    assert_ne!(stranger, cluster_system, "the stranger is another cluster");
    let calls = files.calls();
    c.add_member(5, leader).await;
    wait_log(
        &c,
        5,
        &format!("copied (pg_basebackup); streams from {primary_seen}"),
    )
    .await;
    assert_eq!(files.calls(), calls + 1, "the method ran once, for node 5");
    let log = node_log(&c, 5);
    let refused = format!(
        "the replica method restored another cluster (system identifier {stranger}; the \
         cluster's is {cluster_system})"
    );
    assert!(
        log.contains(&refused) && log.contains("pg_basebackup goes next"),
        "node 5 did not say why it refused the backup:\n{log}"
    );
    assert!(log.contains("cloning (pg_basebackup)"), "node 5: {log}");
    c.wait_rejoined(5, leader).await;
    assert_eq!(system_id(&c.pg.data_dir(5)), Some(cluster_system));
    rows = joined(rows, load_more(&client, rows.max, 10, 10).await);
    wait_tally(&c, 5, None, rows).await;
    assert_eq!(files.calls(), calls + 1, "the method ran once, for node 5");

    phase("a standby down past its slot's retention comes back through the archive");
    let position = wal_position(c.local(first)).await.expect("its position") as u64;
    let aside_before = asides(&c.pg.data_dir(first));
    let restored_before = restored(&c, first);
    c.kill_host(first);
    rows = push_wal_past(&client, position, rows).await;
    c.restart_host(first);
    c.wait_rejoined(first, leader).await;
    wait_tally(&c, first, None, rows).await;
    assert_eq!(
        asides(&c.pg.data_dir(first)),
        aside_before,
        "node {first} was copied afresh instead of replaying from the archive"
    );
    assert!(
        restored(&c, first) > restored_before,
        "node {first} replayed nothing from the archive"
    );

    drop(client);
    common::stop_all_and_assert_invariants(&mut c.t);
}

/// Node `id`'s log (its bully node's), empty while there is none.
fn node_log(c: &BullyPg, id: NodeId) -> String {
    std::fs::read_to_string(c.t.cluster.log_path(id)).unwrap_or_default()
}

/// Waits (within [`AGREE`]) until node `id`'s log holds `line`; panics with the logs.
async fn wait_log(c: &BullyPg, id: NodeId, line: &str) {
    eprintln!("=== waiting for \"{line}\" in node {id}'s log");
    let what = format!("\"{line}\" in node {id}'s log");
    primary::wait_logged(&c.t, &what, AGREE, || async {
        node_log(c, id).contains(line).then_some(())
    })
    .await
}

/// `pg_basebackup` of node `id`'s server into `dir` (emptied first), as the servers'
/// user, the way an operator's backup tool would take one; returns where the WAL the
/// backup needs begins (its label's `START WAL LOCATION`).
fn take_backup(c: &BullyPg, id: NodeId, dir: &Path) -> u64 {
    std::fs::remove_dir_all(dir).unwrap();
    let at = c.local(id);
    let source = format!("host={} port={} user=postgres", at.ip(), at.port());
    let args = [
        "-D",
        &dir.display().to_string(),
        "-d",
        &source,
        "-X",
        "stream",
        "-c",
        "fast",
    ];
    let out = run_as_servers(&c.pg.bin, "pg_basebackup", &args.map(OsStr::new));
    assert!(
        out.status.success(),
        "pg_basebackup: {}",
        common::text(&out)
    );
    let label = std::fs::read_to_string(dir.join("backup_label")).expect("the backup's label");
    let start = label
        .lines()
        .find_map(|l| l.strip_prefix("START WAL LOCATION: "))
        .and_then(|l| l.split_whitespace().next())
        .expect("START WAL LOCATION in the label");
    let (high, low) = start.split_once('/').expect("an LSN");
    (u64::from_str_radix(high, 16).unwrap() << 32) + u64::from_str_radix(low, 16).unwrap()
}

/// Writes rows (after `rows`), switches WAL segments and checkpoints until the oldest
/// WAL the primary keeps begins past `position`; every row written, `rows` too.
async fn push_wal_past(client: &tokio_postgres::Client, position: u64, rows: Tally) -> Tally {
    let mut written = rows;
    for _ in 0..ROUNDS {
        written = joined(written, load_more(client, written.max, 5, 200).await);
        client
            .batch_execute("SELECT pg_switch_wal(); CHECKPOINT")
            .await
            .unwrap();
        if oldest_wal(client).await > position {
            return written;
        }
    }
    panic!("the primary still holds the WAL from {position} after {ROUNDS} rounds");
}

/// `bully pg reinit <id>` through node `id`'s config; what it printed (it must succeed).
fn reinit(c: &BullyPg, id: NodeId) -> String {
    let config = c.config(id);
    let node = id.to_string();
    let out = common::bully(&["pg", "reinit", &node, "--config", config.to_str().unwrap()]);
    let text = common::text(&out);
    assert!(
        out.status.success(),
        "reinit of node {id}: {text}\n{}",
        c.logs()
    );
    text
}

/// How many WAL files node `id`'s server restored from the archive (its log says
/// "restored log file" for each).
fn restored(c: &BullyPg, id: NodeId) -> usize {
    let log = c.t.cluster.data_dir(id).join("postgres.log");
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.matches("restored log file").count()
}

/// How many data dirs were set aside for `data_dir`.
fn asides(data_dir: &Path) -> usize {
    let prefix = format!("{}.aside.", data_dir.file_name().unwrap().to_string_lossy());
    std::fs::read_dir(data_dir.parent().unwrap())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .count()
}
