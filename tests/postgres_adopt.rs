//! `bully pg adopt` keeps every row of a loaded database (src/node/postgres/adopt.rs,
//! docs/postgresql.md), on real processes: the cluster of `examples/postgres-primary`
//! (tests/common/postgres_bully.rs) with SCRAM and password files, whose node 1 takes
//! over a server that ran without bully.
//! - Before any node runs, `adopt` refuses (exit 1, `error: ...`, nothing made) node 2's
//!   missing data dir and node 3's empty one.
//! - Node 1's data dir gets a server of its own (`initdb` as `postgres`, its own port
//!   and socket, `local all all trust`, SCRAM for host logins), 20,000 rows in 1,000
//!   committed transactions, left running. `adopt` stops it cleanly, sets the roles'
//!   passwords from the files and adds bully's `pg_hba.conf` lines; run again it
//!   changes nothing (exit 0, the same `pg_hba.conf`).
//! - The nodes start: node 1 (the only one with data) becomes the coordinator, its
//!   server is promoted onto a new timeline, nodes 2 and 3 clone it and stream; every
//!   row is on each server; the files' superuser password logs in and a wrong one is
//!   refused; `adopt` on a running node is refused. Node 1's host is killed: the new
//!   primary among 2 and 3 holds every row. bully's invariants hold on the event logs.
//!
//! - A second cluster's node 1 takes over a Debian-shaped server: its config in a
//!   directory of its own (standing for /etc/postgresql/15/main: `data_directory`,
//!   `hba_file`, `ident_file`, `external_pid_file`, `include_dir = 'conf.d'` with one
//!   `work_mem`), started with `-c config_file=...`, rows loaded. A refused adopt (the
//!   wrong `--config-file`; a `postgresql.conf` of the data dir's own) leaves it
//!   running; then `adopt` finds the config on its command line and brings it into the
//!   data dir. The nodes start: every server runs with the `conf.d` setting (the
//!   standbys' clones carry `conf.d`), every row is on each, and the config dir is as
//!   it was.
//!
//! Skips, saying why, without PostgreSQL 15 (or, as root, a `postgres` user) or
//! HAProxy; `.ci/run` installs both.

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
use postgres_bully::{adopt, load, wait_tally, BullyPg, Prepared, Secrets, AGREE};
use postgres_cluster::{connect_as, is_root, is_zombie, role_as};
use primary::{http_get, phase, wait_logged};
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The superuser's password: a quote, a backslash, a space, non-ASCII (single-user
/// mode gets it as a SCRAM verifier, never as text).
const SUPERUSER: &str = postgres_bully::AWKWARD_SUPERUSER;
/// The replication role's.
const REPLICATION: &str = "r'e\"pl:ic#ation é";
/// The load: this many committed transactions of [`PER`] rows.
const TRANSACTIONS: i64 = 1_000;
/// Rows per transaction.
const PER: i64 = 20;

/// `program` of PostgreSQL's, run as the user the servers run as (`postgres` when the
/// test runs as root).
fn as_server_user(c: &Prepared, program: &str) -> Command {
    let path = c.pg.bin.join(program);
    match is_root() {
        true => {
            let mut runuser = Command::new("runuser");
            runuser.args(["-u", "postgres", "--"]).arg(path);
            runuser
        }
        false => Command::new(path),
    }
}

/// Makes `dir` belong to the servers' user (as root; otherwise it is already theirs).
fn give_to_server_user(dir: &Path) {
    if is_root() {
        let status = Command::new("chown")
            .arg("postgres:")
            .arg(dir)
            .status()
            .unwrap();
        assert!(status.success(), "chown postgres {}", dir.display());
    }
}

