//! A damaged store on a real process (issue 38): a node killed with SIGKILL whose `db`
//! file is then cut to half of its log must not start on the older term sled reads back
//! from it. Restarting it exits with status 2 and a message naming the data dir, and
//! `bully recover` (its read-only form) reports the damage instead of the older term.

mod common;

use bully::cluster::cut_db_to_half;
use bully::protocol::{Preempt, Timing};
use bully::storage::CHECK_FILE;
use common::{binary, bully, text, TestCluster};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Generous: a single node leads well within a second; CI machines are slow.
const STEP: Duration = Duration::from_secs(20);

/// Runs `bully node --config F` and waits for it to exit, SIGKILLing it (by PID, via
/// `Child::kill`) if it is still running after `limit`: a node that starts on the
/// damaged store is a failure, not a hang.
fn start_expecting_exit(config: &Path, limit: Duration) -> Result<std::process::Output, String> {
    let mut child = Command::new(binary())
        .arg("node")
        .arg("--config")
        .arg(config)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn bully node");
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if child.try_wait().expect("poll the node").is_some() {
            return Ok(child.wait_with_output().expect("the node's output"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let out = child.wait_with_output().expect("the node's output");
    Err(format!(
        "the node started on the damaged store and ran for {limit:?}:\n{}",
        text(&out)
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_node_whose_db_was_cut_refuses_to_start_and_recover_says_why() {
    let mut t = TestCluster::new(1, Timing::default(), Preempt::Always);
    let dir = t.cluster.data_dir(1);
    let config = t.cluster.config_path(1);
    // One life, killed: its saves (incarnation, term) are in the log, and sled has
    // written no `snap.*` file, so it would read the cut log without an error. (A
    // second life's open writes one, and sled then notices some damage itself.)
    t.cluster.start(1).unwrap();
    t.wait_for_leader(&[1], 1, STEP).await;
    t.cluster.kill(1).unwrap();
    let has_snapshot = std::fs::read_dir(&dir).unwrap().any(|e| {
        e.unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with("snap.")
    });
    assert!(
        !has_snapshot,
        "sled left no snapshot to notice the damage by"
    );
    assert!(
        dir.join(CHECK_FILE).is_file(),
        "the saves wrote the check file"
    );
    let (size, written) = cut_db_to_half(&dir).expect("cut the db");
    eprintln!(
        "db: {size} bytes, {written} written, cut to {}",
        written / 2
    );

    let out = tokio::task::spawn_blocking(move || start_expecting_exit(&config, STEP))
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}\n{}", t.log_tail()));
    let said = text(&out);
    eprint!("bully node said:\n{said}");
    assert_eq!(out.status.code(), Some(2), "{said}");
    let dir_text = dir.display().to_string();
    assert!(
        said.contains(&dir_text) && said.contains("went back"),
        "names the data dir and the damage: {said}"
    );

    // The read-only form of recover: reports the damage, not the older term's plan.
    let config = t.cluster.config_path(1).display().to_string();
    let out = tokio::task::spawn_blocking(move || {
        bully(&["recover", "--config", &config, "--members", "1"])
    })
    .await
    .unwrap();
    let said = text(&out);
    eprint!("bully recover said:\n{said}");
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.contains(&dir_text) && said.contains("went back") && !said.contains("Would write"),
        "{said}"
    );
}
