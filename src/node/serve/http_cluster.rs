//! Patroni's `/cluster` on any member: every member that keeps a PostgreSQL server, as
//! it answers now, in the shape Patroni's `cluster_as_json` gives (what dashboards,
//! exporters and operators read): `members` sorted by name, each with `name`, `role`
//! (`leader`, `quorum_standby` or `replica`), `state`, `api_url`, `host`, `port`,
//! `timeline`, the LSNs and their lag behind the leader's; `pause`,
//! `scheduled_switchover` and `scope` at the top.
//!
//! Patroni reads its members from its DCS; bully asks each member over its API
//! ([`gather`], every member at once, each within [`ASK_WITHIN`]). A member that does
//! not answer is listed with `state: "unknown"` and why under `bully.error` (Patroni
//! lists a member until its key expires); a witness, which keeps no server, is not
//! listed. Without `[postgres]` each member is listed by its office alone (`leader` or
//! `replica`, `state: running`), with no server fields. The shape is decided apart from the asking ([`cluster_json`]), so it is tested
//! without a socket.

use super::api::ApiRequests;
use crate::api::postgres::{lsn_text, PgRole};
use crate::api::Status;
use crate::protocol::{NodeId, Role, Seat};
use crate::transport::PeerAddr;
use serde_json::{json, Map, Value};
use std::net::SocketAddr;
use std::time::{Duration, UNIX_EPOCH};

/// How long one member may take to connect and to answer.
pub const ASK_WITHIN: Duration = Duration::from_millis(500);

/// One member's answer: its status, or why there is none.
pub type Answer = (NodeId, Result<Status, String>);

/// The members this node's list names (its own configured peers before it holds a
/// list), witnesses left out.
fn data_members(own: &Status) -> Vec<NodeId> {
    match &own.members {
        Some(list) => list
            .members
            .iter()
            .filter(|m| m.seat != Seat::Witness)
            .map(|m| m.id)
            .collect(),
        None => std::iter::once(own.id)
            .chain(own.peers.iter().map(|p| p.id))
            .collect(),
    }
}

/// Every data member's status: this node's own as of now, the others asked at once.
pub async fn gather(api: &ApiRequests) -> (Status, Vec<Answer>) {
    let own = api.status_now();
    let asks = data_members(&own).into_iter().map(|id| {
        let own = &own;
        async move {
            if id == own.id {
                return (id, Ok(own.clone()));
            }
            (id, api.member_status(own, id, ASK_WITHIN).await)
        }
    });
    let answers = futures::future::join_all(asks).await;
    (own, answers)
}

/// Patroni's `/cluster` body from the asking node's status and every member's answer.
pub fn cluster_json(own: &Status, answers: &[Answer]) -> Value {
    let leader = answers.iter().find_map(|(id, answer)| {
        let status = answer.as_ref().ok()?;
        (status.role == Role::Coordinator).then_some((*id, status))
    });
    let leader_lsn = leader
        .and_then(|(_, s)| s.postgres.as_ref())
        .filter(|pg| pg.role == PgRole::Primary)
        .and_then(|pg| pg.wal_position);
    let leader_id = leader.map(|(id, _)| id).or(own.coordinator());
    let mut members: Vec<Value> = answers
        .iter()
        .map(|(id, answer)| match answer {
            Ok(status) => member_json(own, *id, status, leader_lsn),
            Err(why) => unanswered(own, *id, why, leader_id),
        })
        .collect();
    members.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    let mut body = json!({ "members": members, "scope": super::http_patroni::SCOPE });
    if own.pause.paused {
        body["pause"] = true.into();
    }
    let scheduled = own
        .scheduled_switchover
        .or_else(|| leader.and_then(|(_, s)| s.scheduled_switchover));
    if let Some(plan) = scheduled {
        let at = UNIX_EPOCH + Duration::from_millis(plan.at_ms);
        let mut switchover = json!({
            "at": humantime::format_rfc3339_millis(at).to_string(),
            "to": plan.to.to_string(),
        });
        if let Some(from) = leader_id {
            switchover["from"] = from.to_string().into();
        }
        body["scheduled_switchover"] = switchover;
    }
    body
}

