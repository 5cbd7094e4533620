//! Switchover on real processes: `step-down` hands leadership to the next highest
//! eligible node and answers once it leads, also when asked through a follower (which
//! passes it on to the coordinator); it is refused (and undone) when no other eligible
//! node takes over, and refused at once on a lonely node.

mod common;
#[path = "common/primary.rs"]
mod primary;

use bully::client::ClientError;
use bully::config::HealthConfig;
use bully::protocol::{Mode, Preempt, Timing};
use common::TestCluster;
use primary::{client, phase, status};
use std::time::{Duration, Instant};

const AGREE: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn step_down_hands_over_and_the_node_returns_after_its_period() {
    let mut t = TestCluster::new(3, Timing::default(), Preempt::Always);
    t.start_all();
    let first = t.wait_for_leader(&[1, 2, 3], 3, AGREE).await;

    phase("node 3 steps down for 3 s, asked through follower 1's config: node 2 takes over");
    assert_eq!(
        status(&t, 1).await.unwrap().role,
        bully::protocol::Role::Follower
    );
    let asked = Instant::now();
    let output = std::process::Command::new(common::binary())
        .arg("step-down")
        .arg("--config")
        .arg(t.cluster.config_path(1))
        .args(["--for", "3s"])
        .output()
        .unwrap();
    let switchover = asked.elapsed();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "step-down failed: {text}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(text.contains("node 2 took over"), "{text}");
    assert!(
        text.contains("coordinator 3 (asked through node 1)"),
        "{text}"
    );
    eprintln!("switchover answered in {switchover:?}: {text}");
    let second = t.wait_for_leader(&[1, 2, 3], 2, AGREE).await;
    assert!(second > first);
    let s3 = status(&t, 3).await.unwrap();
    assert!(!s3.eligible && s3.stepped_down_until_ms.is_some(), "{s3:?}");
    assert!(s3.line().contains("stepped down"), "{}", s3.line());

    phase("after its period node 3 is eligible again and takes back over");
    let third = t.wait_for_leader(&[1, 2, 3], 3, AGREE).await;
    assert!(third > second);
    let s3 = status(&t, 3).await.unwrap();
    assert!(s3.eligible && s3.stepped_down_until_ms.is_none(), "{s3:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn step_down_is_refused_without_another_eligible_node() {
    // Classic mode: in quorum mode a lone node of two leads nothing at all.
    let mut t = TestCluster::with_mode(2, Timing::default(), Preempt::Always, Mode::Classic);
    t.cluster
        .edit_config(1, |c| {
            c.health = Some(HealthConfig {
                interval_ms: 50,
                ..HealthConfig::new("false")
            })
        })
        .unwrap();
    t.start_all();
    let first = t.wait_for_leader(&[1, 2], 2, AGREE).await;

    phase("node 1 is up but ineligible: the step-down is undone and refused");
    let answer = client(&t, 2).await.unwrap().step_down(60_000).await;
    match answer {
        Err(ClientError::Refused { reason, .. }) => {
            assert!(
                reason.contains("no other eligible node took over"),
                "{reason}"
            )
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    let again = t.wait_for_leader(&[1, 2], 2, AGREE).await;
    assert!(again > first, "node 2 leads again at a new epoch");
    assert!(status(&t, 2).await.unwrap().eligible);

    phase("node 1 is gone: refused at once");
    t.cluster.kill(1).unwrap();
    common::wait_until("node 2 to see node 1 down", AGREE, || async {
        status(&t, 2)
            .await
            .filter(|s| s.peers.iter().all(|p| !p.connected))
    })
    .await;
    let asked = Instant::now();
    let answer = client(&t, 2).await.unwrap().step_down(60_000).await;
    match answer {
        Err(ClientError::Refused { reason, .. }) => {
            assert!(reason.contains("no other node is reachable"), "{reason}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(asked.elapsed() < Duration::from_secs(2));
    t.wait_for_leader(&[2], 2, AGREE).await;
}
