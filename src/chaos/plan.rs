//! The fault schedule of a chaos run, made up front from the seed alone, so the same
//! `--seed` (with the same nodes, faults, timing and duration) always injects the same
//! faults in the same order at the same offsets: a run that found a bug can be re-run.
//!
//! The schedule keeps a model of the cluster (who is killed, paused or cut off) and
//! keeps at most a minority unavailable at once, so there is always a majority that
//! must converge — in both modes: quorum mode can elect only with a majority, and
//! classic mode is judged the same way so the two modes' runs compare. After most steps it leaves a quiet gap long enough for the I5
//! deadline plus an observation window; after some it fires the next fault at once
//! ("burst"), so faults also land in the middle of an election.
//!
//! [`Step`] is one of three fault vocabularies, and stays apart from the other two on
//! purpose: a step is something done to real processes and a real relay (a signal, a
//! cut at the relay, a data dir wiped or truncated, a `bully member` command), planned
//! whole before the run and printed in its report. The simulator's `Todo`
//! (src/sim/scenario/adversary.rs) is a deterministic world's agenda of follow-ups, and
//! `model::Transition` (src/model/transition.rs) an edge of an exhaustive state space,
//! ordinary steps included. Where they name the same fault (kill, pause, partition,
//! heal) they mean the same; what each must carry differs, and src/checker/ judges
//! the histories of all three alike.

use crate::protocol::{Mode, NodeId, Timing};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

/// A kind of fault the user can ask for with `--faults`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FaultKind {
    /// SIGKILL; the node stays down until a later start step.
    Kill,
    /// SIGSTOP; a later step resumes it with SIGCONT.
    Pause,
    /// SIGKILL and start again at once (crash recovery, I4).
    Restart,
    /// Cut a minority of nodes off from the rest at the relay; a later step heals it.
    Partition,
    /// One-way links: the relay drops everything sent to one node, while what it sends
    /// still arrives (a one-sided firewall rule); a later step heals it.
    OneWay,
    /// A member list change (docs/design.md#membership): add a spare node, remove a
    /// member other than the coordinator (the coordinator never removes itself), or
    /// replace one (its disk lost: killed, data dir wiped, `bully member replace`,
    /// started empty by a later start step), also while others are down or cut off.
    Membership,
    /// A store damaged while its node is down: killed, its `db` cut to half, started
    /// again; it must refuse the store (exit 2) or find it current. A refused store is
    /// then lost (data dir wiped) and a later start step recovers it.
    Store,
    /// Hooks that take time: every node's `on_demoted` sleeps 0, D/2, 2 D or 3 D (per
    /// node, turned by the seed), so departures and pre-emptions wait for it. A setting
    /// of the whole run, not a step.
    SlowHooks,
    /// A rolling change of timing, as an operator makes one: before each member in turn
    /// is stopped (SIGTERM, or SIGKILL on every other step) and started again with its
    /// file on the other timing, the change is asked with `bully config set` (the
    /// timing is a cluster setting, docs/design.md#cluster-settings: the file's counts
    /// for nothing). D and the heartbeat switch between the run's and
    /// [`rolled_timing`]'s (10 D), so one roll raises D and the next lowers it (the
    /// promise made under the old D must outlive the restart,
    /// docs/design.md#q5-restart-hold-off). Members on two Ds talk. Kills, pauses and
    /// cuts may fall between two steps of a roll; a roll not finished by the end is
    /// finished then.
    Config,
}

impl FaultKind {
    /// The kinds `--faults all` stands for, in `--faults` order: not every kind (the
    /// later ones are [`FaultKind::BY_NAME_ONLY`]).
    pub const IN_ALL: [FaultKind; 5] = [
        FaultKind::Kill,
        FaultKind::Pause,
        FaultKind::Restart,
        FaultKind::Partition,
        FaultKind::OneWay,
    ];

    /// The kinds `all` leaves out, asked for by name (`--faults all,store`): each
    /// came after runs with `all` were recorded, whose seeds keep their schedules.
    pub const BY_NAME_ONLY: [FaultKind; 4] = [
        FaultKind::Membership,
        FaultKind::Store,
        FaultKind::SlowHooks,
        FaultKind::Config,
    ];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Kill => "kill",
            FaultKind::Pause => "pause",
            FaultKind::Restart => "restart",
            FaultKind::Partition => "partition",
            FaultKind::OneWay => "one-way",
            FaultKind::Membership => "membership",
            FaultKind::Store => "store",
            FaultKind::SlowHooks => "slow-hooks",
            FaultKind::Config => "config",
        }
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for FaultKind {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        FaultKind::IN_ALL
            .into_iter()
            .chain(FaultKind::BY_NAME_ONLY)
            .find(|k| k.name() == text.trim())
            .ok_or_else(|| {
                format!(
                    "unknown fault `{text}`; use kill, pause, restart, partition, one-way, \
                     membership, store, slow-hooks or config"
                )
            })
    }
}

