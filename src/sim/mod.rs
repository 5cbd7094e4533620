//! Deterministic simulation of a cluster of [`Machine`]s: seeded RNG, virtual clock
//! in ms, per-link FIFO delivery with random bounded delay, and faults (crash,
//! restart, pause, partition, peer-down notices, eligibility changes).
//!
//! [`Sim`] drives each machine exactly as the runtime does: it runs the actions in
//! order; `Persist` updates the node's stored cells at once (a flushed write), `Send`
//! puts the message on the link, `ViewChanged` is recorded. Everything is recorded as
//! history [`Entry`]s and checked as it happens with [`Safety`] (I1–I4), plus checks
//! only a simulator can make (what a node sends is durable; cells at a crash hold all
//! it revealed). [`scenario`] runs random fault scenarios per seed and checks I5.
//!
//! Same seed, same run: nothing reads the wall clock or iterates a hash map in an
//! order that matters.

pub mod scenario;

use crate::checker::{Invariant, Safety, Violation};
use crate::history::{Entry, Record};
use crate::protocol::{
    Action, Body, Cells, Epoch, Event, Fact, Flaw, Machine, MachineConfig, Message, MessageKind,
    Millis, Mode, NodeId, Preempt, Timing, View,
};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, VecDeque};

/// The fixed settings of one simulated cluster.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Seeds the delivery delays (faults are the caller's).
    pub seed: u64,
    /// Every member; each is a peer of all the others.
    pub ids: Vec<NodeId>,
    pub timing: Timing,
    pub preempt: Preempt,
    /// One-way delay of every message, drawn uniformly from this inclusive range.
    /// Keep the maximum below `answer_timeout_ms / 2`, or an Answer can miss T and the
    /// soft part of I2 no longer applies.
    pub delay_ms: (Millis, Millis),
    pub mode: Mode,
    /// Members that are witnesses: they vote and count for majorities, never lead.
    pub witnesses: Vec<NodeId>,
    /// Each node's clock runs at its own rate, drawn from `1000 ± drift_permille` per
    /// mille of real time, from its own origin (0: every clock exact and equal).
    pub drift_permille: u64,
    /// A deliberately broken machine, to show the checkers catch it.
    pub flaw: Option<Flaw>,
    /// Nodes whose timing differs from `timing` (heartbeat, T, T'; members must agree
    /// on D and the mode, which the transport enforces: README "Members must agree").
    pub node_timing: BTreeMap<NodeId, Timing>,
}

impl SimConfig {
    /// A cluster of `ids` with default timing, preempt always, delays of 1–20 ms,
    /// exact clocks, no witnesses.
    pub fn new(seed: u64, ids: Vec<NodeId>, mode: Mode) -> SimConfig {
        SimConfig {
            seed,
            ids,
            timing: Timing::default(),
            preempt: Preempt::Always,
            delay_ms: (1, 20),
            mode,
            witnesses: Vec::new(),
            drift_permille: 0,
            flaw: None,
            node_timing: BTreeMap::new(),
        }
    }

    /// The timing node `id` runs with.
    pub fn timing_of(&self, id: NodeId) -> Timing {
        self.node_timing.get(&id).copied().unwrap_or(self.timing)
    }

    /// The slowest of every node's timeouts and heartbeat: what bounds the cluster's
    /// convergence when they differ.
    pub fn slowest_timing(&self) -> Timing {
        self.node_timing.values().fold(self.timing, |a, b| Timing {
            heartbeat_ms: a.heartbeat_ms.max(b.heartbeat_ms),
            answer_timeout_ms: a.answer_timeout_ms.max(b.answer_timeout_ms),
            coordinator_timeout_ms: a.coordinator_timeout_ms.max(b.coordinator_timeout_ms),
            ..a
        })
    }
}

/// A point in a node's action stream right after which an armed crash happens: lets
/// scenarios kill a node "after its Answer but before its Coordinator", or after it
/// persisted an epoch but before it told anyone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashPoint {
    /// Right after a `Persist` completed.
    AfterPersist,
    /// Right after one message of this kind was sent (to one peer: a broadcast is cut).
    AfterSend(MessageKind),
}

