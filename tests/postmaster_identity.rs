//! The fence cannot hit a stranger (issue 49): a `postmaster.pid` naming a live process
//! that is not a postmaster of its data dir (a reused PID, or a file copied from
//! another data dir) is neither signalled by the stop the manager and the keeper's fence
//! share (`bully::postmaster::stop`), nor taken for a running server, nor kept in the
//! way of a start. A process that passes every check is stopped, fast or by force with
//! the children it started. Real processes: `sleep` as the stranger, copies of `sleep`
//! and `sh` named `postgres` as fake postmasters, and a real PostgreSQL 15 server when
//! one is installed (the test says so and skips that part when not). Every process is
//! killed by its PID when its test ends, also on panic. The sabotage twin
//! (`tests/postmaster_identity_sabotage.rs`) shows these asserts catch a stop without
//! the check.

#[path = "common/postgres_cluster.rs"]
mod postgres_cluster;
#[path = "common/postmaster_fake.rs"]
mod postmaster_fake;

use bully::postmaster::{self, Found, Stopped};
use postmaster_fake::{named_postgres, now_secs, stranger, write_pid_file, Proc, HOUR};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// How long a process that must not have been signalled is watched for its end.
const UNHARMED_FOR: Duration = Duration::from_millis(200);

/// Asserts that nothing about the stranger `proc` named by `data_dir`'s pid file is
/// taken for a postmaster, that stopping the data dir's server leaves it alone, and
/// that a start may clear the file.
async fn assert_left_alone(data_dir: &Path, proc: &mut Proc, case: &str) {
    match postmaster::find(data_dir) {
        Found::Foreign { pid, why } => assert_eq!(pid, proc.pid(), "{case}: {why}"),
        other => panic!("{case}: not foreign: {}", other.describe()),
    }
    assert!(
        postmaster::running(data_dir).is_none(),
        "{case}: the manager would call the server alive"
    );
    match postmaster::stop(data_dir, Duration::from_millis(300)).await {
        Ok(Stopped::NotRunning(Found::Foreign { .. })) => {}
        other => panic!("{case}: the stop did not leave the stranger alone: {other:?}"),
    }
    assert_eq!(
        proc.ended_by(UNHARMED_FOR),
        None,
        "{case}: the stranger was signalled"
    );
    postmaster::clear_stale(data_dir).expect("a foreign pid file is cleared");
    assert!(!data_dir.join("postmaster.pid").exists(), "{case}");
    assert!(
        proc.running(),
        "{case}: clearing the file hurt the stranger"
    );
}

#[tokio::test]
async fn a_stranger_named_by_the_pid_file_is_never_signalled() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir_all(&data_dir).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    let fake = named_postgres(dir.path(), "sleep");
    let in_dir_fake = |cwd: &Path| Proc::spawn(Command::new(&fake).arg("60").current_dir(cwd));
    // Each case fails the program check, the directory check, or both, with the
    // right start time or one an hour off.
    let cases: Vec<(&str, Proc, bool)> = vec![
        (
            "sleep in the data dir, right start",
            stranger(&data_dir),
            true,
        ),
        (
            "sleep in the data dir, an hour off",
            stranger(&data_dir),
            false,
        ),
        (
            "postgres elsewhere, right start",
            in_dir_fake(&elsewhere),
            true,
        ),
        ("sleep elsewhere, an hour off", stranger(&elsewhere), false),
    ];
    for (case, mut proc, right_start) in cases {
        let started = match right_start {
            true => proc.started,
            false => proc.started - HOUR,
        };
        write_pid_file(&data_dir, proc.pid(), started);
        assert_left_alone(&data_dir, &mut proc, case).await;
    }
}

