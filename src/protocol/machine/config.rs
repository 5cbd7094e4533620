//! The static settings of one node's machine, and the deliberate flaws a test may build
//! it with to prove that the simulator and the model checker catch a broken protocol.

use crate::protocol::epoch::{Millis, NodeId};
use crate::protocol::mode::{Mode, Preempt};
use crate::protocol::timing::Timing;

/// Static settings of one node's machine.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MachineConfig {
    pub id: NodeId,
    /// Every other member of the cluster.
    pub peers: Vec<NodeId>,
    pub timing: Timing,
    pub preempt: Preempt,
    /// Whether the node starts out eligible (health checks may change it later).
    pub eligible: bool,
    pub mode: Mode,
    /// This node is a witness: it votes and acks, counts for majorities, never leads.
    pub witness: bool,
    /// Peers that are witnesses; they get no Election (they would never answer).
    pub witnesses: Vec<NodeId>,
    /// Whether a node that starts on an empty store learns the terms it may have
    /// forgotten before it votes or leads (src/protocol/recovery.rs). Always on in a
    /// real node; the rule tests of the other rules turn it off to start from empty cells
    /// at t = 0, and the simulator's sabotage [`Flaw::SkipStoreRecovery`] does too.
    pub recover_empty_store: bool,
    /// How long a coordinator leaving office on its own waits for its driver's release
    /// (`on_demoted`, the keepers) before it leaves anyway; `None`: it leaves at once,
    /// with no release asked (`release.rs`).
    pub release_bound_ms: Option<Millis>,
    /// Deliberately broken behaviour, only so tests can show the checkers catch it.
    pub flaw: Option<Flaw>,
}

impl MachineConfig {
    /// A config with the defaults a node has without a config file's opinions:
    /// default timing, preempt always, eligible, quorum mode, no witnesses. The one
    /// constructor: the node runtime (src/node/drive/start.rs), the simulator
    /// (src/sim/faults.rs) and the model checker (src/model/config.rs) start here and
    /// set what differs with the `with_*` calls, so a new setting gets its default in
    /// one place.
    pub fn new(id: NodeId, peers: Vec<NodeId>) -> MachineConfig {
        MachineConfig {
            id,
            peers,
            timing: Timing::default(),
            preempt: Preempt::Always,
            eligible: true,
            mode: Mode::Quorum,
            witness: false,
            witnesses: Vec::new(),
            recover_empty_store: true,
            release_bound_ms: None,
            flaw: None,
        }
    }

    /// With `timing` instead of the default.
    pub fn with_timing(mut self, timing: Timing) -> MachineConfig {
        self.timing = timing;
        self
    }

    /// With `preempt` instead of always.
    pub fn with_preempt(mut self, preempt: Preempt) -> MachineConfig {
        self.preempt = preempt;
        self
    }

    /// Starting out eligible or not.
    pub fn with_eligible(mut self, eligible: bool) -> MachineConfig {
        self.eligible = eligible;
        self
    }

    /// Running `mode` instead of quorum mode.
    pub fn with_mode(mut self, mode: Mode) -> MachineConfig {
        self.mode = mode;
        self
    }

    /// This node a witness or not, and `witnesses` the members that are (the node
    /// runtime lists its peers only, the simulator and the model checker every one).
    pub fn with_witnesses(mut self, witness: bool, witnesses: Vec<NodeId>) -> MachineConfig {
        self.witness = witness;
        self.witnesses = witnesses;
        self
    }

    /// Whether a node starting on an empty store recovers its terms first (off only
    /// for a new cluster's first start, and in rule tests).
    pub fn with_store_recovery(mut self, on: bool) -> MachineConfig {
        self.recover_empty_store = on;
        self
    }

    /// With a bound on a release (see [`MachineConfig::release_bound_ms`]).
    pub fn with_release_bound_ms(mut self, bound: Option<Millis>) -> MachineConfig {
        self.release_bound_ms = bound;
        self
    }

    /// Deliberately broken by `flaw` (tests of the checkers only).
    /// [`Flaw::SkipStoreRecovery`] is store recovery left out, so it turns that off.
    pub fn with_flaw(mut self, flaw: Option<Flaw>) -> MachineConfig {
        self.flaw = flaw;
        self.recover_empty_store &= flaw != Some(Flaw::SkipStoreRecovery);
        self
    }

    /// Whether this machine was built with `flaw` (tests of the checkers only).
    pub(super) fn has(&self, flaw: Flaw) -> bool {
        self.flaw == Some(flaw)
    }
}

