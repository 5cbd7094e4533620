//! Helpers for the "keep one primary" tests (health, hooks, step-down, HTTP, Redis):
//! included with `#[path = "common/primary.rs"] mod primary;` next to `mod common;`.
#![allow(dead_code)]

use super::common::TestCluster;
use bully::api::{event_log, MetricsSnapshot, Status};
use bully::client::Client;
use bully::history::{Entry, Record};
use bully::protocol::NodeId;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Logs a test phase, so a failure shows how far the scenario got.
pub fn phase(name: &str) {
    eprintln!("=== phase: {name}");
}

/// A client connected to node `id`, or `None` if it does not answer within a second.
pub async fn client(t: &TestCluster, id: NodeId) -> Option<Client> {
    let c = &t.cluster;
    Client::connect(c.addr(id), c.client_tls(), Some(id), Duration::from_secs(1))
        .await
        .ok()
}

/// Node `id`'s counters, or `None` if it does not answer.
pub async fn metrics(t: &TestCluster, id: NodeId) -> Option<MetricsSnapshot> {
    client(t, id).await?.metrics().await.ok()
}

/// Node `id`'s status, or `None` if it does not answer.
pub async fn status(t: &TestCluster, id: NodeId) -> Option<Status> {
    t.cluster.status(id, Duration::from_secs(1)).await.ok()
}

/// Node `id`'s event log (empty if it cannot be read yet).
pub fn events(t: &TestCluster, id: NodeId) -> Vec<Entry> {
    event_log::read_log(&t.cluster.data_dir(id)).unwrap_or_default()
}

/// Whether node `id`'s event log shows it as coordinator at any time.
pub fn ever_led(t: &TestCluster, id: NodeId) -> bool {
    events(t, id).iter().any(
        |e| matches!(&e.record, Record::View(v) if v.role == bully::protocol::Role::Coordinator),
    )
}

/// A path quoted for `sh`.
pub fn quoted(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', "'\\''"))
}

/// The lines of a file (none if it does not exist yet).
pub fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// An HTTP answer as read off the wire: its status code (0 if none) and body.
pub fn parse_answer(answer: &[u8]) -> (u16, String) {
    let text = String::from_utf8_lossy(answer).to_string();
    let code = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (code, body)
}

/// A free loopback address for the HTTP endpoint of each of `ids`.
pub fn http_addrs(ids: &[NodeId]) -> std::collections::BTreeMap<NodeId, SocketAddr> {
    let addrs = bully::ports::free_tcp_addrs(ids.len()).unwrap();
    ids.iter().copied().zip(addrs).collect()
}

/// Sends raw bytes to an HTTP endpoint and returns the status code and body.
pub async fn http_raw(addr: SocketAddr, request: &[u8]) -> std::io::Result<(u16, String)> {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream.write_all(request).await?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await?;
        Ok(parse_answer(&answer))
    };
    tokio::time::timeout(Duration::from_secs(5), exchange)
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "http timeout"))?
}

/// `GET path` on an HTTP endpoint: the status code and body.
pub async fn http_get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    http_raw(addr, request.as_bytes()).await
}

/// Like `common::wait_until`, but a timeout panics with every node's log tail.
pub async fn wait_logged<T, F, Fut>(
    t: &TestCluster,
    what: &str,
    timeout: Duration,
    mut probe: F,
) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let started = std::time::Instant::now();
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        if started.elapsed() > timeout {
            panic!(
                "timed out after {timeout:?} waiting for {what}\n{}",
                t.log_tail()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
