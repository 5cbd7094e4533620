//! Health gating on real processes: a node whose check fails is not eligible, so a
//! failing coordinator hands over and a failing node never takes over; rise/fall
//! hysteresis keeps a flapping check from flapping leadership.

mod common;
#[path = "common/primary.rs"]
mod primary;

use bully::api::HealthState;
use bully::config::HealthConfig;
use bully::history::Record;
use bully::protocol::{NodeId, Preempt, Timing};
use common::{wait_until, TestCluster};
use primary::{events, metrics, phase, quoted, status};
use std::path::PathBuf;
use std::time::Duration;

const AGREE: Duration = Duration::from_secs(20);

/// A marker file that makes node `id`'s check fail while it exists.
fn sick_marker(t: &TestCluster, id: NodeId) -> PathBuf {
    t.dir.path().join(format!("sick-{id}"))
}

/// Gives node `id` a check of `command` every 50 ms with `rise` and `fall`.
fn set_check(t: &TestCluster, id: NodeId, command: String, rise: u32, fall: u32) {
    let check = HealthConfig {
        command,
        interval_ms: 50,
        timeout_ms: 1000,
        rise,
        fall,
        estimate: None,
    };
    t.cluster
        .edit_config(id, |c| c.health = Some(check))
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_check_moves_leadership_and_a_passing_one_brings_it_back() {
    let mut t = TestCluster::new(3, Timing::default(), Preempt::Always);
    for id in t.cluster.ids() {
        let command = format!("test ! -e {}", quoted(&sick_marker(&t, id)));
        set_check(&t, id, command, 2, 2);
    }

    phase("start; the highest node leads once its first check passed");
    t.start_all();
    let first = t.wait_for_leader(&[1, 2, 3], 3, AGREE).await;

    phase("node 3's check fails: it resigns and node 2 leads; node 3 follows");
    std::fs::write(sick_marker(&t, 3), "").unwrap();
    let second = t.wait_for_leader(&[1, 2, 3], 2, AGREE).await;
    assert!(second > first);
    let s3 = status(&t, 3).await.expect("node 3 answers");
    assert!(!s3.eligible, "{s3:?}");
    assert_eq!(s3.health, HealthState::Failing);
    assert!(
        s3.line().contains("ineligible: health check failing"),
        "{}",
        s3.line()
    );
    assert!(
        events(&t, 3).iter().any(|e| matches!(
            e.record,
            Record::EligibilitySet {
                eligible: false,
                ..
            }
        )),
        "node 3's event log records the eligibility change"
    );
    let m3 = metrics(&t, 3).await.unwrap();
    assert!(!m3.eligible && m3.health == HealthState::Failing, "{m3:?}");

    phase("node 2 fails too: node 1 leads");
    std::fs::write(sick_marker(&t, 2), "").unwrap();
    t.wait_for_leader(&[1, 2, 3], 1, AGREE).await;

    phase("both recover: node 3 takes over again (preempt = always)");
    std::fs::remove_file(sick_marker(&t, 2)).unwrap();
    std::fs::remove_file(sick_marker(&t, 3)).unwrap();
    let last = t.wait_for_leader(&[1, 2, 3], 3, AGREE).await;
    assert!(last > second);
    assert!(status(&t, 3).await.unwrap().eligible);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_with_a_failing_check_never_takes_over() {
    let mut t = TestCluster::new(3, Timing::default(), Preempt::Always);
    let marker = sick_marker(&t, 3);
    std::fs::write(&marker, "").unwrap();
    set_check(&t, 3, format!("test ! -e {}", quoted(&marker)), 1, 1);

    phase("node 3 starts failing: it follows node 2 and never leads");
    t.start_all();
    t.wait_for_leader(&[1, 2, 3], 2, AGREE).await;
    wait_until("node 3 has run 20 failing checks", AGREE, || async {
        metrics(&t, 3).await.filter(|m| m.health_failures >= 20)
    })
    .await;
    assert!(!primary::ever_led(&t, 3), "an unhealthy node declared");
    t.wait_for_leader(&[1, 2, 3], 2, AGREE).await;

    phase("its check passes: it takes over");
    std::fs::remove_file(&marker).unwrap();
    t.wait_for_leader(&[1, 2, 3], 3, AGREE).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flapping_check_with_rise_and_fall_does_not_flap_leadership() {
    let mut t = TestCluster::new(3, Timing::default(), Preempt::Always);
    // Passes on even runs, fails on odd ones: never two alike in a row.
    let counter = t.dir.path().join("flap-count");
    let command = format!(
        "n=$(cat {c} 2>/dev/null || echo 0); echo $((n + 1)) > {c}; [ $((n % 2)) -eq 0 ]",
        c = quoted(&counter)
    );
    set_check(&t, 3, command, 2, 2);

    phase("start; node 3 leads");
    t.start_all();
    t.wait_for_leader(&[1, 2, 3], 3, AGREE).await;
    let before = metrics(&t, 1).await.expect("node 1 metrics");

    phase("40 checks alternate pass and fail on node 3");
    let flapped = wait_until("40 health checks on node 3", AGREE, || async {
        metrics(&t, 3).await.filter(|m| m.health_checks >= 40)
    })
    .await;
    assert!(flapped.health_failures >= 19, "{flapped:?}");

    phase("leadership never moved");
    t.wait_for_leader(&[1, 2, 3], 3, AGREE).await;
    let after = metrics(&t, 1).await.expect("node 1 metrics");
    assert_eq!(
        after.coordinator_changes, before.coordinator_changes,
        "node 1 saw the coordinator change while node 3's check flapped"
    );
    // It starts ineligible (no check result yet); it must not fall back after that.
    let changes: Vec<bool> = events(&t, 3)
        .iter()
        .filter_map(|e| match e.record {
            Record::EligibilitySet { eligible, .. } => Some(eligible),
            _ => None,
        })
        .collect();
    assert_eq!(changes, [false, true], "node 3's eligibility changes");
    assert_eq!(flapped.health, HealthState::Passing);
}
