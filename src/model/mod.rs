//! Exhaustive model checking of the real [`Machine`]: every interleaving of a small
//! cluster (N ≤ 4) within stated bounds, explored breadth-first, each state checked.
//!
//! The model wraps the machine unchanged: a [`World`] holds N machines, their stored
//! cells and member lists, one FIFO queue per directed link and one global clock. A
//! [`Transition`] is one of: deliver the head of a link (lost if the receiver is down or
//! cut off; waits while it is paused), fire a due timer, advance the clock to the next
//! deadline of any node, crash, restart, pause, resume, cut a minority off, heal, flip a
//! node's health, a client asking a node who leads, or the operator asking a node for
//! the next membership change of the model's script (docs/design.md#membership; only a coordinator takes it). Time only
//! moves by `Advance`, so a message can wait in its queue across any number of
//! advances: delays are arbitrary up to the time bound.
//!
//! Member lists: a model may hold a joining process that no one else lists yet, and
//! the lists change as the script's changes are taken. Every property that counts a
//! majority counts it in a list a node actually holds: Q6 in the declarer's own list,
//! liveness in the newest list the live nodes hold or are being sent; a node outside
//! that list, or a learner or witness in it, is never expected to lead or follow.
//! Refusing a sender that is not in the receiver's list is what the machine does with
//! any stranger and is not held against it.
//!
//! Properties, each reported as a [`crate::checker::Violation`] and checked by the
//! checker's own rules (src/checker) where the rule is the invariant's:
//! - I1 accepted epochs never go back; I2 the term cell never goes back and a node
//!   never declares a term twice; I3 a message reveals no epoch the sender's stored
//!   cells do not hold;
//! - I7 (quorum) one coordinator per term, ever; I6 (quorum) no node becomes
//!   coordinator while another one's lease is still running;
//! - Q4 for readers: a client asking any node who leads (`Transition::Query`) is named
//!   only a coordinator in office at that moment (docs/design.md#asking-who-leads);
//! - Q6 (quorum) a node raises the term only if a live majority was reachable at some
//!   point of its election;
//! - liveness (reported as I5): from every state, once every fault ends (heal,
//!   resume), a fair schedule reaches one coordinator that every live member of its
//!   list follows, each holding that same list, within a step bound; nothing is
//!   promised while (or once the schedule leaves the cluster on a list whose) majority
//!   is down.
//!
//! Visited states are stored as 64-bit fingerprints (hash compaction, like TLC and
//! SPIN): a collision could hide a state, never invent a violation. A counterexample is
//! the list of transitions from the start, replayed to print each state.
//!
//! This file holds the state and the model's small queries; beside it: `config` (what
//! a model is), `transition` (its edges), `apply` (enabling and applying them),
//! `properties` (the checks on each action), `liveness`, `explore` (the search),
//! `fingerprint` (what the search keeps of a state) and `outcome` (what a search
//! returns).

mod apply;
mod config;
mod explore;
mod fingerprint;
mod liveness;
mod outcome;
mod properties;
mod transition;

pub use config::{Bounds, ModelConfig};
pub use outcome::{Counterexample, Exploration};
pub use transition::Transition;

use fingerprint::fingerprint;

use crate::checker::{TermHolders, Violation};
use crate::protocol::membership::majority_of;
use crate::protocol::{Body, Cells, Machine, Membership, Message, Millis, NodeId};
use std::collections::VecDeque;

/// One node of the model: its machine while up, its stored cells, and what the
/// checks remember about it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Node {
    machine: Option<Machine>,
    disk: Cells,
    /// The member list as last stored (`None`: never stored, the machine seeds it).
    list: Option<Membership>,
    paused: bool,
    eligible: bool,
    declared: u64,
    /// Reached a live majority at some point since it began asking for the term it
    /// may declare next (Q6). Pre-votes are per term, so a vote given in an earlier
    /// election for the same term still counts, and so does the contact it came from.
    contact: bool,
    /// The highest term seen when `contact` was last reset.
    contact_term: u64,
    /// Restarted at least once: runs `ModelConfig::restart_timing` if there is one.
    restarted: bool,
    /// The epoch its machine asked the driver to release, while `on_demoted` runs.
    awaiting: Option<crate::protocol::Epoch>,
}

/// The whole model state.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct World {
    now: Millis,
    nodes: Vec<Node>,
    /// Queue of the link from member i to member j at `i * n + j`.
    links: Vec<VecDeque<Message>>,
    /// Bit i set: member i is on the cut-off side (0: healed).
    cut: u8,
    crashes: u8,
    wipes: u8,
    partitions: u8,
    pauses: u8,
    flips: u8,
    /// Operator's changes taken so far (the next one asked is `changes[asked]`).
    asked: u8,
    /// Quorum: the coordinator of each term so far (I7).
    holders: TermHolders,
    /// I8: inside the liveness check's prompt schedule (faults over, every message
    /// delivered before any timer fires), per member: the peers (bit j: member j) its
    /// Elections went to since its last `ElectionStarted`, and those of the election it
    /// started last in this schedule (bit 7: it started one), whom it asked and who
    /// could therefore answer in time; `None` outside that schedule.
    prompt_elections: Option<Vec<(u8, u8)>>,
}

