//! [`InboundTable`]: the inbound peer connections by peer.

use crate::protocol::NodeId;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

/// Inbound peer connections by peer, so `disconnect` can find them and a newer
/// connection can retire older ones.
#[derive(Default)]
pub(super) struct InboundTable {
    peers: Mutex<HashMap<NodeId, Vec<quinn::Connection>>>,
}

impl InboundTable {
    fn lock(&self) -> MutexGuard<'_, HashMap<NodeId, Vec<quinn::Connection>>> {
        self.peers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a new connection from `peer` and returns the older ones: the peer holds
    /// one outbound connection at a time, so those are dead or abandoned.
    pub fn register(&self, peer: NodeId, conn: &quinn::Connection) -> Vec<quinn::Connection> {
        let mut peers = self.lock();
        let conns = peers.entry(peer).or_default();
        let superseded = std::mem::take(conns);
        conns.push(conn.clone());
        superseded
    }

    /// Forgets a connection that ended; returns whether another from `peer` is live.
    pub fn unregister(&self, peer: NodeId, conn: &quinn::Connection) -> bool {
        let mut peers = self.lock();
        let Some(conns) = peers.get_mut(&peer) else {
            return false;
        };
        conns.retain(|c| c.stable_id() != conn.stable_id());
        !conns.is_empty()
    }

    /// Whether `peer`'s own connection to us is live (its hello done): it carries both
    /// directions, so we need not dial a second one.
    pub fn has(&self, peer: NodeId) -> bool {
        self.lock().get(&peer).is_some_and(|c| !c.is_empty())
    }

    /// Every live inbound connection, with its peer, for the silence watch.
    pub fn all(&self) -> Vec<(NodeId, quinn::Connection)> {
        self.lock()
            .iter()
            .flat_map(|(peer, conns)| conns.iter().map(|c| (*peer, c.clone())))
            .collect()
    }

    /// Removes and returns every connection from `peer`.
    pub fn take_all(&self, peer: NodeId) -> Vec<quinn::Connection> {
        self.lock()
            .get_mut(&peer)
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Forgets every connection: shutdown's last step, for those whose task was aborted
    /// before it could unregister them (each holds the UDP socket open).
    pub fn clear(&self) {
        self.lock().clear();
    }
}
