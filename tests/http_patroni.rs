//! Patroni's health-check routes on real nodes without `[postgres]`: `/primary` and its
//! aliases answer as `/coordinator` does, `/replica`, `/read-only` and `/readiness` are
//! 503 saying there is no PostgreSQL server, `/liveness` is 200, a bad `lag` is a 400
//! naming it, and HEAD and OPTIONS give the status without a body. Then HAProxy with
//! the `listen` section of Patroni's own `haproxy.cfg` (bare `option httpchk`, which
//! sends `OPTIONS /`) sends clients to the coordinator and follows a failover.

mod common;
#[path = "common/primary.rs"]
mod primary;
#[path = "common/redis_servers.rs"]
mod redis_servers;
#[path = "common/resp.rs"]
mod resp;

use bully::config::HttpConfig;
use bully::ports::free_tcp_addr;
use bully::protocol::{NodeId, Preempt, Timing};
use common::{installed, wait_until, TestCluster};
use primary::{http_get, http_raw, phase};
use redis_servers::Haproxy;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

const AGREE: Duration = Duration::from_secs(20);

/// A cluster of three with `[http]` on each node, started, node 3 leading.
async fn started() -> (TestCluster, BTreeMap<NodeId, SocketAddr>) {
    let mut t = TestCluster::new(3, Timing::default(), Preempt::Always);
    let http = primary::http_addrs(&t.cluster.ids());
    for (&id, &listen) in &http {
        t.cluster
            .edit_config(id, |c| c.http = Some(HttpConfig::on(listen)))
            .unwrap();
    }
    t.start_all();
    t.wait_for_leader(&[1, 2, 3], 3, AGREE).await;
    (t, http)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patroni_routes_without_postgres() {
    let (_t, http) = started().await;

    phase("/primary and its aliases answer as /coordinator");
    for path in ["/primary", "/read-write", "/master", "/leader", "/"] {
        for (id, expected) in [(3, 200), (1, 503)] {
            let (code, body) = http_get(http[&id], path).await.unwrap();
            assert_eq!(code, expected, "node {id} {path}: {body}");
            let (_, coordinator) = http_get(http[&id], "/coordinator").await.unwrap();
            assert_eq!(body, coordinator, "node {id} {path}");
        }
    }

    phase("/replica, /read-only, /readiness: 503, no PostgreSQL server");
    for id in [1, 3] {
        for path in ["/replica", "/read-only", "/readiness", "/replica?lag=16MB"] {
            let (code, body) = http_get(http[&id], path).await.unwrap();
            assert_eq!(code, 503, "node {id} {path}: {body}");
            assert!(body.contains("keeps no PostgreSQL server"), "{body}");
        }
        let (code, body) = http_get(http[&id], "/liveness").await.unwrap();
        assert_eq!(code, 200, "{body}");
        let (code, _) = http_get(http[&id], "/health").await.unwrap();
        assert_eq!(code, 200, "/health without [postgres]: the node runs");
    }

    phase("a bad lag is a 400 naming it");
    for query in ["lag=bogus", "lag=16mb", "lag=1.5MB"] {
        let (code, body) = http_get(http[&1], &format!("/replica?{query}"))
            .await
            .unwrap();
        assert_eq!(code, 400, "{query}: {body}");
        let value = query.trim_start_matches("lag=");
        assert!(body.contains(&format!("`{value}`")), "{query}: {body}");
    }

    phase("HEAD and OPTIONS: the status, no body; other methods 405");
    for (request, expected) in [
        ("OPTIONS /primary HTTP/1.0\r\n\r\n", 200),
        ("OPTIONS / HTTP/1.0\r\n\r\n", 200),
        ("HEAD /primary HTTP/1.1\r\n\r\n", 200),
        ("OPTIONS /replica HTTP/1.1\r\n\r\n", 503),
        ("HEAD /read-only HTTP/1.1\r\n\r\n", 503),
    ] {
        let (code, body) = http_raw(http[&3], request.as_bytes()).await.unwrap();
        assert_eq!((code, body.as_str()), (expected, ""), "{request:?}");
    }
    let (code, _) = http_raw(http[&3], b"DELETE /primary HTTP/1.1\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(code, 405);
}

/// The node HAProxy sends a client to: what `/status` through `front` says.
async fn routed_to(front: SocketAddr) -> Option<NodeId> {
    let (code, body) = http_get(front, "/status").await.ok()?;
    let status: bully::api::Status = serde_json::from_str(&body).ok()?;
    (code == 200).then_some(status.id)
}

/// `Some(())` when HAProxy sends six clients in a row to node `id`: more than its
/// round robin could by chance while any other node is still up (HAProxy starts with
/// every server up until its checks fail).
async fn only_to(front: SocketAddr, id: NodeId) -> Option<()> {
    for _ in 0..6 {
        if routed_to(front).await != Some(id) {
            return None;
        }
    }
    Some(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn haproxy_with_patronis_config_follows_the_coordinator() {
    if !installed("haproxy") {
        eprintln!("haproxy is not installed; skipping");
        return;
    }
    let (mut t, http) = started().await;
    let front = free_tcp_addr().unwrap();

    phase("HAProxy with Patroni's listen section: only the coordinator is up");
    // Patroni's haproxy.cfg (github.com/patroni/patroni, haproxy.cfg), its `listen
    // batman` section with our ports and a short `inter`; each backend is the node's
    // HTTP endpoint itself, so `/status` through the front names the node chosen.
    let servers: String = http
        .iter()
        .map(|(id, addr)| {
            format!(
                "    server node{id} {addr} maxconn 100 check port {}\n",
                addr.port()
            )
        })
        .collect();
    let config = format!(
        "global\n    maxconn 100\n\n\
         defaults\n    mode tcp\n    retries 2\n    timeout client 30m\n    \
         timeout connect 4s\n    timeout server 30m\n    timeout check 5s\n\n\
         listen batman\n    bind {front}\n    option httpchk\n    \
         http-check expect status 200\n    \
         default-server inter 100ms fall 3 rise 2 on-marked-down shutdown-sessions\n\
         {servers}"
    );
    let _haproxy = Haproxy::run(t.dir.path(), &config, front);
    wait_until("HAProxy to send clients to node 3 only", AGREE, || {
        only_to(front, 3)
    })
    .await;
    for _ in 0..5 {
        assert_eq!(
            routed_to(front).await,
            Some(3),
            "only the coordinator is up"
        );
    }

    phase("kill -9 the coordinator: HAProxy follows to node 2");
    t.cluster.kill(3).unwrap();
    wait_until("HAProxy to send clients to node 2 only", AGREE, || {
        only_to(front, 2)
    })
    .await;
}
