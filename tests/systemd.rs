//! Running under systemd: the unit files verify, `Type=notify` readiness arrives on
//! `$NOTIFY_SOCKET` only once a coordinator is known, and SIGHUP (`systemctl reload`)
//! applies a changed hook and a re-issued certificate with no election, no change of
//! coordinator and no dropped peer connection, while a broken config file or another
//! node's certificate changes nothing; SIGHUP also applies the readiness settings
//! (`coordinator_ready`, `on_elected_failure`).

mod common;
#[path = "common/primary.rs"]
mod primary;
#[path = "common/units.rs"]
mod units;

use bully::config::{CoordinatorReady, ElectedHookFailure, HooksConfig, HttpConfig};
use bully::ports::free_tcp_addr;
use bully::protocol::{NodeId, Preempt, Timing};
use bully::signals::Signal;
use common::{binary, wait_until, TestCluster};
use primary::{client, http_get, lines, metrics, phase, quoted, status};
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const AGREE: Duration = Duration::from_secs(20);

/// A node process started by the test itself; killed by its PID when dropped.
struct Spawned(Child);

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn hangup(t: &mut TestCluster, id: NodeId) {
    t.cluster
        .signal(id, Signal::SIGHUP)
        .expect("SIGHUP our own node");
}

/// How many lines of `log` contain `needle`.
fn logged(log: &Path, needle: &str) -> usize {
    lines(log).iter().filter(|l| l.contains(needle)).count()
}

