//! `/coordinator` readiness on real processes (`[http] coordinator_ready`):
//! 1. `hook_ok` (the default): a new coordinator answers 200 only once its
//!    `on_elected` has succeeded, and a coordinator whose `on_elected` fails resigns
//!    (`[hooks] on_elected_failure = "resign"`): it never answers 200 and the next
//!    node takes over;
//! 2. `elected`: 200 as soon as the node leads, while `on_elected` still runs.

mod common;
#[path = "common/primary.rs"]
mod primary;

use bully::config::{CoordinatorReady, HooksConfig, HttpConfig};
use bully::ports::free_tcp_addrs;
use bully::protocol::{NodeId, Preempt, Role, Timing};
use common::TestCluster;
use primary::{ever_led, http_get, phase, quoted, status};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

const AGREE: Duration = Duration::from_secs(20);

/// Gives every node an HTTP endpoint with `ready` and the given hooks.
fn configure(
    t: &TestCluster,
    ready: CoordinatorReady,
    hooks: impl Fn(NodeId) -> HooksConfig,
) -> BTreeMap<NodeId, SocketAddr> {
    let mut http = BTreeMap::new();
    let ids = t.cluster.ids();
    for (id, listen) in ids.iter().copied().zip(free_tcp_addrs(ids.len()).unwrap()) {
        http.insert(id, listen);
        t.cluster
            .edit_config(id, |c| {
                c.http = Some(HttpConfig {
                    coordinator_ready: ready,
                    ..HttpConfig::on(listen)
                });
                c.hooks = hooks(id);
            })
            .unwrap();
    }
    http
}

/// `on_elected` that takes `delay_s`, then writes `promoted` (or fails when
/// `fails`): the file stands for "the database was promoted".
fn slow_promotion(promoted: &Path, delay_s: &str, fails: bool) -> HooksConfig {
    let end = if fails {
        "exit 1".to_string()
    } else {
        format!("touch {}", quoted(promoted))
    };
    HooksConfig {
        on_elected: Some(format!("sleep {delay_s}; {end}")),
        resign_for_ms: 60_000,
        ..HooksConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coordinator_is_ready_only_after_on_elected_and_resigns_when_it_fails() {
    let mut t = TestCluster::new(3, Timing::default(), Preempt::Always);
    let promoted = |id: NodeId| t.dir.path().join(format!("promoted-{id}"));
    let files: BTreeMap<NodeId, _> = t
        .cluster
        .ids()
        .iter()
        .map(|&id| (id, promoted(id)))
        .collect();
    // Node 3 (the highest) cannot promote its database; nodes 1 and 2 can, slowly.
    let http = configure(&t, CoordinatorReady::HookOk, |id| {
        slow_promotion(&files[&id], "0.4", id == 3)
    });
    t.start_all();

    phase("watch /coordinator on every node until node 2 is ready");
    let started = Instant::now();
    let mut node2_ready = false;
    let mut samples = 0;
    while !node2_ready {
        assert!(
            started.elapsed() < AGREE,
            "node 2 never answered 200 after node 3's on_elected failed\n{}",
            t.log_tail()
        );
        for (&id, &addr) in &http {
            let Ok((code, body)) = http_get(addr, "/coordinator").await else {
                continue;
            };
            samples += 1;
            if code != 200 {
                continue;
            }
            assert_ne!(
                id, 3,
                "node 3's on_elected failed, yet it answered 200: {body}"
            );
            assert!(
                files[&id].exists(),
                "node {id} answered 200 before its on_elected finished: {body}"
            );
            node2_ready = id == 2;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!("{samples} /coordinator answers checked");

    phase("node 3 led, failed to promote, resigned and stays ineligible");
    assert!(ever_led(&t, 3), "node 3 should have been elected first");
    assert!(!files[&3].exists());
    let s3 = status(&t, 3).await.unwrap();
    assert_eq!(s3.coordinator(), Some(2), "{s3:?}");
    assert!(!s3.eligible && s3.stepped_down_until_ms.is_some(), "{s3:?}");
    let s2 = status(&t, 2).await.unwrap();
    assert!(s2.role == Role::Coordinator && s2.ready(), "{s2:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elected_readiness_answers_200_while_on_elected_still_runs() {
    let mut t = TestCluster::new(1, Timing::default(), Preempt::Always);
    let promoted = t.dir.path().join("promoted");
    let http = configure(&t, CoordinatorReady::Elected, |_| {
        slow_promotion(&promoted, "30", false)
    });
    t.start_all();
    phase("a one-node cluster leads at once; on_elected sleeps 30 s");
    let code = common::wait_until("/coordinator 200", AGREE, || async {
        let (code, _) = http_get(http[&1], "/coordinator").await.ok()?;
        (code == 200).then_some(code)
    })
    .await;
    assert_eq!(code, 200);
    assert!(
        !promoted.exists(),
        "200 came from the elected readiness, not the hook"
    );
}