/// One thing the runner does to the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "step", content = "nodes")]
pub enum Step {
    Kill(NodeId),
    Restart(NodeId),
    Pause(NodeId),
    /// Start a killed node again.
    Start(NodeId),
    /// Continue a paused node.
    Resume(NodeId),
    /// Cut these nodes (a minority) off from all others, both directions.
    Partition(Vec<NodeId>),
    /// Drop everything sent to this node (one-way links); what it sends still arrives.
    Deafen(NodeId),
    /// Restore every link.
    Heal,
    /// Start this node and add it to the member list (once committed: it caught up).
    Add(NodeId),
    /// Remove this member from the list, then stop its process.
    Remove(NodeId),
    /// The lost-disk case: kill this member (if running), wipe its data dir and make it
    /// a learner again (`bully member replace`); a later [`Step::Start`] starts it on
    /// its empty store, and it takes its seat once it has caught up.
    Replace(NodeId),
    /// The damaged-store case: kill this node (if running), cut its `db` to half and
    /// start it, which must refuse the store; a refused store is wiped, and a later
    /// [`Step::Start`] starts the node on an empty store (store recovery).
    Damage(NodeId),
    /// One step of a rolling change of timing ([`FaultKind::Config`]): stop this member
    /// (if running) and start it on the other timing.
    Reconfigure(NodeId),
}

impl Step {
    /// The fault kind this step injects; `None` for recoveries (start, resume, heal).
    pub fn fault(&self) -> Option<FaultKind> {
        match self {
            Step::Kill(_) => Some(FaultKind::Kill),
            Step::Restart(_) => Some(FaultKind::Restart),
            Step::Pause(_) => Some(FaultKind::Pause),
            Step::Partition(_) => Some(FaultKind::Partition),
            Step::Deafen(_) => Some(FaultKind::OneWay),
            Step::Add(_) | Step::Remove(_) | Step::Replace(_) => Some(FaultKind::Membership),
            Step::Damage(_) => Some(FaultKind::Store),
            Step::Reconfigure(_) => Some(FaultKind::Config),
            Step::Start(_) | Step::Resume(_) | Step::Heal => None,
        }
    }

    /// A short name for counting: the fault kind or `start`, `resume`, `heal`.
    pub fn name(&self) -> &'static str {
        match self {
            Step::Start(_) => "start",
            Step::Resume(_) => "resume",
            Step::Heal => "heal",
            Step::Add(_) => "add",
            Step::Remove(_) => "remove",
            Step::Replace(_) => "replace",
            Step::Damage(_) => "damage",
            Step::Reconfigure(_) => "reconfigure",
            other => other.fault().map_or("?", FaultKind::name),
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Kill(n) => write!(f, "kill -9 node {n}"),
            Step::Restart(n) => write!(f, "kill -9 and restart node {n}"),
            Step::Pause(n) => write!(f, "SIGSTOP node {n}"),
            Step::Start(n) => write!(f, "start node {n}"),
            Step::Resume(n) => write!(f, "SIGCONT node {n}"),
            Step::Partition(side) => write!(f, "partition {side:?} from the rest"),
            Step::Deafen(n) => write!(f, "deafen node {n} (it hears no one; it is heard)"),
            Step::Heal => write!(f, "heal every link"),
            Step::Add(n) => write!(f, "add node {n} to the member list"),
            Step::Remove(n) => write!(f, "remove node {n} from the member list"),
            Step::Replace(n) => write!(f, "replace node {n} (lost disk: wiped, a learner again)"),
            Step::Damage(n) => write!(f, "damage node {n}'s store (db cut to half) and start it"),
            Step::Reconfigure(n) => write!(f, "restart node {n} on the other timing (a roll)"),
        }
    }
}

/// A step and when to take it, in ms after the schedule starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Planned {
    pub at_ms: u64,
    pub step: Step,
}

/// What a schedule is made from.
#[derive(Debug, Clone)]
pub struct PlanSpec {
    /// Node IDs are 1..=nodes.
    pub nodes: u64,
    /// Faults are injected during this long; recoveries and a last quiet gap follow.
    pub duration_ms: u64,
    pub faults: Vec<FaultKind>,
    pub timing: Timing,
    /// The election mode the nodes run: it sets the I5 bound the quiet gaps must cover.
    pub mode: Mode,
    /// Extra time on top of `timing.convergence_bound_in(mode)` before I5 is judged.
    pub slack_ms: u64,
    pub seed: u64,
}

impl PlanSpec {
    /// How many nodes may be unavailable at once: strictly fewer than half.
    pub fn budget(&self) -> usize {
        ((self.nodes as usize).saturating_sub(1)) / 2
    }

    /// The shortest quiet gap: the I5 deadline (of this mode) plus a minimal
    /// observation window.
    pub fn min_quiet_ms(&self) -> u64 {
        self.widest_timing().convergence_bound_in(self.mode) + self.slack_ms + OBSERVE_MIN_MS
    }

