//! Patroni's write routes, each turned into the client API's request for the same act,
//! so it runs exactly as `bully step-down` or `bully pg` would (a member that does not
//! lead passes a switchover on to the coordinator, src/node/serve/forward.rs):
//!
//! | route                  | body (JSON, all optional unless said)              | request |
//! |------------------------|----------------------------------------------------|---------|
//! | `POST /switchover`     | `leader` (must be the coordinator), `candidate`, `scheduled_at` (UTC) | `SwitchOver` to the candidate, `ScheduleSwitchOver` with a time, `StepDown` without a candidate |
//! | `POST /failover`       | `candidate` (required), `leader`                   | as `/switchover` to the candidate |
//! | `DELETE /switchover`   |                                                    | `CancelSwitchOver` |
//! | `POST /restart`        | `restart_pending`, `role`                          | `bully pg restart` of this member |
//! | `POST /reinitialize`   |                                                    | `bully pg reinit` of this member |
//! | `POST /reload`         |                                                    | `bully pg reload` of this member |
//!
//! Who may call them is `http_auth`'s decision, made before any of this. Answers: 200
//! when done (202 for a switchover scheduled), 400 for a body that is not one, 412
//! when `leader` or a restart condition does not hold (Patroni's codes), 503 when the
//! node refused, with its reason. A scheduled restart, a `postgres_version` or a
//! `timeout` condition is refused (400), never ignored.

use super::http_reply::Reply;
use crate::api::postgres::PgVerb;
use crate::api::{Request, Response, Status};
use crate::protocol::NodeId;
use serde_json::{Map, Value};
use std::time::Duration;

/// How long the members above a switchover's candidate stand aside (the command line's
/// `step-down --for` default).
pub const STAND_ASIDE: Duration = Duration::from_secs(60);

/// The largest request body read; Patroni's bodies are a few keys.
pub const MAX_BODY: usize = 16 * 1024;

/// Whether `method path` is a write route.
pub fn is_write(method: &str, path: &str) -> bool {
    matches!(
        (method, path),
        (
            "POST",
            "/switchover" | "/failover" | "/restart" | "/reinitialize" | "/reload"
        ) | ("DELETE", "/switchover")
    )
}

/// What a write route asks: the request for the client API, and whether it is a
/// switchover held for later (answered 202).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    pub request: Request,
    pub scheduled: bool,
}

/// The request `method path` with `body` asks of the node whose status is `now`
/// (read at `now_ms`, wall clock); `Err` is the answer when it cannot be asked.
pub fn ask(method: &str, path: &str, body: &[u8], now: &Status, now_ms: u64) -> Result<Ask, Reply> {
    let fields = fields(body)?;
    let now_asked = |request| {
        Ok(Ask {
            request,
            scheduled: false,
        })
    };
    match (method, path) {
        ("DELETE", "/switchover") => now_asked(Request::CancelSwitchOver),
        ("POST", "/switchover") => switchover(&fields, now, now_ms, false),
        ("POST", "/failover") => switchover(&fields, now, now_ms, true),
        ("POST", "/restart") => {
            restart_conditions(&fields, now)?;
            now_asked(Request::Postgres {
                verb: PgVerb::Restart,
            })
        }
        ("POST", "/reinitialize") => now_asked(Request::Postgres {
            verb: PgVerb::Reinit,
        }),
        ("POST", "/reload") => now_asked(Request::Postgres {
            verb: PgVerb::Reload,
        }),
        _ => Err(Reply::text(
            404,
            format!("{method} {path} is not a write route\n"),
        )),
    }
}

/// The JSON object of `body`; an empty body is an empty object.
fn fields(body: &[u8]) -> Result<Map<String, Value>, Reply> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice(body) {
        Ok(Value::Object(fields)) => Ok(fields),
        Ok(_) => Err(bad("the body is not a JSON object")),
        Err(e) => Err(bad(&format!("the body is not JSON: {e}"))),
    }
}

fn bad(why: &str) -> Reply {
    Reply::text(400, format!("{why}\n"))
}

/// A member named by Patroni's `leader` or `candidate`: its node ID, as a string or a
/// number.
fn member(fields: &Map<String, Value>, key: &str) -> Result<Option<NodeId>, Reply> {
    let parsed = match fields.get(key) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(text)) => text.trim().parse::<NodeId>().ok(),
        Some(Value::Number(n)) => n.as_u64().and_then(|n| NodeId::try_from(n).ok()),
        Some(_) => None,
    };
    parsed.map(Some).ok_or_else(|| {
        bad(&format!(
            "`{key}` is not a member's node ID: {}",
            fields[key]
        ))
    })
}

