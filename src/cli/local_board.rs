//! What `bully local` shows about each node: its last view while its process runs, or
//! that it is down or paused. A killed node's watch connection stays open on our side
//! until QUIC notices, and a paused node keeps its socket, so their last views would
//! linger; the shell knows which processes it killed or stopped, and says so instead.

use crate::api::Status;
use crate::protocol::NodeId;
use std::collections::BTreeMap;

/// One node as the shell knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeState {
    /// Its process runs: its last status, or `None` while its API does not answer.
    Live(Option<Box<Status>>),
    /// Its process is not running (killed, or never restarted).
    Down,
    /// Its process is stopped with SIGSTOP.
    Paused,
}

/// Every node's state, by ID.
#[derive(Debug, Clone, Default)]
pub struct Board {
    nodes: BTreeMap<NodeId, NodeState>,
}

impl Board {
    /// Nodes `ids`, all running and not heard from yet.
    pub fn new(ids: &[NodeId]) -> Board {
        Board {
            nodes: ids.iter().map(|&id| (id, NodeState::Live(None))).collect(),
        }
    }

    /// The last status of a running node.
    pub fn view(&self, id: NodeId) -> Option<&Status> {
        match self.nodes.get(&id) {
            Some(NodeState::Live(status)) => status.as_deref(),
            _ => None,
        }
    }

    /// A status (or `None`: unreachable) from a node's watcher. Ignored unless the node
    /// runs: a watcher's last word about a node just killed or paused is no news.
    pub fn update(&mut self, id: NodeId, status: Option<Status>) {
        if let Some(state @ NodeState::Live(_)) = self.nodes.get_mut(&id) {
            *state = NodeState::Live(status.map(Box::new));
        }
    }

    /// Sets what the shell did to a node's process (kill, pause, start, resume).
    pub fn set(&mut self, id: NodeId, state: NodeState) {
        self.nodes.insert(id, state);
    }

    /// Forgets a node removed from the member list: it leaves the board.
    pub fn remove(&mut self, id: NodeId) {
        self.nodes.remove(&id);
    }

    /// One line per node for `status`.
    pub fn lines(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|(id, state)| match state {
                NodeState::Live(Some(status)) => status.line(),
                NodeState::Live(None) => format!("node {id:<3} unreachable"),
                NodeState::Down => format!("node {id:<3} down (not running)"),
                NodeState::Paused => format!("node {id:<3} paused (SIGSTOP)"),
            })
            .collect()
    }

    /// Who the reachable running nodes follow, e.g. `coordinator 5 (5 of 5 reachable
    /// agree)`; down and paused nodes are counted apart.
    pub fn agreement(&self) -> String {
        let answering: Vec<&Status> = self
            .nodes
            .values()
            .filter_map(|state| match state {
                NodeState::Live(status) => status.as_deref(),
                _ => None,
            })
            .collect();
        let reachable = answering.len();
        let mut votes: BTreeMap<NodeId, usize> = BTreeMap::new();
        for status in &answering {
            if let Some(c) = status.coordinator() {
                *votes.entry(c).or_default() += 1;
            }
        }
        let count = |wanted: &NodeState| self.nodes.values().filter(|s| *s == wanted).count();
        let mut absent = Vec::new();
        for (state, word) in [(NodeState::Down, "down"), (NodeState::Paused, "paused")] {
            match count(&state) {
                0 => {}
                n => absent.push(format!("{n} {word}")),
            }
        }
        let absent = match absent.is_empty() {
            true => String::new(),
            false => format!(", {}", absent.join(", ")),
        };
        match votes.iter().max_by_key(|(_, n)| **n) {
            Some((c, n)) => format!("coordinator {c} ({n} of {reachable} reachable agree{absent})"),
            None => format!("no coordinator yet ({reachable} reachable{absent})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Cells, Epoch, Mode, Role, View};

    fn status(id: NodeId, role: Role, leader: NodeId, term: u64) -> Status {
        let view = View {
            id,
            role,
            epoch: Some(Epoch { term, leader }),
            eligible: true,
            incarnation: 1,
        };
        Status::initial(view, Mode::Quorum, Cells::default(), &[], 0)
    }

    /// Five nodes: 5 led at epoch 1@5, then was killed; 4 leads 2@4.
    fn after_kill_5() -> Board {
        let mut board = Board::new(&[1, 2, 3, 4, 5]);
        board.update(5, Some(status(5, Role::Coordinator, 5, 1)));
        board.set(5, NodeState::Down);
        // The dead node's watcher still delivers its last view: ignored.
        board.update(5, Some(status(5, Role::Coordinator, 5, 1)));
        for id in 1..=3 {
            board.update(id, Some(status(id, Role::Follower, 4, 2)));
        }
        board.update(4, Some(status(4, Role::Coordinator, 4, 2)));
        board
    }

    #[test]
    fn a_killed_node_is_down_never_its_last_view_and_not_counted() {
        let board = after_kill_5();
        let lines = board.lines();
        assert_eq!(lines[4], "node 5   down (not running)");
        assert!(lines[3].contains("coordinator epoch 2@4"), "{lines:?}");
        assert_eq!(
            board.agreement(),
            "coordinator 4 (4 of 4 reachable agree, 1 down)"
        );
        assert!(board.view(5).is_none());
    }

    #[test]
    fn a_paused_node_is_paused_until_it_runs_again() {
        let mut board = after_kill_5();
        board.set(4, NodeState::Paused);
        board.update(4, Some(status(4, Role::Coordinator, 4, 2)));
        assert_eq!(board.lines()[3], "node 4   paused (SIGSTOP)");
        assert_eq!(
            board.agreement(),
            "coordinator 4 (3 of 3 reachable agree, 1 down, 1 paused)"
        );
        board.set(4, NodeState::Live(None));
        board.update(4, Some(status(4, Role::Follower, 3, 3)));
        assert!(board.lines()[3].contains("follower"), "{:?}", board.lines());
    }
}