#[tokio::test]
async fn a_postgres_of_this_data_dir_started_at_another_time_is_left_alone_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let fake = named_postgres(dir.path(), "sleep");
    let mut proc = Proc::spawn(Command::new(&fake).arg("60").current_dir(dir.path()));
    write_pid_file(dir.path(), proc.pid(), proc.started - HOUR);
    match postmaster::find(dir.path()) {
        Found::Doubtful { pid, why } => assert_eq!(pid, proc.pid(), "{why}"),
        other => panic!("not doubtful: {}", other.describe()),
    }
    assert!(postmaster::running(dir.path()).is_none());
    let stopped = postmaster::stop(dir.path(), Duration::from_millis(300)).await;
    let why = stopped.expect_err("a doubtful postmaster is an error, not stopped");
    assert!(why.contains("wall clock"), "{why}");
    assert_eq!(proc.ended_by(UNHARMED_FOR), None, "it was signalled");
    assert!(postmaster::clear_stale(dir.path()).is_err());
    assert!(
        dir.path().join("postmaster.pid").exists(),
        "its file was removed"
    );
}

#[tokio::test]
async fn a_stale_pid_file_is_not_running_and_is_cleared() {
    let dir = tempfile::tempdir().unwrap();
    let mut gone = Proc::spawn(&mut Command::new("true"));
    let pid = gone.pid();
    gone.child.wait().unwrap();
    write_pid_file(dir.path(), pid, now_secs());
    assert!(matches!(postmaster::find(dir.path()), Found::Stale { pid: p } if p == pid));
    assert!(matches!(
        postmaster::stop(dir.path(), Duration::from_millis(100)).await,
        Ok(Stopped::NotRunning(Found::Stale { .. }))
    ));
    postmaster::clear_stale(dir.path()).unwrap();
    assert!(!dir.path().join("postmaster.pid").exists());
}

#[tokio::test]
async fn a_verified_postmaster_is_stopped_fast_and_its_file_kept_until_then() {
    let dir = tempfile::tempdir().unwrap();
    let fake = named_postgres(dir.path(), "sleep");
    let mut proc = Proc::spawn(Command::new(&fake).arg("60").current_dir(dir.path()));
    write_pid_file(dir.path(), proc.pid(), proc.started);
    match postmaster::find(dir.path()) {
        Found::Running(p) => assert_eq!(p.pid(), proc.pid()),
        other => panic!("not verified: {}", other.describe()),
    }
    let refused = postmaster::clear_stale(dir.path()).unwrap_err();
    assert!(refused.contains("not starting another"), "{refused}");
    assert!(dir.path().join("postmaster.pid").exists());
    let stopped = postmaster::stop(dir.path(), Duration::from_secs(5)).await;
    assert!(
        matches!(stopped, Ok(Stopped::Fast(p)) if p == proc.pid()),
        "{stopped:?}"
    );
    assert_eq!(proc.ended_by(Duration::from_secs(5)), Some(libc_sigint()));
}