/// A server of node 1's data dir, as an operator ran it before bully: `initdb` as the
/// servers' user, its own port and a socket in the test dir, started by `pg_ctl` with
/// `options`, rows loaded over the socket; left running. Its PID, what was loaded and
/// its system identifier. Killed, if still running, when the cluster drops
/// (`PgServers` kills every server of a node's data dir by its PID).
async fn own_server(
    p: &Prepared,
    edit: impl FnOnce(&Path, String),
    options: &str,
    transactions: i64,
) -> (u32, postgres_bully::Tally, i64) {
    let data_dir = p.pg.data_dir(1);
    let out = as_server_user(p, "initdb")
        .arg("-D")
        .arg(&data_dir)
        .args([
            "-U",
            "postgres",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "--no-sync",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "initdb: {}", common::text(&out));
    let socket = p.t.dir.path().join("node1-socket");
    std::fs::create_dir(&socket).unwrap();
    give_to_server_user(&socket);
    let port = bully::ports::free_tcp_addr().unwrap().port();
    edit(
        &socket,
        format!(
            "\n# the server before bully\nlisten_addresses = '127.0.0.1'\nport = {port}\n\
             unix_socket_directories = '{}'\n",
            socket.display()
        ),
    );
    let log = p.t.dir.path().join("node1-before-bully.log");
    std::fs::File::create(&log).unwrap();
    give_to_server_user(&log);
    let mut pg_ctl = as_server_user(p, "pg_ctl");
    pg_ctl.arg("-D").arg(&data_dir).arg("-l").arg(&log);
    if !options.is_empty() {
        pg_ctl.args(["-o", options]);
    }
    let out = pg_ctl.args(["-w", "-t", "120", "start"]).output().unwrap();
    assert!(out.status.success(), "pg_ctl start: {}", common::text(&out));
    let pid = p.pg.pid(1).expect("node 1's own server runs");
    let (client, connection) = tokio_postgres::Config::new()
        .host_path(&socket)
        .port(port)
        .user("postgres")
        .dbname("postgres")
        .connect_timeout(Duration::from_secs(10))
        .connect(tokio_postgres::NoTls)
        .await
        .expect("a login on node 1's socket");
    let session = tokio::spawn(connection);
    let loading = Instant::now();
    let loaded = load(&client, transactions, PER).await;
    let system = postgres_bully::system_identifier(&client).await;
    eprintln!(
        "=== loaded {loaded:?} in {transactions} commits, {:.1} s; system {system}",
        loading.elapsed().as_secs_f64()
    );
    assert_eq!(postgres_bully::tally(&client).await.unwrap(), loaded);
    drop(client);
    let _ = session.await;
    (pid, loaded, system)
}

/// Asserts `out` is adopt's refusal: exit 1, `error: ` and `why` on stderr.
fn assert_refused(out: &Output, why: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}", common::text(out));
    assert!(
        stderr.starts_with("error: ") && stderr.contains(why),
        "adopt's refusal does not say {why:?}: {stderr}"
    );
}

/// The `pg_hba.conf` lines of `text` naming `role` for `127.0.0.1/32` with SCRAM: the
/// lines bully adds for the members (all on loopback here).
fn member_lines<'a>(text: &'a str, role: &str) -> Vec<&'a str> {
    let quoted = format!("\"{role}\"");
    text.lines()
        .filter(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            words.first() == Some(&"host")
                && words.contains(&quoted.as_str())
                && words.contains(&"127.0.0.1/32")
                && words.last() == Some(&"scram-sha-256")
        })
        .collect()
}

