//! What the HTTP endpoint answers, apart from any socket: the [`Reply`] for a method,
//! path and query, given the node's status as of now, its counters and the boot
//! clock's now. bully's own routes are here; Patroni's checks are `http_patroni`'s and
//! `/coordinator` is `http_coordinator`'s. `http_conn` serves these over hyper.

use super::http_coordinator::coordinator;
use super::http_patroni;
use super::http_reply::Reply;
use crate::api::Status;
use crate::node::publish::exposition;
use crate::node::shared::metrics::Metrics;

/// The methods served: GET, and HEAD and OPTIONS, which answer like GET without the
/// body (Patroni's OPTIONS and HEAD do so; HAProxy's `option httpchk` sends OPTIONS).
pub const ALLOWED: &str = "GET, HEAD, OPTIONS";

/// Whether `method` is served ([`ALLOWED`]); anything else is a 405.
pub fn allowed(method: &str) -> bool {
    matches!(method, "GET" | "HEAD" | "OPTIONS")
}

/// The 405 for a method not in [`ALLOWED`] (shown shortened, as sent).
pub fn method_not_allowed(method: &str) -> Reply {
    let shown: String = method.chars().take(16).collect();
    Reply::text(405, format!("method {shown} not allowed; use GET\n"))
}

/// The answer for `path` (and `query`, the part after `?`) given the node's status as
/// of now, its counters and `now_ns` (`crate::boot_clock::BootInstant::as_nanos`).
pub fn route(
    path: &str,
    query: Option<&str>,
    status: &Status,
    metrics: &Metrics,
    now_ns: u64,
) -> Reply {
    if let Some(reply) = http_patroni::route(path, query, status, now_ns) {
        return reply;
    }
    match path {
        "/coordinator" => coordinator(status),
        "/health" => health(status),
        "/status" => Reply::json(200, status),
        "/metrics" => Reply {
            code: 200,
            content_type: exposition::CONTENT_TYPE,
            body: exposition::render(&metrics.snapshot_for(status)),
        },
        _ => Reply::text(
            404,
            "not found; try /coordinator, /health, /status or /metrics, or Patroni's \
             /primary, /replica, /read-only, /liveness, /readiness, /patroni or /cluster\n",
        ),
    }
}

/// `/health`: without `[postgres]`, 200 while the node runs; with it, Patroni's
/// meaning, 200 while the PostgreSQL server runs (primary or replica), else 503. The
/// body is the node's health either way, and the server's as `postgres`.
fn health(status: &Status) -> Reply {
    let mut body = serde_json::json!({
        "node": status.id,
        "running": true,
        "role": status.role,
        "coordinator": status.coordinator(),
        "eligible": status.eligible,
        "health": status.health,
        "stepped_down_until_ms": status.stepped_down_until_ms,
    });
    let code = match &status.postgres {
        None => 200,
        Some(pg) => {
            body["postgres"] = http_patroni::server_json(pg).into();
            if pg.readable() {
                200
            } else {
                503
            }
        }
    };
    Reply::json(code, &body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::postgres::{PgRole, PgState};

    fn answer(path: &str, status: &Status) -> Reply {
        route(path, None, status, &Metrics::new(status.id), 0)
    }

    #[test]
    fn health_follows_the_server_only_when_there_is_one() {
        let mut status = Status::starting_candidate(2, &[1, 3]);
        let reply = answer("/health", &status);
        assert_eq!(reply.code, 200, "no [postgres]: the node runs");
        let body: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
        assert_eq!(
            (body["node"].as_u64(), body.get("postgres")),
            (Some(2), None)
        );
        for (role, expected) in [
            (PgRole::Primary, 200),
            (PgRole::Replica, 200),
            (PgRole::Stopped, 503),
            (PgRole::Absent, 503),
            (PgRole::Missing, 503),
            (PgRole::Unreachable, 503),
        ] {
            status.postgres = Some(PgState::bare(
                "127.0.0.1:5432".parse().unwrap(),
                role,
                String::new(),
                0,
            ));
            let reply = answer("/health", &status);
            assert_eq!(reply.code, expected, "{role}");
            let body: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
            assert_eq!(body["postgres"]["role"], role.word(), "{body}");
        }
    }

    #[test]
    fn paths_and_methods() {
        let status = Status::starting_candidate(2, &[1, 3]);
        assert_eq!(answer("/coordinator", &status), coordinator(&status));
        assert_eq!(answer("/status", &status).code, 200);
        assert_eq!(answer("/metrics", &status).code, 200);
        assert_eq!(
            answer("/replica", &status).code,
            503,
            "Patroni's, no server"
        );
        assert_eq!(answer("/nope", &status).code, 404);
        assert_eq!(
            answer("/coordinator/", &status).code,
            404,
            "paths are exact"
        );
        for method in ["GET", "HEAD", "OPTIONS"] {
            assert!(allowed(method), "{method}");
        }
        for method in ["POST", "get", "PUT", "DELETE"] {
            assert!(!allowed(method), "{method}");
        }
        let long = "X".repeat(100);
        let reply = method_not_allowed(&long);
        assert_eq!(reply.code, 405);
        assert!(reply.body.len() < 60, "{}", reply.body);
    }
}
