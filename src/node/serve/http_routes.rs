//! What the HTTP endpoint answers, apart from any socket: a request head parsed into
//! an [`HttpRequest`] (or refused as a [`BadRequest`]) and the [`Reply`] for a path,
//! given the node's status and counters. [`super::http`] serves these over TCP.

use crate::api::Status;
use crate::node::publish::exposition;
use crate::node::shared::metrics::Metrics;
use crate::protocol::Role;

/// One answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub code: u16,
    pub content_type: &'static str,
    pub body: String,
}

impl Reply {
    /// A plain-text answer.
    pub fn text(code: u16, body: impl Into<String>) -> Reply {
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
pub struct HttpRequest {
    pub head_only: bool,
    pub path: String,
}

/// Parses the request line of a head: `GET /path?query HTTP/1.1`.
pub fn parse_request(head: &[u8]) -> Result<HttpRequest, BadRequest> {
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
    Ok(HttpRequest {
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
            body: exposition::render(&metrics.snapshot_for(status)),
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
            Ok(HttpRequest {
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