/// Node `id`'s server logged in to with the files' superuser password, within `within`.
async fn login(c: &BullyPg, id: NodeId, within: Duration) -> tokio_postgres::Client {
    let what = format!("a login to node {id}'s server");
    wait_logged(&c.t, &what, within, || {
        connect_as(c.local(id), Duration::from_secs(2), Some(SUPERUSER))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bully_pg_adopt_keeps_every_row_of_a_loaded_database() {
    if postgres_bully::skipped("bully pg adopt on a loaded server") {
        return;
    }
    let began = Instant::now();
    let secrets = tempfile::tempdir().unwrap();
    let superuser = secrets.path().join("pg-superuser");
    let replication = secrets.path().join("pg-replication");
    std::fs::write(&superuser, format!("{SUPERUSER}\n")).unwrap();
    std::fs::write(&replication, format!("{REPLICATION}\n")).unwrap();
    let p = BullyPg::prepare_with(Secrets::Files(superuser, replication), |_, _| {}).await;

    phase("adopt refused: node 2's data dir missing, node 3's empty");
    let missing = p.pg.data_dir(2);
    assert!(!missing.exists());
    assert_refused(&adopt(&p.config(2)).await, "does not exist");
    assert!(
        !missing.exists(),
        "a refused adopt made {}",
        missing.display()
    );
    let empty = p.pg.data_dir(3);
    std::fs::create_dir(&empty).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&empty, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    give_to_server_user(&empty);
    assert_refused(&adopt(&p.config(3)).await, "holds no PostgreSQL cluster");
    assert_eq!(
        std::fs::read_dir(&empty).unwrap().count(),
        0,
        "a refused adopt wrote into {}",
        empty.display()
    );

    phase("node 1's own server: initdb, its own port and socket, rows loaded, left running");
    let data_dir = p.pg.data_dir(1);
    let conf = data_dir.join("postgresql.conf");
    let append = |_: &Path, lines: String| {
        let text = std::fs::read_to_string(&conf).unwrap() + &lines;
        std::fs::write(&conf, text).unwrap();
    };
    let (pid, loaded, system) = own_server(&p, append, "", TRANSACTIONS).await;

    // A synchronous standby named in the file, read by nothing until adopt's
    // single-user run (Patroni's primary has one): its statements must not wait for it.
    let mut text = std::fs::read_to_string(&conf).unwrap();
    text += "synchronous_standby_names = 'a_standby_that_never_connects'\n";
    std::fs::write(&conf, text).unwrap();

    phase("bully pg adopt on node 1: its server stopped, the roles' passwords and pg_hba set");
    let hba_path = data_dir.join("pg_hba.conf");
    let out = adopt(&p.config(1)).await;
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    eprintln!("{}", common::text(&out));
    assert!(out.status.success(), "{}", common::text(&out));
    assert!(said.contains("for node 1"), "{said}");
    assert!(
        said.contains(&format!("Stopped its server (PID {pid}) cleanly")),
        "{said}"
    );
    assert!(said.contains("both roles' passwords are set"), "{said}");
    assert!(said.contains("Added bully's lines"), "{said}");
    assert!(
        is_zombie(pid),
        "node 1's server (PID {pid}) still runs after adopt"
    );
    assert!(
        p.pg.pid(1).is_none(),
        "a postmaster.pid is left in {}",
        data_dir.display()
    );
    let hba = std::fs::read_to_string(&hba_path).unwrap();
    for role in ["postgres", "replicator"] {
        assert_eq!(member_lines(&hba, role).len(), 1, "{role}'s line: {hba}");
    }

    phase("adopt again: nothing more to do");
    let out = adopt(&p.config(1)).await;
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{}", common::text(&out));
    assert!(said.contains("No server was running on it"), "{said}");
    assert!(
        said.contains("pg_hba.conf already had bully's lines"),
        "{said}"
    );
    assert_eq!(
        std::fs::read_to_string(&hba_path).unwrap(),
        hba,
        "a second adopt changed pg_hba.conf"
    );

    phase("the nodes start: node 1's server promoted, nodes 2 and 3 clone it");
    let mut c = p.start();
    let leader = c.wait_all_streaming(&|_| SUPERUSER.to_string()).await;
    assert_eq!(leader, 1, "only node 1 had data\n{}", c.logs());
    assert!(
        matches!(http_get(c.http[&1], "/coordinator").await, Ok((200, _))),
        "node 1 is not the ready coordinator\n{}",
        c.logs()
    );
    let client = login(&c, 1, AGREE).await;
    assert_eq!(postgres_bully::system_identifier(&client).await, system);
    let timeline = postgres_bully::timeline(&client).await;
    assert_eq!(
        timeline,
        Some(2),
        "node 1's server promoted once: a new timeline"
    );
    assert!(
        connect_as(c.local(1), Duration::from_secs(5), Some("not the password"))
            .await
            .is_none(),
        "a wrong superuser password logs in: SCRAM is not what the members use"
    );
    for id in c.ids() {
        wait_tally(&c, id, Some(SUPERUSER), loaded).await;
        let client = login(&c, id, AGREE).await;
        assert_eq!(postgres_bully::system_identifier(&client).await, system);
    }
    assert_refused(&adopt(&c.t.cluster.config_path(2)).await, "the node runs");

    phase("node 1's host killed: every row on the new primary");
    c.kill_host(1);
    let others = [2, 3];
    let new = common::wait_until("a new primary among 2 and 3", AGREE, || async {
        for id in others {
            let role = role_as(c.local(id), Some(SUPERUSER)).await;
            if role.is_some_and(|r| r.writable()) {
                return Some(id);
            }
        }
        None
    })
    .await;
    eprintln!("=== node {new}'s server is the primary");
    for id in others {
        wait_tally(&c, id, Some(SUPERUSER), loaded).await;
    }

    phase("bully's invariants on the event logs");
    common::stop_all_and_assert_invariants(&mut c.t);
    eprintln!("wall time {:.1} s", began.elapsed().as_secs_f64());
}

/// The server's setting `name`, by `SHOW`, on node `id`'s server.
async fn show(c: &BullyPg, id: NodeId, name: &str) -> String {
    let client = connect_as(c.local(id), AGREE, None)
        .await
        .unwrap_or_else(|| panic!("a login to node {id}'s server\n{}", c.logs()));
    let row = client
        .query_one(&format!("SHOW {name}"), &[])
        .await
        .unwrap();
    row.get(0)
}

/// Every file under `dir`: its path, mode, owner and bytes.
fn snapshot(dir: &Path) -> Vec<(std::path::PathBuf, u32, u32, Vec<u8>)> {
    use std::os::unix::fs::MetadataExt;
    let mut files = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(at) = todo.pop() {
        for entry in std::fs::read_dir(&at).unwrap().flatten() {
            let meta = entry.metadata().unwrap();
            match meta.is_dir() {
                true => todo.push(entry.path()),
                false => files.push((
                    entry.path(),
                    meta.mode(),
                    meta.uid(),
                    std::fs::read(entry.path()).unwrap(),
                )),
            }
        }
    }
    files.sort();
    files
}

/// The `work_mem` the Debian-shaped server's `conf.d` sets.
const CONF_D_WORK_MEM: &str = "7777kB";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bully_pg_adopt_brings_a_debian_config_into_the_data_dir() {
    if postgres_bully::skipped("bully pg adopt of a Debian-shaped server") {
        return;
    }
    let began = Instant::now();
    let p = BullyPg::prepare_with(Secrets::Trust, |_, _| {}).await;

    phase("node 1's own server, its config in a dir of its own, started with config_file");
    let data_dir = p.pg.data_dir(1);
    let etc = p.t.dir.path().join("etc-postgresql-15-main");
    let main = etc.join("postgresql.conf");
    let moved = |socket: &Path, lines: String| {
        std::fs::create_dir_all(etc.join("conf.d")).unwrap();
        for name in ["postgresql.conf", "pg_hba.conf", "pg_ident.conf"] {
            std::fs::rename(data_dir.join(name), etc.join(name)).unwrap();
        }
        let text = std::fs::read_to_string(&main).unwrap()
            + &lines
            + &format!(
                "data_directory = '{}'\nhba_file = '{e}/pg_hba.conf'\n\
                 ident_file = '{e}/pg_ident.conf'\nexternal_pid_file = '{}/15-main.pid'\n\
                 include_dir = 'conf.d'\n",
                data_dir.display(),
                socket.display(),
                e = etc.display()
            );
        std::fs::write(&main, text).unwrap();
        // The members log in by trust here (`Secrets::Trust`), as the probes do.
        let hba = "local all all trust\nhost all all 127.0.0.1/32 trust\n";
        std::fs::write(etc.join("pg_hba.conf"), hba).unwrap();
        let memory = format!("work_mem = '{CONF_D_WORK_MEM}'\n");
        std::fs::write(etc.join("conf.d/50-memory.conf"), memory).unwrap();
        let status = Command::new("chown")
            .args(["-R", "postgres:"])
            .arg(&etc)
            .status()
            .unwrap();
        assert!(
            !is_root() || status.success(),
            "chown -R postgres {}",
            etc.display()
        );
    };
    let options = format!("-c config_file={}", main.display());
    let (pid, loaded, system) = own_server(&p, moved, &options, 200).await;
    let before = snapshot(&etc);
    let pid_file = p.t.dir.path().join("node1-socket/15-main.pid");
    assert!(pid_file.exists(), "the server wrote no external_pid_file");

    phase(
        "adopt refused, the server left running: the wrong --config-file; a stray postgresql.conf",
    );
    let config = p.config(1).display().to_string();
    let other = p.t.dir.path().join("other.conf").display().to_string();
    let out = common::bully(&["pg", "adopt", "--config", &config, "--config-file", &other]);
    assert_refused(&out, "reads");
    let stray = data_dir.join("postgresql.conf");
    std::fs::write(&stray, "# not the server's\n").unwrap();
    assert_refused(&adopt(&p.config(1)).await, "does not overwrite it");
    assert_eq!(
        std::fs::read_to_string(&stray).unwrap(),
        "# not the server's\n"
    );
    std::fs::remove_file(&stray).unwrap();
    assert_eq!(p.pg.pid(1), Some(pid), "a refused adopt stopped the server");

    phase("bully pg adopt on node 1: the config found on its command line, brought in");
    let out = adopt(&p.config(1)).await;
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    eprintln!("{}", common::text(&out));
    assert!(out.status.success(), "{}", common::text(&out));
    assert!(
        said.contains(&format!("Brought {} into the data dir", main.display())),
        "{said}"
    );
    assert!(
        said.contains(&format!("Stopped its server (PID {pid}) cleanly")),
        "{said}"
    );
    assert!(
        is_zombie(pid),
        "node 1's server (PID {pid}) still runs after adopt"
    );
    let text = std::fs::read_to_string(&stray).unwrap();
    for line in [
        "#bully: data_directory",
        "#bully: hba_file",
        "#bully: external_pid_file",
    ] {
        assert!(
            text.contains(line),
            "no {line:?} in the data dir's postgresql.conf: {text}"
        );
    }
    {
        use std::os::unix::fs::MetadataExt;
        for name in [
            "postgresql.conf",
            "pg_hba.conf",
            "pg_ident.conf",
            "conf.d/50-memory.conf",
        ] {
            let meta = std::fs::metadata(data_dir.join(name)).unwrap();
            let owner = std::fs::metadata(&data_dir).unwrap().uid();
            assert_eq!(meta.uid(), owner, "{name} is not the server user's");
        }
    }
    assert!(
        !pid_file.exists(),
        "the clean stop left the external_pid_file"
    );

    phase("adopt again, with --config-file: nothing more to do");
    let flag = main.display().to_string();
    let out = common::bully(&["pg", "adopt", "--config", &config, "--config-file", &flag]);
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{}", common::text(&out));
    assert!(said.contains("No server was running on it"), "{said}");
    assert!(!said.contains("Brought"), "brought in twice: {said}");

    phase("the nodes start: every server with conf.d's setting and every row");
    let mut c = p.start();
    let leader = c.wait_all_streaming(&|_| String::new()).await;
    assert_eq!(leader, 1, "only node 1 had data\n{}", c.logs());
    for id in c.ids() {
        wait_tally(&c, id, None, loaded).await;
        assert_eq!(show(&c, id, "work_mem").await, CONF_D_WORK_MEM, "node {id}");
        let client = connect_as(c.local(id), AGREE, None).await.unwrap();
        assert_eq!(postgres_bully::system_identifier(&client).await, system);
    }
    assert!(
        !pid_file.exists(),
        "bully's server wrote the external_pid_file of the config left behind"
    );
    assert_eq!(snapshot(&etc), before, "adopt changed {}", etc.display());

    phase("bully's invariants on the event logs");
    common::stop_all_and_assert_invariants(&mut c.t);
    eprintln!("wall time {:.1} s", began.elapsed().as_secs_f64());
}
