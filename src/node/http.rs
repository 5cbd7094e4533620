//! The plain-HTTP endpoint, `[http] listen` (off unless set): for load balancers
//! (HAProxy `option httpchk GET /coordinator`), Prometheus and people with curl.
//!
//! | path           | answer                                                         |
//! |----------------|----------------------------------------------------------------|
//! | `/coordinator` | 200 on a ready coordinator ([`Status::ready`]), else 503; epoch |
//! | `/health`      | 200 while the node runs; JSON with role and eligibility        |
//! | `/status`      | 200, the node's [`Status`] as JSON                             |
//! | `/metrics`     | 200, OpenMetrics text ([`super::exposition`])                  |
//!
//! A deliberately small HTTP/1.1 responder rather than a web framework: four read-only
//! GET routes do not justify hyper's compile time on a 2-core CI. It reads one request
//! head (at most [`MAX_HEAD`] bytes, within [`READ_TIMEOUT`]), answers, and closes the
//! connection. GET and HEAD only; anything malformed gets a 400, never a panic. Every
//! connection is served at once by its own task; at most [`MAX_CONNECTIONS`] are open,
//! and one more evicts the oldest ([`super::http_slots`]), so clients holding half-sent
//! requests cannot starve `/coordinator` (tests/http_slow_clients.rs). No TLS: bind it
//! to loopback or a trusted network.

use super::exposition;
use super::http_slots::Slots;
use super::metrics::Metrics;
use super::status::Status;
use crate::protocol::Role;
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
}

/// One answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub code: u16,
    pub content_type: &'static str,
    pub body: String,
}

impl Reply {
    fn text(code: u16, body: impl Into<String>) -> Reply {
        Reply {
            code,
            content_type: "text/plain; charset=utf-8",
            body: body.into(),
        }
    }

    fn json(value: &impl serde::Serialize) -> Reply {
        match serde_json::to_string_pretty(value) {
            Ok(mut body) => {
                body.push('\n');
                Reply {
                    code: 200,
                    content_type: "application/json",
                    body,
                }
            }
            Err(e) => Reply::text(500, format!("cannot encode JSON: {e}\n")),
        }
    }
}

/// A request we refuse before routing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BadRequest {
    /// Not an HTTP/1.x request line.
    Malformed(&'static str),
    /// A method other than GET or HEAD.
    Method(String),
}

/// The parts of a request the routes need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub head_only: bool,
    pub path: String,
}

/// Binds the listener (so a busy port fails the node's start with a clear error).
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// Serves connections until the task is aborted.
pub async fn serve(listener: TcpListener, state: HttpState) {
    let slots = Slots::new(MAX_CONNECTIONS);
    loop {
        let (stream, remote) = match listener.accept().await {
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
        let task = tokio::spawn(async move {
            if let Err(e) = serve_connection(stream, &state).await {
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
            let status = state.status.borrow().as_of_now();
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

/// Parses the request line of a head: `GET /path?query HTTP/1.1`.
pub fn parse_request(head: &[u8]) -> Result<Request, BadRequest> {
    let text = std::str::from_utf8(head).map_err(|_| BadRequest::Malformed("not UTF-8"))?;
    let line = text.lines().next().unwrap_or("");
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(BadRequest::Malformed("expected `METHOD /path HTTP/1.1`"));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(BadRequest::Malformed("only HTTP/1.x is served"));
    }
    if !target.starts_with('/') {
        return Err(BadRequest::Malformed("the target must be a path"));
    }
    let head_only = match method {
        "GET" => false,
        "HEAD" => true,
        other => {
            let shown: String = other.chars().take(16).collect();
            return Err(BadRequest::Method(shown));
        }
    };
    let path = target.split(['?', '#']).next().unwrap_or("/");
    Ok(Request {
        head_only,
        path: path.to_string(),
    })
}

/// The answer for `path` given the node's status and counters.
pub fn route(path: &str, status: &Status, metrics: &Metrics) -> Reply {
    match path {
        "/coordinator" => coordinator(status),
        "/health" => Reply::json(&serde_json::json!({
            "node": status.id,
            "running": true,
            "role": status.role,
            "coordinator": status.coordinator,
            "eligible": status.eligible,
            "health": status.health,
            "stepped_down_until_ms": status.stepped_down_until_ms,
        })),
        "/status" => Reply::json(status),
        "/metrics" => Reply {
            code: 200,
            content_type: exposition::CONTENT_TYPE,
            body: exposition::render(&status.metrics(metrics)),
        },
        _ => Reply::text(
            404,
            "not found; try /coordinator, /health, /status or /metrics\n",
        ),
    }
}

fn coordinator(status: &Status) -> Reply {
    let epoch = status
        .epoch
        .map(|e| e.to_string())
        .unwrap_or_else(|| "-".into());
    match (status.role, status.coordinator) {
        (Role::Coordinator, _) if status.ready() => Reply::text(
            200,
            format!("node {} is the coordinator (epoch {epoch})\n", status.id),
        ),
        (Role::Coordinator, _) => Reply::text(
            503,
            format!(
                "node {} leads epoch {epoch} but is not ready: on_elected has not succeeded\n",
                status.id
            ),
        ),
        (_, Some(c)) => Reply::text(
            503,
            format!(
                "node {} is a {}; the coordinator is node {c} (epoch {epoch})\n",
                status.id, status.role
            ),
        ),
        (_, None) => Reply::text(
            503,
            format!(
                "node {} is a {}; no coordinator known\n",
                status.id, status.role
            ),
        ),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Cells, Epoch, Mode, View};

    #[test]
    fn coordinator_answers_200_only_when_ready_for_its_epoch() {
        let epoch = |term| Some(Epoch { term, leader: 3 });
        let view = View {
            id: 3,
            role: Role::Coordinator,
            epoch: epoch(4),
            eligible: true,
            incarnation: 1,
        };
        let mut status = Status::initial(view, Mode::Classic, Cells::default(), &[1, 2], 0);
        let code = |s: &Status| coordinator(s).code;
        assert_eq!(code(&status), 503, "on_elected has not succeeded yet");
        status.ready_epoch = epoch(3);
        assert_eq!(code(&status), 503, "ready for an older epoch only");
        status.ready_epoch = epoch(4);
        assert_eq!(code(&status), 200);
        status.role = Role::Follower;
        assert_eq!(code(&status), 503, "a follower is never ready");
    }

    #[test]
    fn request_lines() {
        assert_eq!(
            parse_request(b"GET /metrics?x=1 HTTP/1.1\r\nHost: a"),
            Ok(Request {
                head_only: false,
                path: "/metrics".into()
            })
        );
        assert!(parse_request(b"HEAD / HTTP/1.0").unwrap().head_only);
        assert_eq!(
            parse_request(b"POST /status HTTP/1.1"),
            Err(BadRequest::Method("POST".into()))
        );
        for bad in [
            &b""[..],
            b"GET",
            b"GET /",
            b"GET / HTTP/2",
            b"GET status HTTP/1.1",
            b"GET / HTTP/1.1 extra",
            b"\xff\xfe / HTTP/1.1",
        ] {
            assert!(
                matches!(parse_request(bad), Err(BadRequest::Malformed(_))),
                "{bad:?}"
            );
        }
    }
}
