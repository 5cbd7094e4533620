//! `bully step-down --to N --at TIME` on three real nodes (quorum mode): refused for an
//! unknown node and a time in the past; a cancelled schedule changes nothing; a held
//! one hands over to N, whose declaration the event logs show at or after the
//! scheduled instant (no timed assertion: the logs' own clock decides "not before").
//! Node 3's event log records each schedule's outcome; its HTTP `/status` shows a
//! pending schedule like the API's status does.

mod common;
#[path = "common/primary.rs"]
mod primary;

use bully::config::HttpConfig;
use bully::history::Record;
use bully::protocol::{Fact, NodeId, Preempt, Timing};
use common::{text, wait_until, TestCluster};
use std::time::Duration;

/// Generous: each step takes a second or two; CI machines are slow.
const STEP: Duration = Duration::from_secs(30);

/// `bully step-down ARGS --config <node at's config>`, off the async runtime.
async fn step_down(t: &TestCluster, at: NodeId, args: &[&str]) -> (bool, String) {
    let mut full = vec![
        "step-down".to_string(),
        "--config".to_string(),
        t.cluster.config_path(at).display().to_string(),
    ];
    full.extend(args.iter().map(|a| a.to_string()));
    let out = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = full.iter().map(String::as_str).collect();
        common::bully(&args)
    })
    .await
    .expect("the CLI ran");
    (out.status.success(), text(&out))
}

/// The times node `id` declared an epoch, from the merged event logs.
fn declarations(t: &TestCluster, id: NodeId) -> Vec<u64> {
    t.cluster
        .history()
        .into_iter()
        .filter(
            |e| matches!(e.record, Record::Fact(Fact::Declared { epoch }) if epoch.leader == id),
        )
        .map(|e| e.at_ms)
        .collect()
}

/// The schedule node `id` reports, if any.
async fn scheduled(t: &TestCluster, id: NodeId) -> Option<bully::api::ScheduledSwitchover> {
    let status = t.cluster.status(id, STEP).await.expect("node answers");
    status.scheduled_switchover
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduled_switchover_waits_for_its_time_and_a_cancelled_one_never_runs() {
    let mut t = TestCluster::new(3, Timing::default(), Preempt::Always);
    let http = bully::ports::free_tcp_addrs(1).unwrap()[0];
    t.cluster
        .edit_config(3, |c| c.http = Some(HttpConfig::on(http)))
        .unwrap();
    t.start_all();
    t.wait_for_leader(&[1, 2, 3], 3, STEP).await;

    for (args, why) in [
        (["--to", "9", "--at", "+5s"], "node 9 is not a member"),
        (["--to", "2", "--at", "2020-01-01T00:00:00Z"], "in the past"),
    ] {
        let (ok, said) = step_down(&t, 3, &args).await;
        assert!(
            !ok && said.contains(why),
            "{args:?}: expected {why:?}: {said}"
        );
    }
    assert_eq!(scheduled(&t, 3).await, None, "nothing held after refusals");

    // Scheduled, then cancelled: its time passes and node 3 still leads.
    let (ok, said) = step_down(&t, 3, &["--to", "2", "--at", "+3s"]).await;
    assert!(ok, "{said}");
    let plan = scheduled(&t, 3)
        .await
        .expect("the schedule shows in status");
    assert_eq!(plan.to, 2);
    let config = t.cluster.config_path(3).display().to_string();
    let shown = tokio::task::spawn_blocking(move || common::bully(&["status", "-c", &config]))
        .await
        .expect("the CLI ran");
    assert!(
        text(&shown).contains("switchover to node 2 scheduled at"),
        "{}",
        text(&shown)
    );
    let (code, body) = primary::http_get(http, "/status")
        .await
        .expect("HTTP answers");
    let shown: bully::api::Status = serde_json::from_str(&body).expect("/status is a status");
    assert_eq!(
        (code, shown.scheduled_switchover),
        (200, Some(plan)),
        "/status shows the schedule"
    );
    // Through a follower's config: node 1 passes the cancel on to coordinator 3.
    let (ok, said) = step_down(&t, 1, &["--cancel"]).await;
    assert!(ok && said.contains("cancelled"), "{said}");
    assert!(
        said.contains("coordinator 3 (asked through node 1)"),
        "{said}"
    );
    assert_eq!(scheduled(&t, 3).await, None);
    let (_, body) = primary::http_get(http, "/status")
        .await
        .expect("HTTP answers");
    let shown: bully::api::Status = serde_json::from_str(&body).expect("/status is a status");
    assert_eq!(shown.scheduled_switchover, None, "/status after the cancel");
    let passed = plan.at_ms + 2_000;
    wait_until("the cancelled time to pass", STEP, || async {
        (bully::wall_clock::wall_ms() > passed).then_some(())
    })
    .await;
    t.wait_for_leader(&[1, 2, 3], 3, STEP).await;
    assert!(declarations(&t, 2).is_empty(), "a cancelled switchover ran");

    // Scheduled and held: node 2 leads, declared no earlier than the time.
    // Through a follower's config again: node 1 passes it on, coordinator 3 holds it.
    let (ok, said) = step_down(&t, 1, &["--to", "2", "--at", "+4s", "--for", "60s"]).await;
    assert!(ok && said.contains("scheduled"), "{said}");
    assert!(
        said.contains("coordinator 3 (asked through node 1)"),
        "{said}"
    );
    let plan = scheduled(&t, 3)
        .await
        .expect("the schedule shows in status");
    t.wait_for_leader(&[1, 2, 3], 2, STEP + Duration::from_secs(4))
        .await;
    let declared = declarations(&t, 2);
    assert!(!declared.is_empty(), "node 2 declared");
    assert!(
        declared.iter().all(|&at| at >= plan.at_ms),
        "node 2 declared at {declared:?}, before the scheduled {}",
        plan.at_ms
    );
    assert_eq!(scheduled(&t, 3).await, None, "the schedule is used up");
    wait_until("node 3's event log to hold each outcome", STEP, || async {
        let outcomes: Vec<String> = t
            .cluster
            .history()
            .into_iter()
            .filter_map(|e| match e.record {
                Record::ScheduledSwitchover { outcome, .. } if e.node == 3 => Some(outcome),
                _ => None,
            })
            .collect();
        let expected = ["scheduled", "cancelled", "scheduled", "done"];
        let seen = outcomes.iter().map(|o| o.split(':').next().unwrap_or(""));
        seen.eq(expected).then_some(())
    })
    .await;
    common::assert_offices_never_overlap(&t);
}
