//! Exhaustive model checking of the real [`Machine`]: every interleaving of a small
//! cluster (N ≤ 4) within stated bounds, explored breadth-first, each state checked.
//!
//! The model wraps the machine unchanged: a [`World`] holds N machines, their stored
//! cells, one FIFO queue per directed link and one global clock. A [`Step`] is one of:
//! deliver the head of a link (lost if the receiver is down or cut off; waits while it
//! is paused), fire a due timer, advance the clock to the next deadline of any node,
//! crash, restart, pause, resume, cut a minority off, heal, flip a node's health. Time
//! only moves by `Advance`, so a message can wait in its queue across any number of
//! advances: delays are arbitrary up to the time bound.
//!
//! Properties, each named in a [`Violation`]:
//! - I1 accepted epochs never go back; I2 the term cell never goes back and a node
//!   never declares a term twice; I3 a message reveals no epoch the sender's stored
//!   cells do not hold;
//! - I7 (quorum) one coordinator per term, ever; I6 (quorum) no node becomes
//!   coordinator while another one's lease is still running;
//! - Q6 (quorum) a node raises the term only if a live majority was reachable at some
//!   point of its election;
//! - liveness: from every state, once every fault ends (heal, resume), a fair schedule
//!   reaches one coordinator that every live node follows within a step bound.
//!
//! Visited states are stored as 64-bit fingerprints (hash compaction, like TLC and
//! SPIN): a collision could hide a state, never invent a violation. A counterexample is
//! the step list from the start, replayed to print each state.

use crate::protocol::{
    Action, Body, Cells, Epoch, Event, Fact, Flaw, Machine, MachineConfig, Message, Millis, Mode,
    NodeId, Preempt, Role, Timing,
};
use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fmt;
use std::hash::{Hash, Hasher};

/// What keeps the state space finite; printed with every result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Steps from the initial state.
    pub depth: usize,
    /// The global clock never passes this (ms of the model's timing).
    pub time: Millis,
    pub crashes: u8,
    /// Crashes that also lose the node's store (it restarts on an empty one).
    pub wipes: u8,
    pub partitions: u8,
    pub pauses: u8,
    pub health_flips: u8,
    /// States whose highest term exceeds this are not expanded.
    pub term: u64,
    /// Steps the fair schedule of the liveness check may take.
    pub liveness_steps: usize,
}

/// One model: the cluster, its settings and the bounds.
#[derive(Debug, Clone)]
pub struct ModelConfig {
    pub ids: Vec<NodeId>,
    pub mode: Mode,
    pub witness: Option<NodeId>,
    pub preempt: Preempt,
    pub timing: Timing,
    pub flaw: Option<Flaw>,
    pub bounds: Bounds,
    /// Start from the cluster already settled under its highest node (every link
    /// empty), so the depth bound is spent on faults and failovers, not on start-up.
    pub settled_start: bool,
}

impl ModelConfig {
    /// Small timing (heartbeat 2, D 5, T 1, T' 2) keeps the clock's values few while
    /// keeping every relation the machine relies on (D > 2 heartbeats, T' ≥ T).
    pub fn small_timing() -> Timing {
        Timing {
            heartbeat_ms: 2,
            suspect_after_ms: 5,
            answer_timeout_ms: 1,
            coordinator_timeout_ms: 2,
            preempt_delay_ms: 0,
        }
    }

    fn majority(&self) -> usize {
        self.ids.len() / 2 + 1
    }

    fn machine_config(&self, id: NodeId, eligible: bool) -> MachineConfig {
        MachineConfig {
            id,
            peers: self.ids.iter().copied().filter(|&p| p != id).collect(),
            timing: self.timing,
            preempt: self.preempt,
            eligible,
            mode: self.mode,
            witness: self.witness == Some(id),
            witnesses: self.witness.into_iter().collect(),
            recover_empty_store: self.flaw != Some(Flaw::SkipStoreRecovery),
            flaw: self.flaw,
        }
    }
}