    /// The slowest timing a node of the run may have: the run's, or [`rolled_timing`]
    /// when it rolls timings. Steps are spaced by it.
    pub fn widest_timing(&self) -> Timing {
        match self.faults.contains(&FaultKind::Config) {
            true => rolled_timing(&self.timing),
            false => self.timing,
        }
    }

    /// Checks that the spec can produce a meaningful schedule.
    pub fn validate(&self) -> Result<(), String> {
        if self.faults.is_empty() {
            return Err("--faults names no fault kind".into());
        }
        if self.budget() == 0 {
            return Err(format!(
                "--nodes {} leaves no minority to break; chaos needs at least 3 nodes",
                self.nodes
            ));
        }
        if self.duration_ms < self.min_quiet_ms() {
            return Err(format!(
                "--duration {} ms is shorter than one quiet gap ({} ms); try at least 10s",
                self.duration_ms,
                self.min_quiet_ms()
            ));
        }
        Ok(())
    }
}

/// The other timing of a `config` roll: D ten times and the heartbeat twice the run's
/// (valid whenever the run's is: D >= 3 h gives 10 D >= 6 h), T and T' unchanged. At
/// the default timing that is issue 38's roll, D = 3000 ms to 300 ms and back; a
/// restart takes far less than the 9 D between the two promises, so a hold-off by the
/// new D shows as two coordinators. The judge bounds leases and convergence by it,
/// the wider of the two.
pub fn rolled_timing(timing: &Timing) -> Timing {
    Timing {
        heartbeat_ms: timing.heartbeat_ms.saturating_mul(2),
        suspect_after_ms: timing.suspect_after_ms.saturating_mul(10),
        ..*timing
    }
}

/// Spare nodes a `membership` fault may add: IDs nodes+1..=nodes+SPARES. The list
/// never shrinks below the `nodes` the run started with, so the budget (fewer than
/// half of `nodes` unavailable) stays a minority of every list.
pub const SPARES: u64 = 2;

/// How long past the I5 deadline a quiet gap lasts, at least and at most (random).
const OBSERVE_MIN_MS: u64 = 300;
const OBSERVE_MAX_MS: u64 = 1200;
/// The share of fault steps followed at once by another step.
const BURST_SHARE: f64 = 0.3;
/// The share of fault steps aimed at the expected coordinator.
const AT_LEADER_SHARE: f64 = 0.5;
/// The share of fault steps that are member changes when `membership` is asked for and
/// one fits: drawn as one kind among six, and only after a quiet gap, a 60 s run had
/// drawn none in most seeds.
const MEMBERSHIP_SHARE: f64 = 0.5;

/// The share of fault steps that start a roll when `config` is asked for and one fits
/// (a whole cluster after a quiet gap): drawn as one kind among eight, a 30-minute run
/// with every kind had started none in 66 steps.
const ROLL_START_SHARE: f64 = 0.25;
/// The share of steps, while a roll is under way, that are its next step: an operator
/// rolls on once the last node is back, while other faults still fall in between.
const ROLL_SHARE: f64 = 0.6;

/// Which nodes are killed, paused or cut off, after a sequence of steps. The schedule
/// uses it to respect the budget; the analysis uses it to know, at each instant, which
/// nodes must agree ("available": running, not paused, on the majority side).
#[derive(Debug, Clone, Default)]
pub struct Availability {
    killed: BTreeSet<NodeId>,
    paused: BTreeSet<NodeId>,
    cut: BTreeSet<NodeId>,
    /// Nodes added at runtime beyond 1..=nodes (and not removed since).
    added: BTreeSet<NodeId>,
    /// Nodes removed from the member list (and not added again since).
    removed: BTreeSet<NodeId>,
    /// Nodes replaced and not started since: learners, so no other learner may be made.
    replaced: BTreeSet<NodeId>,
    /// Nodes whose store was damaged and that were not started since: one at a time,
    /// as store recovery assumes (docs/design.md#store-recovery).
    damaged: BTreeSet<NodeId>,
    /// Members running on [`rolled_timing`] rather than the run's timing.
    rolled: BTreeSet<NodeId>,
    /// Where the latest roll goes: to the rolled timing (`true`) or back.
    rolling_to_rolled: bool,
}

impl Availability {
    /// How many nodes are killed, paused or cut off: the faults the budget counts.
    pub fn unavailable(&self) -> usize {
        let mut all: BTreeSet<NodeId> = self.killed.union(&self.paused).copied().collect();
        all.extend(self.cut.iter().copied());
        all.len()
    }

    /// Whether member `id` runs on [`rolled_timing`].
    pub fn is_rolled(&self, id: NodeId) -> bool {
        self.rolled.contains(&id)
    }

    /// Whether the latest roll goes to [`rolled_timing`]: a member added now joins on it.
    pub fn rolls_to_rolled(&self) -> bool {
        self.rolling_to_rolled
    }