/// `/switchover` (or `/failover`, which needs a candidate).
fn switchover(
    fields: &Map<String, Value>,
    now: &Status,
    now_ms: u64,
    candidate_required: bool,
) -> Result<Ask, Reply> {
    if let Some(leader) = member(fields, "leader")? {
        if now.coordinator() != Some(leader) {
            let known = now
                .coordinator()
                .map_or("none".to_string(), |c| c.to_string());
            return Err(Reply::text(
                412,
                format!(
                    "leader name does not match: node {leader} is not the coordinator ({known})\n"
                ),
            ));
        }
    }
    let candidate = member(fields, "candidate")?;
    let for_ms = STAND_ASIDE.as_millis() as u64;
    let at_ms = match fields.get("scheduled_at") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(utc_ms(text)?),
        Some(other) => return Err(bad(&format!("`scheduled_at` is not a time: {other}"))),
    };
    let request = match (candidate, at_ms) {
        (None, _) if candidate_required => return Err(bad("a failover needs a `candidate`")),
        (None, Some(_)) => return Err(bad("a scheduled switchover needs a `candidate`")),
        (None, None) => Request::StepDown { for_ms },
        (Some(to), None) => Request::SwitchOver { to, for_ms },
        (Some(to), Some(at_ms)) if at_ms > now_ms => {
            Request::ScheduleSwitchOver { to, at_ms, for_ms }
        }
        (Some(to), Some(_)) => Request::SwitchOver { to, for_ms },
    };
    let scheduled = matches!(request, Request::ScheduleSwitchOver { .. });
    Ok(Ask { request, scheduled })
}

/// Wall-clock ms of an ISO 8601 time in UTC (`Z` or `+00:00`, as Patroni's clients
/// send it); another offset, or none, is refused rather than misread.
fn utc_ms(text: &str) -> Result<u64, Reply> {
    let trimmed = text.trim();
    let utc = match trimmed.strip_suffix("+00:00") {
        Some(time) => format!("{time}Z"),
        None if trimmed.ends_with('Z') => trimmed.to_string(),
        None => {
            return Err(bad(&format!(
                "`scheduled_at` {text:?} names no UTC offset; give one like 2026-12-03T15:00:00Z"
            )))
        }
    };
    crate::wall_clock::parse_utc(&utc)
        .map(crate::wall_clock::ms_of)
        .map_err(|e| bad(&format!("`scheduled_at` {text:?}: {e}")))
}

/// Patroni's restart conditions: `restart_pending` (only when the server waits for a
/// restart) and `role`; the ones bully does not run are refused by name.
fn restart_conditions(fields: &Map<String, Value>, now: &Status) -> Result<(), Reply> {
    for key in ["schedule", "postgres_version", "timeout"] {
        if fields.contains_key(key) {
            return Err(bad(&format!(
                "restart `{key}` is not supported: restart when wanted (`bully pg restart`)"
            )));
        }
    }
    let pg = now.postgres.as_ref();
    let unmet = |why: String| {
        Err(Reply::text(
            412,
            format!("restart conditions are not satisfied: {why}\n"),
        ))
    };
    if fields.get("restart_pending") == Some(&Value::Bool(true))
        && !pg.is_some_and(|pg| !pg.pending_restart.is_empty())
    {
        return unmet("no parameter waits for a restart".into());
    }
    if let Some(role) = fields.get("role").and_then(Value::as_str) {
        let is = pg.map(|pg| pg.role.word()).unwrap_or("none");
        let wanted = match role {
            "master" | "primary" => "primary",
            other => other,
        };
        if wanted != is {
            return unmet(format!("the server is {is}, not {role}"));
        }
    }
    Ok(())
}

