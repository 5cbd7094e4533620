//! The package's PostgreSQL recipe (docs/postgresql.md, "On three hosts, from the
//! .deb") on this machine, one host of it: the shipped drop-in installed for both units
//! as the page says, the units verified with it, and each unit's `ExecStart` run as the
//! user, groups and paths the unit and its drop-in give (what systemd would do, done by
//! hand: this test runs where no systemd manages services). The node must then run
//! `initdb` and keep a primary in a data dir under the units' `ReadWritePaths`, reached
//! through its HTTP route; killed, its keeper must stop the server.

use crate::common::wait_until;
use crate::{ok, units, CERTS, CONFFILE, STATE, UNITS};
use bully::ports::{free_tcp_addrs, free_udp_addr};
use nix::unistd::{Gid, Uid, User};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The drop-in as the package ships it.
const DROP_IN: &str = "/usr/share/bully/systemd/postgres.conf";
/// Where the recipe installs it, for each unit.
const DROP_IN_DIRS: [&str; 2] = [
    "/etc/systemd/system/bully.service.d",
    "/etc/systemd/system/bully-run.service.d",
];
/// The server's data dir of this test: under the recipe's /var/lib/postgresql, a name
/// no operator's server has.
const PG_DATA: &str = "/var/lib/postgresql/bully-package-test";

/// Why this part cannot run here, if so: no PostgreSQL 15, no `postgres` user, or
/// something of an earlier run (or an operator's) in the paths it would take.
pub fn skipped() -> Option<String> {
    if let Some(why) = crate::postgres_cluster::cannot_run() {
        return Some(why);
    }
    if User::from_name("postgres").ok().flatten().is_none() {
        return Some("no postgres user".into());
    }
    DROP_IN_DIRS
        .into_iter()
        .chain([PG_DATA])
        .find(|p| Path::new(p).symlink_metadata().is_ok())
        .map(|p| format!("{p} exists"))
}

/// What the recipe put on the machine, taken away on drop (on panic too): the
/// processes killed by PID, the drop-ins and the server's data dir (and its asides)
/// removed.
#[derive(Default)]
pub struct Recipe {
    children: Vec<Child>,
}

impl Drop for Recipe {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        // A server the keeper did not stop: its postmaster's PID, from its own file.
        if let Some(pid) = postmaster_pid() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGQUIT,
            );
        }
        for dir in DROP_IN_DIRS {
            let _ = std::fs::remove_dir_all(dir);
        }
        if let Ok(entries) = std::fs::read_dir("/var/lib/postgresql") {
            let ours = entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.to_string_lossy().starts_with(PG_DATA));
            for path in ours {
                let _ = std::fs::remove_dir_all(&path).or_else(|_| std::fs::remove_file(&path));
            }
        }
    }
}

/// The postmaster's PID in the test's data dir, if one is written.
fn postmaster_pid() -> Option<i32> {
    let text = std::fs::read_to_string(Path::new(PG_DATA).join("postmaster.pid")).ok()?;
    text.lines().next()?.trim().parse().ok()
}

/// A unit's `[Service]` settings with its drop-in over it: each key's values in order
/// (a single-valued key means its last; `ReadWritePaths=` adds up).
fn effective(unit: &str, drop_in: &str, key: &str) -> Vec<String> {
    [unit, drop_in]
        .iter()
        .flat_map(|text| text.lines())
        .filter_map(|line| line.trim().strip_prefix(&format!("{key}=")))
        .map(str::to_string)
        .collect()
}

/// The last value of `key`, which the unit must set.
fn last(unit: &str, drop_in: &str, key: &str) -> String {
    effective(unit, drop_in, key)
        .pop()
        .unwrap_or_else(|| panic!("no {key}= in the unit nor its drop-in"))
}

/// Runs `unit`'s `ExecStart` as its `User=`, `Group=` and `SupplementaryGroups=` (with
/// the drop-in), in `/`, output to `log`.
fn run_unit(unit: &str, drop_in: &str, log: &Path) -> Child {
    let exec = last(unit, drop_in, "ExecStart");
    let mut words = exec.split_whitespace();
    let program = words.next().expect("a program");
    let user = User::from_name(&last(unit, drop_in, "User"))
        .unwrap()
        .expect("the unit's user");
    let group = group_id(&last(unit, drop_in, "Group"));
    let mut groups = vec![group];
    groups.extend(
        effective(unit, drop_in, "SupplementaryGroups")
            .iter()
            .flat_map(|g| g.split_whitespace().map(group_id).collect::<Vec<_>>()),
    );
    let out = std::fs::File::create(log).unwrap();
    let uid = user.uid;
    let mut command = Command::new(program);
    command
        .args(words)
        .current_dir("/")
        .env("HOME", &user.dir)
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out);
    // SAFETY: only async-signal-safe calls (setgroups, setgid, setuid) between fork
    // and exec.
    unsafe {
        command.pre_exec(move || {
            nix::unistd::setgroups(&groups)?;
            nix::unistd::setgid(group)?;
            nix::unistd::setuid(uid)?;
            Ok(())
        });
    }
    command.spawn().unwrap()
}

fn group_id(name: &str) -> Gid {
    nix::unistd::Group::from_name(name)
        .unwrap()
        .unwrap_or_else(|| panic!("no group {name}"))
        .gid
}