    /// The members the roll in progress has yet to restart (none between rolls).
    fn roll_pending(&self, nodes: u64) -> Vec<NodeId> {
        self.members(nodes)
            .into_iter()
            .filter(|n| self.rolled.contains(n) != self.rolling_to_rolled)
            .collect()
    }

    /// The members: 1..=nodes, plus the nodes added and less the nodes removed at
    /// runtime, ascending. Counts and expected leaders follow this list, as the
    /// nodes' own majorities follow the list they hold (docs/design.md#membership).
    pub fn members(&self, nodes: u64) -> Vec<NodeId> {
        let mut all: BTreeSet<NodeId> = (1..=nodes).collect();
        all.extend(self.added.iter().copied());
        all.retain(|n| !self.removed.contains(n));
        all.into_iter().collect()
    }

    /// The members that are running, not paused, not cut off and on the majority's
    /// timing, ascending.
    pub fn available(&self, nodes: u64) -> Vec<NodeId> {
        self.members(nodes)
            .into_iter()
            .filter(|n| {
                !self.killed.contains(n) && !self.paused.contains(n) && !self.cut.contains(n)
            })
            .collect()
    }

    /// What brings the cluster back: starts, resumes, a heal and the rest of a roll.
    fn recoveries(&self, nodes: u64) -> Vec<Step> {
        let pending = self.roll_pending(nodes);
        let mut steps: Vec<Step> = (self.killed.iter())
            .filter(|n| !pending.contains(n))
            .map(|&n| Step::Start(n))
            .collect();
        steps.extend(self.paused.iter().map(|&n| Step::Resume(n)));
        if !self.cut.is_empty() {
            steps.push(Step::Heal);
        }
        steps.extend(pending.into_iter().map(Step::Reconfigure));
        steps
    }

    /// Whether a majority of the `nodes` members (IDs 1..=nodes) is available. In
    /// quorum mode nothing can be elected without one; the members that are down,
    /// paused or cut off still count in the denominator, as they do for the nodes.
    pub fn majority_available(&self, nodes: u64) -> bool {
        self.available(nodes).len() > self.members(nodes).len() / 2
    }

    /// The node every available node must end up following, if one is expected: the
    /// highest available ID — in quorum mode only while a majority is available (a
    /// minority must stay leaderless), in classic mode whenever any node is available.
    pub fn expected_leader(&self, nodes: u64, mode: Mode) -> Option<NodeId> {
        if mode == Mode::Quorum && !self.majority_available(nodes) {
            return None;
        }
        self.available(nodes).last().copied()
    }

    /// Whether the node is killed (not merely paused or cut off).
    pub fn is_killed(&self, id: NodeId) -> bool {
        self.killed.contains(&id)
    }

    /// Whether a partition is in effect. Members mid-roll on two timings are not cut
    /// off from each other: the hello compares the mode only, and a follower promises
    /// the longer D (docs/design.md#cluster-settings; before issue 47 they refused each
    /// other, and a roll's tie left no majority at all).
    pub fn partitioned(&self, _nodes: u64) -> bool {
        !self.cut.is_empty()
    }

    /// Updates the model for one step.
    pub fn apply(&mut self, step: &Step) {
        match step {
            Step::Kill(n) => {
                self.paused.remove(n);
                self.killed.insert(*n);
            }
            Step::Pause(n) => {
                self.paused.insert(*n);
            }
            Step::Start(n) => {
                self.killed.remove(n);
                self.replaced.remove(n);
                self.damaged.remove(n);
            }
            Step::Resume(n) => {
                self.paused.remove(n);
            }
            Step::Partition(side) => self.cut = side.iter().copied().collect(),
            Step::Deafen(n) => self.cut = [*n].into(),
            Step::Heal => self.cut.clear(),
            Step::Restart(_) => {}
            Step::Add(n) => {
                self.removed.remove(n);
                self.killed.remove(n);
                self.added.insert(*n);
                self.move_timing(*n, self.rolling_to_rolled);
            }
            Step::Remove(n) => {
                self.added.remove(n);
                self.killed.remove(n);
                self.paused.remove(n);
                self.replaced.remove(n);
                self.removed.insert(*n);
            }
            Step::Replace(n) => {
                self.paused.remove(n);
                self.killed.insert(*n);
                self.replaced.insert(*n);
            }
            Step::Damage(n) => {
                self.paused.remove(n);
                self.killed.insert(*n);
                self.damaged.insert(*n);
            }
            Step::Reconfigure(n) => {
                self.paused.remove(n);
                self.killed.remove(n);
                let to_rolled = !self.rolled.contains(n);
                self.move_timing(*n, to_rolled);
                self.rolling_to_rolled = to_rolled;
            }
        }
    }

    fn move_timing(&mut self, id: NodeId, to_rolled: bool) {
        match to_rolled {
            true => self.rolled.insert(id),
            false => self.rolled.remove(&id),
        };
    }
}

