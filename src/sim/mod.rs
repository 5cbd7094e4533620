//! Deterministic simulation of a cluster of [`Machine`]s: seeded RNG, virtual clock
//! in ms, per-link FIFO delivery with random bounded delay, and faults (crash,
//! restart, pause, partition, peer-down notices, eligibility changes).
//!
//! [`Sim`] drives each machine exactly as the runtime does: it runs the actions in
//! order; `Persist` updates the node's stored cells at once (a flushed write), `Send`
//! puts the message on the link, `ViewChanged` is recorded. Everything is recorded as
//! history [`Entry`]s and checked as it happens with [`crate::checker::Safety`]
//! (I1–I4), plus checks only a simulator can make (what a node sends is durable; cells
//! at a crash hold all it revealed; no two nodes store different member lists under one
//! identity). [`scenario`] runs random fault scenarios per seed and checks I5.
//!
//! This file holds the cluster and what one can ask it; how it moves is in the files
//! beside it: `run` (the event loop), `network` (links, notices, partitions), `faults`
//! (crash, restart, pause, ...), `recording` (the checked history), `queries` (clients
//! asking every node who leads, answers kept for the judge).
//!
//! - [`postgres`]: a separate, step-based simulator of the PostgreSQL manager's pure
//!   decisions (src/postgres_rules.rs) against modelled servers: no acknowledged
//!   commit lost, never two writable primaries, progress once faults stop.
//!
//! Same seed, same run: nothing reads the wall clock or iterates a hash map in an
//! order that matters.

mod config;
mod faults;
mod flight;
mod network;
mod node;
pub mod postgres;
mod queries;
mod recording;
mod run;
pub mod scenario;

pub use config::{CrashPoint, SimConfig};

use crate::checker::{ListIdentity, Safety, Violation};
use crate::history::Entry;
use crate::protocol::{Change, Event, Machine, Membership, MessageKind, Millis, NodeId, View};
use flight::Flight;
use node::SimNode;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

/// A simulated cluster. Create it, start nodes, inject faults between
/// [`Sim::run_until`] calls, then read [`Sim::history`] and [`Sim::violations`].
pub struct Sim {
    config: SimConfig,
    rng: SmallRng,
    now: Millis,
    nodes: BTreeMap<NodeId, SimNode>,
    flights: BinaryHeap<Flight>,
    seq: u64,
    /// Connection changes the transports will report: (time, seq) -> (node, peer, up).
    notices: BTreeMap<(Millis, u64), (NodeId, NodeId, bool)>,
    /// Releases of an office due: (time, seq) -> (node, its life then, epoch).
    releases: BTreeMap<(Millis, u64), (NodeId, u64, crate::protocol::Epoch)>,
    /// Latest delivery time scheduled per link (keeps each link FIFO).
    link_busy: BTreeMap<(NodeId, NodeId), Millis>,
    /// Partition group of each node; empty when healed.
    groups: BTreeMap<NodeId, usize>,
    /// Percent of messages lost at random (0 unless a lossy fault is in effect).
    loss_percent: u8,
    /// Nodes that hear no one (one-way links: what they send still arrives) until healed.
    deaf: BTreeSet<NodeId>,
    /// Running nodes whose hello a running peer refuses (another D): recorded as cut off
    /// until every running node agrees again, so the checkers see the split.
    split_by_config: BTreeSet<NodeId>,
    armed: Vec<(NodeId, CrashPoint)>,
    history: Vec<Entry>,
    sent: BTreeMap<MessageKind, u64>,
    safety: Safety,
    /// Every stored member list by identity (one list per identity).
    lists: ListIdentity,
    violations: Vec<Violation>,
    /// Starts (node, time) at which the node's list named no other member: it has no
    /// one to wait for, and declares at once.
    alone_starts: BTreeSet<(NodeId, Millis)>,
    /// Index into `history` of the entry at which the first violation was found.
    first_violation_at: Option<usize>,
    steps: u64,
    /// The forced recovery an operator ran, if one did (`Sim::force_recovery`).
    forced: Option<Forced>,
    /// When the nodes are next asked who leads (src/sim/queries.rs).
    next_query_at: Millis,
    /// The answers that named a coordinator.
    leader_answers: Vec<crate::checker::LeaderAnswer>,
}

