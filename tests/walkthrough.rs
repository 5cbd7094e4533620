//! The README's walkthrough ("three terminals", which the manual's getting-started page
//! includes), run as written: its code block's commands in its order, from a copy of
//! `config/`, then what its prose promises: Ctrl-C node 3 and nodes 1 and 2 follow node 2
//! at a higher epoch; start it again and it leads at a higher epoch still; `kill -STOP`
//! it and node 2 leads, `kill -CONT` and node 3 returns. `bully watch` prints each change.
//!
//! One liberty: the copied configs get free loopback ports instead of 7001–7003, so the
//! test cannot collide with another test or a cluster someone runs by hand. The build
//! line (`cargo build --release && export PATH=...`) is checked to be there, and the
//! binary cargo built for the tests stands in for it.

mod common;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Long enough for a busy 2-core machine; the walkthrough promises about 0.4 s.
const DEADLINE: Duration = Duration::from_secs(45);

/// The walkthrough's commands: the first `sh` block between the README's
/// `ANCHOR: walkthrough` markers, comments dropped.
fn walkthrough_commands() -> Vec<String> {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md");
    let section = readme
        .split("ANCHOR: walkthrough")
        .nth(1)
        .and_then(|rest| rest.split("ANCHOR_END: walkthrough").next())
        .expect("README.md has the walkthrough between ANCHOR markers");
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the walkthrough has an sh block");
    block
        .lines()
        .map(|line| line.split(" # ").next().unwrap_or("").trim().to_string())
        .filter(|line| !line.is_empty())
        .collect()
}

/// Child processes killed (by PID) when the test ends, also on panic.
#[derive(Default)]
struct Children(Vec<(String, Child)>);

impl Children {
    fn spawn(&mut self, name: &str, command: &mut Command) -> u32 {
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e}"));
        let pid = child.id();
        self.0.push((name.to_string(), child));
        pid
    }

    fn stop(&mut self, name: &str, signal: Signal) {
        let at = self
            .0
            .iter()
            .position(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("{name} is not running"));
        let (_, mut child) = self.0.remove(at);
        let pid = Pid::from_raw(child.id() as i32);
        kill(pid, signal).expect("signal the node");
        let started = Instant::now();
        while child.try_wait().expect("wait for the node").is_none() {
            assert!(
                started.elapsed() < DEADLINE,
                "{name} did not stop on {signal}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn signal(&self, name: &str, signal: Signal) {
        let (_, child) = self
            .0
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("{name} is not running"));
        kill(Pid::from_raw(child.id() as i32), signal).expect("signal the node");
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        for (_, child) in &mut self.0 {
            let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGCONT);
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A copy of `config/` in `dir`, each node on a free loopback port.
fn copy_configs(dir: &Path) {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
    let ports = bully::ports::free_udp_addrs(3).expect("three free ports");
    std::fs::create_dir_all(dir.join("config")).expect("config dir");
    for n in 1..=3 {
        let name = format!("node{n}.toml");
        let mut text = std::fs::read_to_string(source.join(&name)).expect("example config");
        for (i, addr) in ports.iter().enumerate() {
            let example = format!("127.0.0.1:700{}", i + 1);
            assert!(text.contains(&example), "{name} no longer uses {example}");
            text = text.replace(&example, &addr.to_string());
        }
        std::fs::write(dir.join("config").join(name), text).expect("write config");
    }
}

/// `args` of one walkthrough line (`bully ...`), checked to be a `bully` command.
fn bully_args(line: &str) -> Vec<String> {
    let words: Vec<String> = line.split_whitespace().map(String::from).collect();
    assert_eq!(
        words.first().map(String::as_str),
        Some("bully"),
        "not a bully command: {line}"
    );
    words[1..].to_vec()
}

fn bully_in(dir: &Path, args: &[String]) -> Command {
    let mut command = Command::new(common::binary());
    command.args(args).current_dir(dir);
    command
}

/// The coordinator `bully leader` names and the epoch's term, once it answers as the
/// walkthrough shows: `3 (epoch 1@3, fencing token 1048579, quorum mode, confirmed by
/// the coordinator to node 1)`.
fn leader(dir: &Path, args: &[String]) -> Option<(u64, u64)> {
    let out = bully_in(dir, args).output().expect("run bully leader");
    let line = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() {
        return None;
    }
    let (id, rest) = line.split_once(" (epoch ")?;
    let (epoch, rest) = rest.split_once(", fencing token ")?;
    let (token, rest) = rest.split_once(", ")?;
    let (term, epoch_leader) = epoch.split_once('@')?;
    let (id, term): (u64, u64) = (id.parse().ok()?, term.parse().ok()?);
    assert_eq!(epoch_leader, id.to_string(), "leader line: {line}");
    assert_eq!(
        token.parse::<u64>().ok(),
        Some(term * (1 << 20) + id),
        "token in: {line}"
    );
    // Only the coordinator's word counts, to us or to the node in the config file that
    // asked it for us (src/cli/leader.rs, `OWN_NODE_ALONE`); a follower's view is worded
    // otherwise.
    let confirmed = rest == "quorum mode, answered by the coordinator)"
        || rest.starts_with("quorum mode, confirmed by the coordinator to node ");
    confirmed.then_some((id, term))
}

/// Starts `bully watch`; its lines arrive on the returned channel.
fn watch(children: &mut Children, dir: &Path, args: &[String]) -> mpsc::Receiver<String> {
    let mut command = bully_in(dir, args);
    command.stdout(Stdio::piped()).stderr(Stdio::null());
    children.spawn("watch", &mut command);
    let stdout = children.0.last_mut().expect("watch").1.stdout.take();
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout.expect("watch stdout")).lines() {
            let Ok(line) = line else { break };
            if send.send(line).is_err() {
                break;
            }
        }
    });
    receive
}

