//! Passwords and `pg_hba.conf` on real processes (issue 49, "Secrets and defaults"):
//! the cluster of `examples/postgres-primary` (tests/common/postgres_bully.rs) with
//! SCRAM instead of the failover test's `trust`.
//! - Password files holding a quote, a backslash, a space and non-ASCII (`pa'ss\wo rd
//!   é`, the superuser's) and every other special character a pgpass line can carry
//!   (the replication role's): every standby streams (the primary's
//!   `pg_stat_replication` lists both, `streaming`, within a deadline), and no
//!   `bully.conf` holds a password.
//! - No password files: each node generates its own; once the generated files of the
//!   node that ran initdb are copied to the others (the operator's step,
//!   docs/postgresql.md), the standbys clone and stream; `pg_hba.conf` has no `trust`
//!   line for host connections.
//!
//! Skips, saying why, without PostgreSQL 15 or HAProxy (as the failover test does).

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
use postgres_bully::{BullyPg, Secrets, AGREE, AWKWARD_SUPERUSER, IDS};
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

/// The superuser's password: a quote, a backslash, a space, non-ASCII.
const SUPERUSER: &str = AWKWARD_SUPERUSER;
/// The replication role's: every special character a pgpass line carries (not a
/// newline, which ends the line).
const REPLICATION: &str = "r'e\"p\\l:i#c a=\t$%&;,<>|`~*?[]{}()!@^é漢";

fn skip() -> bool {
    postgres_bully::skipped("SCRAM with special-character passwords")
}

/// A SQL session with the superuser's `password` on `addr`, or `None`.
async fn login(addr: SocketAddr, password: &str) -> Option<tokio_postgres::Client> {
    postgres_cluster::connect_as(addr, Duration::from_secs(2), Some(password)).await
}

/// Asserts no node's `bully.conf` holds a password (nor `password=`), and each
/// standby's names its passfile.
fn assert_no_password_in_conf(pg: &BullyPg, primary: NodeId, passwords: &[&str]) {
    for id in IDS {
        let conf = pg.pg.data_dir(id).join("bully.conf");
        let text = std::fs::read_to_string(&conf).unwrap();
        assert!(!text.contains("password="), "{}: {text}", conf.display());
        for password in passwords {
            assert!(!text.contains(password), "{}: {text}", conf.display());
        }
        if id != primary {
            assert!(text.contains("passfile="), "{}: {text}", conf.display());
        }
    }
}

