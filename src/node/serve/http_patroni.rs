//! Health-check routes compatible with Patroni's REST API, so an HAProxy config
//! written for Patroni (`option httpchk OPTIONS /primary`, `GET /replica?lag=16MB`,
//! `http-check expect status 200`) works unchanged against bully: the same paths, 200
//! when the check passes and 503 when it does not. The decisions are pure (a path, a
//! query, the node's [`Status`] as of now and the boot clock's `now`), so they are
//! tested without a socket; `http_routes` dispatches to them.
//!
//! | path                                          | 200 when                                                    |
//! |-----------------------------------------------|-------------------------------------------------------------|
//! | `/primary`, `/read-write`, `/master`, `/leader`, `/` | the node is the ready coordinator ([`Status::ready`]) and its server is a writable primary |
//! | `/replica`                                    | the server is a running replica and the node is not the coordinator; with `?lag=MAX`, its `lag_bytes` is known and at most MAX |
//! | `/read-only`                                  | the server answers reads (primary or replica; a replica also within `?lag=` if given) |
//! | `/liveness`                                   | the node answers and its last observation of the server is at most [`liveness_bound`] old |
//! | `/readiness`                                  | the node is the ready coordinator with a writable server, or its server is a streaming replica (within `?lag=` if given) |
//! | `/quorum`, `/sync`, `/synchronous`            | `/replica`, and the coordinator's primary names this standby in `synchronous_standby_names` (`PgState::quorum_standby`) |
//! | `/async`, `/asynchronous`                     | `/replica`, and not a quorum standby |
//! | `/read-only-quorum`, `/read-only-sync`, `/read-only-synchronous` | `/primary`, or `/quorum` |
//! | `/standby-leader`                             | the cluster is a standby cluster (`postgres.standby_cluster`), the node is the ready coordinator and its server a running replica: the standby leader |
//!
//! The replica checks (`/replica`, `/read-only`, `/quorum`, `/async`,
//! `/read-only-quorum`) fail on a replica tagged `noloadbalance`, and pass only where
//! every `tag_<name>=<value>` in the query matches the member's `[postgres.tags]`.
//!
//! bully's synchronous standbys are always a quorum (`ANY k (...)`, under `quorum` and
//! `strict` alike), so `/sync` answers as `/quorum` (Patroni answers `/sync` only under
//! its `synchronous_mode: on`, with `FIRST`-style names); under `off` no standby is one.
//! `/config` gives the cluster settings in Patroni's shape where Patroni has the key
//! (502 before any is stored). `/patroni` is 200 while the node answers, with the status body below plus Patroni's
//! `quorum_standby`, `tags` (when any is set), `pause`, `cluster_unlocked` and
//! `patroni` (`version`, `scope`, `name`). `/failsafe` is 502, Patroni's answer without
//! its `failsafe_mode` ([`FAILSAFE`] says why). `/cluster` and `/history` ask beyond
//! the node's status (`http_cluster`, `http_history`).
//!
//! A server whose data is not the cluster's (`PgState::other_cluster`: another
//! cluster's volume, or this node's own `initdb` that lost the race) passes none of
//! these but `/liveness`: clients are never sent to it.
//!
//! Everything else is 503, with a JSON body in Patroni's spirit (`state`, `role`,
//! `timeline`, `xlog`, `replication_state`) built from [`PgState`], plus what bully
//! knows (`bully`) and, on a 503, the `reason`. `lag` is a byte count or a size with a
//! unit (`16MB`, `512kB`), read by `crate::config::bytes::parse` like `[postgres]
//! maximum_lag_on_failover`; a value that is not one is a 400 naming it (Patroni would
//! ignore it; a typo in a load balancer's check should show, not pass). `/health` is
//! `http_routes`' (200 while the server runs, when there is one).
//!
//! Without `[postgres]` (`Status::postgres` is `None`) there is no server to judge:
//! `/primary` and its aliases answer exactly as `/coordinator` does (the database is
//! then whatever the hooks keep, and `/coordinator` is its readiness); `/liveness` is
//! 200 (the node answered); `/replica`, `/read-only` and `/readiness` are 503 with a
//! body saying the node keeps no PostgreSQL server.

use super::http_coordinator::coordinator;
use super::http_query;
use super::http_reply::Reply;
use crate::api::postgres::{PgRole, PgState};
use crate::api::Status;
use crate::config::bytes;
use crate::protocol::settings::Synchronous;
use crate::protocol::Role;
use serde_json::{json, Map, Value};
use std::time::Duration;

