//! Patroni's consumers against bully (issue 50), on real processes: the cluster of
//! `tests/common/postgres_bully.rs` (three nodes each keeping a PostgreSQL 15 server,
//! keepers, HAProxy).
//!
//! - Patroni's documented HAProxy section (examples/postgres-primary/patroni-haproxy/
//!   haproxy.cfg: `option httpchk`, OPTIONS /, Patroni's timings) sends every client to
//!   the primary: each of several sessions through it is on a server out of recovery,
//!   carrying the coordinator's office.
//! - `/config` on every member: the cluster settings in Patroni's shape (`ttl`,
//!   `synchronous_mode: quorum`, `postgresql.parameters`).
//! - `/patroni` read the way Patroni's tools read it: on every member 200 with the
//!   server's `role` and `state`, `patroni.name` the node, `cluster_unlocked` false, the
//!   primary's `xlog.location` and each replica's `replication_state: streaming` and
//!   `quorum_standby` (every standby is named under the default `quorum`).
//! - `/cluster` read by a consumer written to Patroni's shape ([`Cluster`]): on every
//!   member, the leader's `host:port` is the server out of recovery, each replica is
//!   `streaming` on the leader's timeline with a numeric lag, and each `api_url`
//!   answers `/patroni` with that member's role.
//! - After the primary's host is killed: the new primary's `/history` lists the
//!   switch from timeline 1 with the node that promoted, and `/cluster` names the
//!   new leader and the silent member as `unknown`.
//!
//! Skips, saying why, without PostgreSQL 15 (or, as root, without a `postgres` user) or
//! HAProxy.

mod common;
#[path = "common/postgres_bully.rs"]
mod postgres_bully;
#[path = "common/postgres_cluster.rs"]
mod postgres_cluster;
#[path = "common/primary.rs"]
mod primary;
#[path = "common/redis_servers.rs"]
mod redis_servers;
#[path = "common/resp.rs"]
mod resp;
#[path = "common/tcp_cut.rs"]
mod tcp_cut;

use bully::protocol::NodeId;
use postgres_bully::{BullyPg, AGREE, IDS, PATRONI_SESSIONS};
use postgres_cluster::role;
use primary::{http_get, phase};
use serde::Deserialize;
use std::net::SocketAddr;

/// Patroni's `/cluster` as its consumers read it: the fields and types they rely on
/// (a lag is bytes or `"unknown"`), strictly typed so a shape that differs fails here.
#[derive(Debug, Deserialize)]
struct Cluster {
    members: Vec<ClusterMember>,
    scope: String,
}

#[derive(Debug, Deserialize)]
struct ClusterMember {
    name: String,
    role: String,
    state: String,
    api_url: Option<String>,
    host: Option<String>,
    port: Option<u16>,
    timeline: Option<u32>,
    lag: Option<Lag>,
}

#[derive(Debug, PartialEq, Deserialize)]
#[serde(untagged)]
enum Lag {
    Bytes(u64),
    Unknown(String),
}

/// `/cluster` of the member whose HTTP endpoint is `http`, parsed as a consumer would.
async fn cluster(http: SocketAddr) -> Option<Cluster> {
    let (code, body) = http_get(http, "/cluster").await.ok()?;
    assert_eq!(code, 200, "{body}");
    Some(serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}")))
}

/// What a consumer does with `/cluster`: the leader, and the address its server takes
/// writes at.
fn leader_of(cluster: &Cluster) -> Option<(&ClusterMember, SocketAddr)> {
    let leader = cluster
        .members
        .iter()
        .find(|m| m.role == "leader" && m.state == "running")?;
    let addr = format!("{}:{}", leader.host.as_ref()?, leader.port?);
    Some((leader, addr.parse().ok()?))
}

