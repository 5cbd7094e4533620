//! The plain-HTTP endpoint, `[http] listen` (off unless set): for load balancers
//! (HAProxy `option httpchk GET /coordinator`), Prometheus and people with curl.
//!
//! | path           | answer                                                         |
//! |----------------|----------------------------------------------------------------|
//! | `/coordinator` | 200 on a ready coordinator ([`Status::ready`]), else 503; epoch |
//! | `/health`      | 200 while the node runs; JSON with role and eligibility        |
//! | `/status`      | 200, the node's [`Status`] as JSON                             |
//! | `/metrics`     | 200, OpenMetrics text (`node/publish/exposition.rs`)           |
//!
//! A deliberately small HTTP/1.1 responder rather than a web framework: four read-only
//! GET routes do not justify hyper's compile time on a 2-core CI. It reads one request
//! head (at most [`MAX_HEAD`] bytes, within [`READ_TIMEOUT`]), answers, and closes the
//! connection. GET and HEAD only; anything malformed gets a 400, never a panic. Every
//! connection is served at once by its own task; at most [`MAX_CONNECTIONS`] are open,
//! and one more evicts the oldest ([`super::http_slots`]), so clients holding half-sent
//! requests cannot starve `/coordinator` (tests/http_slow_clients.rs). No TLS: bind it
//! to loopback or a trusted network. What to answer is decided in
//! [`super::http_routes`]; this module only moves bytes. The server and every connection
//! end on their group's stop signal (the node stopping, or a reload moving the endpoint).

use super::http_routes::{parse_request, route, BadRequest, Reply};
use super::http_slots::Slots;
use super::scheduled_switchover::Schedule;
use crate::api::Status;
use crate::node::shared::metrics::Metrics;
use crate::node::shared::tasks::NodeTasks;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// Longest request head accepted (request line plus headers).
pub const MAX_HEAD: usize = 8 * 1024;
/// How long a client may take to send its request head.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections open at once; a new one beyond this evicts the oldest. With at most
/// [`MAX_HEAD`] buffered per connection this bounds the endpoint's memory.
pub const MAX_CONNECTIONS: usize = 512;

/// What the endpoint reads from.
#[derive(Clone)]
pub struct HttpState {
    pub status: watch::Receiver<Status>,
    pub metrics: Arc<Metrics>,
    /// The pending scheduled switchover, which `/status` shows like the API's status.
    pub schedule: Schedule,
}

/// Binds the listener (so a busy port fails the node's start with a clear error).
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// Serves connections until `tasks` stops; each connection is one of `tasks` too.
pub async fn serve(listener: TcpListener, state: HttpState, tasks: NodeTasks) {
    let slots = Slots::new(MAX_CONNECTIONS);
    while let Some(accepted) = tasks.until_stopped(listener.accept()).await {
        let (stream, remote) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Typically out of file descriptors: back off instead of spinning.
                tracing::warn!("http accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let (slot, evicted) = slots.take();
        if evicted > 0 {
            tracing::debug!(%remote, "http: {MAX_CONNECTIONS} connections open; closed the oldest");
        }
        let id = slot.id();
        let state = state.clone();
        let group = tasks.clone();
        let task = tasks.spawn(async move {
            if let Some(Err(e)) = group.until_stopped(serve_connection(stream, &state)).await {
                tracing::debug!(%remote, "http connection failed: {e}");
            }
            drop(slot);
        });
        slots.attach(id, task.abort_handle());
    }
}

async fn serve_connection(mut stream: TcpStream, state: &HttpState) -> std::io::Result<()> {
    let head = match tokio::time::timeout(READ_TIMEOUT, read_head(&mut stream)).await {
        Ok(head) => head?,
        Err(_) => {
            let reply = Reply::text(408, "request head not received in time\n");
            return write_reply(&mut stream, &reply, false).await;
        }
    };
    let (reply, head_only) = match head.as_deref().map(parse_request) {
        None => (Reply::text(431, "request head too large\n"), false),
        Some(Err(BadRequest::Malformed(why))) => {
            (Reply::text(400, format!("bad request: {why}\n")), false)
        }
        Some(Err(BadRequest::Method(method))) => (
            Reply::text(405, format!("method {method} not allowed; use GET\n")),
            false,
        ),
        Some(Ok(request)) => {
            let status = state.schedule.status_now(&state.status);
            (
                route(&request.path, &status, &state.metrics),
                request.head_only,
            )
        }
    };
    write_reply(&mut stream, &reply, head_only).await
}

/// Reads up to the blank line ending the head; `None` if it exceeds [`MAX_HEAD`].
/// A connection closed early yields what was read (the parser then refuses it).
async fn read_head(stream: &mut TcpStream) -> std::io::Result<Option<Vec<u8>>> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    loop {
        if let Some(end) = find_end(&head) {
            head.truncate(end);
            return Ok(Some(head));
        }
        if head.len() > MAX_HEAD {
            return Ok(None);
        }
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok(Some(head));
        }
        head.extend_from_slice(&buf[..n]);
    }
}

fn find_end(head: &[u8]) -> Option<usize> {
    head.windows(4).position(|w| w == b"\r\n\r\n")
}

async fn write_reply(
    stream: &mut TcpStream,
    reply: &Reply,
    head_only: bool,
) -> std::io::Result<()> {
    let reason = match reply.code {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Internal Server Error",
    };
    let allow = if reply.code == 405 {
        "Allow: GET, HEAD\r\n"
    } else {
        ""
    };
    let mut out = format!(
        "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\n{allow}Connection: close\r\n\r\n",
        reply.code,
        reply.content_type,
        reply.body.len()
    )
    .into_bytes();
    if !head_only {
        out.extend_from_slice(reply.body.as_bytes());
    }
    stream.write_all(&out).await?;
    stream.shutdown().await?;
    // Lingering close: closing with unread request bytes (an oversized or pipelined
    // request) makes the kernel send a reset, which can destroy the reply in flight.
    // Read what the client still sends, briefly and boundedly, until it closes.
    let drain = async {
        let mut buf = [0u8; 4096];
        let mut left: usize = 64 * 1024;
        while left > 0 {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), drain).await;
    Ok(())
}
