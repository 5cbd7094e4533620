//! What one seeded run leaves behind: its history, violations and coverage flavour,
//! and the failure report that lets one rerun it.

use crate::checker::Violation;
use crate::history::{tail, Entry};
use crate::protocol::{MessageKind, Millis, Mode};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// How many history entries a failure report shows.
pub const REPORT_TAIL: usize = 200;

/// The result of one seeded run: everything needed to judge and to debug it.
pub struct SeedRun {
    pub seed: u64,
    /// The cluster and settings the seed chose.
    pub description: String,
    /// The faults the adversary injected, with their times.
    pub steps: Vec<String>,
    pub history: Vec<Entry>,
    pub violations: Vec<Violation>,
    /// What a known gap of the machine explains rather than a broken invariant, with
    /// the I5 failure it would be. Counted by the tests, not failed (unless asked).
    pub known_gaps: Vec<(Gap, Violation)>,
    /// How many history entries existed when the first safety violation was found.
    pub first_violation_index: Option<usize>,
    /// Messages sent, by kind.
    pub sent: BTreeMap<MessageKind, u64>,
    pub last_fault_ms: Millis,
    /// The I5 deadline the run was judged against.
    pub deadline_ms: Millis,
    /// From the last fault to the last view change of a live node: how long the
    /// cluster really took to settle (compare with `deadline_ms - last_fault_ms`).
    pub settled_after_ms: Millis,
    /// Which flavour the seed chose, for coverage statistics.
    pub flavor: Flavor,
    /// How many answers to "who leads?" named a coordinator (src/sim/queries.rs).
    pub leader_answers: usize,
}

/// A gap of the machine under membership changes that the simulator found, reported
/// (tests/simulation.rs names the seeds) and not yet fixed: the judge sets what it
/// explains apart from the violations, so the other checks still run on the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Gap {
    /// A removed member that missed the list without it is never told: every member
    /// refuses its messages (`UnknownPeer`) before it could answer with the newer list.
    /// In classic mode it then leads a cluster of one (`judge.rs`, `outsiders_lead`).
    UnawareOutsiderLeads,
    /// A node recovering an empty store counts the reports the list it started with
    /// asks for, whatever list it adopts meanwhile; a member removed since refuses it,
    /// and learners count as members but not for the majority, so it can stay short
    /// forever (`judge.rs`, `stuck_recoveries`).
    RecoveryStuck,
}

/// The settings a seed chose, for the test's coverage summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Flavor {
    pub mode: Mode,
    pub nodes: usize,
    /// A witness among the members (quorum mode).
    pub witness: bool,
    /// Message delays reach beyond T/2 (up to 1.5 T): Answers can miss their timeout.
    pub slow_network: bool,
    pub fast_timing: bool,
    pub preempt_delay: bool,
    pub preempt_never: bool,
    pub ineligible: bool,
    /// Nodes run different heartbeats and T, T' (same D).
    pub mixed_timing: bool,
    /// An operator changes the member list (adds a spare, removes or replaces a member).
    pub membership: bool,
    /// An operator rolls a new D (and sometimes heartbeat) through the cluster by
    /// restarts (`operator.rs`).
    pub config_roll: bool,
    /// A second store is lost while the first node still recovers (`operator.rs`).
    pub two_stores_lost: bool,
    /// Hooks take time, or hang, when a coordinator leaves office on its own
    /// (`operator.rs`).
    pub slow_hooks: bool,
    /// An operator forces a recovery on a minority while the rest still runs
    /// (`forced.rs`).
    pub forced_recovery: bool,
    /// A store goes back to an older copy while its node is down (`damage.rs`).
    pub store_rolled_back: bool,
    /// An operator restarts a minority under a cut with files naming only each other
    /// (`file_edits.rs`).
    pub file_edit: bool,
    pub faults: usize,
}

impl SeedRun {
    /// No violation of any kind.
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }

    /// The failure message: seed, scenario, violations, the last [`REPORT_TAIL`]
    /// entries up to the first violation, and how to rerun just this seed.
    pub fn report(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "SIMULATION FAILED: seed {}", self.seed);
        let _ = writeln!(out, "scenario: {}", self.description);
        let _ = writeln!(out, "faults:");
        for step in &self.steps {
            let _ = writeln!(out, "  {step}");
        }
        let _ = writeln!(
            out,
            "last fault at {} ms, I5 deadline {} ms",
            self.last_fault_ms, self.deadline_ms
        );
        let _ = writeln!(out, "violations:");
        for v in &self.violations {
            let _ = writeln!(out, "  {v}");
        }
        for (gap, v) in &self.known_gaps {
            let _ = writeln!(out, "  known gap {gap:?}: {v}");
        }
        let upto = self.first_violation_index.unwrap_or_else(|| {
            let at = self.violations.first().map_or(Millis::MAX, |v| v.at_ms);
            self.history.partition_point(|e| e.at_ms <= at)
        });
        let _ = writeln!(
            out,
            "last {REPORT_TAIL} history entries up to the first violation:"
        );
        out.push_str(&tail(
            &self.history[..upto.min(self.history.len())],
            REPORT_TAIL,
        ));
        let _ = writeln!(
            out,
            "rerun just this seed: SIM_SEED={} cargo test --test simulation -- --nocapture",
            self.seed
        );
        out
    }
}