/// One member that answered, with its server.
fn member_json(own: &Status, id: NodeId, status: &Status, leader_lsn: Option<u64>) -> Value {
    let is_leader = status.role == Role::Coordinator;
    let mut member = Map::new();
    member.insert("name".into(), id.to_string().into());
    if let Some(http) = status.http {
        let scheme = if http.tls { "https" } else { "http" };
        // A wildcard listener with no member list to name the host: no URL to give.
        if let Some(authority) = reachable(own, id, http.listen) {
            member.insert(
                "api_url".into(),
                format!("{scheme}://{authority}/patroni").into(),
            );
        }
    }
    member.insert("bully".into(), json!({ "node_role": status.role }));
    let Some(pg) = &status.postgres else {
        member.insert(
            "role".into(),
            if is_leader { "leader" } else { "replica" }.into(),
        );
        member.insert("state".into(), "running".into());
        return Value::Object(member);
    };
    // Patroni's word for the coordinator of a standby cluster.
    let standby_leader = super::http_patroni::standby_cluster(own).is_some();
    let role = if is_leader && standby_leader && pg.role == PgRole::Replica {
        "standby_leader"
    } else if is_leader {
        "leader"
    } else if pg.quorum_standby {
        "quorum_standby"
    } else {
        "replica"
    };
    let state = match pg.role {
        PgRole::Replica if pg.streaming_from.is_some() && !is_leader => "streaming",
        _ if pg.readable() => "running",
        other => other.word(),
    };
    member.insert("role".into(), role.into());
    member.insert("state".into(), state.into());
    let host = reachable(own, id, pg.listen).map(|a| a.host().to_string());
    member.insert(
        "host".into(),
        host.unwrap_or_else(|| pg.listen.ip().to_string()).into(),
    );
    member.insert("port".into(), pg.listen.port().into());
    if let Some(timeline) = pg.timeline {
        member.insert("timeline".into(), timeline.into());
    }
    if !pg.pending_restart.is_empty() {
        member.insert("pending_restart".into(), true.into());
    }
    if pg.tags != Default::default() {
        member.insert("tags".into(), json!(pg.tags));
    }
    if !is_leader {
        let received = pg.wal_position;
        let replayed = pg.replayed;
        let lsn = received.max(replayed);
        for (key, at) in [("receive_", received), ("replay_", replayed), ("", lsn)] {
            let (lsn, lag) = lsn_and_lag(at, leader_lsn);
            member.insert(format!("{key}lsn"), lsn);
            member.insert(format!("{key}lag"), lag);
        }
    }
    Value::Object(member)
}

/// Patroni's pair for one LSN: the position as PostgreSQL writes it and its lag behind
/// the leader's, 0 when ahead; both `"unknown"` when the position is.
fn lsn_and_lag(at: Option<u64>, leader: Option<u64>) -> (Value, Value) {
    match (at, leader) {
        (None, _) => ("unknown".into(), "unknown".into()),
        (Some(at), Some(leader)) => (lsn_text(at).into(), leader.saturating_sub(at).into()),
        (Some(at), None) => (lsn_text(at).into(), "unknown".into()),
    }
}

/// A member that did not answer: what the asking node knows of it.
fn unanswered(own: &Status, id: NodeId, why: &str, leader: Option<NodeId>) -> Value {
    let role = if Some(id) == leader {
        "leader"
    } else {
        "replica"
    };
    json!({
        "name": id.to_string(),
        "role": role,
        "state": "unknown",
        "bully": { "error": why, "asked_by": own.id },
    })
}

