//! Values written by bully's own functions, read back from a real PostgreSQL server:
//! `bully.conf` settings holding quotes, backslashes, spaces, newlines and non-ASCII
//! (`SHOW`/`current_setting` give them back exactly), the superuser's password through
//! initdb's `--pwfile`, the replication role's SCRAM verifier and the passfile (libpq's
//! `psql` logs in with it), and role DDL kept out of a `log_statement = 'all'` log;
//! with `[postgres] tls = "on"`, the server bully configures with the node's
//! certificate, verified by the manager's connector and by libpq (`verify-ca`), and
//! refusing bully's roles without TLS.
//! Skipped, saying so, when PostgreSQL is not installed.

use super::files;
use super::owned;
use super::programs::Programs;
use super::secrets::{self, Passwords};
use super::sql;
use super::tls::{self, Connector};
use crate::certs::TlsFiles;
use crate::config::postgres::{PostgresConfig, TlsMode};
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The values the test writes: everything the formats escape.
const VALUES: &[&str] = &[
    r"pa'ss\wo rd é",
    r"''\\'\'",
    "line one\nline two\r\tend",
    "\\n is not a newline",
    "\\101 octal-looking",
    "#not a comment = x",
    "漢字 ß ü",
    "",
];

/// Kills the server's process group when the test ends, also on panic.
struct Server(i32);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(self.0),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

#[tokio::test]
async fn bully_conf_values_and_passwords_round_trip_through_a_real_server() {
    let Some((programs, dir, root)) = scratch() else {
        return;
    };
    let owner = programs.owner();
    let listen = crate::ports::free_tcp_addrs(1).unwrap()[0];
    let mut config = PostgresConfig::new(root.join("data"), listen);
    config.replication.user = r"rep'l\i ca é".into();
    config
        .parameters
        .insert("log_statement".into(), "all".into());
    for (i, value) in VALUES.iter().enumerate() {
        config
            .parameters
            .insert(format!("bully.probe{i}"), value.to_string());
    }
    let passwords = Passwords {
        superuser: Some(VALUES[0].into()),
        replication: Some(r"re'pl\\ica: é".into()),
    };
    let pwfile =
        secrets::initdb_pwfile(&config, passwords.superuser.as_deref().unwrap(), owner).unwrap();
    initdb(
        &programs,
        &config,
        &format!("--pwfile={}", pwfile.display()),
    )
    .await;
    let passfile = secrets::write_passfile(&config, &passwords, owner)
        .unwrap()
        .unwrap();
    // An upstream (a primary ignores it) so primary_conninfo is written in full.
    let upstream = files::Upstream {
        server: "127.0.0.1:1".parse().unwrap(),
        member: true,
    };
    let text = files::owned_conf(&config, 7, Some(upstream), Some(&passfile), "");
    files::write_conf(&config.data_dir, &text, owner).unwrap();

    let log = dir.path().join("server.log");
    let _server = start(&programs, &config, &log);
    let su = passwords.superuser.as_deref();
    let client = let_in(&Connector::Plain, listen, su, &log).await;
    for (i, value) in VALUES.iter().enumerate() {
        let row = client
            .query_one(&format!("SELECT current_setting('bully.probe{i}')"), &[])
            .await
            .unwrap();
        assert_eq!(row.get::<_, String>(0), *value, "bully.probe{i}");
    }
    let conninfo: String = client
        .query_one("SHOW primary_conninfo", &[])
        .await
        .unwrap()
        .get(0);
    let app = crate::postgres_rules::application_name(7);
    let user = &config.replication.user;
    let expected = files::conninfo(upstream.server, user, Some(&passfile), &app, None);
    assert_eq!(conninfo, expected);
    assert!(!text.contains("password"), "{text}");

    sql::ensure_replication_role(
        &client,
        &config.replication.user,
        passwords.replication.as_deref(),
        Duration::from_secs(5),
    )
    .await
    .unwrap();
    client.batch_execute("SELECT 'logged-probe'").await.unwrap();
    // libpq itself (psql), with the password from the passfile and nothing else.
    let login = format!(
        "host=127.0.0.1 port={} dbname=postgres user={}",
        listen.port(),
        super::quote::conninfo_value(&config.replication.user)
    );
    let env = secrets::passfile_env(Some(&passfile));
    let ran = programs
        .run(
            "psql",
            &[login, "-Atc".into(), "SELECT current_user".into()],
            &env,
            Duration::from_secs(30),
        )
        .await
        .expect("psql logs in as the replication role with the passfile");
    assert_eq!(ran.stdout.trim_end(), config.replication.user);

    let logged = wait_for_text(&log, "logged-probe").await;
    assert!(!logged.contains("ROLE"), "role DDL was logged:\n{logged}");
    assert!(!logged.contains("SCRAM-SHA-256$"), "{logged}");
}