/// A forced recovery (`bully recover --force`) on some survivors while the rest, the
/// members it gave up, may be alive: what the judge needs to check that the given-up
/// side stands down once it meets the survivors (src/protocol/machine/given_up.rs).
#[derive(Debug, Clone, Default)]
pub struct Forced {
    /// The survivors the recovery kept.
    pub survivors: BTreeSet<NodeId>,
    /// The members it gave up.
    pub lost: BTreeSet<NodeId>,
    /// When it was written.
    pub at_ms: Millis,
    /// When each given-up node first had a working link to a running survivor since:
    /// from then on its transport is refused as given up at every dial.
    pub contact: BTreeMap<NodeId, Millis>,
}

impl Sim {
    /// A cluster with every node down; call [`Sim::start`] for each.
    pub fn new(config: SimConfig) -> Sim {
        let mut rng = SmallRng::seed_from_u64(config.seed);
        let drift = config.drift_permille.min(500);
        let nodes = config
            .processes()
            .into_iter()
            .map(|id| {
                let (rate, origin) = if drift == 0 {
                    (1000, 0)
                } else {
                    (
                        rng.gen_range(1000 - drift..=1000 + drift),
                        rng.gen_range(0..=100_000),
                    )
                };
                let node = SimNode {
                    eligible: !config.witnesses.contains(&id),
                    rate,
                    origin,
                    ..SimNode::default()
                };
                (id, node)
            })
            .collect();
        Sim {
            rng,
            config,
            now: 0,
            nodes,
            flights: BinaryHeap::new(),
            notices: BTreeMap::new(),
            releases: BTreeMap::new(),
            seq: 0,
            link_busy: BTreeMap::new(),
            groups: BTreeMap::new(),
            loss_percent: 0,
            deaf: BTreeSet::new(),
            split_by_config: BTreeSet::new(),
            armed: Vec::new(),
            history: Vec::new(),
            sent: BTreeMap::new(),
            safety: Safety::new(),
            lists: ListIdentity::new(),
            alone_starts: BTreeSet::new(),
            violations: Vec::new(),
            first_violation_at: None,
            steps: 0,
            forced: None,
            next_query_at: 0,
            leader_answers: Vec::new(),
        }
    }

    /// The settings this cluster runs with.
    pub fn config(&self) -> &SimConfig {
        &self.config
    }

    /// Virtual time in ms.
    pub fn now(&self) -> Millis {
        self.now
    }

    /// Everything recorded so far, in time order.
    pub fn history(&self) -> &[Entry] {
        &self.history
    }

    /// Messages sent so far, by kind (including those later lost).
    pub fn sent(&self) -> &BTreeMap<MessageKind, u64> {
        &self.sent
    }

    /// Violations found so far (I1–I4 and the simulator's own checks).
    pub fn violations(&self) -> &[Violation] {
        &self.violations
    }

    /// How many history entries existed when the first violation was found.
    pub fn first_violation_index(&self) -> Option<usize> {
        self.first_violation_at
    }

    /// The current view of a running node (paused or not); `None` while it is down.
    pub fn view(&self, id: NodeId) -> Option<View> {
        self.nodes.get(&id)?.machine.as_ref().map(Machine::view)
    }

    /// When (in real time) a running node's machine next wants a tick.
    pub fn next_deadline(&self, id: NodeId) -> Option<Millis> {
        let node = self.nodes.get(&id)?;
        node.machine.as_ref().map(|m| node.real(m.next_deadline()))
    }

    /// The role a reader of node `id` would see right now, read against its lease (Q4).
    pub fn role_now(&self, id: NodeId) -> Option<crate::protocol::Role> {
        let node = self.nodes.get(&id)?;
        node.machine
            .as_ref()
            .map(|m| m.role_at(node.local(self.now)))
    }

