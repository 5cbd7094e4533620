//! The maintenance pause on real processes (`bully pause` / `bully resume`,
//! src/api/pause.rs), three nodes in quorum mode with preemption on:
//! - the pause is kept by the members that answer; one that was down learns it from
//!   its peers when it starts, and does not take over although it is the highest;
//! - the coordinator keeps its role; when it dies no other node is elected, a node
//!   restarted meanwhile still keeps the pause, and `status`, `status --cluster` and
//!   `/metrics`' counters say the cluster is paused;
//! - `bully resume` ends it: exactly one election follows, and a member that was down
//!   during the resume learns it too;
//! - a pause kept by one member only reaches the others over links already up.
//!
//! The invariants I1–I4, I6 and I7 are checked on the merged event logs at the end.

mod common;
#[path = "common/pause.rs"]
mod pause;
#[path = "common/primary.rs"]
mod primary;

use bully::api::{Pause, Request, Response};
use bully::client::Client;
use bully::history::Record;
use bully::protocol::{Preempt, Timing};
use common::{bully, text, wait_until, TestCluster};
use pause::{cli, declared_after_killing, declared_since};
use primary::{events, metrics, phase, status};
use std::time::Duration;

const AGREE: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_stops_failover_and_preemption_until_resume() {
    let mut t = TestCluster::new(3, Timing::default(), Preempt::Always);
    t.start_all();
    t.wait_for_leader(&[1, 2, 3], 3, AGREE).await;

    phase("node 3 dies: node 2 leads");
    t.cluster.kill(3).unwrap();
    let held_term = t.wait_for_leader(&[1, 2], 2, AGREE).await;

    phase("pause while node 3 is down: kept by 1 and 2, node 3 named");
    let out = cli(&t, "pause");
    assert!(out.status.success(), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("kept by nodes 1,2"), "{said}");
    assert!(
        said.contains("no answer from") && said.contains("node 3"),
        "{said}"
    );
    let s1 = status(&t, 1).await.unwrap();
    assert!(s1.pause.paused && s1.pause.holder == Some(2), "{s1:?}");
    assert!(!s1.eligible, "a paused follower may not lead: {s1:?}");
    assert!(status(&t, 2).await.unwrap().eligible, "the holder may");
    assert!(metrics(&t, 1).await.unwrap().paused);

    phase("node 3 comes back: it learns the pause and does not take over");
    t.cluster.start(3).unwrap();
    wait_until("node 3 keeps the pause", AGREE, || async {
        status(&t, 3)
            .await
            .filter(|s| s.pause.paused && !s.eligible)
    })
    .await;
    let term = t.wait_for_leader(&[1, 2, 3], 2, AGREE).await;
    assert_eq!(term, held_term, "no election since the pause");

    phase("the holder dies: no election");
    let declared = declared_after_killing(&mut t, 2, &[1, 3]).await;
    assert_eq!(declared, vec![], "an election while paused");
    let shown = text(&cli(&t, "status"));
    assert!(shown.contains("cluster paused"), "{shown}");
    let config = t.cluster.config_path(1);
    let table = text(&bully(&[
        "status",
        "--cluster",
        "--config",
        config.to_str().unwrap(),
    ]));
    assert!(table.contains("cluster paused"), "{table}");

    phase("node 1 restarted while paused keeps the pause");
    t.cluster.kill(1).unwrap();
    t.cluster.start(1).unwrap();
    let s1 = wait_until("node 1 answers again", AGREE, || status(&t, 1)).await;
    assert!(
        s1.pause.paused && !s1.eligible,
        "kept across a restart: {s1:?}"
    );

    phase("resume: one election, node 3 leads");
    let resumed_at = bully::wall_clock::wall_ms();
    let out = cli(&t, "resume");
    assert!(out.status.success(), "{}", text(&out));
    let term = t.wait_for_leader(&[1, 3], 3, AGREE).await;
    assert!(term > held_term);
    let declared = declared_since(&t, resumed_at);
    assert_eq!(
        declared,
        vec![(3, term)],
        "exactly one election after resume"
    );

    phase("node 2, down during the resume, learns it");
    t.cluster.start(2).unwrap();
    wait_until("node 2 keeps the resume", AGREE, || async {
        status(&t, 2)
            .await
            .filter(|s| !s.pause.paused && s.pause.generation == 2 && s.eligible)
    })
    .await;
    t.wait_for_leader(&[1, 2, 3], 3, AGREE).await;
    assert!(events(&t, 2)
        .iter()
        .any(|e| matches!(e.record, Record::Maintenance { paused: false, .. })));
    common::assert_invariants(&t);
}

/// A pause written to one member only (as when `bully pause` reaches only node 1) is
/// passed on along the live links: nodes 2 and 3 keep it although none of their links
/// came up again, and the coordinator it names keeps leading.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_one_member_keeps_reaches_the_others_over_live_links() {
    let mut t = TestCluster::new(3, Timing::default(), Preempt::Always);
    t.start_all();
    let term = t.wait_for_leader(&[1, 2, 3], 3, AGREE).await;
    let pause = Pause {
        generation: 1,
        paused: true,
        holder: Some(3),
        set_at_ms: bully::wall_clock::wall_ms(),
    };
    let client = Client::connect(t.cluster.addr(1), t.cluster.client_tls(), Some(1), AGREE)
        .await
        .expect("node 1's API answers");
    let answer = client
        .request_within(Request::SetPause { pause }, AGREE)
        .await
        .expect("node 1 answers the pause");
    assert!(matches!(answer, Response::Done(_)), "{answer:?}");
    for id in [2, 3] {
        wait_until(&format!("node {id} keeps the pause"), AGREE, || async {
            status(&t, id)
                .await
                .filter(|s| s.pause.paused && s.pause.generation == 1)
        })
        .await;
    }
    for id in [1, 2] {
        let s = status(&t, id).await.expect("a follower answers");
        assert!(!s.eligible, "node {id} may not lead while paused: {s:?}");
    }
    assert_eq!(
        t.wait_for_leader(&[1, 2, 3], 3, AGREE).await,
        term,
        "the holder keeps its office"
    );
    common::assert_invariants(&t);
}
