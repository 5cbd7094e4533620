//! Running on "hosts": each node in a directory of its own holding only the files the
//! deployment table of docs/deploying.md puts there, peers named `localhost:PORT` (resolved at each
//! dial), certificates from one admin directory that keeps the CA key, a fourth node
//! added with `certs add` and `bully member add`, and queries that
//! need only the CA and a client certificate. I1–I3, no overlap and one coordinator per
//! term are checked on the nodes' event logs at the end.

mod common;

use bully::checker;
use bully::history::Entry;
use bully::protocol::{NodeId, Timing};
use common::binary;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Generous: two cores shared with other builds.
const SETTLE: Duration = Duration::from_secs(20);

fn bully(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(binary());
    command
        .args(args)
        .env_remove("BULLY_ENDPOINTS")
        .env_remove("BULLY_CERTS");
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().expect("run bully")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The hosts, their ports and running nodes; kills every node by PID when dropped.
struct Hosts {
    root: tempfile::TempDir,
    ports: BTreeMap<NodeId, u16>,
    nodes: BTreeMap<NodeId, Child>,
}

impl Hosts {
    fn admin(&self) -> PathBuf {
        self.root.path().join("admin")
    }

    fn host(&self, id: NodeId) -> PathBuf {
        self.root.path().join(format!("host-{id}"))
    }

    /// A directory with what a machine that only queries needs: ca.pem and a client pair.
    fn client_dir(&self) -> PathBuf {
        self.root.path().join("ops")
    }

    fn endpoint(&self, id: NodeId) -> String {
        format!("localhost:{}", self.ports[&id])
    }

    fn endpoints(&self) -> String {
        let all: Vec<String> = self.ports.keys().map(|&id| self.endpoint(id)).collect();
        all.join(",")
    }

    /// Copies node `id`'s files to its host and writes its config naming `members`.
    fn install(&mut self, id: NodeId, members: &[NodeId]) {
        let certs = self.host(id).join("certs");
        fs::create_dir_all(&certs).unwrap();
        for file in [
            "ca.pem".to_string(),
            format!("node-{id}.pem"),
            format!("node-{id}.key"),
        ] {
            fs::copy(self.admin().join(&file), certs.join(&file)).unwrap();
        }
        let mut config = format!(
            "id = {id}\nlisten = \"127.0.0.1:{}\"\ndata_dir = \"data\"\n[tls]\n\
             ca = \"certs/ca.pem\"\ncert = \"certs/node-{id}.pem\"\nkey = \"certs/node-{id}.key\"\n",
            self.ports[&id]
        );
        for &peer in members.iter().filter(|&&p| p != id) {
            config.push_str(&format!(
                "[[peers]]\nid = {peer}\naddr = \"{}\"\n",
                self.endpoint(peer)
            ));
        }
        fs::write(self.host(id).join("node.toml"), config).unwrap();
    }

    fn start(&mut self, id: NodeId) {
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.host(id).join("node.log"))
            .unwrap();
        let child = Command::new(binary())
            .args(["node", "--config"])
            .arg(self.host(id).join("node.toml"))
            .env("BULLY_LOG", "info,quinn=warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start a node");
        self.nodes.insert(id, child);
    }

    /// SIGTERM, then a bounded wait for the exit (SIGKILL if it does not come).
    fn stop(&mut self, id: NodeId) {
        let mut child = self.nodes.remove(&id).expect("node is running");
        // A child we spawned and have not reaped.
        let _ = bully::signals::send(child.id(), bully::signals::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if child.try_wait().unwrap().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// `status --cluster --json` over the client directory, through the environment.
    fn cluster_rows(&self) -> Vec<serde_json::Value> {
        let out = bully(
            &["status", "--cluster", "--json", "--timeout", "1s"],
            &[
                ("BULLY_ENDPOINTS", &self.endpoints()),
                ("BULLY_CERTS", self.client_dir().to_str().unwrap()),
            ],
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)))
    }

    /// Waits until every node in `followers` follows or is `leader`.
    fn wait_for_leader(&self, leader: NodeId, followers: &[NodeId]) {
        let deadline = Instant::now() + SETTLE;
        let mut last = Vec::new();
        while Instant::now() < deadline {
            last = self.cluster_rows();
            let running = |row: &serde_json::Value| {
                row["status"]["id"]
                    .as_u64()
                    .is_some_and(|id| followers.contains(&id))
            };
            let agreeing = last
                .iter()
                .filter(|row| running(row) && row["status"]["coordinator"] == leader)
                .count();
            if agreeing == followers.len() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "not every node follows {leader} within {SETTLE:?}: {last:#?}\n{}",
            self.logs()
        );
    }

    fn logs(&self) -> String {
        self.ports
            .keys()
            .map(|id| {
                let log = fs::read_to_string(self.host(*id).join("node.log")).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(15).collect();
                format!(
                    "--- node {id}\n{}\n",
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                )
            })
            .collect()
    }

    fn history(&self) -> Vec<Entry> {
        let logs = self
            .ports
            .keys()
            .filter_map(|id| bully::api::event_log::read_log(&self.host(*id).join("data")).ok());
        bully::history::merge(logs)
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for child in self.nodes.values_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `bully certs ACTION --dir admin ...` on the admin machine, which must succeed.
fn certs(admin: &Path, args: &[&str]) {
    let dir = admin.to_str().unwrap();
    let out = bully(
        &[&["certs", args[0], "--dir", dir], &args[1..]].concat(),
        &[],
    );
    assert!(out.status.success(), "{}", text(&out));
}

fn copy_files(from: &Path, to: &Path, files: &[&str]) {
    fs::create_dir_all(to).unwrap();
    for file in files {
        fs::copy(from.join(file), to.join(file)).unwrap();
    }
}

#[test]
fn three_hosts_by_name_grow_to_four_and_answer_with_one_down() {
    let mut hosts = Hosts {
        root: tempfile::tempdir().unwrap(),
        ports: (1..=4)
            .zip(bully::ports::free_udp_addrs(4).unwrap())
            .map(|(id, addr)| (id, addr.port()))
            .collect(),
        nodes: BTreeMap::new(),
    };
    let admin = hosts.admin();
    certs(&admin, &["init", "--nodes", "1,2,3"]);
    certs(&admin, &["client", "--name", "ops"]);
    // The querying machine gets the CA and its client pair, named as queries expect.
    let ops = hosts.client_dir();
    copy_files(&admin, &ops, &["ca.pem"]);
    fs::copy(admin.join("client-ops.pem"), ops.join("client.pem")).unwrap();
    fs::copy(admin.join("client-ops.key"), ops.join("client.key")).unwrap();

    let three: Vec<NodeId> = vec![1, 2, 3];
    for &id in &three {
        hosts.install(id, &three);
        hosts.start(id);
    }
    hosts.wait_for_leader(3, &three);
    for id in 1..=3 {
        assert!(
            !hosts.host(id).join("certs/ca.key").exists(),
            "the CA key stays on the admin machine"
        );
    }

    // Node 4 joins: a certificate from the same CA, its host, then `bully member add`
    // through any member (the files of 1–3 are not the member list once they started:
    // docs/deploying.md). Once seated, node 4 is the highest voter and takes over.
    certs(&admin, &["add", "--nodes", "4"]);
    let four: Vec<NodeId> = vec![1, 2, 3, 4];
    hosts.install(4, &four);
    hosts.start(4);
    let addr4 = hosts.endpoint(4);
    let add = [
        "member",
        "add",
        "4",
        &addr4,
        "--endpoints",
        &hosts.endpoint(1),
        "--certs",
        ops.to_str().unwrap(),
        "--timeout",
        "20s",
    ];
    let out = bully(&add, &[]);
    assert!(
        out.status.success() && text(&out).contains("node 4 joined"),
        "{}",
        text(&out)
    );
    hosts.wait_for_leader(4, &four);

    // One endpoint down: the others answer, exit 0.
    hosts.stop(2);
    let started = Instant::now();
    let out = bully(
        &[
            "leader",
            "--endpoints",
            &hosts.endpoints(),
            "--certs",
            ops.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("4 (epoch"),
        "{}",
        text(&out)
    );
    println!(
        "leader --endpoints with node 2 down answered in {:?}",
        started.elapsed()
    );
    let out = bully(
        &[
            "status",
            "--cluster",
            "--endpoints",
            &hosts.endpoints(),
            "--timeout",
            "1s",
        ],
        &[("BULLY_CERTS", ops.to_str().unwrap())],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let table = String::from_utf8_lossy(&out.stdout).to_string();
    println!("{table}");
    let rows: Vec<Vec<&str>> = table
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 4, "one row per member:\n{table}");
    let roles: Vec<(&str, &str)> = rows.iter().map(|r| (r[0], r[2])).collect();
    assert_eq!(
        roles,
        [
            ("1", "follower"),
            ("2", "no"),
            ("3", "follower"),
            ("4", "coordinator"),
        ],
        "{table}"
    );

    let stopping: Vec<NodeId> = hosts.nodes.keys().copied().collect();
    for id in stopping {
        hosts.stop(id);
    }
    let history = hosts.history();
    assert!(!history.is_empty(), "the nodes wrote no event log");
    let mut violations = checker::check_safety(&history);
    violations.extend(checker::check_no_overlap(
        &history,
        checker::lease_bound_ms(&Timing::default()),
    ));
    violations.extend(checker::check_one_per_term(&history));
    assert!(violations.is_empty(), "{violations:#?}\n{}", hosts.logs());
}