/// The recipe's node config on loopback: one member, its certificates in /etc/bully,
/// the server's data dir under /var/lib/postgresql.
fn node_config(pg: SocketAddr, http: SocketAddr) -> String {
    format!(
        "id = 1\nlisten = \"{node}\"\ndata_dir = \"{STATE}\"\n\
         [tls]\nca = \"{CERTS}/ca.pem\"\ncert = \"{CERTS}/node-1.pem\"\nkey = \"{CERTS}/node-1.key\"\n\
         [postgres]\ndata_dir = \"{PG_DATA}\"\nlisten = \"{pg}\"\n\
         [http]\nlisten = \"{http}\"\n",
        node = free_udp_addr().unwrap(),
    )
}

/// The part of the install test: see the module's comment.
pub async fn run(dir: &Path, recipe: &mut Recipe) {
    for to in DROP_IN_DIRS {
        ok(Command::new("install")
            .args(["-D", "-m", "0644", DROP_IN])
            .arg(Path::new(to).join("postgres.conf")));
    }
    if crate::common::installed("systemd-analyze") {
        units::verify(Path::new(UNITS), None).expect("the units with the drop-in");
    }
    let drop_in = std::fs::read_to_string(DROP_IN).unwrap();
    let node_unit = std::fs::read_to_string(Path::new(UNITS).join("bully.service")).unwrap();
    let keeper_unit = std::fs::read_to_string(Path::new(UNITS).join("bully-run.service")).unwrap();
    assert_eq!(last(&node_unit, &drop_in, "User"), "postgres");
    assert_eq!(last(&keeper_unit, &drop_in, "User"), "postgres");
    let writable: Vec<PathBuf> = effective(&node_unit, &drop_in, "ReadWritePaths")
        .iter()
        .flat_map(|v| v.split_whitespace().map(PathBuf::from).collect::<Vec<_>>())
        .collect();
    for needed in [STATE, PG_DATA] {
        assert!(
            writable.iter().any(|w| Path::new(needed).starts_with(w)),
            "{needed} is not under the unit's ReadWritePaths {writable:?}"
        );
    }

    // A fresh host's state dir (the earlier part's node stored a three-member list),
    // as systemd makes it at the start with `StateDirectory=bully`, `User=postgres`.
    let postgres = User::from_name("postgres").unwrap().unwrap();
    std::fs::remove_dir_all(STATE).unwrap();
    std::fs::create_dir(STATE).unwrap();
    std::fs::set_permissions(STATE, std::os::unix::fs::PermissionsExt::from_mode(0o750)).unwrap();
    chown_tree(Path::new(STATE), postgres.uid, postgres.gid);
    let ports = free_tcp_addrs(2).unwrap();
    let (pg, http) = (ports[0], ports[1]);
    std::fs::write(CONFFILE, node_config(pg, http)).unwrap();

    let keeper = run_unit(&keeper_unit, &drop_in, &dir.join("keeper.log"));
    recipe.children.push(keeper);
    let node_log = dir.join("pg-node.log");
    let node = run_unit(&node_unit, &drop_in, &node_log);
    recipe.children.push(node);
    let route = http.to_string();
    let logs = || {
        format!(
            "--- node\n{}\n--- keeper\n{}",
            std::fs::read_to_string(&node_log).unwrap_or_default(),
            std::fs::read_to_string(dir.join("keeper.log")).unwrap_or_default()
        )
    };
    // Bounded: a fresh initdb and start take a few seconds; the logs on failure.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let exited: Vec<_> = recipe
            .children
            .iter_mut()
            .filter_map(|c| c.try_wait().unwrap())
            .collect();
        assert!(exited.is_empty(), "exited: {exited:?}\n{}", logs());
        if get_status(&route, "/primary").await == Some(200) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the node, as user postgres, keeps no primary after 120 s (GET /primary)\n{}",
            logs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let owner = std::fs::metadata(PG_DATA).map(|m| {
        use std::os::unix::fs::MetadataExt;
        m.uid()
    });
    assert_eq!(owner.ok(), Some(postgres.uid.as_raw()), "{PG_DATA}'s owner");
    let server = postmaster_pid().expect("the server's postmaster.pid");

    // The node killed: its keeper, as postgres, fences (stops) the server.
    let mut node = recipe.children.pop().expect("the node");
    node.kill().unwrap();
    node.wait().unwrap();
    wait_until(
        "the keeper to stop the server once its node is gone",
        Duration::from_secs(60),
        || {
            let alive = nix::sys::signal::kill(nix::unistd::Pid::from_raw(server), None).is_ok();
            async move { (!alive).then_some(()) }
        },
    )
    .await;
}

/// Gives `path` and everything under it to `uid:gid`.
fn chown_tree(path: &Path, uid: Uid, gid: Gid) {
    std::os::unix::fs::chown(path, Some(uid.as_raw()), Some(gid.as_raw())).unwrap();
    if path.is_dir() {
        for entry in std::fs::read_dir(path).unwrap().flatten() {
            chown_tree(&entry.path(), uid, gid);
        }
    }
}

/// The HTTP status of `GET path` at `addr`, or `None` when nothing answers.
async fn get_status(addr: &str, path: &str) -> Option<u16> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut head = vec![0; 64];
    let n = stream.read(&mut head).await.ok()?;
    let line = String::from_utf8_lossy(&head[..n]);
    line.split_whitespace().nth(1)?.parse().ok()
}