    /// Quorum mode: when (in real time) a running node's coordinator role ends unless
    /// more acks arrive; `None` when it is not coordinator or holds no lease.
    pub fn lease_until(&self, id: NodeId) -> Option<Millis> {
        let node = self.nodes.get(&id)?;
        let until = node.machine.as_ref()?.lease_until()?;
        Some(node.real(until))
    }

    /// Whether the node is running (not crashed, not yet unstarted).
    pub fn is_up(&self, id: NodeId) -> bool {
        self.nodes.get(&id).is_some_and(|n| n.machine.is_some())
    }

    /// Whether the node is up but paused.
    pub fn is_paused(&self, id: NodeId) -> bool {
        self.nodes.get(&id).is_some_and(|n| n.paused)
    }

    /// Whether the node's health check lets it lead.
    pub fn is_eligible(&self, id: NodeId) -> bool {
        self.nodes.get(&id).is_some_and(|n| n.eligible)
    }

    /// Nodes that are up and not paused.
    pub fn live(&self) -> Vec<NodeId> {
        self.nodes
            .iter()
            .filter(|(_, n)| n.machine.is_some() && !n.paused)
            .map(|(&id, _)| id)
            .collect()
    }

    /// Whether the node's stored cells hold no term: never elected anything, or lost and
    /// not yet recovered (src/protocol/recovery.rs).
    pub fn store_is_empty(&self, id: NodeId) -> bool {
        self.nodes
            .get(&id)
            .is_some_and(|n| n.disk.term == 0 && n.disk.accepted.is_none())
    }

    /// Whether the node is up and still recovering an empty store (it votes and leads
    /// nothing until enough peers reported their terms).
    pub fn is_recovering(&self, id: NodeId) -> bool {
        self.nodes
            .get(&id)
            .and_then(|n| n.machine.as_ref())
            .is_some_and(|m| m.recovery_progress().is_some())
    }

    /// Whether node `id`, started at `at`, found no other member in its list then
    /// (every other member removed): it declares at once, as a one-node cluster does.
    pub fn started_alone(&self, id: NodeId, at: Millis) -> bool {
        self.alone_starts.contains(&(id, at))
    }

    /// While node `id` recovers an empty store: how many peers reported their terms
    /// and how many must (src/protocol/recovery.rs).
    pub fn recovery_progress(&self, id: NodeId) -> Option<(usize, usize)> {
        self.nodes
            .get(&id)
            .and_then(|n| n.machine.as_ref())
            .and_then(Machine::recovery_progress)
    }

    /// The member list node `id` lives by: its machine's while up, else the one its
    /// store holds (`None`: down and never stored one; its next start seeds one).
    pub fn members(&self, id: NodeId) -> Option<Membership> {
        let node = self.nodes.get(&id)?;
        match &node.machine {
            Some(machine) => Some(machine.members().clone()),
            None => node.members.clone(),
        }
    }

    /// The newest list a coordinator wrote (a stamped one) that one of `among` lives by:
    /// lists spread to every member that is heard, so it is the one the cluster ends
    /// on. `None` while all of them live by the lists their config files seeded.
    pub fn newest_list(&self, among: &[NodeId]) -> Option<Membership> {
        among
            .iter()
            .filter_map(|&id| self.members(id))
            .filter(|list| list.id.stamp.is_some())
            .max_by_key(|list| list.id)
    }

    /// An operator asks node `id` for a membership change (queued while it is paused,
    /// lost while it is down); the machine's facts tell the outcome.
    pub fn change_members(&mut self, id: NodeId, change: Change) {
        if self.is_up(id) {
            self.deliver_event(id, Event::ChangeMembers(change));
        }
    }

    /// The forced recovery an operator ran, if one did.
    pub fn forced(&self) -> Option<&Forced> {
        self.forced.as_ref()
    }

    /// Whether a partition or message loss is in effect.
    pub fn is_disturbed(&self) -> bool {
        !self.groups.is_empty() || self.loss_percent > 0 || !self.deaf.is_empty()
    }
}
