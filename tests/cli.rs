//! The command line as a user meets it: help, exit codes, JSON output, bad config,
//! a data dir already in use.

mod common;

use bully::protocol::{Preempt, Timing};
use common::{binary, TestCluster};
use std::process::{Command, Output};
use std::time::Duration;

fn bully(args: &[&str]) -> Output {
    Command::new(binary())
        .args(args)
        .output()
        .expect("run bully")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn help_lists_every_command() {
    let out = bully(&["--help"]);
    assert!(out.status.success());
    let help = text(&out);
    for command in [
        "certs",
        "node",
        "leader",
        "status",
        "watch",
        "step-down",
        "local",
    ] {
        assert!(help.contains(command), "--help misses {command}:\n{help}");
    }
}

#[test]
fn certs_init_writes_private_keys_0600() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let out = bully(&["certs", "init", "--dir", d, "--nodes", "1,2"]);
    assert!(out.status.success(), "{}", text(&out));
    for key in ["ca.key", "node-1.key", "node-2.key", "client.key"] {
        let mode = std::fs::metadata(dir.path().join(key))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{key} has mode {mode:o}");
    }
    let again = bully(&["certs", "init", "--dir", d, "--nodes", "1,2"]);
    assert_eq!(
        again.status.code(),
        Some(2),
        "overwriting a CA must be refused"
    );
}

#[test]
fn a_bad_config_exits_2_naming_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(
        &path,
        "id = 1\nlisten = \"127.0.0.1:7001\"\ndata_dir = \"d\"\ncolour = 3\n",
    )
    .unwrap();
    let out = bully(&["node", "--config", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let said = text(&out);
    assert!(
        said.contains("bad.toml") && said.contains("colour"),
        "{said}"
    );
}

#[test]
fn leader_exits_2_when_nobody_answers() {
    let t = TestCluster::new(1, Timing::default(), Preempt::Always);
    let certs = t.dir.path().join("certs");
    let addr = bully::cluster::free_udp_addr().unwrap().to_string();
    let out = bully(&[
        "leader",
        "--endpoint",
        &addr,
        "--certs",
        certs.to_str().unwrap(),
        "--timeout",
        "1s",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_exits_1_while_no_coordinator_is_known() {
    // Node 1 of two waits a minute before its first election: no leader yet.
    let timing = Timing {
        preempt_delay_ms: 60_000,
        ..Timing::default()
    };
    let mut t = TestCluster::new(2, timing, Preempt::Always);
    t.cluster.start(1).unwrap();
    let config = t.cluster.config_path(1);
    let config = config.to_str().unwrap();
    let out = common::wait_until("node 1 answers", Duration::from_secs(20), || async {
        let out = bully(&["leader", "--config", config]);
        (out.status.code() != Some(2)).then_some(out)
    })
    .await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));

    // status --json says why: the node is still a candidate.
    let json = bully(&["status", "--config", config, "--json"]);
    assert_eq!(json.status.code(), Some(0), "{}", text(&json));
    let status: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(status["id"], 1);
    assert_eq!(status["role"], "candidate");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_json_names_the_coordinator_and_a_locked_data_dir_is_refused() {
    let mut t = TestCluster::new(3, Timing::default(), Preempt::Always);
    t.start_all();
    let all = t.cluster.ids();
    let term = t.wait_for_leader(&all, 3, Duration::from_secs(20)).await;
    let config = t.cluster.config_path(1);
    let out = bully(&["leader", "--config", config.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["coordinator"], 3);
    assert_eq!(answer["epoch"]["term"], term);

    // A second process on node 1's config finds the data dir locked and says so.
    let out = bully(&["node", "--config", config.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("in use"), "{}", text(&out));
}