/// One transition of the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Step {
    Deliver {
        from: NodeId,
        to: NodeId,
    },
    Tick(NodeId),
    Advance(Millis),
    Crash(NodeId),
    /// A crash that also loses the node's store (a replaced disk).
    Wipe(NodeId),
    Restart(NodeId),
    Pause(NodeId),
    Resume(NodeId),
    /// Cut these nodes off from the rest.
    Cut(u8),
    Heal,
    Health(NodeId, bool),
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Deliver { from, to } => write!(f, "deliver n{from} -> n{to}"),
            Step::Tick(n) => write!(f, "timer of n{n} fires"),
            Step::Advance(t) => write!(f, "clock to {t}"),
            Step::Crash(n) => write!(f, "crash n{n}"),
            Step::Wipe(n) => write!(f, "crash n{n}, its store lost"),
            Step::Restart(n) => write!(f, "restart n{n}"),
            Step::Pause(n) => write!(f, "pause n{n}"),
            Step::Resume(n) => write!(f, "resume n{n}"),
            Step::Cut(mask) => write!(f, "cut off node set {mask:#06b} (bit i = i-th member)"),
            Step::Heal => write!(f, "heal"),
            Step::Health(n, ok) => {
                write!(f, "n{n} health {}", if *ok { "passes" } else { "fails" })
            }
        }
    }
}

/// A property broken in some state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub property: &'static str,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Node {
    machine: Option<Machine>,
    disk: Cells,
    paused: bool,
    eligible: bool,
    declared: u64,
    /// Reached a live majority at some point since it began asking for the term it
    /// may declare next (Q6). Pre-votes are per term, so a vote given in an earlier
    /// election for the same term still counts, and so does the contact it came from.
    contact: bool,
    /// The highest term seen when `contact` was last reset.
    contact_term: u64,
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
    /// Quorum: the coordinator of each term so far (I7).
    holders: BTreeMap<u64, NodeId>,
}

/// The result of one exploration.
#[derive(Debug, Clone)]
pub struct Exploration {
    pub states: usize,
    pub transitions: usize,
    pub max_depth: usize,
    /// Whether the depth bound cut some paths short (otherwise the bounded space was
    /// explored to its end).
    pub depth_limited: bool,
    pub liveness_checked: usize,
    pub counterexample: Option<Counterexample>,
}

/// A path to a violation.
#[derive(Debug, Clone)]
pub struct Counterexample {
    pub violation: Violation,
    pub steps: Vec<Step>,
    /// One line per step: the step and the nodes' roles after it.
    pub trace: Vec<String>,
}