/// Polls `bully leader` until it names `id` at a term above `above`.
fn wait_for_leader(dir: &Path, args: &[String], id: u64, above: u64) -> u64 {
    let started = Instant::now();
    loop {
        if let Some((now, term)) = leader(dir, args) {
            if now == id && term > above {
                return term;
            }
        }
        assert!(
            started.elapsed() < DEADLINE,
            "bully leader never named node {id} above term {above} within {DEADLINE:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_readme_walkthrough_runs_as_written() {
    let commands = walkthrough_commands();
    assert!(
        commands[0].starts_with("cargo build --release && export PATH="),
        "the walkthrough starts by building bully: {:?}",
        commands[0]
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let dir: PathBuf = dir.path().to_path_buf();
    copy_configs(&dir);
    let mut children = Children::default();
    let mut leader_args = None;
    let mut watch_args = None;
    let mut node_args = Vec::new();
    for line in &commands[1..] {
        let args = bully_args(line);
        match args[0].as_str() {
            "certs" => {
                let out = bully_in(&dir, &args).output().expect("run bully certs");
                assert!(out.status.success(), "{line}: {}", common::text(&out));
            }
            "node" => {
                let name = format!("node{}", node_args.len() + 1);
                let mut command = bully_in(&dir, &args);
                command.stdout(Stdio::null()).stderr(Stdio::null());
                children.spawn(&name, &mut command);
                node_args.push(args);
            }
            "leader" => leader_args = Some(args),
            "watch" => watch_args = Some(args),
            other => panic!("the walkthrough runs `bully {other}`, which this test does not know"),
        }
    }
    assert_eq!(node_args.len(), 3, "the walkthrough starts three nodes");
    let leader_args = leader_args.expect("the walkthrough asks bully leader");
    let watch_args = watch_args.expect("the walkthrough runs bully watch");

    let first = wait_for_leader(&dir, &leader_args, 3, 0);
    // Terminal 4 runs `bully watch` once `bully leader` has answered.
    let lines = watch(&mut children, &dir, &watch_args);
    // "Ctrl-C node 3: ... nodes 1 and 2 follow node 2 at a higher epoch."
    children.stop("node3", Signal::SIGINT);
    let second = wait_for_leader(&dir, &leader_args, 2, first);
    // "Start it again: ... takes over at a higher epoch still."
    let mut command = bully_in(&dir, &node_args[2]);
    command.stdout(Stdio::null()).stderr(Stdio::null());
    children.spawn("node3", &mut command);
    let third = wait_for_leader(&dir, &leader_args, 3, second);
    // "`kill -STOP` it and the others elect node 2; `kill -CONT` and node 3 returns."
    children.signal("node3", Signal::SIGSTOP);
    let fourth = wait_for_leader(&dir, &leader_args, 2, third);
    children.signal("node3", Signal::SIGCONT);
    let fifth = wait_for_leader(&dir, &leader_args, 3, fourth);

    // `bully watch`: one line per coordinator change, node 1's view.
    let mut seen = Vec::new();
    let started = Instant::now();
    while seen.last() != Some(&(3, fifth)) {
        let left = DEADLINE.saturating_sub(started.elapsed());
        let Ok(line) = lines.recv_timeout(left) else {
            panic!("bully watch printed {seen:?}, never epoch {fifth}@3");
        };
        let (epoch, coordinator) = line
            .split_once(" epoch ")
            .and_then(|(_, rest)| rest.split_once(" coordinator "))
            .unwrap_or_else(|| panic!("bully watch printed {line:?}"));
        let term = epoch.split('@').next().and_then(|t| t.trim().parse().ok());
        if let (Some(term), Ok(id)) = (term, coordinator.trim().parse::<u64>()) {
            seen.push((id, term));
        }
    }
    let leaders: Vec<u64> = seen.iter().map(|&(id, _)| id).collect();
    let mut changes = leaders.clone();
    changes.dedup();
    // The line for the state it started in (3) is printed or not; the changes must be.
    let changes = changes.strip_prefix(&[3]).unwrap_or(&changes);
    assert_eq!(
        changes,
        [2, 3, 2, 3],
        "bully watch showed coordinators {seen:?}; the walkthrough's changes are 2, 3, 2, 3"
    );
    let terms: Vec<u64> = seen.iter().map(|&(_, term)| term).collect();
    assert!(
        terms.windows(2).all(|w| w[0] <= w[1]),
        "terms went back: {seen:?}"
    );
}