#[test]
fn unit_files_pass_systemd_analyze_verify() {
    if !common::installed("systemd-analyze") {
        eprintln!("systemd-analyze not installed; unit files not verified");
        return;
    }
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
    // verify checks that ExecStart exists: point it at the binary under test.
    if let Err(e) = units::verify(&config, Some(&binary())) {
        panic!("{e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_is_notified_once_a_coordinator_is_known() {
    let mut t = TestCluster::new(3, Timing::default(), Preempt::Always);
    let socket_path = t.dir.path().join("notify.sock");
    let socket = UnixDatagram::bind(&socket_path).unwrap();
    let log = std::fs::File::create(t.dir.path().join("node-3-notify.log")).unwrap();
    let _node3 = Spawned(
        Command::new(binary())
            .arg("node")
            .arg("--config")
            .arg(t.cluster.config_path(3))
            .env("NOTIFY_SOCKET", &socket_path)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap(),
    );

    phase("node 3 alone (quorum mode): no coordinator, so no READY");
    socket
        .set_read_timeout(Some(Duration::from_millis(1500)))
        .unwrap();
    let mut buf = [0u8; 256];
    let early = socket.recv(&mut buf);
    assert!(
        early.is_err(),
        "READY before a coordinator: {:?}",
        early.map(|n| String::from_utf8_lossy(&buf[..n]).into_owned())
    );

    phase("nodes 1 and 2 start: node 3 leads and says READY=1");
    t.cluster.start(1).unwrap();
    t.cluster.start(2).unwrap();
    socket.set_read_timeout(Some(AGREE)).unwrap();
    let n = socket.recv(&mut buf).expect("READY within the deadline");
    let message = String::from_utf8_lossy(&buf[..n]).into_owned();
    assert!(message.lines().any(|l| l == "READY=1"), "{message:?}");
    let s = status(&t, 3).await.expect("node 3 answers");
    assert!(
        s.coordinator().is_some(),
        "ready without a coordinator: {s:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_applies_a_new_hook_without_an_election() {
    let mut t = TestCluster::new(3, Timing::default(), Preempt::Always);
    let (old_file, new_file) = (t.dir.path().join("old.log"), t.dir.path().join("new.log"));
    let hooks = |file: &Path| {
        let line = format!(
            "echo \"$BULLY_HOOK $BULLY_COORDINATOR\" >> {}",
            quoted(file)
        );
        HooksConfig {
            on_elected: Some(line.clone()),
            on_change: Some(line),
            ..HooksConfig::default()
        }
    };
    let first = hooks(&old_file);
    t.cluster.edit_config(2, |c| c.hooks = first).unwrap();
    t.start_all();
    let term = t.wait_for_leader(&[1, 2, 3], 3, AGREE).await;
    wait_until("node 2's first on_change", AGREE, || async {
        (lines(&old_file) == ["on_change 3"]).then_some(())
    })
    .await;
    let mut before = Vec::new();
    for id in [1, 2, 3] {
        before.push(metrics(&t, id).await.expect("metrics"));
    }
    let log2 = t.cluster.log_path(2);

    phase("a broken config file: SIGHUP changes nothing");
    let good = std::fs::read_to_string(t.cluster.config_path(2)).unwrap();
    std::fs::write(t.cluster.config_path(2), "id = \"two\"\n").unwrap();
    hangup(&mut t, 2);
    wait_until("the refused reload in node 2's log", AGREE, || async {
        (logged(&log2, "reload refused") == 1).then_some(())
    })
    .await;
    std::fs::write(t.cluster.config_path(2), good).unwrap();

    phase("node 1's certificate in node 2's config: SIGHUP refuses it, nothing changes");
    let (cert, key) = {
        let c = bully::config::load(&t.cluster.config_path(2)).unwrap();
        (c.tls.cert, c.tls.key)
    };
    t.cluster
        .edit_config(2, |c| {
            c.tls.cert = cert.with_file_name("node-1.pem");
            c.tls.key = key.with_file_name("node-1.key");
        })
        .unwrap();
    hangup(&mut t, 2);
    wait_until("the refused certificate in node 2's log", AGREE, || async {
        (logged(&log2, "reload refused") == 2).then_some(())
    })
    .await;
    t.cluster
        .edit_config(2, |c| {
            c.tls.cert = cert.clone();
            c.tls.key = key.clone();
        })
        .unwrap();

    phase("node 2's pair re-issued (certs add --replace): SIGHUP loads it");
    let out = Command::new(binary())
        .args(["certs", "add", "--nodes", "2", "--replace", "--dir"])
        .arg(cert.parent().unwrap())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    phase("node 2's hooks now write elsewhere; SIGHUP node 2");
    let second = hooks(&new_file);
    t.cluster.edit_config(2, |c| c.hooks = second).unwrap();
    hangup(&mut t, 2);
    wait_until("the reload in node 2's log", AGREE, || async {
        (logged(&log2, "reloaded hooks") == 1).then_some(())
    })
    .await;
    assert!(t.cluster.is_running(2), "SIGHUP ended node 2");
    // Past a suspicion timeout, so a reload that dropped a connection would show.
    tokio::time::sleep(Duration::from_millis(
        Timing::default().suspect_after_ms + 200,
    ))
    .await;
    assert_eq!(t.wait_for_leader(&[1, 2, 3], 3, AGREE).await, term);
    for (id, was) in [1, 2, 3].into_iter().zip(&before) {
        let now = metrics(&t, id).await.expect("metrics");
        assert_eq!(now.elections_started, was.elections_started, "node {id}");
        assert_eq!(
            now.coordinator_changes, was.coordinator_changes,
            "node {id}"
        );
        assert_eq!(now.peers_up, 2, "node {id} lost a peer");
    }

    phase("node 1 restarts: node 2 dials it with the re-issued pair");
    t.cluster.stop(1, Duration::from_secs(5)).unwrap();
    t.cluster.start(1).unwrap();
    assert_eq!(t.wait_for_leader(&[1, 2, 3], 3, AGREE).await, term);
    wait_until("node 2 to reach node 1 again", AGREE, || async {
        let s = status(&t, 2).await?;
        s.peers.iter().all(|p| p.connected).then_some(())
    })
    .await;

    phase("node 3 stops: node 2 takes over and runs the new hooks only");
    t.cluster.stop(3, Duration::from_secs(5)).unwrap();
    t.wait_for_leader(&[1, 2], 2, AGREE).await;
    wait_until("the new hooks", AGREE, || async {
        (lines(&new_file) == ["on_elected 2", "on_change 2"]).then_some(())
    })
    .await;
    assert_eq!(lines(&old_file), ["on_change 3"], "the old hook ran again");
    for id in [1, 2] {
        t.cluster.stop(id, Duration::from_secs(5)).unwrap();
    }
    common::assert_invariants(&t);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_applies_the_readiness_settings() {
    let mut t = TestCluster::new(3, Timing::default(), Preempt::Always);
    let http = free_tcp_addr().unwrap();
    let log3 = t.cluster.log_path(3);
    t.cluster
        .edit_config(3, |c| {
            c.http = Some(HttpConfig::on(http));
            c.hooks = HooksConfig {
                on_elected: Some("exit 1".into()),
                on_elected_failure: ElectedHookFailure::Stay,
                resign_for_ms: 60_000,
                ..HooksConfig::default()
            };
        })
        .unwrap();
    t.start_all();
    let term = t.wait_for_leader(&[1, 2, 3], 3, AGREE).await;
    wait_until("node 3's on_elected to fail", AGREE, || async {
        let m = metrics(&t, 3).await?;
        (m.hooks["on_elected"].failures == 1).then_some(())
    })
    .await;
    let (code, body) = http_get(http, "/coordinator").await.unwrap();
    assert_eq!(code, 503, "node 3 stays coordinator, not ready: {body}");

    phase("SIGHUP with coordinator_ready = elected: node 3 is ready at once");
    let elected = HttpConfig {
        coordinator_ready: CoordinatorReady::Elected,
        ..HttpConfig::on(http)
    };
    t.cluster
        .edit_config(3, |c| c.http = Some(elected))
        .unwrap();
    hangup(&mut t, 3);
    wait_until("/coordinator 200 on node 3", AGREE, || async {
        let (code, _) = http_get(http, "/coordinator").await.ok()?;
        (code == 200).then_some(())
    })
    .await;
    assert_eq!(
        logged(&log3, "reload refused"),
        0,
        "the endpoint kept its port"
    );
    assert_eq!(t.wait_for_leader(&[1, 2, 3], 3, AGREE).await, term);

    phase("SIGHUP with on_elected_failure = resign: node 3's next failure resigns");
    t.cluster
        .edit_config(3, |c| {
            c.http = Some(HttpConfig::on(http));
            c.hooks.on_elected_failure = ElectedHookFailure::Resign;
        })
        .unwrap();
    hangup(&mut t, 3);
    wait_until("the second reload in node 3's log", AGREE, || async {
        (logged(&log3, "reloaded hooks") == 2).then_some(())
    })
    .await;
    let handed = client(&t, 3).await.unwrap().step_down(3_000).await;
    assert!(handed.is_ok(), "{handed:?}");
    wait_until(
        "node 3 to lead again, fail and resign for 60 s",
        AGREE,
        || async {
            let failed = metrics(&t, 3).await?.hooks["on_elected"].failures;
            let s3 = status(&t, 3).await?;
            let until = s3.stepped_down_until_ms?;
            let resigned = until > bully::wall_clock::wall_ms() + 30_000;
            (failed == 2 && resigned && s3.coordinator() == Some(2)).then_some(())
        },
    )
    .await;
    for id in [1, 2, 3] {
        t.cluster.stop(id, Duration::from_secs(5)).unwrap();
    }
    common::assert_invariants(&t);
}