/// The HTTP answer for the client API's `response` to a write route.
pub fn reply_for(response: Response, scheduled: bool) -> Reply {
    match response {
        Response::Done(text) => Reply::text(if scheduled { 202 } else { 200 }, format!("{text}\n")),
        Response::Refused(text) => Reply::text(503, format!("{text}\n")),
        other => Reply::text(500, format!("unexpected answer: {other:?}\n")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::postgres::{PgRole, PgState};
    use crate::protocol::{Epoch, Role};

    const NOW_MS: u64 = 1_800_000_000_000;

    /// Node 1 following coordinator 3.
    fn follower() -> Status {
        let mut status = Status::starting_candidate(1, &[2, 3]);
        status.set_office(Role::Follower, Some(Epoch { term: 4, leader: 3 }));
        status.postgres = Some(PgState::bare(
            "127.0.0.1:5432".parse().unwrap(),
            PgRole::Replica,
            String::new(),
            0,
        ));
        status
    }

    fn asked(method: &str, path: &str, body: &str) -> Result<Ask, Reply> {
        ask(method, path, body.as_bytes(), &follower(), NOW_MS)
    }

    fn code(result: Result<Ask, Reply>) -> u16 {
        result.map(|_| 200).unwrap_or_else(|reply| reply.code)
    }

    #[test]
    fn switchover_bodies_as_patronis_clients_send_them() {
        let for_ms = 60_000;
        assert_eq!(
            asked(
                "POST",
                "/switchover",
                r#"{"leader": "3", "candidate": "2"}"#
            )
            .unwrap()
            .request,
            Request::SwitchOver { to: 2, for_ms }
        );
        assert_eq!(
            asked("POST", "/switchover", r#"{"candidate": 2}"#)
                .unwrap()
                .request,
            Request::SwitchOver { to: 2, for_ms },
            "a number is taken too"
        );
        assert_eq!(
            asked("POST", "/switchover", "").unwrap().request,
            Request::StepDown { for_ms }
        );
        let later = asked(
            "POST",
            "/switchover",
            r#"{"candidate": "2", "scheduled_at": "2027-01-15T08:10:00+00:00"}"#,
        )
        .unwrap();
        assert_eq!(
            later,
            Ask {
                request: Request::ScheduleSwitchOver {
                    to: 2,
                    at_ms: NOW_MS + 600_000,
                    for_ms
                },
                scheduled: true
            }
        );
        assert_eq!(
            asked("DELETE", "/switchover", "").unwrap().request,
            Request::CancelSwitchOver
        );
    }

    #[test]
    fn bad_or_mismatched_switchovers_are_refused_with_patronis_codes() {
        assert_eq!(
            code(asked("POST", "/switchover", r#"{"leader": "2"}"#)),
            412
        );
        assert_eq!(
            code(asked("POST", "/switchover", r#"{"candidate": "x"}"#)),
            400
        );
        assert_eq!(code(asked("POST", "/switchover", "[1]")), 400);
        assert_eq!(code(asked("POST", "/switchover", "{")), 400);
        assert_eq!(
            code(asked("POST", "/failover", "{}")),
            400,
            "needs a candidate"
        );
        let offset = r#"{"candidate": "2", "scheduled_at": "2027-01-15T08:10:00+02:00"}"#;
        assert_eq!(code(asked("POST", "/switchover", offset)), 400, "only UTC");
        let no_zone = r#"{"candidate": "2", "scheduled_at": "2027-01-15T08:10:00"}"#;
        assert_eq!(
            code(asked("POST", "/switchover", no_zone)),
            400,
            "a zone is named"
        );
        assert_eq!(code(asked("POST", "/scale", "")), 404);
    }

    #[test]
    fn restarts_honour_their_conditions_and_refuse_the_unsupported() {
        assert_eq!(
            asked("POST", "/restart", "").unwrap().request,
            Request::Postgres {
                verb: PgVerb::Restart
            }
        );
        assert_eq!(
            code(asked("POST", "/restart", r#"{"restart_pending": true}"#)),
            412
        );
        assert_eq!(
            code(asked("POST", "/restart", r#"{"role": "primary"}"#)),
            412
        );
        assert_eq!(
            code(asked("POST", "/restart", r#"{"role": "replica"}"#)),
            200
        );
        assert_eq!(
            code(asked(
                "POST",
                "/restart",
                r#"{"schedule": "2027-01-01T00:00:00Z"}"#
            )),
            400
        );
        assert_eq!(
            asked("POST", "/reinitialize", "").unwrap().request,
            Request::Postgres {
                verb: PgVerb::Reinit
            }
        );
        assert_eq!(
            asked("POST", "/reload", "").unwrap().request,
            Request::Postgres {
                verb: PgVerb::Reload
            }
        );
    }

    #[test]
    fn answers_map_to_patronis_codes() {
        assert_eq!(reply_for(Response::Done("ok".into()), false).code, 200);
        assert_eq!(reply_for(Response::Done("ok".into()), true).code, 202);
        assert_eq!(reply_for(Response::Refused("no".into()), false).code, 503);
        assert!(is_write("POST", "/switchover") && is_write("DELETE", "/switchover"));
        assert!(!is_write("GET", "/switchover") && !is_write("POST", "/primary"));
    }
}
