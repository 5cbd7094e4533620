//! Replicas from backups and WAL from an archive (issue 50), on real processes: the
//! cluster of `tests/common/postgres_bully.rs` (three nodes, each keeping a PostgreSQL
//! 15 server, keepers, HAProxy) with every server archiving its WAL
//! (`archive_command` copies each segment into a shared directory), reading it back
//! (`restore_command`), retention made small (`wal_keep_size = 0`,
//! `max_slot_wal_keep_size = "32MB"`), and `[postgres] replica_method` a script that
//! copies a backup directory into the empty data dir (as pgBackRest's `restore` would).
//!
//! - **An old backup, bridged by the archive.** The test takes a backup with
//!   `pg_basebackup`, writes past it until the primary no longer holds the WAL the
//!   backup needs, then `bully pg reinit` of a standby restores that backup with the
//!   method: the standby replays the missing WAL from the archive, streams, holds every
//!   row, and its mark as a restored copy still filling (`bully.filling`) goes once it
//!   reached where the primary was when the copy began; no `pg_basebackup` ran.
//! - **A backup of another cluster.** The backup directory then holds a fresh `initdb`
//!   (a wrong stanza): `bully pg reinit` of the other standby restores it, bully
//!   refuses it by its system identifier, and `pg_basebackup` makes the copy instead.
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
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_restore_from_backups_and_replay_from_the_archive() {
    if postgres_bully::skipped("replicas from backups") {
        return;
    }
    let prepared = BullyPg::prepare_with(Secrets::Trust, |_, _| {}).await;
    let files = Files::new(&prepared.pg.data_dir(1).with_file_name(""));
    let archive = files.archive.display().to_string();
    let method = [&files.method, &files.backup, &files.calls].map(|p| p.display().to_string());
    for id in prepared.t.cluster.ids() {
        prepared
            .t
            .cluster
            .edit_config(id, |c| {
                let pg = c.postgres.as_mut().expect("[postgres]");
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
            })
            .unwrap();
    }
    let mut c = prepared.start();
    let leader = c.wait_all_streaming(&|_| String::new()).await;
    let standbys: Vec<NodeId> = c.ids().into_iter().filter(|&id| id != leader).collect();
    let client = connect(c.local(leader), PROBE * 4)
        .await
        .expect("the primary");
    let mut rows = load(&client, 20, 10).await;

    phase("a backup, then writes until the primary no longer holds its WAL");
    let backup_from = take_backup(&c, leader, &files.backup);
    rows = push_wal_past(&client, backup_from, rows).await;

    phase("reinit of a standby restores the old backup and replays from the archive");
    let (first, second) = (standbys[0], standbys[1]);
    let calls = files.calls();
    let restored_before = restored(&c, first);
    let node_log =
        |id: NodeId| std::fs::read_to_string(c.t.cluster.log_path(id)).unwrap_or_default();
    let clones = |log: &str| log.matches("cloning (pg_basebackup)").count();
    let clones_before = clones(&node_log(first));
    let out = reinit(&c, first);
    assert!(
        out.contains("the replica method"),
        "node {first}'s reinit: {out}\n{}",
        c.logs()
    );
    assert_eq!(files.calls(), calls + 1, "the method ran once");
    c.wait_rejoined(first, leader).await;
    wait_tally(&c, first, None, rows).await;
    assert!(
        restored(&c, first) > restored_before,
        "node {first} replayed nothing from the archive"
    );
    // The restored copy counts again once its WAL reached where the primary's was
    // when it began; it was never replaced by pg_basebackup.
    let filling = c.pg.data_dir(first).join("bully.filling");
    common::wait_until("the restored copy's mark removed", AGREE, || async {
        (!filling.exists()).then_some(())
    })
    .await;
    let log = node_log(first);
    assert!(log.contains("the restored copy reached where its source was"));
    assert_eq!(files.calls(), calls + 1, "the method ran once");
    assert_eq!(asides(&c.pg.data_dir(first)), 1, "one data dir set aside");
    assert_eq!(
        clones(&log),
        clones_before,
        "node {first}'s copy was replaced by pg_basebackup"
    );

    phase("a backup of another cluster is refused; pg_basebackup copies instead");
    std::fs::remove_dir_all(&files.backup).unwrap();
    let stranger = c.pg.initdb_stranger(&files.backup);
    let cluster_system = system_id(&c.pg.data_dir(leader)).expect("the primary's system");
    let out = reinit(&c, second);
    assert!(
        out.contains("pg_basebackup"),
        "node {second}'s reinit: {out}\n{}",
        c.logs()
    );
    assert_eq!(
        files.calls(),
        calls + 2,
        "the method ran, then pg_basebackup"
    );
    let log = node_log(second);
    assert!(
        log.contains(&format!(
            "restored another cluster (system identifier {stranger}"
        )),
        "node {second} did not say why it refused the backup"
    );
    c.wait_rejoined(second, leader).await;
    assert_eq!(system_id(&c.pg.data_dir(second)), Some(cluster_system));
    rows = joined(rows, load_more(&client, rows.max, 10, 10).await);
    wait_tally(&c, second, None, rows).await;

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