/// Asserts `pg_hba.conf` of `id`'s server has no host line with `trust`.
fn assert_no_host_trust(pg: &BullyPg, id: NodeId) {
    let hba = std::fs::read_to_string(pg.pg.data_dir(id).join("pg_hba.conf")).unwrap();
    let lines: Vec<&str> = hba
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .collect();
    assert!(lines.iter().any(|l| l.starts_with("host")), "{hba}");
    for line in &lines {
        if line.starts_with("host") {
            assert!(
                !line.ends_with("trust"),
                "a trusted host line: {line}\n{hba}"
            );
            assert!(
                !line.contains("0.0.0.0/0") && !line.contains("::/0"),
                "{line}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn special_character_passwords_stream_and_stay_out_of_bully_conf() {
    if skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let superuser = dir.path().join("pg-superuser");
    let replication = dir.path().join("pg-replication");
    std::fs::write(&superuser, format!("{SUPERUSER}\n")).unwrap();
    std::fs::write(&replication, format!("{REPLICATION}\n")).unwrap();
    let pg = BullyPg::start_with(Secrets::Files(superuser, replication)).await;
    let primary = pg.wait_all_streaming(&|_| SUPERUSER.to_string()).await;
    assert_no_password_in_conf(&pg, primary, &[SUPERUSER, REPLICATION]);
    assert_no_host_trust(&pg, primary);
    // The passfile beside each data dir: private, and the server user's.
    for id in IDS {
        use std::os::unix::fs::MetadataExt;
        let passfile = Path::new(&format!("{}.pgpass", pg.pg.data_dir(id).display())).to_owned();
        let meta = std::fs::metadata(&passfile).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600, "{}", passfile.display());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_new_cluster_without_password_files_trusts_no_host_and_streams() {
    if skip() {
        return;
    }
    let mut pg = BullyPg::start_with(Secrets::Generated).await;
    let node_dirs: Vec<(NodeId, std::path::PathBuf)> = IDS
        .iter()
        .map(|&id| (id, pg.t.cluster.data_dir(id)))
        .collect();
    let generated = |id: NodeId, role: &str| {
        let (_, dir) = node_dirs.iter().find(|(n, _)| *n == id).unwrap();
        dir.join(format!("postgres-{role}.password"))
    };
    let read = |path: &Path| {
        std::fs::read_to_string(path)
            .unwrap()
            .trim_end()
            .to_string()
    };
    // The node that ran initdb: the one whose server a login with its own generated
    // superuser password reaches as a primary.
    let deadline = Instant::now() + AGREE;
    let first = loop {
        let mut found = None;
        for id in IDS {
            let Ok(password) = std::fs::read_to_string(generated(id, "superuser")) else {
                continue;
            };
            let Some(client) = login(pg.local(id), password.trim_end()).await else {
                continue;
            };
            let primary = client
                .query_one("SELECT NOT pg_is_in_recovery()", &[])
                .await
                .is_ok_and(|r| r.get::<_, bool>(0));
            if primary {
                found = Some(id);
            }
        }
        if let Some(id) = found {
            break id;
        }
        assert!(
            Instant::now() < deadline,
            "no primary within {AGREE:?}\n{}",
            pg.logs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_no_host_trust(&pg, first);
    // The operator's step: the first member's files to the others, then a restart.
    for id in IDS.into_iter().filter(|&id| id != first) {
        for role in ["superuser", "replication"] {
            std::fs::copy(generated(first, role), generated(id, role)).unwrap();
        }
        pg.kill_host(id);
        pg.restart_host(id);
    }
    let superuser = read(&generated(first, "superuser"));
    let primary = pg.wait_all_streaming(&|_| superuser.clone()).await;
    let replication = read(&generated(first, "replication"));
    assert_no_password_in_conf(&pg, primary, &[&superuser, &replication]);
}

/// Changed password files (issue 49, "a changed password file is applied with ALTER
/// ROLE, and the standbys follow"): both files changed on every host while the cluster
/// runs. The primary sets both roles' passwords: a login with the new superuser
/// password works on every server (replicated), the old one is refused, and the
/// standbys, their connections broken, reconnect with the new replication password
/// from their rewritten passfiles. Then the primary's host is killed: the standby promoted in its place and the other standby,
/// which must reconnect with the new replication password from its rewritten passfile,
/// stream again, and so does the old primary's host once back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn changed_password_files_are_applied_and_the_standbys_follow() {
    if skip() {
        return;
    }
    const NEW_SUPERUSER: &str = "n3w 'super' \\ pass ü";
    const NEW_REPLICATION: &str = "n3w:repl#'\\ ication ü";
    let dir = tempfile::tempdir().unwrap();
    let superuser = dir.path().join("pg-superuser");
    let replication = dir.path().join("pg-replication");
    std::fs::write(&superuser, format!("{SUPERUSER}\n")).unwrap();
    std::fs::write(&replication, format!("{REPLICATION}\n")).unwrap();
    let files = Secrets::Files(superuser.clone(), replication.clone());
    let mut pg = BullyPg::start_with(files).await;
    let primary = pg.wait_all_streaming(&|_| SUPERUSER.to_string()).await;

    primary::phase("both password files changed on every host");
    std::fs::write(&superuser, format!("{NEW_SUPERUSER}\n")).unwrap();
    std::fs::write(&replication, format!("{NEW_REPLICATION}\n")).unwrap();
    for id in IDS {
        let what = format!("node {id}'s server taking the new superuser password");
        let addr = pg.local(id);
        common::wait_until(&what, AGREE, || async {
            login(addr, NEW_SUPERUSER).await.map(|_| ())
        })
        .await;
        assert!(
            login(addr, SUPERUSER).await.is_none(),
            "node {id}'s server still takes the old superuser password"
        );
    }
    assert_no_password_in_conf(&pg, primary, &[NEW_SUPERUSER, NEW_REPLICATION]);

    primary::phase("the standbys' connections broken: they reconnect with the new password");
    let standbys: Vec<(NodeId, Option<u32>)> = IDS
        .into_iter()
        .filter(|&id| id != primary)
        .map(|id| (id, pg.pg.pid(id)))
        .collect();
    let client = login(pg.local(primary), NEW_SUPERUSER).await.unwrap();
    client
        .batch_execute("SELECT pg_terminate_backend(pid) FROM pg_stat_replication")
        .await
        .unwrap();
    pg.wait_all_streaming(&|_| NEW_SUPERUSER.to_string()).await;
    for (id, pid) in standbys {
        assert_eq!(
            pg.pg.pid(id),
            pid,
            "node {id}'s server was restarted to stream again: its passfile was not \
             rewritten\n{}",
            pg.logs()
        );
    }

    primary::phase("the primary's host killed: the standbys stream with the new password");
    pg.kill_host(primary);
    let others: Vec<NodeId> = IDS.into_iter().filter(|&id| id != primary).collect();
    common::wait_until("a standby promoted", AGREE, || async {
        for &id in &others {
            let role = postgres_cluster::role_as(pg.local(id), Some(NEW_SUPERUSER)).await;
            if role.is_some_and(|r| r.writable()) {
                return Some(());
            }
        }
        None
    })
    .await;
    pg.restart_host(primary);
    pg.wait_all_streaming(&|_| NEW_SUPERUSER.to_string()).await;
}