/// A deliberate protocol bug, for the tests that prove a broken machine is caught.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flaw {
    /// Quorum mode: the coordinator keeps its role after its lease ran out, and
    /// followers ignore their lease promises.
    IgnoreLease,
    /// Quorum mode: a declaration at a term equal to the node's term cell is accepted.
    AcceptEqualTerm,
    /// A node that starts on an empty store votes and leads at once, as if it had never
    /// run before: the simulator and model checker build its machine with
    /// `recover_empty_store` off (src/protocol/recovery.rs).
    SkipStoreRecovery,
    /// Quorum mode: a coordinator hands over to any higher candidate that asks, whether
    /// or not its pre-vote shows it hears the coordinator (before one-way links were
    /// considered, a node that could send but not receive was handed office again and
    /// again).
    DeafHandover,
    /// A membership change counts as committed, and the next one may start, once a
    /// majority of the list before it stored it, whatever the list after it says
    /// (docs/design.md#membership: both majorities are needed).
    OldMajorityOnly,
    /// A membership change counts as committed the moment the coordinator writes it,
    /// stored by no majority at all, so the next change starts while the previous one
    /// is still under way (docs/design.md#membership: one change at a time). Two
    /// removals in a row then leave lists two members apart whose majorities need not
    /// meet; the model checker's sabotage test shows two coordinators.
    TwoAtOnce,
    /// Estimates travel and nodes with a source run ranked elections, but every
    /// comparison of rank uses the ID alone and voters ignore estimates
    /// (docs/design.md#elected-by-data-est): the highest ID wins over fresher data, and
    /// the model checker's I8 and the simulator must say so.
    IdOrder,
    /// Quorum mode: a restart holds off for the D it restarts with, not the D its
    /// earlier life promised under (the rule before `Cells::promise_ms` existed): a
    /// rolling restart that lowers D lets the node accept a new coordinator while the
    /// old one still counts on its promise (docs/design.md#q5-restart-hold-off).
    HoldoffByNewD,
    /// A node recovering an empty store answers term queries with a `TermReport` even
    /// when it has seen a term and its store never completed a recovery, and every
    /// report counts (the rule before `Body::TermUnknown`): two stores lost in a row
    /// vouch for each other, and a term forgotten by both is declared again.
    EmptyStoreVouches,
    /// A node refused as given up by a forced recovery goes on as before (the rule
    /// before `Cells::given_up`): the old majority and the survivors both lead for as
    /// long as they run (src/protocol/machine/given_up.rs).
    IgnoresGivenUp,
    /// A survivor of a forced recovery votes and leads at once, on the term it saw
    /// alone (the rule before `Cells::awaits_survivors`): a term one survivor declared
    /// before the loss, unseen by the others, is declared again by them
    /// (src/protocol/recovery.rs).
    SurvivorsTrustOwnTerms,
    /// Not the machine's: the simulator's store model skips the store check
    /// (src/storage/check.rs), so a store rolled back to an older copy while its node
    /// was down is used as current (the rule before `cells.check`).
    TrustsDamagedStore,
    /// Not the election's: a follower asked who leads names the coordinator from its
    /// own view while its last ack is at most D - 2.5 heartbeats old, without asking
    /// the coordinator (the rule `bully leader` had before read-index answers,
    /// src/protocol/machine/leader_query.rs): it names a coordinator that died or lost
    /// its lease since.
    FollowerWindow,
    /// Not the machine's: the simulator's start stores no member list until the first
    /// membership change, so each start takes the config file's `[[peers]]` (the rule
    /// before issue 47, [`crate::protocol::membership::list_at_start`]): members
    /// restarted under a cut with files naming only each other count a majority of
    /// their own.
    FileListCounts,
    /// Not the machine's: the simulator's start stores no mode, so each start runs the
    /// mode its config file names (the rule before issue 47,
    /// [`crate::protocol::mode_at_start`]): members restarted in classic mode under a
    /// cut lead beside the quorum side's coordinator.
    FileModeCounts,
    /// A coordinator that stores a list written under a newer epoch than its office
    /// stays in office (the rule before newer_list, src/protocol/machine/membership.rs):
    /// classic seed 735049 then confirmed that list under its own epoch with a version
    /// it had already written, two lists of one identity.
    KeepsOfficeOverNewerList,
    /// A follower suspects its coordinator after its own D, whatever D the coordinator
    /// said it leads under (the rule before `Machine::suspect_span`): a coordinator on
    /// a longer D, whose heartbeats come less often, is suspected between two of them,
    /// and the followers flap (classic seed 72779 of the simulator).
    SuspectByOwnD,
    /// A follower above its coordinator that preempts answers a lower node's Election
    /// but does not take over (the rule before `on_election` ran for it): after an
    /// online change of `preempt` to `always`, a restarted middle node bullies the lower
    /// coordinator, is answered by the highest node, and waits for it for ever (quorum
    /// seed 843935 of the simulator).
    WaitsOverLowerLeader,
    /// Quorum mode: the coordinator stores a new member list without first sending a
    /// round of its lease (the rule before lease_before_list,
    /// src/protocol/machine/membership.rs): while the list is flushed, first on the
    /// coordinator and then on each follower, no ack renews the lease, and with flushes
    /// of tens of milliseconds a change loses it with every node up.
    NoRenewBeforeList,
}
