//! The HTTP endpoint on real processes: `/coordinator` 200 only on the coordinator
//! (and it follows a failover), `/health`, `/status` as JSON, `/metrics` with every
//! metric family, and bad requests answered with 4xx instead of a crash.

mod common;
#[path = "common/primary.rs"]
mod primary;

use bully::api::Status;
use bully::config::HttpConfig;
use bully::ports::free_tcp_addrs;
use bully::protocol::{NodeId, Preempt, Timing};
use common::{wait_until, TestCluster};
use primary::{http_get, http_raw, phase};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

const AGREE: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_answer_with_the_right_codes_and_metric_names() {
    let mut t = TestCluster::new(3, Timing::default(), Preempt::Always);
    let mut http: BTreeMap<NodeId, SocketAddr> = BTreeMap::new();
    let ids = t.cluster.ids();
    for (id, listen) in ids.iter().copied().zip(free_tcp_addrs(ids.len()).unwrap()) {
        http.insert(id, listen);
        t.cluster
            .edit_config(id, |c| c.http = Some(HttpConfig::on(listen)))
            .unwrap();
    }
    t.start_all();
    let term = t.wait_for_leader(&[1, 2, 3], 3, AGREE).await;

    phase("/coordinator: 200 on the coordinator, 503 on followers");
    let (code, body) = http_get(http[&3], "/coordinator").await.unwrap();
    assert_eq!(code, 200, "{body}");
    assert!(body.contains(&format!("epoch {term}@3")), "{body}");
    for id in [1, 2] {
        let (code, body) = http_get(http[&id], "/coordinator").await.unwrap();
        assert_eq!(code, 503, "{body}");
        assert!(body.contains("the coordinator is node 3"), "{body}");
    }
    let (code, body) = http_raw(http[&3], b"HEAD /coordinator HTTP/1.1\r\n\r\n")
        .await
        .unwrap();
    assert_eq!((code, body.as_str()), (200, ""), "HEAD has no body");

    phase("/health and /status");
    let (code, body) = http_get(http[&1], "/health").await.unwrap();
    assert_eq!(code, 200);
    let health: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(health["eligible"], true, "{body}");
    assert_eq!(health["health"], "unchecked", "{body}");
    let (code, body) = http_get(http[&2], "/status?pretty").await.unwrap();
    assert_eq!(code, 200);
    let status: Status = serde_json::from_str(&body).unwrap();
    assert_eq!((status.id, status.coordinator()), (2, Some(3)));

    phase("/metrics: every family, messages by type");
    let (code, text) = http_get(http[&3], "/metrics").await.unwrap();
    assert_eq!(code, 200);
    for name in [
        "bully_is_coordinator 1.0",
        &format!("bully_epoch_term {term}.0"),
        "bully_elections_started_total ",
        "bully_declarations_total ",
        "bully_coordinator_changes_total ",
        "bully_messages_sent_total{type=\"heartbeat\"}",
        "bully_messages_received_total{type=\"ack\"}",
        "bully_peers_up 2.0",
        "bully_peer_up{peer=\"1\"} 1.0",
        "bully_failover_seconds_bucket{le=\"+Inf\"}",
        "bully_failover_seconds_count ",
        "bully_persist_seconds_count ",
        "bully_hook_runs_total{hook=\"on_elected\"}",
        "bully_hook_failures_total{hook=\"on_change\"}",
        "bully_health_state{state=\"unchecked\"} 1.0",
        "bully_eligible 1.0",
        "bully_transport_refused_total ",
        "bully_transport_bad_frames_total ",
        "bully_build_info{version=",
        "process_resident_memory_bytes ",
    ] {
        assert!(text.contains(name), "{name} missing from\n{text}");
    }

    phase("bad requests get 4xx and the server keeps serving");
    for (request, expected) in [
        (&b"BLAH\r\n\r\n"[..], 400),
        (b"GET / HTTP/2\r\n\r\n", 400),
        (b"POST /status HTTP/1.1\r\n\r\n", 405),
        (b"GET /nope HTTP/1.1\r\n\r\n", 404),
        (b"\xff\xff\xff\r\n\r\n", 400),
    ] {
        let (code, _) = http_raw(http[&1], request).await.unwrap();
        assert_eq!(code, expected, "{:?}", String::from_utf8_lossy(request));
    }
    let huge = vec![b'a'; 20_000];
    let (code, _) = http_raw(http[&1], &huge).await.unwrap();
    assert_eq!(code, 431);

    phase("kill -9 the coordinator: node 2's /coordinator turns 200");
    t.cluster.kill(3).unwrap();
    wait_until("node 2 to answer 200 on /coordinator", AGREE, || async {
        let (code, _) = http_get(http[&2], "/coordinator").await.ok()?;
        (code == 200).then_some(())
    })
    .await;
    let (code, _) = http_get(http[&1], "/coordinator").await.unwrap();
    assert_eq!(code, 503);
    // Node 2 went through a candidate spell to win, so it timed a failover (node 1
    // may have switched straight from following 3 to following 2).
    let (_, text) = http_get(http[&2], "/metrics").await.unwrap();
    assert!(
        text.contains("bully_failover_seconds_count 1\n"),
        "node 2 timed its failover:\n{text}"
    );
}
