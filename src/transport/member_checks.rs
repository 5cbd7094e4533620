//! Who may be a member: node IDs in range, and a peer list the node can dial. The one
//! home of these checks: the config names the offending key, the transport refuses to
//! start, both with the same words.

use super::peer_addr::PeerAddr;
use crate::protocol::{NodeId, MAX_NODE_ID, TOKEN_LEADER_BITS};
use std::collections::HashMap;
use std::net::SocketAddr;
use thiserror::Error;

/// Why a node ID cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NodeIdError {
    /// 0 means "no node" (e.g. in metrics).
    #[error("0 is reserved; node IDs start at 1")]
    Zero,
    /// A classic-mode fencing token keeps the leader ID in its low bits.
    #[error(
        "{0} is above the highest node ID {MAX_NODE_ID} (fencing tokens keep the leader ID \
         in {TOKEN_LEADER_BITS} bits)"
    )]
    TooHigh(NodeId),
}

/// A node ID must be at least 1 and at most [`MAX_NODE_ID`]
/// (see [`crate::protocol::Epoch::token`]).
pub fn check_node_id(id: NodeId) -> Result<(), NodeIdError> {
    match id {
        0 => Err(NodeIdError::Zero),
        id if id > MAX_NODE_ID => Err(NodeIdError::TooHigh(id)),
        _ => Ok(()),
    }
}

/// The first unusable entry of a peer list: its index and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("peers[{index}].{}: {problem}", problem.key())]
pub struct PeerListError {
    /// The entry's position in the list (`peers[index]` in the config).
    pub index: usize,
    /// What is wrong with it.
    pub problem: PeerProblem,
}

/// What can be wrong with one peer.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PeerProblem {
    #[error(transparent)]
    Id(#[from] NodeIdError),
    #[error("{0} is this node's own id; list only the other members")]
    OwnId(NodeId),
    #[error("duplicate peer id {id} (also peers[{first}].id)")]
    DuplicateId { id: NodeId, first: usize },
    /// An unspecified IP (`0.0.0.0`) or port 0.
    #[error("{0} cannot be dialed; give the address and port the peer listens on")]
    Undialable(PeerAddr),
    #[error("{0} is this node's own listen address")]
    OwnAddress(PeerAddr),
    /// A loopback address at our port while we listen on every address.
    #[error("{addr} reaches this node's own listen address {listen}")]
    ReachesOwnAddress { addr: PeerAddr, listen: SocketAddr },
    #[error("duplicate address {addr} (also peers[{first}].addr)")]
    DuplicateAddress { addr: PeerAddr, first: usize },
}

impl PeerProblem {
    /// The key of the peer entry at fault: `id` or `addr`.
    pub fn key(&self) -> &'static str {
        match self {
            PeerProblem::Id(_) | PeerProblem::OwnId(_) | PeerProblem::DuplicateId { .. } => "id",
            _ => "addr",
        }
    }
}

/// Checks the peers of node `id` listening on `listen`, in list order and for each
/// peer its ID before its address, so the first problem a reader meets is reported.
pub fn check_peers<'a>(
    id: NodeId,
    listen: SocketAddr,
    peers: impl IntoIterator<Item = (NodeId, &'a PeerAddr)>,
) -> Result<(), PeerListError> {
    let mut ids: HashMap<NodeId, usize> = HashMap::new();
    let mut addrs: HashMap<&PeerAddr, usize> = HashMap::new();
    for (index, (peer, addr)) in peers.into_iter().enumerate() {
        let at = |problem| PeerListError { index, problem };
        check_node_id(peer).map_err(|e| at(e.into()))?;
        if peer == id {
            return Err(at(PeerProblem::OwnId(peer)));
        }
        if let Some(first) = ids.insert(peer, index) {
            return Err(at(PeerProblem::DuplicateId { id: peer, first }));
        }
        check_addr(listen, addr).map_err(at)?;
        if let Some(first) = addrs.insert(addr, index) {
            let addr = addr.clone();
            return Err(at(PeerProblem::DuplicateAddress { addr, first }));
        }
    }
    Ok(())
}

/// A peer address must be dialable and must not lead back to this node.
fn check_addr(listen: SocketAddr, addr: &PeerAddr) -> Result<(), PeerProblem> {
    let ip = addr.ip();
    if ip.is_some_and(|a| a.ip().is_unspecified()) || addr.port() == 0 {
        return Err(PeerProblem::Undialable(addr.clone()));
    }
    if ip == Some(listen) {
        return Err(PeerProblem::OwnAddress(addr.clone()));
    }
    // Dialing a loopback address at our port reaches our endpoint bound to all addresses.
    let reaches_us = |a: SocketAddr| {
        listen.ip().is_unspecified() && a.ip().is_loopback() && a.port() == listen.port()
    };
    if ip.is_some_and(reaches_us) {
        return Err(PeerProblem::ReachesOwnAddress {
            addr: addr.clone(),
            listen,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peers(list: &[(NodeId, &str)]) -> Vec<(NodeId, PeerAddr)> {
        list.iter()
            .map(|(id, a)| (*id, a.parse().unwrap()))
            .collect()
    }

    fn check(list: &[(NodeId, &str)]) -> Result<(), PeerListError> {
        let listen = "0.0.0.0:7001".parse().unwrap();
        check_peers(1, listen, peers(list).iter().map(|(id, a)| (*id, a)))
    }

    #[test]
    fn the_first_problem_is_named_with_its_index_and_key() {
        assert_eq!(check(&[(2, "10.0.0.2:7001"), (3, "db-3:7001")]), Ok(()));
        let cases = [
            (
                vec![(2, "10.0.0.2:1"), (0, "10.0.0.3:1")],
                "peers[1].id: 0 is reserved",
            ),
            (
                vec![(1, "10.0.0.2:1")],
                "peers[0].id: 1 is this node's own id",
            ),
            (
                vec![(2, "10.0.0.2:1"), (2, "10.0.0.3:1")],
                "peers[1].id: duplicate peer id 2 (also peers[0].id)",
            ),
            (
                vec![(2, "10.0.0.2:0")],
                "peers[0].addr: 10.0.0.2:0 cannot be dialed",
            ),
            (
                vec![(2, "127.0.0.1:7001")],
                "peers[0].addr: 127.0.0.1:7001 reaches this node's own listen address 0.0.0.0:7001",
            ),
            (
                vec![(2, "db:1"), (3, "DB:1")],
                "peers[1].addr: duplicate address db:1 (also peers[0].addr)",
            ),
            // An ID problem is found before an address problem of the same peer.
            (
                vec![(1, "0.0.0.0:1")],
                "peers[0].id: 1 is this node's own id",
            ),
        ];
        for (list, expected) in cases {
            let err = check(&list).unwrap_err().to_string();
            assert!(err.starts_with(expected), "{list:?}: {err}");
        }
    }

    #[test]
    fn node_ids_are_checked_at_both_ends() {
        assert_eq!(check_node_id(0), Err(NodeIdError::Zero));
        assert_eq!(check_node_id(1), Ok(()));
        assert_eq!(check_node_id(MAX_NODE_ID), Ok(()));
        assert_eq!(
            check_node_id(MAX_NODE_ID + 1),
            Err(NodeIdError::TooHigh(MAX_NODE_ID + 1))
        );
    }
}