/// The timeline node `id`'s `/patroni` gives.
async fn after_timeline(c: &BullyPg, id: NodeId) -> u64 {
    let (_, body) = http_get(c.http[&id], "/patroni").await.expect("/patroni");
    let json: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    json["timeline"].as_u64().expect("a timeline")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patronis_haproxy_section_and_status_route_work_unchanged() {
    if postgres_bully::skipped("Patroni's HAProxy section and /patroni") {
        return;
    }
    let c = BullyPg::start().await;
    let leader = c.wait_primary(&IDS).await;

    phase("Patroni's documented HAProxy section: OPTIONS /, inter 3s fall 3 rise 2");
    // The section as the bench times it (`bully-patroni-haproxy`): started, and waited
    // on until every session through it reaches the primary.
    let (haproxy, office) = c.patroni_haproxy().await;
    let front = haproxy.front;
    for session in 0..PATRONI_SESSIONS {
        let r = role(front)
            .await
            .expect("a session through Patroni's section");
        assert!(
            !r.standby && !r.read_only && r.epoch == office,
            "session {session} reached {r:?}, not the primary of office {office}"
        );
    }
    eprintln!(
        "=== {PATRONI_SESSIONS} sessions through Patroni's section: the primary (office {office})"
    );

    phase("/config on any member: the cluster settings in Patroni's shape");
    for id in IDS {
        let (code, body) = http_get(c.http[&id], "/config").await.expect("/config");
        assert_eq!(code, 200, "node {id}: {body}");
        let json: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(json["synchronous_mode"], "quorum", "node {id}: {json}");
        assert!(json["ttl"].as_f64().is_some_and(|d| d > 0.0), "{json}");
        assert!(json["postgresql"]["parameters"].is_object(), "{json}");
    }

    phase("/patroni on every member, read as Patroni's tools read it");
    for id in IDS {
        let (code, body) = http_get(c.http[&id], "/patroni").await.expect("/patroni");
        assert_eq!(code, 200, "node {id}: {body}");
        let json: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(json["patroni"]["name"], id.to_string(), "{json}");
        assert_eq!(json["state"], "running", "node {id}: {json}");
        assert_eq!(json["cluster_unlocked"], false, "node {id}: {json}");
        if id == leader {
            assert_eq!(json["role"], "primary", "{json}");
            assert!(json["xlog"]["location"].as_u64().is_some(), "{json}");
        } else {
            assert_eq!(json["role"], "replica", "node {id}: {json}");
            assert_eq!(json["replication_state"], "streaming", "node {id}: {json}");
            // Named once the standby's manager has read the primary's names.
            let what = format!("node {id}'s /patroni naming it a quorum standby");
            primary::wait_logged(&c.t, &what, AGREE, || async {
                let (_, body) = http_get(c.http[&id], "/patroni").await.ok()?;
                let json: serde_json::Value = serde_json::from_str(&body).ok()?;
                (json["quorum_standby"] == true).then_some(())
            })
            .await;
        }
    }

    phase("/cluster on every member, read by a consumer of Patroni's shape");
    for id in IDS {
        let what = format!("node {id}'s /cluster with a leader and two streaming replicas");
        let cluster = primary::wait_logged(&c.t, &what, AGREE, || async {
            let cluster = cluster(c.http[&id]).await?;
            let streaming = cluster.members.iter().filter(|m| m.state == "streaming");
            (streaming.count() == 2 && leader_of(&cluster).is_some()).then_some(cluster)
        })
        .await;
        assert_eq!(cluster.scope, "bully");
        let (top, addr) = leader_of(&cluster).unwrap();
        assert_eq!(top.name, leader.to_string(), "node {id}: {cluster:?}");
        // `host:port` is `[postgres] connect_address`, as Patroni's: the address the
        // other hosts reach the server at (here the cut proxy in front of it).
        let r = role(addr).await.expect("the leader's server answers");
        assert!(!r.standby && !r.read_only, "the consumer's leader: {r:?}");
        for member in &cluster.members {
            let mid: NodeId = member.name.parse().expect("names are node IDs");
            if mid != leader {
                assert!(
                    ["replica", "quorum_standby"].contains(&member.role.as_str()),
                    "{member:?}"
                );
                assert_eq!(member.timeline, top.timeline, "{member:?}");
                assert!(matches!(member.lag, Some(Lag::Bytes(_))), "{member:?}");
            }
            let url = member.api_url.as_deref().expect("api_url");
            let (base, path) = url
                .strip_prefix("http://")
                .and_then(|rest| rest.split_once('/'))
                .expect("http://host:port/path");
            assert_eq!(base.parse::<SocketAddr>().ok(), Some(c.http[&mid]), "{url}");
            let (code, body) = http_get(c.http[&mid], &format!("/{path}"))
                .await
                .expect(url);
            assert_eq!(code, 200, "{url}: {body}");
            let json: serde_json::Value = serde_json::from_str(&body).expect("JSON");
            let wanted = if mid == leader { "primary" } else { "replica" };
            assert_eq!(json["role"], wanted, "{url}: {json}");
        }
    }
    // A new cluster's first primary was promoted once already (timeline 2).
    let (code, body) = http_get(c.http[&leader], "/history")
        .await
        .expect("/history");
    assert_eq!(code, 200, "{body}");
    let before: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let before = before.as_array().expect("a list").len();

    phase("the primary's host killed: /history and /cluster after the failover");
    let mut c = c;
    c.kill_host(leader);
    let rest: Vec<NodeId> = IDS.into_iter().filter(|&id| id != leader).collect();
    let promoted = c.wait_primary(&rest).await;
    let what = format!("node {promoted}'s /history naming the switch it made");
    let history = primary::wait_logged(&c.t, &what, AGREE, || async {
        let (code, body) = http_get(c.http[&promoted], "/history").await.ok()?;
        let json: serde_json::Value = serde_json::from_str(&body).ok()?;
        (code == 200 && json.as_array()?.len() == before + 1).then_some(json)
    })
    .await;
    let switch = history[before].as_array().expect("a line");
    let timeline = after_timeline(&c, promoted).await;
    assert_eq!(switch[0], timeline - 1, "the timeline it left: {history}");
    assert!(switch[1].as_u64().is_some_and(|lsn| lsn > 0), "{history}");
    assert_eq!(switch[4], promoted.to_string(), "the promoter: {history}");
    let survivor = rest.into_iter().find(|&id| id != promoted).unwrap();
    let what = format!("node {survivor}'s /cluster naming node {promoted} the leader");
    let after = primary::wait_logged(&c.t, &what, AGREE, || async {
        let cluster = cluster(c.http[&survivor]).await?;
        let (top, _) = leader_of(&cluster)?;
        (top.name == promoted.to_string()).then_some(cluster)
    })
    .await;
    let dead = after
        .members
        .iter()
        .find(|m| m.name == leader.to_string())
        .expect("the killed member is still listed");
    assert_eq!(dead.state, "unknown", "{after:?}");
}