/// Makes the schedule: a pure function of the spec (and so of the seed).
pub fn plan(spec: &PlanSpec) -> Vec<Planned> {
    let mut rng = SmallRng::seed_from_u64(spec.seed);
    let mut model = Availability::default();
    let mut steps = Vec::new();
    let quiet = |rng: &mut SmallRng| {
        spec.min_quiet_ms() + rng.gen_range(0..=OBSERVE_MAX_MS - OBSERVE_MIN_MS)
    };
    let timing = spec.widest_timing();
    let burst_max = timing.suspect_after_ms + timing.answer_timeout_ms;
    let burst = |rng: &mut SmallRng| rng.gen_range(20..=burst_max);
    // Room at the end for every recovery (a burst apart) and a last quiet gap.
    let tail = (spec.budget() as u64 + 1) * burst_max + spec.min_quiet_ms();
    let mut at = rng.gen_range(200..=1000);
    // Whether a quiet gap (or the first election) came before this step: a member
    // change needs an established coordinator, so it never follows a burst.
    let mut quiet_before = true;
    while at + tail <= spec.duration_ms {
        let recoveries = model.recoveries(spec.nodes);
        let faults = possible_faults(spec, &model, quiet_before);
        let recover = !recoveries.is_empty() && (faults.is_empty() || rng.gen_bool(0.5));
        // A replaced node is started next, as an operator would once the change is
        // in: while it is a learner, no other member change can be made.
        let roll_pending = model.roll_pending(spec.nodes);
        let step = if let Some(&n) = model.replaced.first() {
            Step::Start(n)
        } else if !roll_pending.is_empty() && rng.gen_bool(ROLL_SHARE) {
            Step::Reconfigure(*roll_pending.choose(&mut rng).expect("not empty"))
        } else if recover {
            recoveries
                .choose(&mut rng)
                .cloned()
                .expect("recoveries is not empty")
        } else if let Some(kind) = pick_fault(&faults, &mut rng) {
            fault_step(spec, &model, kind, &mut rng)
        } else {
            break; // nothing enabled can run (cannot happen with a valid spec)
        };
        let is_fault = step.fault().is_some();
        // A member change is followed by a quiet gap: the next one (and a removal,
        // which must not hit the coordinator) needs the last one committed.
        let burst_ok = step.fault() != Some(FaultKind::Membership);
        model.apply(&step);
        steps.push(Planned { at_ms: at, step });
        // Mid-roll no I5 window is judged (two timings are a cut): the roll goes on
        // at a burst's pace, with faults still falling between its steps.
        let mid_roll = !model.roll_pending(spec.nodes).is_empty();
        let burst_next = mid_roll || (is_fault && burst_ok && rng.gen_bool(BURST_SHARE));
        quiet_before = !burst_next;
        at += if quiet_before {
            quiet(&mut rng)
        } else {
            burst(&mut rng)
        };
    }
    // Bring everything back, then leave a last quiet gap for the final I5 check. The
    // gap after the last fault may be cut short for that (the loop guard kept room).
    let recoveries = model.recoveries(spec.nodes);
    let latest = spec
        .duration_ms
        .saturating_sub(spec.min_quiet_ms() + recoveries.len() as u64 * burst_max);
    at = at.min(latest);
    for step in recoveries {
        steps.push(Planned { at_ms: at, step });
        at += burst(&mut rng);
    }
    steps
}

/// One of the enabled kinds: a roll with [`ROLL_START_SHARE`] and a member change with
/// [`MEMBERSHIP_SHARE`] when they fit, else any other kind alike.
fn pick_fault(faults: &[FaultKind], rng: &mut SmallRng) -> Option<FaultKind> {
    let (chosen_apart, other): (Vec<FaultKind>, Vec<FaultKind>) = faults
        .iter()
        .partition(|&&kind| matches!(kind, FaultKind::Membership | FaultKind::Config));
    for (kind, share) in [
        (FaultKind::Config, ROLL_START_SHARE),
        (FaultKind::Membership, MEMBERSHIP_SHARE),
    ] {
        let last_left = other.is_empty() && chosen_apart == [kind];
        if chosen_apart.contains(&kind) && (last_left || rng.gen_bool(share)) {
            return Some(kind);
        }
    }
    other
        .choose(rng)
        .or_else(|| chosen_apart.choose(rng))
        .copied()
}

