//! Values written by bully's own functions, read back from a real PostgreSQL server:
//! `bully.conf` settings holding quotes, backslashes, spaces, newlines and non-ASCII
//! (`SHOW`/`current_setting` give them back exactly), the superuser's password through
//! initdb's `--pwfile`, the replication role's SCRAM verifier and the passfile (libpq's
//! `psql` logs in with it), and role DDL kept out of a `log_statement = 'all'` log.
//! Skipped, saying so, when PostgreSQL is not installed.

use super::files;
use super::programs::Programs;
use super::secrets::{self, Passwords};
use super::sql;
use crate::config::postgres::PostgresConfig;
use std::path::Path;
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
    let Ok(programs) = Programs::find(None, None) else {
        eprintln!("skipped: PostgreSQL is not installed (no /usr/lib/postgresql/*/bin)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let owner = programs.owner();
    let root = dir.path().join("pg root");
    std::fs::create_dir(&root).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    files::give(&root, owner).unwrap();
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
    std::fs::create_dir(&config.data_dir).unwrap();
    std::fs::set_permissions(&config.data_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    files::give(&config.data_dir, owner).unwrap();
    let pwfile =
        secrets::initdb_pwfile(&config, passwords.superuser.as_deref().unwrap(), owner).unwrap();
    let args: Vec<String> = [
        "-D",
        &config.data_dir.display().to_string(),
        "-U",
        "postgres",
        "--auth-local=trust",
        "--auth-host=scram-sha-256",
        &format!("--pwfile={}", pwfile.display()),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    programs
        .run("initdb", &args, &[], Duration::from_secs(120))
        .await
        .expect("initdb");
    let passfile = secrets::write_passfile(&config, &passwords, owner)
        .unwrap()
        .unwrap();
    // An upstream (a primary ignores it) so primary_conninfo is written in full.
    let upstream = "127.0.0.1:1".parse().unwrap();
    let text = files::owned_conf(&config, 7, Some(upstream), Some(&passfile), "");
    files::write_conf(&config.data_dir, &text, owner).unwrap();

    let log = dir.path().join("server.log");
    let out = std::fs::File::create(&log).unwrap();
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
    let _server = Server(child.id().unwrap() as i32);
    let deadline = Instant::now() + Duration::from_secs(30);
    let client = loop {
        let su = passwords.superuser.as_deref();
        match sql::connect(listen, "postgres", su, Duration::from_secs(1)).await {
            Ok(client) => break client,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!(
                "the server did not let the superuser in: {e}\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            ),
        }
    };
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
    let expected = files::conninfo(upstream, &config.replication.user, Some(&passfile), &app);
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
