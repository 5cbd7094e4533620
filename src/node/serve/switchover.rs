//! Switchover to a chosen node (`bully step-down --to N`), built on the plain
//! step-down without new protocol rules: Bully elects the highest eligible node, so the
//! coordinator first asks every reachable eligible member above N to stand aside (be
//! ineligible for the step-down period), then steps down itself; N is then the highest
//! eligible node and wins the election the Resign starts.
//!
//! Refused up front, with the reason, when N cannot take over: N is this node, not a
//! member, a witness, unreachable, ineligible, or follows another coordinator; or a
//! member above N that is connected does not agree to stand aside.
//!
//! A stand-aside (and the old coordinator's step-down) ends early when N, having led,
//! stops leading and does not lead again within a grace (at once if N's connection is
//! down): the nodes held back must not leave the cluster leaderless if N dies
//! (the hold is part of `node/policy/eligibility.rs`).

use crate::api::Status;
use crate::api::{Request, Response};
use crate::certs::TlsFiles;
use crate::client_pool::{ClientPool, Within};
use crate::config::PeerConfig;
use crate::node::shared::mailbox::{ask_runtime, Command};
use crate::protocol::{NodeId, Role};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::sync::mpsc;

/// How long each peer has to answer during the preparation.
pub const ASK_TIMEOUT: Duration = Duration::from_secs(2);

/// What the coordinator needs to reach its peers' APIs: its own certificate (the API
/// accepts any certificate of the cluster CA) and where the peers are.
#[derive(Debug, Clone)]
pub struct PeerApis {
    pub peers: Vec<PeerConfig>,
    pub tls: TlsFiles,
    /// Our own QUIC address, to pick the address family when resolving a peer's name.
    pub local_addr: SocketAddr,
    /// Connections kept to the peers' APIs (src/client_pool.rs).
    pub clients: ClientPool,
}

/// Runs a switchover to `to` on the coordinator: checks, stand-asides, then the
/// step-down through the runtime. `Ok` once `to` leads.
pub async fn run(
    members: &PeerApis,
    status: &Status,
    commands: &mpsc::Sender<Command>,
    to: NodeId,
    for_ms: u64,
) -> Result<String, String> {
    could_take_over(members, status, to).await?;
    for peer in above(members, status, to) {
        let request = Request::StandAside { for_ms, target: to };
        match ask(members, peer, request).await {
            Ok(Response::Done(_)) => tracing::info!(peer = peer.id, to, "stands aside"),
            Ok(Response::Refused(why)) => {
                return Err(format!(
                    "node {} above node {to} refused to stand aside: {why}",
                    peer.id
                ))
            }
            Ok(other) => return Err(format!("node {} answered {other:?}", peer.id)),
            Err(e) => {
                return Err(format!(
                    "node {} above node {to} cannot be asked to stand aside: {e}",
                    peer.id
                ))
            }
        }
    }
    let ask = |reply| Command::StepDown {
        for_ms,
        to: Some(to),
        reply,
    };
    ask_runtime(commands, ask)
        .await
        .unwrap_or_else(|stopping| Err(stopping.to_string()))
}

/// Whether `to` could take over from this coordinator now: a member that may lead,
/// reachable, eligible and following this node; else why not. The checks a switchover
/// makes before anything moves (also when a scheduled one is accepted).
pub async fn could_take_over(
    members: &PeerApis,
    status: &Status,
    to: NodeId,
) -> Result<(), String> {
    let target = check_target(members, status, to)?;
    let candidate = ask(members, target, Request::Status)
        .await
        .map_err(|e| format!("node {to} is unreachable: {e}"))?;
    let Response::Status(theirs) = candidate else {
        return Err(format!(
            "node {to} answered {candidate:?} to a status request"
        ));
    };
    if !theirs.eligible {
        return Err(format!(
            "node {to} is not eligible to lead (health: {:?}{})",
            theirs.health,
            if theirs.stepped_down_until_ms.is_some() {
                ", stepped down"
            } else {
                ""
            }
        ));
    }
    if theirs.coordinator() != Some(status.id) {
        return Err(format!(
            "node {to} does not follow this node (its coordinator: {:?})",
            theirs.coordinator()
        ));
    }
    Ok(())
}

/// The target's config entry, if it is a member that could lead.
fn check_target<'a>(
    members: &'a PeerApis,
    status: &Status,
    to: NodeId,
) -> Result<&'a PeerConfig, String> {
    if status.role != Role::Coordinator {
        return Err(format!(
            "node {} is not the coordinator (coordinator: {})",
            status.id,
            status
                .coordinator()
                .map_or_else(|| "none".to_string(), |c| c.to_string())
        ));
    }
    if to == status.id {
        return Err(format!("node {to} is the coordinator already"));
    }
    let Some(target) = members.peers.iter().find(|p| p.id == to) else {
        let known: Vec<String> = members.peers.iter().map(|p| p.id.to_string()).collect();
        return Err(format!(
            "node {to} is not a member (peers of node {}: {})",
            status.id,
            known.join(",")
        ));
    };
    if target.witness {
        return Err(format!("node {to} is a witness and never leads"));
    }
    if !status.peers.iter().any(|p| p.id == to && p.connected) {
        return Err(format!("node {to} is unreachable from node {}", status.id));
    }
    Ok(target)
}

/// The members above `to` that could win the election instead of it: connected, not
/// witnesses, not this node (which steps down itself).
fn above<'a>(members: &'a PeerApis, status: &Status, to: NodeId) -> Vec<&'a PeerConfig> {
    members
        .peers
        .iter()
        .filter(|p| p.id > to && !p.witness)
        .filter(|p| status.peers.iter().any(|s| s.id == p.id && s.connected))
        .collect()
}

/// Asks member `id` over its API, at the address this node's config file gives it, else
/// the one its member list gives, on a kept connection or not as `within` says
/// (src/client_pool.rs).
pub async fn ask_member(
    members: &PeerApis,
    status: &Status,
    id: NodeId,
    request: Request,
    within: Within,
) -> Result<Response, String> {
    let listed = status
        .members
        .as_ref()
        .and_then(|list| list.get(id))
        .and_then(|m| m.addr.parse().ok());
    let from_file = members
        .peers
        .iter()
        .find(|p| p.id == id)
        .map(|p| p.addr.clone());
    let Some(addr) = from_file.or(listed) else {
        return Err(format!("no address known for node {id}"));
    };
    let addr = addr
        .resolve(members.local_addr)
        .await
        .map_err(|e| e.to_string())?;
    members
        .clients
        .request((id, addr), &members.tls, request, within)
        .await
        .map_err(|e| e.to_string())
}

async fn ask(members: &PeerApis, peer: &PeerConfig, request: Request) -> Result<Response, String> {
    let addr = peer
        .addr
        .resolve(members.local_addr)
        .await
        .map_err(|e| e.to_string())?;
    members
        .clients
        .request(
            (peer.id, addr),
            &members.tls,
            request,
            Within::fresh(ASK_TIMEOUT, ASK_TIMEOUT),
        )
        .await
        .map_err(|e| e.to_string())
}