#[tokio::test]
async fn a_postmaster_deaf_to_the_fast_shutdown_is_killed_with_its_children() {
    let dir = tempfile::tempdir().unwrap();
    let fake = named_postgres(dir.path(), "sh");
    // Not a group leader: its child can only be found by its parent.
    let mut proc = Proc::spawn(
        Command::new(&fake)
            .args(["-c", "trap '' INT; sleep 60 & wait"])
            .current_dir(dir.path()),
    );
    write_pid_file(dir.path(), proc.pid(), proc.started);
    let child = wait_for_child(proc.pid());
    // The child is killed below with the fake postmaster; on panic, here.
    let _child_guard = KillOnDrop(child);
    let stopped = postmaster::stop(dir.path(), Duration::from_millis(300)).await;
    assert!(
        matches!(stopped, Ok(Stopped::Killed(p)) if p == proc.pid()),
        "{stopped:?}"
    );
    assert_eq!(proc.ended_by(Duration::from_secs(5)), Some(9), "SIGKILL");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !postgres_cluster::is_zombie(child as u32) {
        assert!(
            Instant::now() < deadline,
            "its child {child} outlived the kill"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[tokio::test]
async fn a_real_postgres_of_another_data_dir_is_not_signalled() {
    if let Some(why) = postgres_cluster::cannot_run() {
        eprintln!("skipped: {why}");
        return;
    }
    let bin = postgres_cluster::pg_bin().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut server = RealServer::start(&bin, dir.path());
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::copy(
        server.data_dir.join("postmaster.pid"),
        other.join("postmaster.pid"),
    )
    .unwrap();
    let proc = &mut server.proc;
    assert_left_alone(&other, proc, "a postgres of another data dir").await;
    // The real one passes the check for its own data dir, and stops fast.
    assert!(postmaster::running(&server.data_dir).is_some_and(|p| p.pid() == proc.pid()));
    let stopped = postmaster::stop(&server.data_dir, Duration::from_secs(30)).await;
    assert!(
        matches!(stopped, Ok(Stopped::Fast(p)) if p == proc.pid()),
        "{stopped:?}"
    );
    assert!(!proc.running());
}

/// SIGINT's number.
fn libc_sigint() -> i32 {
    nix::sys::signal::Signal::SIGINT as i32
}

/// The first child of `pid` (a bounded wait for it to appear).
fn wait_for_child(pid: i32) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let children = postgres_cluster::server_pids(pid as u32);
        if let Some(&child) = children.get(1) {
            return child as i32;
        }
        assert!(Instant::now() < deadline, "no child of {pid} appeared");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A process that is not the test's child, SIGKILLed by its PID on drop.
struct KillOnDrop(i32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if !postgres_cluster::is_zombie(self.0 as u32) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(self.0),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// A PostgreSQL server of a new data dir, run by the test (as `postgres` when the test
/// runs as root), listening on a socket in the temp dir only; it and its children are
/// killed by their PIDs on drop.
struct RealServer {
    data_dir: std::path::PathBuf,
    proc: Proc,
}

impl RealServer {
    fn start(bin: &Path, dir: &Path) -> RealServer {
        use std::os::unix::fs::PermissionsExt;
        use std::os::unix::process::CommandExt;
        let root = dir.join("pg");
        std::fs::create_dir(&root).unwrap();
        let owner = postgres_cluster::is_root().then(|| {
            let user = nix::unistd::User::from_name("postgres")
                .unwrap()
                .expect("a postgres user (cannot_run checked)");
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711)).unwrap();
            nix::unistd::chown(&root, Some(user.uid), Some(user.gid)).unwrap();
            (user.uid.as_raw(), user.gid.as_raw())
        });
        let as_owner = |command: &mut Command| {
            if let Some((uid, gid)) = owner {
                command.uid(uid).gid(gid).env("HOME", &root);
            }
            command.env("LC_ALL", "C");
        };
        let data_dir = root.join("data");
        let mut initdb = Command::new(bin.join("initdb"));
        initdb
            .args(["-N", "-A", "trust", "-U", "postgres", "-D"])
            .arg(&data_dir);
        as_owner(&mut initdb);
        let out = initdb.output().unwrap();
        assert!(
            out.status.success(),
            "initdb: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut postgres = Command::new(bin.join("postgres"));
        postgres
            .arg("-D")
            .arg(&data_dir)
            .args(["-c", "listen_addresses=", "-k"])
            .arg(&root)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        as_owner(&mut postgres);
        let mut proc = Proc::spawn(&mut postgres);
        let deadline = Instant::now() + Duration::from_secs(30);
        while postmaster::running(&data_dir).is_none() {
            assert!(proc.running(), "postgres exited at its start");
            assert!(Instant::now() < deadline, "postgres did not start in 30 s");
            std::thread::sleep(Duration::from_millis(20));
        }
        RealServer { data_dir, proc }
    }
}

impl Drop for RealServer {
    fn drop(&mut self) {
        for pid in postgres_cluster::server_pids(self.proc.pid() as u32) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}