/// A message on the wire. Ordered by delivery time, then send order, so the heap
/// pops the earliest first and each link stays FIFO.
#[derive(Debug, Clone)]
struct Flight {
    at: Millis,
    seq: u64,
    from: NodeId,
    to: NodeId,
    msg: Message,
    /// The receiver's life when sent: a message to an earlier life is lost (the
    /// connection it travelled on died with that process).
    to_life: u64,
    /// Sent across a partition (or drawn as lost): lost even if it heals before delivery.
    cut: bool,
}

impl PartialEq for Flight {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Flight {}
impl PartialOrd for Flight {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Flight {
    fn cmp(&self, other: &Self) -> Ordering {
        // Reversed: BinaryHeap is a max-heap, we want the earliest.
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// One simulated process and its disk.
#[derive(Debug, Default)]
struct SimNode {
    /// `None` while down (crashed or not started yet).
    machine: Option<Machine>,
    /// The stored cells: what survives a crash.
    disk: Cells,
    /// The health check's verdict; survives restarts (it is about the host).
    eligible: bool,
    paused: bool,
    /// Events that arrived while paused, handled on resume.
    inbox: VecDeque<Event>,
    /// Counts starts; messages to an earlier life are lost.
    life: u64,
    /// Highest epoch this node revealed (views and messages) in any life.
    revealed: Option<Epoch>,
    /// Highest term this node declared.
    declared_term: u64,
    /// The machine stopped advancing its deadline; its timers are no longer fired.
    stalled: bool,
    /// Clock rate in per mille of real time, and the clock's reading at real time 0.
    rate: u64,
    origin: Millis,
    /// When the current pause began (its connections die after D).
    paused_at: Option<Millis>,
}

impl SimNode {
    /// This node's clock reading at real (simulated) time `at`.
    fn local(&self, at: Millis) -> Millis {
        self.origin + at * self.rate / 1000
    }

    /// The first real time at which this node's clock reads at least `local`.
    fn real(&self, local: Millis) -> Millis {
        let elapsed = local.saturating_sub(self.origin);
        (elapsed * 1000).div_ceil(self.rate)
    }
}

/// Upper bound on handled events per run, so a message storm fails instead of hanging.
const MAX_STEPS: u64 = 5_000_000;

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
    /// Latest delivery time scheduled per link (keeps each link FIFO).
    link_busy: BTreeMap<(NodeId, NodeId), Millis>,
    /// Partition group of each node; empty when healed.
    groups: BTreeMap<NodeId, usize>,
    /// Percent of messages lost at random (0 unless a lossy fault is in effect).
    loss_percent: u8,
    /// Nodes that hear no one (one-way links: what they send still arrives) until healed.
    deaf: BTreeSet<NodeId>,
    armed: Vec<(NodeId, CrashPoint)>,
    history: Vec<Entry>,
    sent: BTreeMap<MessageKind, u64>,
    safety: Safety,
    violations: Vec<Violation>,
    /// Index into `history` of the entry at which the first violation was found.
    first_violation_at: Option<usize>,
    steps: u64,
}

impl Sim {
    /// A cluster with every node down; call [`Sim::start`] for each.
    pub fn new(config: SimConfig) -> Sim {
        let mut rng = SmallRng::seed_from_u64(config.seed);
        let drift = config.drift_permille.min(500);
        let nodes = config
            .ids
            .iter()
            .map(|&id| {
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
            seq: 0,
            link_busy: BTreeMap::new(),
            groups: BTreeMap::new(),
            loss_percent: 0,
            deaf: BTreeSet::new(),
            armed: Vec::new(),
            history: Vec::new(),
            sent: BTreeMap::new(),
            safety: Safety::new(),
            violations: Vec::new(),
            first_violation_at: None,
            steps: 0,
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

    /// Starts a node that is down (first start or restart after a crash) from its
    /// stored cells, as `Machine::start` does in the runtime. Ignored if it is up.
    pub fn start(&mut self, id: NodeId) {
        let Some(node) = self.nodes.get_mut(&id) else {
            return;
        };
        if node.machine.is_some() {
            return;
        }
        node.life += 1;
        node.stalled = false;
        let config = MachineConfig {
            id,
            peers: self
                .config
                .ids
                .iter()
                .copied()
                .filter(|&p| p != id)
                .collect(),
            timing: self.config.timing_of(id),
            preempt: self.config.preempt,
            eligible: node.eligible,
            mode: self.config.mode,
            witness: self.config.witnesses.contains(&id),
            witnesses: self.config.witnesses.clone(),
            recover_empty_store: self.config.flaw != Some(Flaw::SkipStoreRecovery),
            flaw: self.config.flaw,
        };
        let incarnation = node.disk.incarnation + 1;
        let local = node.local(self.now);
        node.machine = Some(Machine::start(config, node.disk, local));
        self.record(id, Record::Started { incarnation });
        self.drain(id);
        // The new process dials its peers and they dial it: PeerUp on both ends. A dial
        // that reaches nobody fails when the handshake bound (20 D) runs out, unless the
        // peer came up meanwhile (then its own start reports the link up).
        for peer in self.config.ids.clone() {
            if peer != id && self.is_up(peer) {
                self.notice_after_delay(id, peer, true);
                self.notice_after_delay(peer, id, true);
            } else if peer != id {
                self.notice_after_idle_timeout(id, peer);
            }
        }
    }

    /// The transport's connection notices, as the runtime gets them: a connection that
    /// stops carrying packets is reported down between the silence timeout (20 D, a link
    /// with traffic) and QUIC's idle timeout (200 D, a quiet link whose peer never pings
    /// it); one that (re)connects is reported up after a handshake (one delay). Each
    /// notice is checked again when it falls due, so a link that recovered in the
    /// meantime is not reported. Notices are hints: nothing safe depends on when, or
    /// whether, one comes.
    fn notice_at(&mut self, at: Millis, node: NodeId, peer: NodeId, up: bool) {
        self.seq += 1;
        self.notices.insert((at, self.seq), (node, peer, up));
    }

    fn notice_after_delay(&mut self, node: NodeId, peer: NodeId, up: bool) {
        let (lo, hi) = self.config.delay_ms;
        let at = self.now + self.rng.gen_range(lo..=hi.max(lo));
        self.notice_at(at, node, peer, up);
    }

    fn notice_after_idle_timeout(&mut self, node: NodeId, peer: NodeId) {
        let timing = &self.config.timing;
        let (lo, hi) = (
            timing.peer_idle_timeout_ms(),
            timing.quiet_link_timeout_ms(),
        );
        let at = self.now + self.rng.gen_range(lo..=hi.max(lo));
        self.notice_at(at, node, peer, false);
    }

    /// Whether the connection between `a` and `b` carries packets: both up, on one side
    /// of any partition, and neither paused for so long that its connections timed out.
    fn link_alive(&self, a: NodeId, b: NodeId) -> bool {
        let timeout = self.config.timing.peer_idle_timeout_ms();
        let alive = |id: NodeId| {
            self.nodes.get(&id).is_some_and(|n| {
                n.machine.is_some() && n.paused_at.map_or(true, |at| self.now < at + timeout)
            })
        };
        alive(a) && alive(b) && self.connected(a, b)
    }

    fn fire_notice(&mut self, node: NodeId, peer: NodeId, up: bool) {
        if !self.is_up(node) || self.link_alive(node, peer) != up {
            return;
        }
        if up {
            // A connection made now also ends any dial failure still pending for it.
            self.notices
                .retain(|_, &mut (n, p, u)| !(n == node && p == peer && !u));
            self.deliver_event(node, Event::PeerUp(peer));
        } else {
            self.record(node, Record::PeerDown { peer });
            self.deliver_event(node, Event::PeerDown(peer));
        }
    }

    /// Kills a node: its machine (volatile state) and inbox are gone, its stored cells
    /// stay. Of the messages it still has in flight, each link loses a random suffix
    /// (what the dead process had not yet got onto the wire).
    pub fn crash(&mut self, id: NodeId) {
        let Some(node) = self.nodes.get_mut(&id) else {
            return;
        };
        if node.machine.take().is_none() {
            return;
        }
        node.paused = false;
        node.paused_at = None;
        node.inbox.clear();
        let (disk, revealed, declared) = (node.disk, node.revealed, node.declared_term);
        self.armed.retain(|&(n, _)| n != id);
        self.record(id, Record::Crashed);
        for peer in self.config.ids.clone() {
            if peer != id && self.is_up(peer) {
                self.notice_after_idle_timeout(peer, id);
            }
        }
        if revealed > disk.accepted || declared > disk.term {
            self.violate(
                Invariant::Durability,
                id,
                format!(
                    "crash keeps cells {disk:?}, but the node revealed {revealed:?} and declared term {declared}"
                ),
            );
        }
        self.lose_unsent_suffix(id);
    }

    /// The disk of a node that is down is lost (a replaced disk, a container without
    /// its volume): its next start is on an empty store. Crashes it first if it is up.
    pub fn lose_store(&mut self, id: NodeId) {
        self.crash(id);
        let Some(node) = self.nodes.get_mut(&id) else {
            return;
        };
        node.disk = Cells::default();
        node.revealed = None;
        node.declared_term = 0;
        self.record(id, Record::StoreLost);
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

    fn lose_unsent_suffix(&mut self, id: NodeId) {
        let mut flights = std::mem::take(&mut self.flights).into_sorted_vec();
        flights.reverse(); // earliest first
        let mut per_link: BTreeMap<NodeId, usize> = BTreeMap::new();
        for f in flights.iter().filter(|f| f.from == id) {
            *per_link.entry(f.to).or_default() += 1;
        }
        // Keep a random prefix of each link's in-flight messages.
        let mut keep: BTreeMap<NodeId, usize> = BTreeMap::new();
        for (&to, &count) in &per_link {
            keep.insert(to, self.rng.gen_range(0..=count));
        }
        let mut lost = Vec::new();
        for f in flights {
            match keep.get_mut(&f.to) {
                Some(k) if f.from == id => {
                    if *k > 0 {
                        *k -= 1;
                        self.flights.push(f);
                    } else {
                        lost.push(f);
                    }
                }
                _ => self.flights.push(f),
            }
        }
        for f in lost {
            self.record(
                f.to,
                Record::Lost {
                    from: f.from,
                    msg: f.msg,
                },
            );
        }
    }

    /// Crashes `id` right after it next runs an action matching `point` (see
    /// [`CrashPoint`]). Stays armed until it fires, the node crashes otherwise, or
    /// [`Sim::disarm`].
    pub fn arm_crash(&mut self, id: NodeId, point: CrashPoint) {
        self.armed.push((id, point));
    }

    /// Removes every armed crash.
    pub fn disarm(&mut self) {
        self.armed.clear();
    }

    /// Stops a running node (SIGSTOP): messages and notices queue, timers wait.
    pub fn pause(&mut self, id: NodeId) {
        if self.is_up(id) && !self.is_paused(id) {
            let now = self.now;
            if let Some(n) = self.nodes.get_mut(&id) {
                n.paused = true;
                n.paused_at = Some(now);
            }
            self.record(id, Record::Paused);
            // A machine sabotaged to ignore its lease keeps office past it: no bound.
            let honours_lease = self.config.flaw != Some(Flaw::IgnoreLease);
            let lease_until = self.nodes.get(&id).and_then(|n| {
                let until = n.machine.as_ref()?.lease_until()?;
                honours_lease.then(|| n.real(until))
            });
            if let Some(until_ms) = lease_until {
                self.record(id, Record::PausedLease { until_ms });
            }
            for peer in self.config.ids.clone() {
                if peer != id && self.is_up(peer) {
                    self.notice_after_idle_timeout(peer, id);
                    self.notice_after_idle_timeout(id, peer);
                }
            }
        }
    }

    /// Continues a paused node (SIGCONT). It handles its queue and its overdue timer;
    /// which comes first is drawn at random, as it is a race in the real runtime.
    pub fn resume(&mut self, id: NodeId) {
        if !self.is_paused(id) {
            return;
        }
        let timeout = self.config.timing.peer_idle_timeout_ms();
        let now = self.now;
        let (mut inbox, timed_out) = match self.nodes.get_mut(&id) {
            Some(n) => {
                n.paused = false;
                let timed_out = n.paused_at.take().is_some_and(|at| now >= at + timeout);
                (std::mem::take(&mut n.inbox), timed_out)
            }
            None => return,
        };
        self.record(id, Record::Resumed);
        if timed_out {
            // Its connections timed out while it slept: what they carried is gone, and
            // both ends reconnect.
            inbox.retain(|e| !matches!(e, Event::Message { .. }));
            for peer in self.config.ids.clone() {
                if peer != id && self.is_up(peer) {
                    self.notice_after_delay(id, peer, true);
                    self.notice_after_delay(peer, id, true);
                }
            }
        }
        let tick_first = self.rng.gen_bool(0.5);
        if tick_first {
            self.tick_if_due(id);
        }
        for event in inbox {
            if !self.is_up(id) {
                return; // an armed crash fired
            }
            self.feed(id, event);
        }
    }

    /// Splits the cluster: messages between different groups are lost (sent across the
    /// cut, or arriving while it is in effect). Nodes in no group form one more group.
    pub fn partition(&mut self, groups: &[Vec<NodeId>]) {
        self.heal();
        for (i, group) in groups.iter().enumerate() {
            for &id in group {
                self.groups.insert(id, i + 1);
            }
        }
        for id in self.config.ids.clone() {
            self.groups.entry(id).or_insert(0);
        }
        for id in self.config.ids.clone() {
            let cut_off: Vec<NodeId> = self
                .config
                .ids
                .iter()
                .copied()
                .filter(|&p| self.groups[&p] != self.groups[&id])
                .collect();
            if !cut_off.is_empty() {
                for &peer in &cut_off {
                    if self.is_up(id) {
                        self.notice_after_idle_timeout(id, peer);
                    }
                }
                self.record(id, Record::Partitioned { cut_off });
            }
        }
    }

    /// One-way links: `id` hears no one (every message to it is lost) while what it
    /// sends still arrives, until [`Sim::heal`] — a firewall rule that drops one
    /// direction. Its connections time out at both ends, as a partition's do.
    pub fn deafen(&mut self, id: NodeId) {
        self.heal();
        self.deaf.insert(id);
        let others: Vec<NodeId> = self
            .config
            .ids
            .iter()
            .copied()
            .filter(|&p| p != id)
            .collect();
        for &peer in &others {
            for (node, other) in [(id, peer), (peer, id)] {
                if self.is_up(node) {
                    self.notice_after_idle_timeout(node, other);
                }
            }
        }
        self.record(id, Record::Partitioned { cut_off: others });
    }

    /// Makes the network lose `percent` of all messages at random (decided when each
    /// is sent) until [`Sim::heal`]. The only fault that loses single messages.
    pub fn set_loss(&mut self, percent: u8) {
        let percent = percent.min(100);
        if percent == 0 {
            return;
        }
        self.loss_percent = percent;
        for id in self.config.ids.clone() {
            self.record(id, Record::Lossy { percent });
        }
    }

    /// Ends any partition and any message loss.
    pub fn heal(&mut self) {
        if !self.is_disturbed() {
            return;
        }
        let lossy = self.loss_percent > 0;
        let ids = self.config.ids.clone();
        for id in ids {
            if lossy || self.config.ids.iter().any(|p| !self.connected(id, *p)) {
                self.record(id, Record::Healed);
            }
        }
        let cut: Vec<(NodeId, NodeId)> = ids_pairs(&self.config.ids)
            .filter(|&(a, b)| !self.connected(a, b))
            .collect();
        self.groups.clear();
        self.deaf.clear();
        self.loss_percent = 0;
        for (a, b) in cut {
            if self.is_up(a) && self.is_up(b) {
                self.notice_after_delay(a, b, true);
                self.notice_after_delay(b, a, true);
            }
        }
    }

    /// Whether a partition or message loss is in effect.
    pub fn is_disturbed(&self) -> bool {
        !self.groups.is_empty() || self.loss_percent > 0 || !self.deaf.is_empty()
    }

    /// Whether the link between `a` and `b` carries packets both ways.
    fn connected(&self, a: NodeId, b: NodeId) -> bool {
        self.delivers(a, b) && self.delivers(b, a)
    }

    /// Whether a message from `from` reaches `to`: same side of any partition, and
    /// `to` not deaf.
    fn delivers(&self, from: NodeId, to: NodeId) -> bool {
        self.groups.get(&from) == self.groups.get(&to) && !self.deaf.contains(&to)
    }

    /// The transport of `node` reports `peer` down (queued if `node` is paused). If the
    /// link in fact works, its redial succeeds and reports the peer up again one delay
    /// later, as the real transport does.
    pub fn peer_down(&mut self, node: NodeId, peer: NodeId) {
        if self.is_up(node) {
            self.record(node, Record::PeerDown { peer });
            self.deliver_event(node, Event::PeerDown(peer));
            if self.link_alive(node, peer) {
                self.notice_after_delay(node, peer, true);
            }
        }
    }

    /// The health check of `node` passes or fails. Remembered across restarts.
    pub fn set_eligible(&mut self, node: NodeId, eligible: bool) {
        if self.config.witnesses.contains(&node) {
            return; // a witness never leads, whatever its health
        }
        let Some(n) = self.nodes.get_mut(&node) else {
            return;
        };
        if n.eligible == eligible {
            return;
        }
        n.eligible = eligible;
        self.record(node, Record::EligibilitySet { eligible });
        if self.is_up(node) {
            self.deliver_event(node, Event::SetEligible(eligible));
        }
    }

    /// Runs deliveries and timers in time order up to and including `until`, then sets
    /// the clock to `until`. At equal times, deliveries go first (in send order), then
    /// timers (by node ID).
    pub fn run_until(&mut self, until: Millis) {
        self.run_while(until, |_| true);
    }

    /// Like [`Sim::run_until`], but stops early (returning true) as soon as `done`
    /// holds after a step; the clock then stays at that step's time.
    pub fn run_until_or(&mut self, until: Millis, mut done: impl FnMut(&Sim) -> bool) -> bool {
        let mut finished = false;
        self.run_while(until, |sim| {
            finished = done(sim);
            !finished
        });
        finished
    }

    fn run_while(&mut self, until: Millis, mut go_on: impl FnMut(&Sim) -> bool) {
        loop {
            if self.steps >= MAX_STEPS {
                if self.steps == MAX_STEPS {
                    self.steps += 1; // report once
                    self.violate(
                        Invariant::Protocol,
                        0,
                        format!("more than {MAX_STEPS} events: a message storm"),
                    );
                }
                break;
            }
            let next_flight = self.flights.peek().map(|f| f.at);
            let next_timer = self
                .nodes
                .iter()
                .filter(|(_, n)| !n.paused && !n.stalled)
                .filter_map(|(&id, n)| {
                    n.machine
                        .as_ref()
                        .map(|m| (n.real(m.next_deadline()).max(self.now), id))
                })
                .min();
            if let Some((&(at, seq), _)) = self.notices.iter().next() {
                let first = next_flight.map_or(true, |f| at < f)
                    && next_timer.map_or(true, |(t, _)| at < t);
                if first {
                    if at > until {
                        break;
                    }
                    self.now = self.now.max(at);
                    self.steps += 1;
                    if let Some((node, peer, up)) = self.notices.remove(&(at, seq)) {
                        self.fire_notice(node, peer, up);
                    }
                    if !go_on(self) {
                        return;
                    }
                    continue;
                }
            }
            let take_flight = match (next_flight, next_timer) {
                (Some(f), Some((t, _))) => f <= t,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            let at = if take_flight {
                next_flight.unwrap_or(until)
            } else {
                next_timer.map_or(until, |(t, _)| t)
            };
            if at > until {
                break;
            }
            self.now = self.now.max(at);
            self.steps += 1;
            if take_flight {
                if let Some(flight) = self.flights.pop() {
                    self.land(flight);
                }
            } else if let Some((_, id)) = next_timer {
                self.tick_if_due(id);
            }
            if !go_on(self) {
                return;
            }
        }
        self.now = self.now.max(until);
    }

    fn land(&mut self, f: Flight) {
        let node = &self.nodes[&f.to];
        let timeout = self.config.timing.peer_idle_timeout_ms();
        let lost = f.cut
            || !self.delivers(f.from, f.to)
            || node.paused_at.is_some_and(|at| self.now >= at + timeout)
            || node.machine.is_none()
            || node.life != f.to_life;
        if lost {
            self.record(
                f.to,
                Record::Lost {
                    from: f.from,
                    msg: f.msg,
                },
            );
            return;
        }
        self.deliver_event(
            f.to,
            Event::Message {
                from: f.from,
                msg: f.msg,
            },
        );
    }

    /// Hands an event to a running node now, or queues it if the node is paused.
    fn deliver_event(&mut self, id: NodeId, event: Event) {
        let Some(node) = self.nodes.get_mut(&id) else {
            return;
        };
        if node.paused {
            node.inbox.push_back(event);
        } else {
            self.feed(id, event);
        }
    }

    fn tick_if_due(&mut self, id: NodeId) {
        let due = self.next_deadline(id).is_some_and(|d| d <= self.now);
        if !due {
            return;
        }
        self.feed(id, Event::Tick);
        if let Some(next) = self.next_deadline(id) {
            if next <= self.now {
                if let Some(n) = self.nodes.get_mut(&id) {
                    n.stalled = true;
                }
                self.violate(
                    Invariant::Protocol,
                    id,
                    format!(
                        "after a tick at {} ms the next deadline is {next} ms",
                        self.now
                    ),
                );
            }
        }
    }

    fn feed(&mut self, id: NodeId, event: Event) {
        if let Event::Message { from, msg } = event {
            self.record(id, Record::Received { from, msg });
        }
        let Some(node) = self.nodes.get_mut(&id) else {
            return;
        };
        let now = node.local(self.now);
        let Some(machine) = node.machine.as_mut() else {
            return;
        };
        machine.handle(event, now);
        self.drain(id);
    }

    /// Runs a node's pending actions in order, as the runtime does.
    fn drain(&mut self, id: NodeId) {
        loop {
            let action = self
                .nodes
                .get_mut(&id)
                .and_then(|n| n.machine.as_mut())
                .and_then(Machine::poll_action);
            let Some(action) = action else {
                return;
            };
            let point = match action {
                Action::Persist(cells) => {
                    if let Some(node) = self.nodes.get_mut(&id) {
                        node.disk = cells;
                    }
                    self.record(id, Record::Persisted(cells));
                    CrashPoint::AfterPersist
                }
                Action::Fact(fact) => {
                    let fact = self.fact_in_real_time(id, fact);
                    self.record(id, Record::Fact(fact));
                    continue;
                }
                Action::Send { to, msg } => {
                    self.check_reveal(id, &msg);
                    self.send(id, to, msg);
                    CrashPoint::AfterSend(msg.body.kind())
                }
                Action::ViewChanged(view) => {
                    if let Some(node) = self.nodes.get_mut(&id) {
                        node.revealed = node.revealed.max(view.epoch);
                    }
                    self.record(id, Record::View(view));
                    continue;
                }
                Action::Misbehaved { peer, what } => {
                    let what = what.to_string();
                    self.record(
                        id,
                        Record::Misbehaved {
                            peer,
                            what: what.clone(),
                        },
                    );
                    self.violate(
                        Invariant::Protocol,
                        id,
                        format!("flagged honest peer {peer}: {what}"),
                    );
                    continue;
                }
            };
            if let Some(i) = self.armed.iter().position(|&a| a == (id, point)) {
                self.armed.remove(i);
                self.crash(id);
                return;
            }
        }
    }

    /// Notes what a fact tells the simulator's own checks, and puts a demotion's
    /// office end (the node's clock) on the simulator's real clock.
    fn fact_in_real_time(&mut self, id: NodeId, fact: Fact) -> Fact {
        let Some(node) = self.nodes.get_mut(&id) else {
            return fact;
        };
        match fact {
            Fact::Declared { epoch } => {
                node.declared_term = node.declared_term.max(epoch.term);
                fact
            }
            Fact::Demoted {
                epoch,
                reason,
                office_ended_at,
            } => Fact::Demoted {
                epoch,
                reason,
                office_ended_at: node.real(office_ended_at).min(self.now),
            },
            _ => fact,
        }
    }

    /// I3 for messages: an epoch a node puts in a message must already be in its
    /// stored cells; a claim (Coordinator, Heartbeat, Resign) must be its accepted epoch.
    fn check_reveal(&mut self, id: NodeId, msg: &Message) {
        let disk = self.nodes[&id].disk;
        let (epoch, claim) = match msg.body {
            Body::Coordinator { epoch }
            | Body::Heartbeat { epoch, .. }
            | Body::Resign { epoch } => (Some(epoch), true),
            Body::Election { accepted } | Body::Ack { accepted, .. } => (accepted, false),
            Body::Answer
            | Body::Probe
            | Body::PreVote { .. }
            | Body::Vote { .. }
            | Body::TermQuery
            | Body::TermReport => (None, false),
        };
        let ok = if claim {
            epoch == disk.accepted
        } else {
            epoch <= disk.accepted
        };
        if !ok {
            self.violate(
                Invariant::Durability,
                id,
                format!(
                    "sends {:?} revealing {epoch:?}, but its stored accepted epoch is {:?}",
                    msg.body, disk.accepted
                ),
            );
        }
        if let Some(node) = self.nodes.get_mut(&id) {
            node.revealed = node.revealed.max(epoch);
        }
    }

    fn send(&mut self, from: NodeId, to: NodeId, msg: Message) {
        *self.sent.entry(msg.body.kind()).or_default() += 1;
        self.record(from, Record::Sent { to, msg });
        let Some(to_life) = self.nodes.get(&to).map(|n| n.life) else {
            return;
        };
        let (lo, hi) = self.config.delay_ms;
        let delay = self.rng.gen_range(lo..=hi.max(lo));
        let busy = self.link_busy.entry((from, to)).or_default();
        let at = (self.now + delay).max(*busy);
        *busy = at;
        self.seq += 1;
        let cut = !self.delivers(from, to)
            || (self.loss_percent > 0 && self.rng.gen_range(0..100) < self.loss_percent);
        self.flights.push(Flight {
            at,
            seq: self.seq,
            from,
            to,
            msg,
            to_life,
            cut,
        });
    }

    fn record(&mut self, node: NodeId, record: Record) {
        let entry = Entry {
            at_ms: self.now,
            node,
            record,
        };
        let before = self.violations.len();
        self.safety.observe(&entry, &mut self.violations);
        self.history.push(entry);
        if self.violations.len() > before && self.first_violation_at.is_none() {
            self.first_violation_at = Some(self.history.len());
        }
    }

    fn violate(&mut self, invariant: Invariant, node: NodeId, explanation: String) {
        self.violations.push(Violation {
            invariant,
            node,
            at_ms: self.now,
            explanation,
        });
        if self.first_violation_at.is_none() {
            self.first_violation_at = Some(self.history.len());
        }
    }
}

/// Every unordered pair of distinct IDs.
fn ids_pairs(ids: &[NodeId]) -> impl Iterator<Item = (NodeId, NodeId)> + '_ {
    ids.iter()
        .enumerate()
        .flat_map(move |(i, &a)| ids[i + 1..].iter().map(move |&b| (a, b)))
}