/// The enabled fault kinds that fit the budget and the model right now; a member
/// change only after a quiet gap (`quiet_before`).
fn possible_faults(spec: &PlanSpec, model: &Availability, quiet_before: bool) -> Vec<FaultKind> {
    let room = spec.budget().saturating_sub(model.unavailable());
    let available = model.available(spec.nodes);
    let rolling = !model.roll_pending(spec.nodes).is_empty();
    spec.faults
        .iter()
        .copied()
        .filter(|kind| match kind {
            FaultKind::Kill | FaultKind::Pause => room > 0 && !available.is_empty(),
            FaultKind::Restart => !available.is_empty(),
            FaultKind::Partition => room > 0 && model.cut.is_empty() && available.len() > room,
            FaultKind::OneWay => room > 0 && model.cut.is_empty() && !available.is_empty(),
            FaultKind::Membership => {
                quiet_before && !rolling && !membership_steps(spec, model).is_empty()
            }
            // After a quiet gap, and with no other store lost or damaged meanwhile:
            // the last one has recovered by then.
            FaultKind::Store => {
                quiet_before
                    && !rolling
                    && !damage_targets(spec, model).is_empty()
                    && model.damaged.is_empty()
                    && model.replaced.is_empty()
            }
            FaultKind::SlowHooks => false,
            // A roll starts after a quiet gap, with no store lost or damaged; a member
            // down or cut off is rolled too (started on the other timing). Its other
            // steps are recoveries.
            FaultKind::Config => {
                quiet_before && !rolling && model.replaced.is_empty() && model.damaged.is_empty()
            }
        })
        .collect()
}

/// One fault of `kind`, aimed at the expected coordinator half of the time.
fn fault_step(spec: &PlanSpec, model: &Availability, kind: FaultKind, rng: &mut SmallRng) -> Step {
    let available = model.available(spec.nodes);
    let leader = *available.last().expect("a fault needs an available node");
    let target = |rng: &mut SmallRng| {
        if rng.gen_bool(AT_LEADER_SHARE) {
            leader
        } else {
            *available.choose(rng).expect("not empty")
        }
    };
    match kind {
        FaultKind::Kill => Step::Kill(target(rng)),
        FaultKind::Pause => Step::Pause(target(rng)),
        FaultKind::Restart => Step::Restart(target(rng)),
        FaultKind::Partition => {
            let room = spec.budget() - model.unavailable();
            let size = rng.gen_range(1..=room);
            let first = target(rng);
            let mut others: Vec<NodeId> =
                available.iter().copied().filter(|&n| n != first).collect();
            others.shuffle(rng);
            let mut side: Vec<NodeId> = std::iter::once(first)
                .chain(others.into_iter().take(size - 1))
                .collect();
            side.sort_unstable();
            Step::Partition(side)
        }
        FaultKind::OneWay => Step::Deafen(target(rng)),
        FaultKind::Membership => membership_steps(spec, model)
            .choose(rng)
            .cloned()
            .expect("membership is enabled only with a step to take"),
        FaultKind::Store => {
            let targets = damage_targets(spec, model);
            let pick = if targets.contains(&leader) && rng.gen_bool(AT_LEADER_SHARE) {
                leader
            } else {
                *targets
                    .choose(rng)
                    .expect("store is enabled only with a target")
            };
            Step::Damage(pick)
        }
        FaultKind::SlowHooks => unreachable!("slow hooks are a setting, never a step"),
        FaultKind::Config => Step::Reconfigure(target(rng)),
    }
}

/// The members whose store may be damaged now: killed ones, or available ones while
/// the budget has room for one more down.
fn damage_targets(spec: &PlanSpec, model: &Availability) -> Vec<NodeId> {
    let room = spec.budget().saturating_sub(model.unavailable());
    let available = model.available(spec.nodes);
    model
        .members(spec.nodes)
        .into_iter()
        .filter(|n| model.killed.contains(n) || (room > 0 && available.contains(n)))
        .collect()
}