/// Patroni's `scope` (its cluster's name): bully has none, so its own name.
pub const SCOPE: &str = "bully";

/// `/liveness` passes while the server's last observation is at most this old ...
pub const LIVENESS_FLOOR: Duration = Duration::from_secs(10);
/// ... or this many lease spans, if that is longer: the manager observes the server
/// well within a lease while it keeps it, so an older record means it is stuck.
pub const LIVENESS_LEASES: u32 = 4;

/// One of Patroni's checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    Primary,
    Replica,
    ReadOnly,
    Liveness,
    Readiness,
    Quorum,
    Async,
    ReadOnlyQuorum,
    StandbyLeader,
}

impl Check {
    /// The check `path` asks for, Patroni's aliases included; `None` for other paths.
    pub fn for_path(path: &str) -> Option<Check> {
        Some(match path {
            "/" | "/primary" | "/read-write" | "/master" | "/leader" => Check::Primary,
            "/replica" => Check::Replica,
            "/read-only" => Check::ReadOnly,
            "/liveness" => Check::Liveness,
            "/readiness" => Check::Readiness,
            "/quorum" | "/sync" | "/synchronous" => Check::Quorum,
            "/async" | "/asynchronous" => Check::Async,
            "/read-only-quorum" | "/read-only-sync" | "/read-only-synchronous" => {
                Check::ReadOnlyQuorum
            }
            "/standby-leader" => Check::StandbyLeader,
            _ => return None,
        })
    }

    /// Whether `?lag=` bounds this check (the ones a replica can pass).
    fn reads_lag(self) -> bool {
        matches!(
            self,
            Check::Replica
                | Check::ReadOnly
                | Check::Readiness
                | Check::Quorum
                | Check::Async
                | Check::ReadOnlyQuorum
        )
    }
}

/// How old `PgState::observed_at_ns` may be for `/liveness`: the longer of
/// [`LIVENESS_FLOOR`] and [`LIVENESS_LEASES`] lease spans of the node's timing.
pub fn liveness_bound(status: &Status) -> Duration {
    let leases = Duration::from_millis(status.timing.lease_span_ms()) * LIVENESS_LEASES;
    leases.max(LIVENESS_FLOOR)
}

/// The answer for `path` if it is one of Patroni's checks, else `None`. `query` is the
/// part after `?`; `status` is read as of now; `now_ns` is the boot clock now
/// (`crate::boot_clock::BootInstant::as_nanos`), which `/liveness` compares with.
pub fn route(path: &str, query: Option<&str>, status: &Status, now_ns: u64) -> Option<Reply> {
    if path == "/patroni" {
        return Some(Reply::json(200, &patroni(status)));
    }
    if path == "/config" {
        return Some(config(status));
    }
    if path == "/failsafe" {
        return Some(Reply::text(502, FAILSAFE));
    }
    Check::for_path(path).map(|check| answer(check, query, status, now_ns))
}

/// Patroni's `/config`: the cluster settings of the list this node holds, in Patroni's
/// shape where Patroni has the key (`ttl` and `loop_wait` in seconds, as D and the
/// heartbeat; `synchronous_mode`, `synchronous_mode_strict`;
/// `postgresql.parameters`), each setting as `bully config show` names it under
/// `bully`. 502 while the node holds no settings, as Patroni's without a config in its
/// DCS.
fn config(status: &Status) -> Reply {
    let Some(settings) = status.members.as_ref().and_then(|l| l.settings.as_ref()) else {
        return Reply::text(502, "no cluster settings stored yet\n");
    };
    let t = &settings.timing;
    let seconds = |ms: u64| ms as f64 / 1000.0;
    let mut body = json!({
        "ttl": seconds(t.suspect_after_ms),
        "loop_wait": seconds(t.heartbeat_ms),
        "retry_timeout": seconds(t.answer_timeout_ms),
        "bully": settings.entries().into_iter().map(|(k, v)| (k, Value::from(v))).collect::<Map<String, Value>>(),
    });
    if let Some(mode) = settings.pg_synchronous {
        body["synchronous_mode"] = match mode {
            Synchronous::Off => false.into(),
            Synchronous::Quorum | Synchronous::Strict => "quorum".into(),
        };
        body["synchronous_mode_strict"] = (mode == Synchronous::Strict).into();
    }
    if let Some(parameters) = &settings.pg_parameters {
        body["postgresql"] = json!({ "parameters": parameters });
    }
    Reply::json(200, &body)
}