impl fmt::Display for Counterexample {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} violated: {}",
            self.violation.property, self.violation.detail
        )?;
        for (i, line) in self.trace.iter().enumerate() {
            writeln!(f, "  {:>3}. {line}", i + 1)?;
        }
        Ok(())
    }
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

    fn n(&self) -> usize {
        self.config.ids.len()
    }

    fn index(&self, id: NodeId) -> usize {
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
                    paused: false,
                    eligible: true,
                    declared: 0,
                    contact: false,
                    contact_term: 0,
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
            holders: BTreeMap::new(),
        };
        for i in 0..n {
            self.start(&mut world, i)?;
        }
        if self.config.settled_start {
            world = self.settle(world)?;
        }
        Ok(world)
    }

    /// Runs the fair schedule until one coordinator leads all and every link is empty.
    fn settle(&self, mut w: World) -> Result<World, Violation> {
        let live: Vec<usize> = (0..self.n()).collect();
        for _ in 0..self.config.bounds.liveness_steps {
            if self.settled(&w, &live) && w.links.iter().all(VecDeque::is_empty) {
                return Ok(w);
            }
            let Some(step) = self.fair_step(&w) else {
                break;
            };
            w = self.apply(&w, step)?;
        }
        fail("liveness", "the fault-free start-up did not settle".into())
    }

    /// The fair schedule's next step: the oldest link first, then due timers, then time.
    fn fair_step(&self, w: &World) -> Option<Step> {
        let n = self.n();
        (0..n * n)
            .find(|&k| !w.links[k].is_empty())
            .map(|k| Step::Deliver {
                from: self.config.ids[k / n],
                to: self.config.ids[k % n],
            })
            .or_else(|| {
                (0..n)
                    .find(|&i| self.deadline(w, i).is_some_and(|d| d <= w.now))
                    .map(|i| Step::Tick(self.config.ids[i]))
            })
            .or_else(|| {
                (0..n)
                    .filter_map(|i| self.deadline(w, i))
                    .min()
                    .map(Step::Advance)
            })
    }

    fn start(&self, w: &mut World, i: usize) -> Result<(), Violation> {
        let id = self.config.ids[i];
        let config = self.config.machine_config(id, w.nodes[i].eligible);
        w.nodes[i].machine = Some(Machine::start(config, w.nodes[i].disk, w.now));
        w.nodes[i].paused = false;
        w.nodes[i].contact = false;
        self.run_actions(w, i)?;
        // Its transport dials every peer at once: the reachable ones are reported up,
        // the others down (a failed dial), in one step; the machine's later messages
        // may still be lost or delayed like any other.
        for p in 0..self.n() {
            if p != i {
                let peer = self.config.ids[p];
                let event = if self.up(w, p) && self.connected(w, i, p) {
                    Event::PeerUp(peer)
                } else {
                    Event::PeerDown(peer)
                };
                self.feed(w, i, event)?;
            }
        }
        Ok(())
    }

    fn up(&self, w: &World, i: usize) -> bool {
        w.nodes[i].machine.is_some()
    }

    fn connected(&self, w: &World, a: usize, b: usize) -> bool {
        (w.cut >> a & 1) == (w.cut >> b & 1)
    }

    fn has_live_majority(&self, w: &World, i: usize) -> bool {
        let live = (0..self.n())
            .filter(|&j| self.up(w, j) && !w.nodes[j].paused && self.connected(w, i, j))
            .count();
        live >= self.config.majority()
    }

    fn deadline(&self, w: &World, i: usize) -> Option<Millis> {
        let node = &w.nodes[i];
        if node.paused {
            return None;
        }
        node.machine.as_ref().map(Machine::next_deadline)
    }

    /// The steps enabled in `w`, in a fixed order.
    pub fn enabled(&self, w: &World) -> Vec<Step> {
        let n = self.n();
        let b = &self.config.bounds;
        let ids = &self.config.ids;
        let mut steps = Vec::new();
        for from in 0..n {
            for to in 0..n {
                let queue = &w.links[from * n + to];
                let waiting = self.up(w, to) && w.nodes[to].paused;
                if !queue.is_empty() && !waiting {
                    steps.push(Step::Deliver {
                        from: ids[from],
                        to: ids[to],
                    });
                }
            }
        }
        let due: Vec<usize> = (0..n)
            .filter(|&i| self.deadline(w, i).is_some_and(|d| d <= w.now))
            .collect();
        steps.extend(due.iter().map(|&i| Step::Tick(ids[i])));
        if due.is_empty() {
            let next = (0..n).filter_map(|i| self.deadline(w, i)).min();
            if let Some(t) = next.filter(|&t| t > w.now && t <= self.time_limit) {
                steps.push(Step::Advance(t));
            }
        }
        for (i, &id) in ids.iter().enumerate() {
            if self.up(w, i) {
                if w.crashes < b.crashes {
                    steps.push(Step::Crash(id));
                }
                if w.wipes < b.wipes {
                    steps.push(Step::Wipe(id));
                }
                if w.nodes[i].paused {
                    steps.push(Step::Resume(id));
                } else if w.pauses < b.pauses {
                    steps.push(Step::Pause(id));
                }
            } else {
                steps.push(Step::Restart(id));
            }
            if w.flips < b.health_flips && self.config.witness != Some(id) {
                steps.push(Step::Health(id, !w.nodes[i].eligible));
            }
        }
        if w.cut != 0 {
            steps.push(Step::Heal);
        } else if w.partitions < b.partitions {
            for mask in 1u8..(1 << n) {
                let size = mask.count_ones() as usize;
                // Minority sides only; a half of four counts once (the side with member 0).
                if size * 2 < n || (size * 2 == n && mask & 1 == 1) {
                    steps.push(Step::Cut(mask));
                }
            }
        }
        steps
    }

    /// Applies `step` to a copy of `w`.
    pub fn apply(&self, w: &World, step: Step) -> Result<World, Violation> {
        let mut w = w.clone();
        let n = self.n();
        // Contact counts from the state the step starts in (a heal or resume done
        // outside `apply`, as the liveness check does, is seen here).
        self.note_contact(&mut w);
        match step {
            Step::Deliver { from, to } => {
                let (f, t) = (self.index(from), self.index(to));
                let msg = w.links[f * n + t].pop_front();
                if let Some(msg) = msg {
                    if self.up(&w, t) && self.connected(&w, f, t) {
                        self.feed(&mut w, t, Event::Message { from, msg })?;
                    }
                }
            }
            Step::Tick(id) => self.feed(&mut w, self.index(id), Event::Tick)?,
            Step::Advance(t) => w.now = t,
            Step::Crash(id) => {
                self.crash(&mut w, self.index(id));
                w.crashes += 1;
            }
            Step::Wipe(id) => {
                let i = self.index(id);
                self.crash(&mut w, i);
                // A new, empty store: the per-node checks (I1, I2) start afresh; I7 and
                // I6 still see every coordinator the lost store helped elect.
                w.nodes[i].disk = Cells::default();
                w.nodes[i].declared = 0;
                w.wipes += 1;
            }
            Step::Restart(id) => self.start(&mut w, self.index(id))?,
            Step::Pause(id) => {
                w.nodes[self.index(id)].paused = true;
                w.pauses += 1;
            }
            Step::Resume(id) => w.nodes[self.index(id)].paused = false,
            Step::Cut(mask) => {
                w.cut = mask;
                w.partitions += 1;
            }
            Step::Heal => w.cut = 0,
            Step::Health(id, ok) => {
                let i = self.index(id);
                w.nodes[i].eligible = ok;
                w.flips += 1;
                if self.up(&w, i) && !w.nodes[i].paused {
                    self.feed(&mut w, i, Event::SetEligible(ok))?;
                }
            }
        }
        self.note_contact(&mut w);
        Ok(w)
    }

    /// Kills node `i`: its machine and the connections to it are gone, its store stays.
    fn crash(&self, w: &mut World, i: usize) {
        let n = self.n();
        w.nodes[i].machine = None;
        w.nodes[i].paused = false;
        for j in 0..n {
            w.links[j * n + i].clear(); // the connections to it died with it
        }
    }

    /// Marks every node that now reaches a live majority (Q6 bookkeeping).
    fn note_contact(&self, w: &mut World) {
        for i in 0..self.n() {
            if self.has_live_majority(w, i) {
                w.nodes[i].contact = true;
            }
        }
    }

    fn feed(&self, w: &mut World, i: usize, event: Event) -> Result<(), Violation> {
        let now = w.now;
        if let Some(m) = w.nodes[i].machine.as_mut() {
            m.handle(event, now);
        }
        self.run_actions(w, i)
    }

    /// Runs node `i`'s actions in order, checking each against the properties.
    fn run_actions(&self, w: &mut World, i: usize) -> Result<(), Violation> {
        let id = self.config.ids[i];
        let quorum = self.config.mode == Mode::Quorum;
        loop {
            let Some(action) = w.nodes[i].machine.as_mut().and_then(Machine::poll_action) else {
                return Ok(());
            };
            match action {
                Action::Persist(cells) => {
                    let disk = w.nodes[i].disk;
                    if cells.accepted < disk.accepted {
                        return fail("I1", format!("n{id} stores {cells:?} after {disk:?}"));
                    }
                    if cells.term < disk.term {
                        return fail("I2", format!("n{id}'s term cell goes back: {cells:?}"));
                    }
                    w.nodes[i].disk = cells;
                }
                Action::Send { to, msg } => self.send(w, i, to, msg)?,
                Action::Fact(Fact::ElectionStarted) => {
                    let seen = w.nodes[i].machine.as_ref().map_or(0, |m| m.seen_term());
                    let reached = self.has_live_majority(w, i);
                    let node = &mut w.nodes[i];
                    if seen != node.contact_term {
                        node.contact = reached;
                        node.contact_term = seen;
                    } else {
                        node.contact |= reached;
                    }
                }
                Action::Fact(Fact::Declared { epoch }) => {
                    if epoch.term <= w.nodes[i].declared {
                        return fail("I2", format!("n{id} declares term {} again", epoch.term));
                    }
                    w.nodes[i].declared = epoch.term;
                    if quorum && !w.nodes[i].contact {
                        return fail(
                            "Q6",
                            format!(
                                "n{id} raised the term to {} without ever reaching a live majority",
                                epoch.term
                            ),
                        );
                    }
                }
                Action::Fact(Fact::Established { epoch }) if quorum => {
                    self.established(w, i, epoch)?
                }
                Action::Misbehaved { peer, what } => {
                    return fail(
                        "machine contract",
                        format!("n{id} flags honest n{peer}: {what}"),
                    );
                }
                _ => {}
            }
        }
    }

    /// I3 for a send (it reveals only what node `i` stored), then queues it on its link.
    fn send(&self, w: &mut World, i: usize, to: NodeId, msg: Message) -> Result<(), Violation> {
        let disk = w.nodes[i].disk;
        let ok = match msg.body {
            Body::Coordinator { epoch }
            | Body::Heartbeat { epoch, .. }
            | Body::Resign { epoch } => Some(epoch) == disk.accepted,
            Body::Election { accepted } | Body::Ack { accepted, .. } => accepted <= disk.accepted,
            _ => true,
        };
        if !ok {
            let id = self.config.ids[i];
            return fail(
                "I3",
                format!("n{id} sends {:?} but stored {:?}", msg.body, disk.accepted),
            );
        }
        let t = self.index(to);
        w.links[i * self.n() + t].push_back(msg);
        Ok(())
    }

    /// I7 (one coordinator per term) and I6 (no other node still holds a lease) when
    /// node `i` establishes itself in quorum mode.
    fn established(&self, w: &mut World, i: usize, epoch: Epoch) -> Result<(), Violation> {
        let id = self.config.ids[i];
        if let Some(&holder) = w.holders.get(&epoch.term) {
            if holder != id {
                return fail(
                    "I7",
                    format!("n{id} leads term {}, which n{holder} led", epoch.term),
                );
            }
        }
        w.holders.insert(epoch.term, id);
        for (j, other) in w.nodes.iter().enumerate() {
            let Some(m) = other.machine.as_ref().filter(|_| j != i) else {
                continue;
            };
            if m.role_at(w.now) == Role::Coordinator {
                return fail(
                    "I6",
                    format!(
                        "n{id} becomes coordinator of {epoch} at {} while n{} still holds {:?} (lease until {:?})",
                        w.now,
                        self.config.ids[j],
                        m.view().epoch,
                        m.lease_until()
                    ),
                );
            }
        }
        Ok(())
    }

    fn highest_term(&self, w: &World) -> u64 {
        w.nodes.iter().map(|n| n.disk.term).max().unwrap_or(0)
    }

    /// Liveness from `w`: end every fault, then run a fair schedule (deliver the oldest
    /// link first, then fire due timers, then advance the clock) until one coordinator
    /// leads every live node, within the step bound.
    pub fn converges(&self, w: &World) -> Result<(), (Violation, Vec<Step>)> {
        self.converges_cached(w, &mut HashSet::new())
    }

    /// [`Model::converges`], skipping (and remembering) the fault-free states already
    /// known to converge: many states end their faults in the same place.
    fn converges_cached(
        &self,
        w: &World,
        known: &mut HashSet<u64>,
    ) -> Result<(), (Violation, Vec<Step>)> {
        let mut w = w.clone();
        let mut taken: Vec<Step> = Vec::new();
        if w.cut != 0 {
            w.cut = 0;
            taken.push(Step::Heal);
        }
        for (i, node) in w.nodes.iter_mut().enumerate() {
            if node.paused {
                node.paused = false;
                taken.push(Step::Resume(self.config.ids[i]));
            }
        }
        let n = self.n();
        let live: Vec<usize> = (0..n).filter(|&i| self.up(&w, i)).collect();
        let can_lead = live
            .iter()
            .any(|&i| w.nodes[i].eligible && self.config.witness != Some(self.config.ids[i]));
        let enough = match self.config.mode {
            Mode::Quorum => live.len() >= self.config.majority(),
            Mode::Classic => !live.is_empty(),
        };
        // A node on an empty store votes and leads only once M - q + 1 other members
        // reported their terms (src/protocol/recovery.rs): with fewer up, nothing is
        // promised.
        let needed = crate::protocol::recovery::reports_needed(n, self.config.majority());
        let recovering = live.iter().any(|&i| {
            w.nodes[i]
                .machine
                .as_ref()
                .is_some_and(|m| m.recovery_progress().is_some())
        });
        let enough = enough && (!recovering || live.len() > needed);
        if !can_lead || !enough {
            return Ok(()); // nothing is promised
        }
        let mut visited: Vec<u64> = Vec::new();
        for _ in 0..self.config.bounds.liveness_steps {
            let fp = fingerprint(&w);
            if known.contains(&fp) || self.settled(&w, &live) {
                known.extend(visited);
                return Ok(());
            }
            visited.push(fp);
            let Some(step) = self.fair_step(&w) else {
                break;
            };
            taken.push(step);
            w = self.apply(&w, step).map_err(|v| (v, taken.clone()))?;
        }
        if self.settled(&w, &live) {
            known.extend(visited);
            return Ok(());
        }
        let roles: Vec<String> = live
            .iter()
            .filter_map(|&i| w.nodes[i].machine.as_ref())
            .map(|m| format!("n{} {} {:?}", m.id(), m.role_at(w.now), m.view().epoch))
            .collect();
        Err((
            Violation {
                property: "liveness",
                detail: format!(
                    "no single coordinator {} steps after every fault ended: {}",
                    self.config.bounds.liveness_steps,
                    roles.join(", ")
                ),
            },
            taken,
        ))
    }

    fn settled(&self, w: &World, live: &[usize]) -> bool {
        let machines: Vec<&Machine> = live
            .iter()
            .filter_map(|&i| w.nodes[i].machine.as_ref())
            .collect();
        let leaders: Vec<&&Machine> = machines
            .iter()
            .filter(|m| m.role_at(w.now) == Role::Coordinator)
            .collect();
        let [leader] = leaders[..] else { return false };
        let epoch: Option<Epoch> = leader.view().epoch;
        machines
            .iter()
            .all(|m| m.view().epoch == epoch && m.view().role != Role::Candidate)
    }

    /// Breadth-first search over every state within the bounds.
    pub fn explore(&self) -> Exploration {
        let mut outcome = Exploration {
            states: 0,
            transitions: 0,
            max_depth: 0,
            depth_limited: false,
            liveness_checked: 0,
            counterexample: None,
        };
        let initial = match self.initial() {
            Ok(w) => w,
            Err(v) => {
                outcome.counterexample = Some(self.counterexample(v, Vec::new()));
                return outcome;
            }
        };
        let mut parents: HashMap<u64, (u64, Step)> = HashMap::new();
        let mut seen: HashSet<u64> = HashSet::new();
        let root = fingerprint(&initial);
        seen.insert(root);
        let mut frontier: VecDeque<(World, u64, usize)> = VecDeque::from([(initial, root, 0)]);
        let mut converging: HashSet<u64> = HashSet::new();
        while let Some((world, hash, depth)) = frontier.pop_front() {
            outcome.states += 1;
            outcome.max_depth = outcome.max_depth.max(depth);
            if let Err((v, fair)) = self.converges_cached(&world, &mut converging) {
                let mut steps = path(&parents, hash);
                let faulty = steps.len();
                steps.extend(fair);
                let mut c = self.counterexample(v, steps);
                c.trace.insert(
                    faulty.min(c.trace.len()),
                    "-- every fault ends; fair schedule:".into(),
                );
                outcome.counterexample = Some(c);
                return outcome;
            }
            outcome.liveness_checked += 1;
            if depth >= self.config.bounds.depth {
                outcome.depth_limited = true;
                continue;
            }
            if self.highest_term(&world) > self.config.bounds.term {
                continue;
            }
            for step in self.enabled(&world) {
                outcome.transitions += 1;
                match self.apply(&world, step) {
                    Ok(next) => {
                        let h = fingerprint(&next);
                        if seen.insert(h) {
                            parents.insert(h, (hash, step));
                            frontier.push_back((next, h, depth + 1));
                        }
                    }
                    Err(v) => {
                        let mut steps = path(&parents, hash);
                        steps.push(step);
                        outcome.counterexample = Some(self.counterexample(v, steps));
                        return outcome;
                    }
                }
            }
        }
        outcome
    }

    /// Replays `steps` from the initial state, one line per step.
    pub fn counterexample(&self, violation: Violation, steps: Vec<Step>) -> Counterexample {
        let mut trace = Vec::new();
        if let Ok(mut w) = self.initial() {
            for &step in &steps {
                match self.apply(&w, step) {
                    Ok(next) => {
                        trace.push(format!("{step}  => {}", self.describe(&next)));
                        w = next;
                    }
                    Err(v) => {
                        trace.push(format!("{step}  => {}: {}", v.property, v.detail));
                        break;
                    }
                }
            }
        }
        Counterexample {
            violation,
            steps,
            trace,
        }
    }

    /// The nodes' roles and epochs at a glance.
    pub fn describe(&self, w: &World) -> String {
        let nodes: Vec<String> = w
            .nodes
            .iter()
            .zip(&self.config.ids)
            .map(|(node, id)| match &node.machine {
                None => format!("n{id} down"),
                Some(m) => {
                    let epoch = m.view().epoch.map_or("-".to_string(), |e| e.to_string());
                    let paused = if node.paused { " paused" } else { "" };
                    format!("n{id} {} {epoch}{paused}", m.role_at(w.now))
                }
            })
            .collect();
        format!("t={} [{}]", w.now, nodes.join(", "))
    }

    /// Replays `steps`; the first violation met, if any (for regression tests).
    pub fn replay(&self, steps: &[Step]) -> Result<World, Violation> {
        let mut w = self.initial()?;
        for &step in steps {
            w = self.apply(&w, step)?;
        }
        Ok(w)
    }
}

fn fail<T>(property: &'static str, detail: String) -> Result<T, Violation> {
    Err(Violation { property, detail })
}

fn fingerprint(w: &World) -> u64 {
    let mut h = DefaultHasher::new();
    w.hash(&mut h);
    h.finish()
}

fn path(parents: &HashMap<u64, (u64, Step)>, mut hash: u64) -> Vec<Step> {
    let mut steps = Vec::new();
    while let Some(&(parent, step)) = parents.get(&hash) {
        steps.push(step);
        hash = parent;
    }
    steps.reverse();
    steps
}