/// The model: its config and how to step a world.
pub struct Model {
    config: ModelConfig,
    /// The clock bound: `bounds.time` after the initial state's time.
    time_limit: Millis,
}

impl Model {
    /// A model of `config`; its clock bound counts from the initial state's time.
    pub fn new(config: ModelConfig) -> Model {
        let mut model = Model {
            time_limit: Millis::MAX,
            config,
        };
        let start = model.initial().map_or(0, |w| w.now);
        model.time_limit = start + model.config.bounds.time;
        model
    }

    pub(super) fn n(&self) -> usize {
        self.config.ids.len()
    }

    pub(super) fn index(&self, id: NodeId) -> usize {
        self.config.ids.iter().position(|&i| i == id).unwrap_or(0)
    }

    /// Every node started at time 0 from empty cells.
    pub fn initial(&self) -> Result<World, Violation> {
        let n = self.n();
        let mut world = World {
            now: 0,
            nodes: vec![
                Node {
                    machine: None,
                    disk: Cells::default(),
                    list: None,
                    paused: false,
                    eligible: true,
                    declared: 0,
                    contact: false,
                    contact_term: 0,
                    restarted: false,
                    awaiting: None,
                };
                n
            ],
            links: vec![VecDeque::new(); n * n],
            cut: 0,
            crashes: 0,
            wipes: 0,
            partitions: 0,
            pauses: 0,
            flips: 0,
            asked: 0,
            holders: TermHolders::default(),
            prompt_elections: None,
        };
        for i in 0..n {
            self.start(&mut world, i)?;
        }
        if self.config.settled_start {
            world = self.settle(world)?;
        }
        Ok(world)
    }

    pub(super) fn up(&self, w: &World, i: usize) -> bool {
        w.nodes[i].machine.is_some()
    }

    pub(super) fn connected(&self, w: &World, a: usize, b: usize) -> bool {
        // Nodes on different D talk (src/transport/agreement.rs compares the mode only):
        // a follower promises the longer of the two (promise_span,
        // docs/design.md#cluster-settings).
        (w.cut >> a & 1) == (w.cut >> b & 1)
    }

    /// Whether node `i` reaches a live majority of the voters of the list it holds
    /// (the list its machine counts votes by); never while it is down.
    pub(super) fn has_live_majority(&self, w: &World, i: usize) -> bool {
        let Some(m) = &w.nodes[i].machine else {
            return false;
        };
        self.majority_live(w, m.members(), i)
    }

    /// Whether a majority of `list`'s voters is up, not paused and on node `i`'s side
    /// of any cut.
    pub(super) fn majority_live(&self, w: &World, list: &Membership, i: usize) -> bool {
        let voters = list.voters();
        let live = voters
            .iter()
            .map(|&v| self.index(v))
            .filter(|&j| self.up(w, j) && !w.nodes[j].paused && self.connected(w, i, j))
            .count();
        live >= majority_of(voters.len())
    }

    /// The cluster's list as the live nodes will hold it once the links are drained: the
    /// newest one a live node holds or a `Members` message on its way to a live node
    /// carries (a crashed coordinator's last lists still arrive). The joining process's
    /// seed is left aside while it is all it holds: its config file names the members
    /// it hopes to join, not a list anyone agreed to. `None` while no other node is up.
    pub(super) fn cluster_list<'w>(&self, w: &'w World) -> Option<&'w Membership> {
        let n = self.n();
        let held = w
            .nodes
            .iter()
            .zip(&self.config.ids)
            .filter_map(|(node, &id)| {
                let list = node.machine.as_ref()?.members();
                let seed_only = list.id.stamp.is_none() && self.config.joining == Some(id);
                (!seed_only).then_some(list)
            });
        let coming = (0..n * n)
            .filter(|&k| self.up(w, k % n))
            .flat_map(|k| &w.links[k])
            .filter_map(|msg| match &msg.body {
                Body::Members { list } => Some(list),
                _ => None,
            });
        held.chain(coming).max_by_key(|list| list.id)
    }

    pub(super) fn deadline(&self, w: &World, i: usize) -> Option<Millis> {
        let node = &w.nodes[i];
        if node.paused {
            return None;
        }
        node.machine.as_ref().map(Machine::next_deadline)
    }

    pub(super) fn highest_term(&self, w: &World) -> u64 {
        w.nodes.iter().map(|n| n.disk.term).max().unwrap_or(0)
    }
}