/// Patroni's `/patroni` body: the server (when the node keeps one), Patroni's cluster
/// flags, and who answers (`patroni.name` is the node's ID; bully has no scope, so
/// `scope` is `bully`).
fn patroni(status: &Status) -> Map<String, Value> {
    let mut body = status
        .postgres
        .as_ref()
        .map(server_json)
        .unwrap_or_default();
    if status.postgres.as_ref().is_some_and(|pg| pg.quorum_standby) {
        body.insert("quorum_standby".into(), true.into());
    }
    // Patroni lists a member's tags when it has any set.
    if let Some(pg) = status
        .postgres
        .as_ref()
        .filter(|pg| pg.tags != Default::default())
    {
        body.insert("tags".into(), json!(pg.tags));
    }
    body.insert("pause".into(), status.pause.paused.into());
    body.insert(
        "cluster_unlocked".into(),
        status.coordinator().is_none().into(),
    );
    body.insert(
        "patroni".into(),
        json!({
            "version": env!("CARGO_PKG_VERSION"),
            "scope": SCOPE,
            "name": status.id.to_string(),
        }),
    );
    body
}

/// The answer to `check`.
pub fn answer(check: Check, query: Option<&str>, status: &Status, now_ns: u64) -> Reply {
    let max_lag = if check.reads_lag() {
        match lag(query) {
            Ok(max_lag) => max_lag,
            Err(bad) => return bad,
        }
    } else {
        None
    };
    let Some(pg) = &status.postgres else {
        return without_server(check, status);
    };
    let verdict =
        judge(check, status, pg, max_lag, now_ns).and_then(|()| as_tagged(check, pg, query));
    let mut body = server_json(pg);
    body.insert(
        "bully".into(),
        json!({
            "node": status.id,
            "role": status.role,
            "coordinator": status.coordinator(),
            "ready": status.ready(),
        }),
    );
    if let Err(reason) = &verdict {
        body.insert("reason".into(), Value::from(reason.as_str()));
    }
    Reply::json(if verdict.is_ok() { 200 } else { 503 }, &body)
}

/// Whether `check` passes for a node with a server; `Err` says why not.
pub fn judge(
    check: Check,
    status: &Status,
    pg: &PgState,
    max_lag: Option<u64>,
    now_ns: u64,
) -> Result<(), String> {
    if pg.other_cluster && check != Check::Liveness {
        return Err(
            "the server holds another cluster's data, not this cluster's: \
                    clients are never sent to it"
                .into(),
        );
    }
    match check {
        Check::Primary => primary(status, pg),
        Check::Replica => replica(status, pg, max_lag),
        Check::Quorum => {
            replica(status, pg, max_lag)?;
            match pg.quorum_standby {
                true => Ok(()),
                false => Err("the coordinator's primary does not name this standby in \
                     synchronous_standby_names"
                    .into()),
            }
        }
        Check::Async => {
            replica(status, pg, max_lag)?;
            match pg.quorum_standby {
                true => Err("a quorum standby (named in synchronous_standby_names)".into()),
                false => Ok(()),
            }
        }
        Check::ReadOnlyQuorum => primary(status, pg).or_else(|not_primary| {
            judge(Check::Quorum, status, pg, max_lag, now_ns)
                .map_err(|not_quorum| format!("{not_primary}; and {not_quorum}"))
        }),
        Check::StandbyLeader => standby_leader(status, pg),
        Check::ReadOnly => match pg.role {
            PgRole::Primary => Ok(()),
            PgRole::Replica => within_lag(pg, max_lag),
            other => Err(format!("the PostgreSQL server is {other}, not readable")),
        },
        Check::Liveness => {
            let age = Duration::from_nanos(now_ns.saturating_sub(pg.observed_at_ns));
            let bound = liveness_bound(status);
            if age <= bound {
                Ok(())
            } else {
                Err(format!(
                    "the PostgreSQL server was last observed {:.1} s ago (at most {} s allowed)",
                    age.as_secs_f64(),
                    bound.as_secs()
                ))
            }
        }
        Check::Readiness => {
            if status.ready() && pg.writable() {
                return Ok(());
            }
            if pg.role == PgRole::Replica && pg.streaming_from.is_some() {
                return within_lag(pg, max_lag);
            }
            let why = primary(status, pg).err().unwrap_or_default();
            Err(format!("{why}; and the server is not a streaming replica"))
        }
    }
}