/// The member changes that fit now, while a minority may be down or cut off (a change
/// commits with a majority of the list before and after it, and the budget keeps one
/// available): adding the lowest spare not a member; removing a member other than the
/// expected coordinator (whom the cluster refuses to remove) and not cut off (the
/// relay's cut stays on the nodes it was made for); replacing a member other than the
/// coordinator that is killed, or available when the budget has room for it to go
/// down. The list stays within nodes..=nodes+SPARES, and no add or replace while a
/// replaced node is still a learner (the cluster takes one learner at a time).
fn membership_steps(spec: &PlanSpec, model: &Availability) -> Vec<Step> {
    let members = model.members(spec.nodes);
    let available = model.available(spec.nodes);
    let Some(&leader) = available.last() else {
        return Vec::new();
    };
    let room = spec.budget().saturating_sub(model.unavailable());
    let learner_pending = !model.replaced.is_empty();
    let mut steps = Vec::new();
    if !learner_pending && (members.len() as u64) < spec.nodes + SPARES {
        let spare = (1..=spec.nodes + SPARES).find(|n| !members.contains(n));
        steps.extend(spare.map(Step::Add));
    }
    let others = members.iter().copied().filter(|&n| n != leader);
    if members.len() as u64 > spec.nodes {
        let linked = others.clone().filter(|n| !model.cut.contains(n));
        steps.extend(linked.map(Step::Remove));
    }
    // A replaced store is a lost one: not while a damaged one is still to recover.
    if !learner_pending && model.damaged.is_empty() {
        let may_go = |n: &NodeId| model.killed.contains(n) || (room > 0 && available.contains(n));
        steps.extend(others.filter(may_go).map(Step::Replace));
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn spec(nodes: u64, seed: u64) -> PlanSpec {
        PlanSpec {
            nodes,
            duration_ms: 60_000,
            faults: FaultKind::IN_ALL.to_vec(),
            timing: Timing::default(),
            mode: Mode::Quorum,
            slack_ms: 1000,
            seed,
        }
    }

    #[test]
    fn a_config_roll_restarts_every_member_both_ways_among_other_faults() {
        let (mut up, mut down, mut between) = (0, 0, 0);
        for seed in 0..20 {
            let mut spec = spec(5, seed);
            // Steps are spaced for the rolled timing (D = 3000 ms here): give rolls room.
            spec.duration_ms = 600_000;
            spec.faults = vec![FaultKind::Kill, FaultKind::Partition, FaultKind::Config];
            let mut model = Availability::default();
            for p in plan(&spec) {
                let rolling = !model.roll_pending(5).is_empty();
                match p.step {
                    Step::Reconfigure(n) if model.is_rolled(n) => down += 1,
                    Step::Reconfigure(_) => up += 1,
                    _ => between += usize::from(rolling && p.step.fault().is_some()),
                }
                model.apply(&p.step);
            }
            assert_eq!(model.roll_pending(5), Vec::<NodeId>::new(), "seed {seed}");
            assert_eq!(model.unavailable(), 0, "seed {seed}: left broken");
        }
        assert!(
            up >= 10 && down >= 10 && between > 0,
            "{up} {down} {between}"
        );
    }

    #[test]
    fn a_roll_is_drawn_among_every_other_kind_in_a_thirty_minute_run() {
        let mut rolled = 0;
        for seed in 0..10 {
            let mut spec = spec(5, seed);
            spec.duration_ms = 30 * 60_000;
            spec.faults = [FaultKind::IN_ALL.as_slice(), &FaultKind::BY_NAME_ONLY].concat();
            let steps = plan(&spec);
            let rolls = steps
                .iter()
                .filter(|p| matches!(p.step, Step::Reconfigure(_)))
                .count();
            assert!(rolls >= 10, "seed {seed}: {rolls} roll steps");
            rolled += rolls;
        }
        assert!(rolled >= 200, "{rolled}");
    }

    #[test]
    fn mid_roll_every_member_stays_available_whatever_its_timing() {
        let mut model = Availability::default();
        model.apply(&Step::Reconfigure(1));
        model.apply(&Step::Reconfigure(2));
        assert_eq!(model.available(5), vec![1, 2, 3, 4, 5]);
        assert!(!model.partitioned(5));
        assert_eq!(model.roll_pending(5), vec![3, 4, 5]);
        let mut four = Availability::default();
        four.apply(&Step::Reconfigure(1));
        four.apply(&Step::Reconfigure(2));
        // Four members, two on each timing: still one cluster.
        assert_eq!(four.available(4), vec![1, 2, 3, 4]);
        for n in [3, 4, 5] {
            model.apply(&Step::Reconfigure(n));
        }
        assert!(model.rolls_to_rolled());
        assert!(model.roll_pending(5).is_empty());
    }

    #[test]
    fn same_seed_same_schedule_other_seed_other_schedule() {
        assert_eq!(plan(&spec(5, 1)), plan(&spec(5, 1)));
        assert_ne!(plan(&spec(5, 1)), plan(&spec(5, 2)));
    }

    #[test]
    fn never_more_than_a_minority_down_and_all_recovered_at_the_end() {
        for nodes in [3u64, 4, 5, 9] {
            let mut all_kinds = BTreeSet::new();
            for seed in 0..50 {
                let spec = spec(nodes, seed);
                let steps = plan(&spec);
                let mut model = Availability::default();
                let mut kinds = BTreeSet::new();
                for p in &steps {
                    model.apply(&p.step);
                    assert!(
                        model.unavailable() <= spec.budget(),
                        "nodes {nodes} seed {seed}: {} down after {}",
                        model.unavailable(),
                        p.step
                    );
                    kinds.extend(p.step.fault());
                }
                assert_eq!(
                    model.unavailable(),
                    0,
                    "nodes {nodes} seed {seed}: left broken"
                );
                assert!(
                    kinds.len() >= 2,
                    "nodes {nodes} seed {seed}: kinds {kinds:?}"
                );
                all_kinds.extend(kinds);
            }
            assert_eq!(
                all_kinds.len(),
                FaultKind::IN_ALL.len(),
                "nodes {nodes}: kinds {all_kinds:?}"
            );
        }
    }

    #[test]
    fn steps_are_in_time_order_and_leave_a_last_quiet_gap() {
        let spec = spec(5, 3);
        let steps = plan(&spec);
        assert!(steps.len() >= 10, "only {} steps in 60 s", steps.len());
        assert!(steps.windows(2).all(|w| w[0].at_ms < w[1].at_ms));
        let last = steps.last().unwrap().at_ms;
        assert!(
            last + spec.min_quiet_ms() <= spec.duration_ms,
            "last step at {last} ms"
        );
    }

    #[test]
    fn faults_hit_the_coordinator_and_only_enabled_kinds() {
        let mut spec = spec(5, 4);
        spec.faults = vec![FaultKind::Pause];
        let steps = plan(&spec);
        assert!(steps
            .iter()
            .all(|p| matches!(p.step, Step::Pause(_) | Step::Resume(_))));
        assert!(steps.iter().any(|p| p.step == Step::Pause(5)), "{steps:?}");
    }

    #[test]
    fn quorum_gaps_are_longer_and_leaders_need_a_majority() {
        let quorum = spec(5, 3);
        let classic = PlanSpec {
            mode: Mode::Classic,
            ..quorum.clone()
        };
        assert!(quorum.min_quiet_ms() > classic.min_quiet_ms());
        let mut model = Availability::default();
        model.apply(&Step::Partition(vec![4, 5]));
        assert_eq!(model.expected_leader(5, Mode::Quorum), Some(3));
        model.apply(&Step::Kill(3));
        // {1, 2} of 5: no majority; classic still expects the highest of them.
        assert!(!model.majority_available(5));
        assert_eq!(model.expected_leader(5, Mode::Quorum), None);
        assert_eq!(model.expected_leader(5, Mode::Classic), Some(2));
        model.apply(&Step::Heal);
        assert_eq!(model.expected_leader(5, Mode::Quorum), Some(5));
        // 2 of 4 is not a majority.
        let mut four = Availability::default();
        four.apply(&Step::Pause(4));
        four.apply(&Step::Kill(1));
        assert_eq!(four.expected_leader(4, Mode::Quorum), None);
    }

    #[test]
    fn fault_names_parse() {
        assert_eq!("partition".parse::<FaultKind>(), Ok(FaultKind::Partition));
        assert!("flood"
            .parse::<FaultKind>()
            .unwrap_err()
            .contains("unknown fault"));
        let mut bad = spec(2, 1);
        assert!(bad.validate().unwrap_err().contains("at least 3 nodes"));
        bad.nodes = 5;
        bad.duration_ms = 100;
        assert!(bad.validate().is_err());
    }

    #[test]
    fn store_damage_is_drawn_one_store_at_a_time_and_each_is_started_again() {
        let mut damaged = 0;
        for seed in 1..=20 {
            let mut spec = spec(5, seed);
            spec.faults.extend([
                FaultKind::Store,
                FaultKind::SlowHooks,
                FaultKind::Membership,
            ]);
            let mut model = Availability::default();
            for p in plan(&spec) {
                if let Step::Damage(n) = p.step {
                    damaged += 1;
                    assert!(
                        model.damaged.is_empty() && model.replaced.is_empty(),
                        "seed {seed}: node {n} damaged while another store is lost"
                    );
                }
                if let Step::Replace(_) = p.step {
                    assert!(
                        model.damaged.is_empty(),
                        "seed {seed}: replaced while damaged"
                    );
                }
                model.apply(&p.step);
                assert!(model.unavailable() <= spec.budget(), "seed {seed}: {p:?}");
            }
            assert!(
                model.damaged.is_empty(),
                "seed {seed}: a damaged node never started"
            );
        }
        assert!(damaged >= 10, "{damaged} stores damaged in 20 seeds");
    }

    #[test]
    fn the_kinds_all_leaves_out_are_parsed_by_name() {
        for kind in FaultKind::BY_NAME_ONLY {
            assert!(!FaultKind::IN_ALL.contains(&kind));
            assert_eq!(kind.name().parse::<FaultKind>(), Ok(kind));
        }
    }

    #[test]
    fn membership_draws_add_remove_and_replace_also_while_nodes_are_down() {
        let mut kinds = BTreeSet::new();
        let mut during_faults = 0;
        for seed in 1..=10 {
            let mut spec = spec(5, seed);
            spec.faults.push(FaultKind::Membership);
            let mut model = Availability::default();
            let mut changes = 0;
            for p in plan(&spec) {
                if p.step.fault() == Some(FaultKind::Membership) {
                    changes += 1;
                    kinds.insert(p.step.name());
                    during_faults += usize::from(model.unavailable() > 0);
                }
                model.apply(&p.step);
                let members = model.members(5).len() as u64;
                assert!((5..=5 + SPARES).contains(&members), "seed {seed}: {p:?}");
                assert!(model.unavailable() <= spec.budget(), "seed {seed}: {p:?}");
            }
            assert!(changes >= 2, "seed {seed}: {changes} member changes");
            assert_eq!(model.unavailable(), 0, "seed {seed}: left broken");
        }
        assert_eq!(kinds, BTreeSet::from(["add", "remove", "replace"]));
        assert!(
            during_faults >= 5,
            "{during_faults} changes while nodes were down"
        );
    }
}