/// Where others reach `addr` of member `id`: as it is, unless it listens on every
/// address, then at the host of the member's address in the list (`None` without one).
fn reachable(own: &Status, id: NodeId, addr: SocketAddr) -> Option<PeerAddr> {
    if !addr.ip().is_unspecified() {
        return addr.to_string().parse().ok();
    }
    let listed: PeerAddr = own.members.as_ref()?.get(id)?.addr.parse().ok()?;
    match listed.ip() {
        Some(ip) => SocketAddr::new(ip.ip(), addr.port())
            .to_string()
            .parse()
            .ok(),
        None => format!("{}:{}", listed.host(), addr.port()).parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::postgres::PgState;
    use crate::api::HttpEndpoint;
    use crate::api::ScheduledSwitchover;
    use crate::protocol::Epoch;

    fn server(role: PgRole, port: u16, at: u64) -> PgState {
        PgState {
            timeline: Some(3),
            wal_position: Some(at),
            replayed: (role == PgRole::Replica).then_some(at - 8),
            streaming_from: (role == PgRole::Replica).then_some(3),
            quorum_standby: port == 5431,
            ..PgState::bare(
                format!("127.0.0.1:{port}").parse().unwrap(),
                role,
                String::new(),
                0,
            )
        }
    }

    /// Node `id` of a three-member cluster led by node 3 (epoch 4@3).
    fn member(id: NodeId, pg: PgState) -> Status {
        let epoch = Some(Epoch { term: 4, leader: 3 });
        let role = if id == 3 {
            Role::Coordinator
        } else {
            Role::Follower
        };
        let peers: Vec<NodeId> = [1, 2, 3].into_iter().filter(|&p| p != id).collect();
        let mut status = Status::starting_candidate(id, &peers);
        status.set_office(role, epoch);
        status.postgres = Some(pg);
        status.http = Some(HttpEndpoint {
            listen: format!("0.0.0.0:800{id}").parse().unwrap(),
            tls: id == 2,
        });
        status
    }

    fn members(body: &Value) -> &Vec<Value> {
        body["members"].as_array().unwrap()
    }

    #[test]
    fn every_member_in_patronis_shape() {
        let leader = member(3, server(PgRole::Primary, 5433, 0x3000100));
        let one = member(1, server(PgRole::Replica, 5431, 0x3000100));
        let two = member(2, server(PgRole::Replica, 5432, 0x3000000));
        let answers = vec![(3, Ok(leader)), (1, Ok(one.clone())), (2, Ok(two))];
        let body = cluster_json(&one, &answers);
        assert_eq!(body["scope"], "bully");
        assert_eq!(body.get("pause"), None, "only when paused, as Patroni");
        let names: Vec<&str> = members(&body)
            .iter()
            .map(|m| m["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["1", "2", "3"], "sorted by name");
        let [one, two, three] = &members(&body)[..] else {
            panic!("{body}")
        };
        assert_eq!(three["role"], "leader");
        assert_eq!(three["state"], "running");
        assert_eq!(three.get("lsn"), None, "the leader has no lag");
        assert_eq!(three["host"], "127.0.0.1");
        assert_eq!(three["port"], 5433);
        assert_eq!(three["timeline"], 3);
        assert_eq!(one["role"], "quorum_standby");
        assert_eq!(one["state"], "streaming");
        assert_eq!(one["lsn"], "0/3000100");
        assert_eq!(one["lag"], 0);
        assert_eq!(one["replay_lsn"], "0/30000F8");
        assert_eq!(one["replay_lag"], 8);
        assert_eq!(two["role"], "replica");
        assert_eq!(two["receive_lag"], 0x100);
        assert_eq!(
            two.get("api_url"),
            None,
            "a wildcard and no list: no host to give"
        );
    }

    #[test]
    fn a_silent_member_is_listed_as_unknown_and_a_witness_not_at_all() {
        use crate::protocol::{Member, Membership};
        let mut one = member(1, server(PgRole::Replica, 5431, 0x100));
        let seat = |id, seat| Member {
            id,
            seat,
            learner: false,
            addr: format!("db{id}:7000"),
        };
        one.members = Some(Membership::seeded(vec![
            seat(1, Seat::Voter),
            seat(3, Seat::Voter),
            seat(4, Seat::Witness),
        ]));
        assert_eq!(data_members(&one), [1, 3], "the witness is not asked");
        let answers = vec![
            (1, Ok(one.clone())),
            (3, Err("node 3 did not answer".to_string())),
        ];
        let body = cluster_json(&one, &answers);
        assert_eq!(members(&body).len(), 2, "{body}");
        assert_eq!(
            members(&body)[0]["api_url"],
            "http://db1:8001/patroni",
            "the list's host"
        );
        let silent = &members(&body)[1];
        assert_eq!(
            (
                silent["name"].as_str(),
                silent["role"].as_str(),
                silent["state"].as_str()
            ),
            (Some("3"), Some("leader"), Some("unknown")),
            "the coordinator node 1 follows"
        );
        assert_eq!(
            members(&body)[0]["lag"],
            "unknown",
            "no leader position known"
        );
    }

    #[test]
    fn pause_and_a_scheduled_switchover_show_at_the_top() {
        let mut leader = member(3, server(PgRole::Primary, 5433, 0x100));
        leader.pause.paused = true;
        leader.scheduled_switchover = Some(ScheduledSwitchover {
            to: 1,
            at_ms: 1_800_000_000_000,
            for_ms: 1000,
        });
        let body = cluster_json(&leader, &[(3, Ok(leader.clone()))]);
        assert_eq!(body["pause"], true);
        assert_eq!(
            body["scheduled_switchover"],
            json!({ "at": "2027-01-15T08:00:00.000Z", "from": "3", "to": "1" })
        );
    }

    #[test]
    fn without_postgres_members_are_listed_by_office() {
        let mut leader = member(3, server(PgRole::Primary, 5433, 0x100));
        leader.postgres = None;
        let body = cluster_json(&leader, &[(3, Ok(leader.clone()))]);
        let only = &members(&body)[0];
        assert_eq!(
            (only["role"].as_str(), only["state"].as_str()),
            (Some("leader"), Some("running"))
        );
        assert_eq!(only.get("host"), None, "{only}");
    }

    #[test]
    fn hosts_of_members_listening_everywhere_come_from_the_list() {
        use crate::protocol::{Member, Membership};
        let mut own = member(1, server(PgRole::Replica, 5431, 0x100));
        let listed = |id, addr: &str| Member {
            id,
            seat: Seat::Voter,
            learner: false,
            addr: addr.into(),
        };
        own.members = Some(Membership::seeded(vec![
            listed(1, "db1.example:7000"),
            listed(2, "[::1]:7000"),
        ]));
        let everywhere: SocketAddr = "0.0.0.0:8008".parse().unwrap();
        let shown = |id| reachable(&own, id, everywhere).map(|a| a.to_string());
        assert_eq!(shown(1).as_deref(), Some("db1.example:8008"));
        assert_eq!(shown(2).as_deref(), Some("[::1]:8008"));
        assert_eq!(shown(3), None, "not listed");
        let fixed: SocketAddr = "10.0.0.1:8008".parse().unwrap();
        assert_eq!(
            reachable(&own, 3, fixed).map(|a| a.to_string()).as_deref(),
            Some("10.0.0.1:8008")
        );
    }
}