/// Patroni's tags on the replica checks: a replica tagged `noloadbalance` passes none
/// of them, and each `tag_<name>=<value>` in the query must match this member's
/// `[postgres.tags]` (src/postgres_rules/tags.rs; a tag it does not have never does).
/// A primary passing `/read-only` or `/read-only-quorum` is not a load-balanced replica.
fn as_tagged(check: Check, pg: &PgState, query: Option<&str>) -> Result<(), String> {
    let replica_check = matches!(
        check,
        Check::Replica | Check::ReadOnly | Check::Quorum | Check::Async | Check::ReadOnlyQuorum
    );
    if !replica_check || pg.role != PgRole::Replica {
        return Ok(());
    }
    if pg.tags.noloadbalance {
        return Err("tagged noloadbalance: load balancers leave this replica out".into());
    }
    let filters = http_query::with_prefix(query, "tag_");
    match pg
        .tags
        .matches(filters.iter().map(|(n, v)| (n.as_str(), v.as_str())))
    {
        true => Ok(()),
        false => Err(format!(
            "the tags asked for ({filters:?}) are not this member's"
        )),
    }
}

/// Why `/failsafe` is a 502, Patroni's answer when its `failsafe_mode` is off: that
/// mode keeps a primary whose DCS is down while it reaches every member; bully's
/// members are its DCS, and a coordinator keeps its lease while a majority answers.
const FAILSAFE: &str = "bully has no failsafe mode: the members themselves hold the election, \
                        and the coordinator keeps its lease while a majority of them answers\n";

/// The remote primary a standby cluster follows, from the settings this node holds
/// (`postgres.standby_cluster`); `None`: the cluster runs its own primary.
pub fn standby_cluster(status: &Status) -> Option<&str> {
    let settings = status.members.as_ref()?.settings.as_ref()?;
    settings.pg_standby_cluster.as_deref()
}

/// Patroni's `/standby-leader`: in a standby cluster, the ready coordinator whose
/// server runs as a replica (of the remote primary).
fn standby_leader(status: &Status, pg: &PgState) -> Result<(), String> {
    let Some(remote) = standby_cluster(status) else {
        return Err(
            "not a standby cluster (postgres.standby_cluster is unset): no standby leader".into(),
        );
    };
    if !status.ready() {
        return Err(coordinator(status).body.trim_end().to_string());
    }
    running_as(pg, PgRole::Replica).map_err(|e| format!("{e} (the remote primary: {remote})"))
}

/// Patroni's `/replica`: a running replica whose node is not the coordinator, within
/// `max_lag`.
fn replica(status: &Status, pg: &PgState, max_lag: Option<u64>) -> Result<(), String> {
    if status.role == Role::Coordinator {
        return Err(format!(
            "node {} is the coordinator, not a replica's node",
            status.id
        ));
    }
    running_as(pg, PgRole::Replica)?;
    within_lag(pg, max_lag)
}

/// Patroni's `/primary`: the ready coordinator with a writable server.
fn primary(status: &Status, pg: &PgState) -> Result<(), String> {
    if !status.ready() {
        return Err(coordinator(status).body.trim_end().to_string());
    }
    running_as(pg, PgRole::Primary)
}

fn running_as(pg: &PgState, wanted: PgRole) -> Result<(), String> {
    if pg.role == wanted {
        Ok(())
    } else {
        Err(format!(
            "the PostgreSQL server is {}, not a running {wanted}",
            pg.role
        ))
    }
}

/// A replica within `max_lag` bytes of its primary; an unknown lag never passes a bound.
fn within_lag(pg: &PgState, max_lag: Option<u64>) -> Result<(), String> {
    match (max_lag, pg.lag_bytes) {
        (None, _) => Ok(()),
        (Some(max), Some(lag)) if lag <= max => Ok(()),
        (Some(max), Some(lag)) => Err(format!(
            "replication lag {lag} bytes exceeds the maximum {max}"
        )),
        (Some(max), None) => Err(format!(
            "replication lag unknown, so not within the maximum {max}"
        )),
    }
}

/// `?lag=` in bytes, if given; a value that is not a byte size is a 400 naming it.
fn lag(query: Option<&str>) -> Result<Option<u64>, Reply> {
    match http_query::param(query, "lag") {
        None => Ok(None),
        Some(text) => bytes::parse(&text)
            .map(Some)
            .map_err(|e| Reply::text(400, format!("bad lag: {e}\n"))),
    }
}

fn without_server(check: Check, status: &Status) -> Reply {
    match check {
        Check::Primary => coordinator(status),
        Check::Liveness => Reply::text(200, format!("node {} is running\n", status.id)),
        _ => Reply::text(
            503,
            format!(
                "node {} keeps no PostgreSQL server ([postgres] is not configured)\n",
                status.id
            ),
        ),
    }
}

