//! The command line as a user meets it: help, exit codes, JSON output, bad config,
//! a data dir already in use.

mod common;

use bully::protocol::{Preempt, Timing};
use common::{binary, bully, text, TestCluster};
use std::process::{Command, Stdio};
use std::time::Duration;

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
fn certs_init_writes_keys_0640_and_the_ca_key_0600() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let out = bully(&["certs", "init", "--dir", d, "--nodes", "1,2"]);
    assert!(out.status.success(), "{}", text(&out));
    for (key, expected) in [
        ("ca.key", 0o600),
        ("node-1.key", 0o640),
        ("node-2.key", 0o640),
        ("client.key", 0o640),
    ] {
        let mode = std::fs::metadata(dir.path().join(key))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, expected, "{key} has mode {mode:o}");
    }
    let again = bully(&["certs", "init", "--dir", d, "--nodes", "1,2"]);
    assert_eq!(
        again.status.code(),
        Some(2),
        "overwriting a CA must be refused"
    );
}

#[test]
fn certs_add_client_and_show_grow_an_existing_ca() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    assert!(bully(&["certs", "init", "--dir", d, "--nodes", "1,2,3"])
        .status
        .success());
    let ca_before = std::fs::read(dir.path().join("ca.pem")).unwrap();
    let add = bully(&["certs", "add", "--dir", d, "--nodes", "4"]);
    assert!(add.status.success(), "{}", text(&add));
    assert!(text(&add).contains("node-4.key"), "{}", text(&add));
    let again = bully(&["certs", "add", "--dir", d, "--nodes", "4"]);
    assert_eq!(again.status.code(), Some(2), "{}", text(&again));
    assert!(text(&again).contains("--replace"), "{}", text(&again));
    let client = bully(&["certs", "client", "--dir", d, "--name", "monitoring"]);
    assert!(client.status.success(), "{}", text(&client));
    assert_eq!(std::fs::read(dir.path().join("ca.pem")).unwrap(), ca_before);

    let show = bully(&["certs", "show", "--dir", d]);
    assert!(show.status.success(), "{}", text(&show));
    let table = String::from_utf8_lossy(&show.stdout).to_string();
    let row = |file: &str| {
        table
            .lines()
            .find(|l| l.starts_with(file))
            .unwrap_or_else(|| panic!("no {file} row:\n{table}"))
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    assert_eq!(row("node-4.pem")[1], "node-4", "{table}");
    assert_eq!(row("client-monitoring.pem")[1..3], ["client", "monitoring"]);
    assert_eq!(row("ca.pem").last(), Some(&"0600"), "{table}");
    assert!(
        table.lines().skip(1).all(|l| l.contains(" yes ")),
        "every certificate is signed by ca.pem:\n{table}"
    );
    let json = bully(&["certs", "show", "--dir", d, "--json"]);
    let rows: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(rows.as_array().map(Vec::len), Some(7), "{rows}");

    // A host that holds only ca.pem cannot sign, and says where the CA key belongs.
    let host = tempfile::tempdir().unwrap();
    std::fs::copy(dir.path().join("ca.pem"), host.path().join("ca.pem")).unwrap();
    let h = host.path().to_str().unwrap();
    let refused = bully(&["certs", "add", "--dir", h, "--nodes", "5"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        text(&refused).contains("never goes to the nodes"),
        "{}",
        text(&refused)
    );
}

/// `bully certs init --dir certs --nodes nodes`, which must succeed.
fn init_certs(certs: &std::path::Path, nodes: &str) {
    let out = bully(&[
        "certs",
        "init",
        "--dir",
        certs.to_str().unwrap(),
        "--nodes",
        nodes,
    ]);
    assert!(out.status.success(), "{}", text(&out));
}

/// A one-node config in `dir` using `cert` (e.g. node-2.pem for id 1) and `data_dir`.
fn single_node_config(dir: &std::path::Path, cert_id: u64, data_dir: &str, port: u16) -> String {
    let path = dir.join("node.toml");
    std::fs::write(
        &path,
        format!(
            "id = 1\nlisten = \"127.0.0.1:{port}\"\ndata_dir = \"{data_dir}\"\n[tls]\n\
             ca = \"certs/ca.pem\"\ncert = \"certs/node-{cert_id}.pem\"\n\
             key = \"certs/node-{cert_id}.key\"\n"
        ),
    )
    .unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn start_up_errors_name_the_config_field() {
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    init_certs(&certs, "1,2");
    // A port held by another socket: the node must say `listen` and that it is in use.
    let holder = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = holder.local_addr().unwrap().port();

    let config = single_node_config(dir.path(), 2, "data", port);
    let out = bully(&["node", "--config", &config]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("tls.cert: certificate")
            && text(&out).contains("bully certs add --dir"),
        "{}",
        text(&out)
    );

    std::fs::write(dir.path().join("datafile"), "").unwrap();
    let config = single_node_config(dir.path(), 1, "datafile", port);
    let out = bully(&["node", "--config", &config]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("data_dir: ") && text(&out).contains("is not a directory"),
        "{}",
        text(&out)
    );

    let config = single_node_config(dir.path(), 1, "data", port);
    let out = bully(&["node", "--config", &config]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("listen: cannot listen on 127.0.0.1:{port}"))
            && text(&out).contains("another process holds this port"),
        "{}",
        text(&out)
    );
    drop(holder);
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
    let addr = bully::ports::free_udp_addr().unwrap().to_string();
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

#[test]
fn completions_and_man_page_cover_every_command() {
    for shell in ["bash", "zsh", "fish"] {
        let out = bully(&["completions", shell]);
        assert!(out.status.success(), "{shell}: {}", text(&out));
        let script = String::from_utf8_lossy(&out.stdout);
        for word in ["certs", "status", "endpoints", "cluster"] {
            assert!(script.contains(word), "{shell} completion misses {word}");
        }
    }
    let out = bully(&["man"]);
    assert!(out.status.success(), "{}", text(&out));
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(
        page.starts_with(".ie") || page.contains(".TH bully"),
        "{page}"
    );
    for section in [
        ".SH \"BULLY CERTS\"",
        ".SH \"BULLY STATUS\"",
        "BULLY_ENDPOINTS",
    ] {
        assert!(page.contains(section), "the man page misses {section}");
    }
    let bad = bully(&["completions", "cmd.exe"]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
}

#[test]
fn printing_commands_die_quietly_when_stdout_is_closed() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    assert!(bully(&["certs", "init", "--dir", d, "--nodes", "1"])
        .status
        .success());
    let commands: [&[&str]; 3] = [
        &["completions", "bash"],
        &["man"],
        &["certs", "show", "--dir", d],
    ];
    for args in commands {
        // A pipe whose reader is already gone: the first write fails.
        let (reader, writer) = nix::unistd::pipe().expect("pipe");
        drop(reader);
        let out = Command::new(binary())
            .args(args)
            .stdout(Stdio::from(writer))
            .output()
            .expect("run bully");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(
            out.status.signal(),
            Some(nix::sys::signal::Signal::SIGPIPE as i32),
            "{args:?}: {:?} {stderr}",
            out.status
        );
    }
}

/// Runs a one-node cluster with `extra` arguments before `node` until it has logged
/// `lines` lines on stderr (bounded), then kills it by PID; returns those lines.
fn node_log_lines(extra: &[&str], lines: usize) -> Vec<String> {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    init_certs(&certs, "1");
    let port = bully::ports::free_udp_addr().unwrap().port();
    let config = single_node_config(dir.path(), 1, "data", port);
    let mut child = Command::new(binary())
        .args(extra)
        .args(["node", "--config", &config])
        .env("BULLY_LOG", "info")
        .stderr(Stdio::piped())
        .spawn()
        .expect("start a node");
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let stderr = child.stderr.take().unwrap();
    let _guard = Kill(child);
    // A one-node cluster declares itself at once: "declared", "established", ...
    BufReader::new(stderr)
        .lines()
        .take(lines)
        .map(|l| l.expect("read the node's stderr"))
        .collect()
}

#[test]
fn logs_have_no_colour_off_a_terminal_and_json_on_request() {
    let plain = node_log_lines(&[], 3);
    assert_eq!(plain.len(), 3, "{plain:?}");
    assert!(
        plain.iter().all(|l| !l.contains('\u{1b}')),
        "ANSI codes in {plain:?}"
    );
    assert!(plain.iter().any(|l| l.contains("INFO")), "{plain:?}");
    let json = node_log_lines(&["--log-format", "json"], 3);
    assert_eq!(json.len(), 3, "{json:?}");
    for line in &json {
        let value: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert_eq!(value["level"], "INFO", "{line}");
        assert!(value["fields"]["message"].is_string(), "{line}");
    }
}