/// A scratch directory the server's user can reach (`<tmp>/pg root`, theirs) and the
/// programs; `None`, saying so, when PostgreSQL is not installed.
fn scratch() -> Option<(Programs, tempfile::TempDir, PathBuf)> {
    let Ok(programs) = Programs::find(None, None) else {
        eprintln!("skipped: PostgreSQL is not installed (no /usr/lib/postgresql/*/bin)");
        return None;
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("pg root");
    std::fs::create_dir(&root).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    owned::give(&root, programs.owner()).unwrap();
    Some((programs, dir, root))
}

/// `initdb` of `config.data_dir` (made first, the server user's, mode 0700) with host
/// logins by `auth` (`--pwfile=...` for SCRAM, or `--auth-host=trust`).
async fn initdb(programs: &Programs, config: &PostgresConfig, auth: &str) {
    std::fs::create_dir(&config.data_dir).unwrap();
    std::fs::set_permissions(&config.data_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    owned::give(&config.data_dir, programs.owner()).unwrap();
    let mut args: Vec<String> = [
        "-D",
        &config.data_dir.display().to_string(),
        "-U",
        "postgres",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push("--auth-local=trust".into());
    match auth.strip_prefix("--pwfile=") {
        Some(_) => args.extend(["--auth-host=scram-sha-256".into(), auth.into()]),
        None => args.push(auth.into()),
    }
    programs
        .run("initdb", &args, &[], Duration::from_secs(120))
        .await
        .expect("initdb");
}

/// Starts the server of `config`, its output in `log`; killed when the guard drops.
fn start(programs: &Programs, config: &PostgresConfig, log: &Path) -> Server {
    let out = std::fs::File::create(log).unwrap();
    let mut command = programs.command(
        "postgres",
        &["-D".into(), config.data_dir.display().to_string()],
        &[],
    );
    command
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .process_group(0);
    let child = command.spawn().expect("postgres starts");
    Server(child.id().unwrap() as i32)
}

/// The superuser's session on `listen` by `connector`, once the server lets it in
/// (within 30 s; else a panic with the server's log).
async fn let_in(
    connector: &Connector,
    listen: SocketAddr,
    password: Option<&str>,
    log: &Path,
) -> tokio_postgres::Client {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match sql::connect(
            connector,
            listen,
            "postgres",
            password,
            Duration::from_secs(1),
        )
        .await
        {
            Ok(client) => return client,
            Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!(
                "the server did not let the superuser in: {e}\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            ),
        }
    }
}

/// Whether the session behind `client` is encrypted (`pg_stat_ssl`).
const OWN_SSL: &str = "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()";

#[tokio::test]
async fn a_tls_server_takes_verified_clients_and_refuses_the_members_plain_ones() {
    let Some((programs, dir, root)) = scratch() else {
        return;
    };
    let owner = programs.owner();
    let listen = crate::ports::free_tcp_addrs(1).unwrap()[0];
    let mut config = PostgresConfig::new(root.join("data"), listen);
    config.tls = TlsMode::On;
    config.auth = crate::config::postgres::Auth::Trust;
    // bully's CA and node 1's certificate, which names `node-1.bully`, not 127.0.0.1.
    let certs = dir.path().join("certs");
    crate::certs::init(&certs, &[1]).unwrap();
    let node = TlsFiles::for_node(&certs, 1);
    let stranger = dir.path().join("stranger");
    crate::certs::init(&stranger, &[1]).unwrap();
    let strangers = TlsFiles::for_node(&stranger, 1);

    initdb(&programs, &config, "--auth-host=trust").await;
    let hba = config.data_dir.join("pg_hba.conf");
    let initdb_text = std::fs::read_to_string(&hba).unwrap();
    let members = [listen.ip()];
    let text = secrets::hba_file(&config, &members, &initdb_text);
    files::write_owned(&hba, &text, owner).unwrap();
    let installed = tls::install(&node, &config.data_dir, owner).unwrap();
    let text = files::owned_conf(&config, 1, None, None, "");
    files::write_conf(&config.data_dir, &text, owner).unwrap();
    let log = dir.path().join("server.log");
    let _server = start(&programs, &config, &log);

    // The manager's own round trips: TLS, verified against bully's CA.
    let verified = Connector::new(Some(&node)).unwrap();
    let client = let_in(&verified, listen, None, &log).await;
    let row = client.query_one(OWN_SSL, &[]).await.unwrap();
    assert!(row.get::<_, bool>(0), "the manager's session is encrypted");
    // Without TLS, bully's roles from a member address are refused (hostnossl reject
    // before initdb's own `host all all 127.0.0.1/32 trust`).
    let plain = sql::connect(
        &Connector::Plain,
        listen,
        "postgres",
        None,
        Duration::from_secs(2),
    );
    let Err(refused) = plain.await else {
        panic!("a plain login was let in");
    };
    assert!(refused.contains("no encryption"), "{refused}");
    // A server whose certificate another CA signed is not trusted.
    let other = Connector::new(Some(&strangers)).unwrap();
    let wrong = sql::connect(&other, listen, "postgres", None, Duration::from_secs(2));
    assert!(wrong.await.is_err(), "a server of another CA was trusted");

    // libpq (psql, as a standby's WAL receiver would connect): verify-ca with the copy
    // of the CA beside the data dir; refused against another CA.
    let psql = |ca: PathBuf| {
        let info = files::conninfo(listen, "postgres", None, "probe", Some(&ca));
        let args = [
            format!("{info} dbname=postgres"),
            "-Atc".into(),
            OWN_SSL.into(),
        ];
        let programs = programs.clone();
        async move {
            programs
                .run("psql", &args, &[], Duration::from_secs(30))
                .await
        }
    };
    let ran = psql(installed.ca.clone())
        .await
        .expect("psql verifies the server");
    assert_eq!(ran.stdout.trim(), "t");
    let other_ca = tls::install(&strangers, &root.join("stranger"), owner).unwrap();
    let refused = psql(other_ca.ca)
        .await
        .expect_err("a server of another CA was trusted");
    assert!(refused.contains("certificate verify failed"), "{refused}");
}

/// The server's log once it holds `probe` (a bounded wait: the logger writes late).
async fn wait_for_text(log: &Path, probe: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.contains(probe) || Instant::now() >= deadline {
            assert!(text.contains(probe), "{probe} never logged:\n{text}");
            return text;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A standby whose walreceiver connects but cannot start streaming (its slot is missing
/// on the upstream: what a standby cluster's standby leader met when bully named a slot
/// on the remote) never reads as streaming, however often it is asked: PostgreSQL
/// shows the walreceiver's status as `streaming` from the moment the process starts,
/// before the upstream accepted anything. Once the slot exists it does stream.
#[tokio::test]
async fn a_standby_that_cannot_start_streaming_never_reads_as_streaming() {
    let Some((programs, _dir, root)) = scratch() else {
        return;
    };
    let [primary_at, standby_at] = crate::ports::free_tcp_addrs(2).unwrap()[..] else {
        panic!("two ports");
    };
    let primary = PostgresConfig::new(root.join("primary"), primary_at);
    initdb(&programs, &primary, "--auth-host=trust").await;
    let text = files::owned_conf(&primary, 1, None, None, "");
    files::write_conf(&primary.data_dir, &text, programs.owner()).unwrap();
    let primary_log = root.join("primary.log");
    let _primary = start(&programs, &primary, &primary_log);
    let on_primary = let_in(&Connector::Plain, primary_at, None, &primary_log).await;

    let mut standby = PostgresConfig::new(root.join("standby"), standby_at);
    standby.replication.user = "postgres".into();
    let args: Vec<String> = [
        "-D",
        &standby.data_dir.display().to_string(),
        "-h",
        &primary_at.ip().to_string(),
        "-p",
        &primary_at.port().to_string(),
        "-U",
        "postgres",
        "-X",
        "stream",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    programs
        .run("pg_basebackup", &args, &[], Duration::from_secs(120))
        .await
        .expect("pg_basebackup");
    let upstream = files::Upstream {
        server: primary_at,
        member: true,
    };
    let text = files::owned_conf(&standby, 7, Some(upstream), None, "");
    files::write_conf(&standby.data_dir, &text, programs.owner()).unwrap();
    files::standby_signal(&standby.data_dir, programs.owner()).unwrap();
    let standby_log = root.join("standby.log");
    let _standby = start(&programs, &standby, &standby_log);
    let on_standby = let_in(&Connector::Plain, standby_at, None, &standby_log).await;

    let refused = "replication slot \"bully_7\" does not exist";
    wait_for_text(&standby_log, refused).await;
    let until = Instant::now() + Duration::from_secs(4);
    let mut asked = 0;
    while Instant::now() < until {
        let seen = sql::describe(&on_standby, Duration::from_secs(5))
            .await
            .unwrap();
        assert!(
            !seen.streaming,
            "read as streaming at ask {asked} while its upstream refuses it ({refused})"
        );
        asked += 1;
    }
    assert!(asked > 100, "asked only {asked} times");
    on_primary
        .execute("SELECT pg_create_physical_replication_slot('bully_7')", &[])
        .await
        .unwrap();
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let seen = sql::describe(&on_standby, Duration::from_secs(5))
            .await
            .unwrap();
        if seen.streaming {
            break;
        }
        assert!(
            Instant::now() < until,
            "never streaming once its slot exists:\n{}",
            std::fs::read_to_string(&standby_log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
