//! A stopped node leaves nothing behind: started in this process with an HTTP endpoint,
//! a health check and a hook, holding an API watch and an idle HTTP connection, its
//! `shutdown` ends every task it spawned, closes the API connection, and frees its UDP
//! and TCP ports and its file descriptors, even while its counters are still held.

mod common;

use bully::client::Client;
use bully::config::{HealthConfig, HooksConfig, HttpConfig};
use bully::ports::free_tcp_addr;
use bully::protocol::{Mode, Preempt, Timing};
use common::{wait_until, TestCluster};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const SOON: Duration = Duration::from_secs(10);

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

fn alive_tasks() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_node_leaves_no_task_or_socket_behind() {
    let t = TestCluster::with_mode(1, Timing::default(), Preempt::Always, Mode::Classic);
    let http = free_tcp_addr().unwrap();
    t.cluster
        .edit_config(1, |c| {
            c.http = Some(HttpConfig::on(http));
            c.health = Some(HealthConfig {
                interval_ms: 50,
                ..HealthConfig::new("true")
            });
            c.hooks = HooksConfig {
                on_change: Some("true".into()),
                ..HooksConfig::default()
            };
        })
        .unwrap();
    let config = bully::config::load(&t.cluster.config_path(1)).unwrap();
    let (tasks_before, fds_before) = (alive_tasks(), open_fds());

    let node = bully::node::start(config).await.unwrap();
    let udp = node.local_addr();
    // An embedder may keep the counters after the node is gone.
    let counters = node.metrics();
    let mut status = node.subscribe();
    let led = tokio::time::timeout(SOON, status.wait_for(|s| s.coordinator() == Some(1))).await;
    assert!(led.is_ok_and(|r| r.is_ok()), "node 1 leads alone");

    let client = Client::connect(udp, t.cluster.client_tls(), Some(1), SOON)
        .await
        .unwrap();
    let mut watch = client.watch().await.unwrap();
    assert!(watch.next().await.unwrap().is_some(), "the watch answers");
    // Half a request: the connection's task waits for the rest.
    let mut idle_http = tokio::net::TcpStream::connect(http).await.unwrap();
    idle_http
        .write_all(b"GET /status HTTP/1.1\r\n")
        .await
        .unwrap();
    wait_until("the node's tasks to run", SOON, || async {
        (alive_tasks() > tasks_before + 3).then_some(())
    })
    .await;

    tokio::time::timeout(SOON, node.shutdown())
        .await
        .expect("shutdown within 10 s")
        .unwrap();
    // Closed at once, not answered with a 408 after the read timeout (5 s).
    let mut answer = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(2), idle_http.read_to_end(&mut answer));
    assert!(closed.await.is_ok(), "the idle HTTP connection was closed");
    assert!(answer.is_empty(), "{}", String::from_utf8_lossy(&answer));
    let ended = tokio::time::timeout(SOON, async {
        // The demoted status may come first; then the stream or connection ends.
        while let Ok(Some(_)) = watch.next().await {}
    })
    .await;
    assert!(ended.is_ok(), "the node closed the API watch");
    let last = status.borrow().as_of_now();
    drop((watch, client, status));

    wait_until("every task to end", SOON, || async {
        (alive_tasks() <= tasks_before).then_some(())
    })
    .await;
    drop(idle_http);
    std::net::UdpSocket::bind(udp).expect("the QUIC port is free again");
    assert_eq!(
        counters.snapshot_for(&last).node,
        1,
        "the counters outlive the node"
    );
    std::net::TcpListener::bind(http).expect("the HTTP port is free again");
    wait_until("the file descriptors to close", SOON, || async {
        (open_fds() <= fds_before).then_some(())
    })
    .await;
}