/// The server as Patroni's status body shows it (`state`, `role`, `timeline`, `xlog`,
/// `replication_state`), plus bully's `lag_bytes`, `streaming_from`, `listen` and
/// `note`; also the `postgres` part of `/health`.
pub fn server_json(pg: &PgState) -> Map<String, Value> {
    let state = if pg.readable() {
        "running"
    } else {
        pg.role.word()
    };
    let xlog = match pg.role {
        PgRole::Primary => json!({ "location": pg.wal_position }),
        PgRole::Replica => json!({
            "received_location": pg.wal_position,
            "replayed_location": pg.replayed,
        }),
        _ => json!({}),
    };
    let mut body = Map::new();
    body.insert("state".into(), state.into());
    body.insert("role".into(), pg.role.word().into());
    body.insert("timeline".into(), json!(pg.timeline));
    body.insert("xlog".into(), xlog);
    if pg.role == PgRole::Replica && pg.streaming_from.is_some() {
        body.insert("replication_state".into(), "streaming".into());
    }
    body.insert("lag_bytes".into(), json!(pg.lag_bytes));
    body.insert("streaming_from".into(), json!(pg.streaming_from));
    body.insert("listen".into(), pg.listen.to_string().into());
    body.insert("note".into(), pg.note.as_str().into());
    // Patroni's flag, and the names bully knows (`bully pg restart N` applies them).
    body.insert(
        "pending_restart".into(),
        (!pg.pending_restart.is_empty()).into(),
    );
    body.insert("pending_restart_params".into(), json!(pg.pending_restart));
    body
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Epoch;

    const NOW: u64 = 1_000_000_000_000;

    fn pg(role: PgRole) -> PgState {
        PgState {
            branch: Some(1),
            timeline: Some(2),
            wal_position: Some(0x3000148),
            ..PgState::bare("127.0.0.1:5432".parse().unwrap(), role, String::new(), NOW)
        }
    }

    /// Node 3: the ready coordinator of epoch 4@3 with `role`'s server.
    fn leader(role: PgRole) -> Status {
        let mut status = Status::starting_candidate(3, &[1, 2]);
        let epoch = Some(Epoch { term: 4, leader: 3 });
        status.set_office(Role::Coordinator, epoch);
        status.ready_epoch = epoch;
        status.postgres = Some(pg(role));
        status
    }

    /// Node 1 following node 3, with a replica streaming from 3 that is `lag` behind.
    fn follower(lag: Option<u64>) -> Status {
        let mut status = leader(PgRole::Replica);
        status.id = 1;
        status.set_office(Role::Follower, status.epoch);
        status.ready_epoch = None;
        let server = status.postgres.as_mut().unwrap();
        server.lag_bytes = lag;
        server.streaming_from = Some(3);
        status
    }

    fn code(path: &str, query: Option<&str>, status: &Status) -> u16 {
        route(path, query, status, NOW)
            .expect("a Patroni path")
            .code
    }

    #[test]
    fn primary_and_aliases_need_the_ready_coordinator_and_a_writable_server() {
        let paths = ["/primary", "/read-write", "/master", "/leader", "/"];
        let mut status = leader(PgRole::Primary);
        for path in paths {
            assert_eq!(code(path, None, &status), 200, "{path}");
        }
        status.ready_epoch = None;
        assert_eq!(code("/primary", None, &status), 503, "on_elected not done");
        for role in [PgRole::Replica, PgRole::Stopped, PgRole::Unreachable] {
            assert_eq!(code("/primary", None, &leader(role)), 503, "{role}");
        }
        let mut stale = follower(Some(0));
        stale.postgres.as_mut().unwrap().role = PgRole::Primary;
        let reply = route("/read-write", None, &stale, NOW).unwrap();
        assert_eq!(reply.code, 503, "a writable server on a follower");
        let body: Value = serde_json::from_str(&reply.body).unwrap();
        assert!(
            body["reason"]
                .as_str()
                .unwrap()
                .contains("the coordinator is node 3"),
            "{body}"
        );
        assert_eq!(
            (body["state"].as_str(), body["role"].as_str()),
            (Some("running"), Some("primary"))
        );
    }

    #[test]
    fn a_server_of_another_cluster_passes_no_route_but_liveness() {
        let mut status = follower(Some(0));
        status.postgres.as_mut().unwrap().other_cluster = true;
        for path in ["/replica", "/read-only", "/readiness", "/primary"] {
            assert_eq!(code(path, None, &status), 503, "{path}");
        }
        assert_eq!(code("/liveness", None, &status), 200);
        status.postgres.as_mut().unwrap().other_cluster = false;
        assert_eq!(code("/replica", None, &status), 200);
    }

    #[test]
    fn a_noloadbalance_replica_and_unmatched_tag_filters_fail_the_replica_checks() {
        let mut status = follower(Some(0));
        fn tagged(s: &mut Status) -> &mut crate::postgres_rules::Tags {
            &mut s.postgres.as_mut().unwrap().tags
        }
        tagged(&mut status).nosync = true;
        assert_eq!(code("/replica", Some("tag_nosync=true"), &status), 200);
        assert_eq!(
            code("/replica", Some("lag=1kB&tag_nosync=true"), &status),
            200
        );
        assert_eq!(code("/replica", Some("tag_nosync=false"), &status), 503);
        assert_eq!(
            code("/async", Some("tag_zone=a"), &status),
            503,
            "no such tag"
        );
        assert_eq!(code("/read-only", Some("tag_nosync=false"), &status), 503);
        tagged(&mut status).noloadbalance = true;
        for path in ["/replica", "/read-only", "/async"] {
            assert_eq!(code(path, None, &status), 503, "{path}");
        }
        let reply = route("/replica", None, &status, NOW).unwrap();
        assert!(reply.body.contains("noloadbalance"), "{}", reply.body);
        let patroni = route("/patroni", None, &status, NOW).unwrap();
        let body: Value = serde_json::from_str(&patroni.body).unwrap();
        assert_eq!(body["tags"]["noloadbalance"], true, "{body}");
        assert_eq!(body["tags"]["failover_priority"], 1, "{body}");
        let untagged = route("/patroni", None, &follower(Some(0)), NOW).unwrap();
        assert!(!untagged.body.contains("\"tags\""), "{}", untagged.body);
        assert_eq!(
            code("/readiness", None, &status),
            200,
            "not a balancer's route"
        );
        let mut primary = leader(PgRole::Primary);
        primary.postgres.as_mut().unwrap().tags.noloadbalance = true;
        assert_eq!(
            code("/read-only", Some("tag_zone=a"), &primary),
            200,
            "a primary"
        );
    }

    #[test]
    fn replica_needs_a_running_replica_off_the_coordinator_within_lag() {
        let status = follower(Some(1000));
        assert_eq!(code("/replica", None, &status), 200);
        assert_eq!(code("/replica", Some("lag=1000"), &status), 200);
        assert_eq!(code("/replica", Some("lag=999"), &status), 503);
        assert_eq!(code("/replica", Some("lag=1kB"), &status), 200);
        assert_eq!(
            code("/replica", Some("lag=16MB"), &follower(Some(16 << 20))),
            200
        );
        assert_eq!(
            code(
                "/replica",
                Some("lag=16MB"),
                &follower(Some((16 << 20) + 1))
            ),
            503
        );
        assert_eq!(
            code("/replica", None, &follower(None)),
            200,
            "no bound asked"
        );
        assert_eq!(
            code("/replica", Some("lag=1GB"), &follower(None)),
            503,
            "lag unknown"
        );
        assert_eq!(
            code("/replica", None, &leader(PgRole::Replica)),
            503,
            "on the coordinator"
        );
        for role in [
            PgRole::Primary,
            PgRole::Stopped,
            PgRole::Absent,
            PgRole::Unreachable,
        ] {
            let mut status = follower(Some(0));
            status.postgres.as_mut().unwrap().role = role;
            assert_eq!(code("/replica", None, &status), 503, "{role}");
        }
    }

    #[test]
    fn a_bad_lag_is_a_400_naming_it_even_without_a_server() {
        let mut without = follower(Some(0));
        without.postgres = None;
        for status in [follower(Some(0)), without] {
            for path in ["/replica", "/read-only", "/readiness"] {
                let reply = route(path, Some("lag=16mb"), &status, NOW).unwrap();
                assert_eq!(reply.code, 400, "{path}");
                assert!(reply.body.contains("`16mb`"), "{}", reply.body);
            }
        }
        let reply = route("/primary", Some("lag=bogus"), &leader(PgRole::Primary), NOW);
        assert_eq!(
            reply.unwrap().code,
            200,
            "/primary ignores lag, as Patroni's does"
        );
    }

    #[test]
    fn read_only_takes_a_primary_or_a_replica_within_lag() {
        assert_eq!(code("/read-only", None, &leader(PgRole::Primary)), 200);
        assert_eq!(
            code("/read-only", Some("lag=0"), &leader(PgRole::Primary)),
            200
        );
        assert_eq!(code("/read-only", None, &follower(Some(10))), 200);
        assert_eq!(code("/read-only", Some("lag=9"), &follower(Some(10))), 503);
        for role in [PgRole::Stopped, PgRole::Absent, PgRole::Unreachable] {
            assert_eq!(code("/read-only", None, &leader(role)), 503, "{role}");
        }
    }

    #[test]
    fn liveness_needs_a_recent_observation() {
        let status = follower(Some(0));
        let bound = liveness_bound(&status);
        assert_eq!(bound, LIVENESS_FLOOR, "default timing: leases are short");
        let at = |now: u64| route("/liveness", None, &status, now).unwrap().code;
        assert_eq!(at(NOW), 200);
        assert_eq!(at(NOW - 1), 200, "observed after the reader's now");
        assert_eq!(at(NOW + bound.as_nanos() as u64), 200);
        assert_eq!(at(NOW + bound.as_nanos() as u64 + 1), 503);
        let mut slow = status.clone();
        slow.timing.suspect_after_ms = 5_000;
        assert!(
            liveness_bound(&slow) > LIVENESS_FLOOR,
            "long leases widen it"
        );
        let mut without = status;
        without.postgres = None;
        assert_eq!(
            route("/liveness", None, &without, u64::MAX).unwrap().code,
            200
        );
    }

    #[test]
    fn readiness_takes_the_writable_coordinator_or_a_streaming_replica() {
        assert_eq!(code("/readiness", None, &leader(PgRole::Primary)), 200);
        assert_eq!(code("/readiness", None, &leader(PgRole::Stopped)), 503);
        assert_eq!(code("/readiness", None, &follower(Some(5))), 200);
        assert_eq!(code("/readiness", Some("lag=4"), &follower(Some(5))), 503);
        let mut not_streaming = follower(Some(0));
        not_streaming.postgres.as_mut().unwrap().streaming_from = None;
        assert_eq!(code("/readiness", None, &not_streaming), 503);
        let mut unready = leader(PgRole::Primary);
        unready.ready_epoch = None;
        assert_eq!(code("/readiness", None, &unready), 503);
    }

    #[test]
    fn without_postgres_primary_answers_as_coordinator_and_the_rest_503() {
        let mut status = leader(PgRole::Primary);
        status.postgres = None;
        for path in ["/primary", "/read-write", "/master", "/leader"] {
            assert_eq!(route(path, None, &status, NOW), Some(coordinator(&status)));
        }
        status.ready_epoch = None;
        assert_eq!(code("/primary", None, &status), 503);
        for path in ["/replica", "/read-only", "/readiness"] {
            let reply = route(path, None, &status, NOW).unwrap();
            assert_eq!(reply.code, 503, "{path}");
            assert!(
                reply.body.contains("keeps no PostgreSQL server"),
                "{}",
                reply.body
            );
        }
        assert_eq!(
            route("/coordinator", None, &status, NOW),
            None,
            "not Patroni's"
        );
    }

    #[test]
    fn quorum_and_async_split_the_replicas_by_the_primarys_names() {
        let mut named = follower(Some(0));
        named.postgres.as_mut().unwrap().quorum_standby = true;
        let unnamed = follower(Some(0));
        for path in [
            "/quorum",
            "/sync",
            "/synchronous",
            "/read-only-quorum",
            "/read-only-sync",
        ] {
            assert_eq!(code(path, None, &named), 200, "{path}");
            assert_eq!(code(path, None, &unnamed), 503, "{path}");
        }
        for path in ["/async", "/asynchronous"] {
            assert_eq!(code(path, None, &named), 503, "{path}");
            assert_eq!(code(path, None, &unnamed), 200, "{path}");
        }
        let far = {
            let mut far = follower(Some(64 << 20));
            far.postgres.as_mut().unwrap().quorum_standby = true;
            far
        };
        assert_eq!(code("/quorum", Some("lag=16MB"), &far), 503);
        assert_eq!(code("/async", Some("lag=16MB"), &unnamed), 200);
        let primary = leader(PgRole::Primary);
        assert_eq!(code("/read-only-quorum", None, &primary), 200);
        assert_eq!(code("/quorum", None, &primary), 503);
        assert_eq!(code("/async", None, &primary), 503);
        let mut standby_leader = leader(PgRole::Replica);
        assert_eq!(code("/standby-leader", None, &standby_leader), 503);
        let settings = crate::protocol::ClusterSettings::new(
            crate::protocol::Timing::default(),
            crate::protocol::Preempt::Never,
        )
        .with("postgres.standby_cluster", "dr:5432")
        .unwrap();
        let list = crate::protocol::Membership::seeded(vec![]).with_settings(settings);
        standby_leader.members = Some(list.clone());
        assert_eq!(code("/standby-leader", None, &standby_leader), 200);
        assert_eq!(code("/primary", None, &standby_leader), 503);
        let mut in_standby_cluster = named.clone();
        in_standby_cluster.members = Some(list);
        assert_eq!(code("/standby-leader", None, &in_standby_cluster), 503);
        for status in [&primary, &named, &unnamed] {
            assert_eq!(code("/standby-leader", None, status), 503);
            assert_eq!(
                code("/failsafe", None, status),
                502,
                "Patroni's: not enabled"
            );
        }
    }

    #[test]
    fn config_gives_the_cluster_settings_in_patronis_shape() {
        use crate::protocol::{ClusterSettings, Membership, Preempt, Timing};
        let mut status = follower(Some(0));
        status.members = None;
        assert_eq!(route("/config", None, &status, NOW).unwrap().code, 502);
        let mut settings = ClusterSettings::new(Timing::default(), Preempt::Always)
            .with_pg_parameters([("work_mem".to_string(), "64MB".to_string())].into());
        settings.pg_synchronous = Some(Synchronous::Strict);
        status.members = Some(Membership::seeded(Vec::new()).with_settings(settings));
        let reply = route("/config", None, &status, NOW).unwrap();
        assert_eq!(reply.code, 200);
        let body: Value = serde_json::from_str(&reply.body).unwrap();
        assert_eq!(
            body["ttl"], 0.3,
            "D of the default timing, in seconds: {body}"
        );
        assert_eq!(body["synchronous_mode"], "quorum");
        assert_eq!(body["synchronous_mode_strict"], true);
        assert_eq!(body["postgresql"]["parameters"]["work_mem"], "64MB");
        assert_eq!(body["bully"]["postgres.synchronous"], "strict");
    }

    #[test]
    fn patroni_answers_with_patronis_flags() {
        let mut named = follower(Some(0));
        named.postgres.as_mut().unwrap().quorum_standby = true;
        let reply = route("/patroni", None, &named, NOW).unwrap();
        assert_eq!(reply.code, 200);
        let body: Value = serde_json::from_str(&reply.body).unwrap();
        assert_eq!(body["role"], "replica");
        assert_eq!(body["quorum_standby"], true);
        assert_eq!(body["pause"], false);
        assert_eq!(body["cluster_unlocked"], false);
        assert_eq!(body["patroni"]["name"], "1");
        let mut lost = Status::starting_candidate(2, &[1, 3]);
        lost.postgres = None;
        let body: Value =
            serde_json::from_str(&route("/patroni", None, &lost, NOW).unwrap().body).unwrap();
        assert_eq!(body["cluster_unlocked"], true);
        assert!(body.get("role").is_none(), "{body}");
    }

    #[test]
    fn the_body_reads_like_patronis() {
        let reply = route("/replica", None, &follower(Some(7)), NOW).unwrap();
        assert_eq!(reply.content_type, "application/json");
        let body: Value = serde_json::from_str(&reply.body).unwrap();
        assert_eq!(body["state"], "running");
        assert_eq!(body["role"], "replica");
        assert_eq!(body["replication_state"], "streaming");
        assert_eq!(body["timeline"], 2);
        assert_eq!(body["xlog"]["received_location"], 0x3000148);
        assert_eq!(body["lag_bytes"], 7);
        assert_eq!(body["bully"]["node"], 1);
        assert!(body.get("reason").is_none(), "{body}");
        let stopped = route("/read-only", None, &leader(PgRole::Stopped), NOW).unwrap();
        let body: Value = serde_json::from_str(&stopped.body).unwrap();
        assert_eq!(body["state"], "stopped");
        assert!(
            body["reason"].as_str().unwrap().contains("stopped"),
            "{body}"
        );
    }

    #[test]
    fn pending_restart_shows_as_patronis_flag_with_the_names() {
        let mut status = leader(PgRole::Primary);
        let body = server_json(status.postgres.as_ref().unwrap());
        assert_eq!(body["pending_restart"], false);
        status.postgres.as_mut().unwrap().pending_restart = vec!["shared_buffers".into()];
        let reply = answer(Check::Primary, None, &status, NOW);
        let body: Value = serde_json::from_str(&reply.body).unwrap();
        assert_eq!(body["pending_restart"], true, "{body}");
        assert_eq!(body["pending_restart_params"], json!(["shared_buffers"]));
    }
}
