//! A deterministic simulator of the PostgreSQL manager's engine
//! (src/postgres_rules/engine.rs): N members, each a node and a modelled PostgreSQL
//! server, stepped in lockstep from one u64 seed. Each step draws faults, ends an
//! office whose lease ran out (the keeper fences its primary), elects by `(est, id)`
//! when no one holds the office (docs/design.md#elected-by-data-est), hands every
//! member's engine whose manager runs its look (`Engine::handle`) and runs the commands
//! it gives against the model, as the runtime's executor runs them, then lets
//! the primary commit, the standbys stream and the commits be acknowledged as
//! `synchronous_standby_names` says. After every step it checks what the decisions
//! promise:
//!
//! - no acknowledged commit lost: every server promoted holds every commit any earlier
//!   primary acknowledged (except the `quorum` weakening: commits a primary acknowledged
//!   with k lowered below `synchronous_count` because fewer standbys truly streamed,
//!   counted apart; a k lowered below the standbys that streamed is checked; `off` is
//!   not checked);
//! - never two writable primaries at once;
//! - progress: once faults stop (with every member back), within a bound some server is
//!   primary and every other streams from it or is legitimately out.
//!
//! The servers' positions are what the runtime feeds the decisions: a [`Position`] whose
//! branch is the term of the office whose promotion began the server's timeline, read
//! from the data directory's records (`bully.branch`, src/node/postgres/files.rs); a
//! timeline without a record ranks as its newest recorded ancestor's
//! (`postgres_rules::lineage_branch`). The model keeps those records as the runtime
//! does: a promotion records its office's term for the timeline PostgreSQL will pick
//! before promoting, in its own data directory and in every peer's its promotion check
//! reached whose timeline is below that one (a promotion that then fails leaves the
//! records), a streaming standby records its upstream's reported (timeline, branch), a
//! clone or a rewind copies the source's records, a wiped directory loses them. The
//! coordinator reads a peer's branch from the peer's own records (by SQL, with its LSN).
//! A primary names in `synchronous_standby_names` only the standbys known to have
//! recorded its branch (`Cluster::knows_branch`): the peers it wrote it to, then each
//! whose report shows its timeline and branch (the engine keeps the set); a restarted
//! node's new engine rebuilds it from the reports alone.
//!
//! - WAL retention (`retention`): one slot per member on every server, and a drawn
//!   removal of the WAL no slot holds; a standby past it must be cloned afresh, not
//!   rewound for ever.
//! - The replica method (`backups`, `restored`): no member starts a backup of
//!   another cluster, and the method is not restored again in place of its own copy that
//!   never streamed; the WAL archive (`archive`) carries a standby past what its
//!   upstream keeps.
//! - A standby cluster (`remote`): while `postgres.standby_cluster` is set no member's
//!   server is a primary and every member's data is the remote primary's system; once
//!   faults stop the coordinator's server streams from the remote and every other member
//!   from it; after the operator unsets it (a DR promotion) the usual checks, and the
//!   promoted server holds the remote's WAL that servers enough to meet every majority
//!   held.
//!
//! Files: `operator` (what a person does after the heal, as the manual says), `server`
//! (the modelled server, its WAL and branch records), `world` (members,
//! office, elections, the step), `apply` (an `Act` applied as the runtime would, with its
//! `Memory` bookkeeping, as src/node/postgres/manager.rs keeps it), `faults` (what each
//! seed draws), `replication` (commits, streaming, acknowledgements), `log` (the history
//! a violation carries), `restarts` (the operator's `bully pg reload` and `bully pg
//! restart N` during the faults), `remote` (the remote primary of a standby cluster,
//! and the operator's DR promotion).
//!
//! [`Position`]: crate::postgres_rules::Position
//!
//! Same seed, same run: nothing reads the clock or iterates a hash map.

mod adopted;
mod apply;
mod archive;
mod backups;
mod faults;
mod log;
mod machines;
mod never_leads;
mod operator;
mod pause;
mod processes;
mod protocol;
mod remote;
mod replication;
mod restarts;
mod restored;
mod retention;
mod server;
mod setting;
mod stalls;
mod strangers;
mod tags;
mod world;

/// The decisions under test: the very functions the runtime calls.
use crate::postgres_rules as decisions;

use crate::config::postgres::Synchronous;
use std::collections::BTreeMap;
use std::fmt;

/// How the cluster starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// Every data directory empty: the first coordinator runs `initdb`.
    New,
    /// Member 1 leads with a primary and every other member streams from it (a cluster
    /// already bootstrapped), so every seed's faults hit a running cluster at once.
    Running,
    /// Member 1 holds a server's data made without bully (`bully pg adopt`), the others
    /// none (src/sim/postgres/adopted.rs).
    Adopted,
    /// Every member holds data of one system made without bully, member 1's the
    /// primary's (a Patroni cluster taken over: src/sim/postgres/adopted.rs).
    TakenOver,
}

/// A deliberate flaw the simulator applies around the decisions or in its model of the
/// runtime, to prove its checks catch what they claim to (none of these touches
/// src/postgres_rules.rs). The last four bring back what the decisions and the runtime
/// did before the simulator's findings were fixed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sabotage {
    /// A coordinator refused for want of a majority promotes anyway.
    SkipMajority,
    /// The old identity wait: a new cluster's coordinator (every other member absent)
    /// promotes without the cluster's identity in any record it could read or commit,
    /// so a raced `initdb` elsewhere later commits its own (seed 9677, two members and
    /// a witness, new cluster).
    PromotesWithoutIdentity,
    /// The primary applies `synchronous_standby_names` with k one lower than decided.
    KMinusOne,
    /// The keeper does not fence the primary of a node whose lease ended.
    NoFence,
    /// A keeper that fences only when its node says the office ended, not at the end
    /// of the last grant by its own clock: a node stopped whole (or cut off and
    /// stalled) says nothing while its server writes on (`Spec::protocol` only).
    KeeperWaitsForItsNode,
    /// The old wait for a rewind: a member to be rewound stops (a standby) or waits
    /// stopped and ineligible (a former primary) as soon as a coordinator is known,
    /// whether or not its server is a primary yet, and a standby that does not stream
    /// stops to be rewound even while there is no primary to rewind from. Its WAL then
    /// no longer counts toward the coordinator's majority (seed 7, 3 members, quorum).
    RewindWaits,
    /// The old reading of a member without data: reached, at `Position::default()`, so
    /// a wiped member makes up the coordinator's majority over a member that is only
    /// down (seed 1, 3 members, strict).
    AbsentCountsAsReached,
    /// The old rank: every server's branch is its PostgreSQL timeline number rather
    /// than the term of the office that began it, so two promotions on two sides of a
    /// fault that both pick "timeline 2" compare as one branch (seed 1097, 3 members,
    /// strict).
    TimelineNumbersOnly,
    /// The old names: the promoting coordinator writes its branch into no peer's data
    /// directory, and the primary names every data voter under its own name, whether or
    /// not it is known to have recorded the primary's branch ([`Cluster::knows_branch`]
    /// is every other data voter), so a standby that streamed a new primary's first
    /// commits before it adopted the branch acknowledges them while it reads as an older
    /// branch (0 then; its ancestor's since unrecorded timelines inherit); if the new
    /// primary is gone before the standby adopts the branch, a coordinator on the older
    /// branch promotes over the acknowledged commits (seeds 87, 40 and 28).
    ///
    /// [`Cluster::knows_branch`]: crate::postgres_rules::Cluster::knows_branch
    NamesIgnoreBranch,
    /// The old count of live standbys: `quorum` lowers k to the standbys that stream
    /// *and* are known to have recorded the primary's branch, so on a new cluster (no
    /// standby reached at the promotion) or after a standby rejoins, k falls to 0 while
    /// standbys stream, and the primary acknowledges commits alone until a report shows
    /// the branch (the failover test's run 11 lost a row that way).
    StreamingOnlyKnown,
    /// The old write at promotion: the coordinator writes its branch record into every
    /// reached peer, also one already on the timeline number it will pick (another
    /// branch's: two promotions on two sides of a fault can pick one number, seed
    /// 1097), which relabels that peer's own WAL with this office's term so that it
    /// outranks the commits acknowledged on this branch (seeds 11325 and 3072).
    PeerBranchAtAnyTimeline,
    /// The old reading: a timeline without a record reads as branch 0, not as its
    /// newest recorded ancestor's, so a standby that streamed past a new primary's
    /// timeline switch before it could adopt the branch ranks below every recorded
    /// branch, and a coordinator on an older branch promotes over the commits it holds
    /// (seeds 15963 and 5297).
    UnknownBranchReadsZero,
    /// The old reinit: the data dir moved aside stays aside when the clone fails, so
    /// the member holds no data until a clone succeeds; with enough of them a majority
    /// of servers with data is never reached again and no one promotes (seed 55940, 5
    /// members).
    ReinitLosesData,
    /// The old synchronous names: a primary under `quorum` lowers k to the standbys
    /// that stream at once, with no record kept by a majority first, so a standby that
    /// cannot stream leaves commits on the primary alone, and a promotion passes over
    /// them (the tester's 1,598 lost inserts, issue 49).
    NarrowsUncommitted,
    /// The old bookkeeping of a record write that no majority kept: the primary goes
    /// on relying on the office's older record, so it narrows on an `alone` record
    /// while the newer one (full names) may still surface as the newest from the
    /// minority that kept it, and a standby without what it acknowledged alone is
    /// promoted (seed 11685, 3 members, quorum).
    TrustsOlderRecord,
    /// The manager before issue 49: the pause held elections only, and the manager
    /// started, stopped and promoted as ever (the tester's server stopped by hand was
    /// started again 0.15 s later; a primary stopped by hand was promoted again).
    PauseIgnored,
    /// The old rule for a data dir of another cluster: left for the operator even when
    /// this node's own `initdb` made it and it was never promoted, so after the initdb
    /// race the member never streams unless someone runs `bully pg reinit` (the CI run
    /// of tests/postgres_unstreamable.rs, stop 52).
    KeepsOwnInitdb,
    /// Every data dir of another cluster reads as one this node made: the decisions
    /// replace a stranger's volume by a clone.
    ReplacesStrangers,
    /// A member whose data its own `initdb` made, never promoted, counts as one holding
    /// data: after an initdb race with no identity committed, neither side can reach a
    /// majority of servers of its own system, and no one promotes (seed 461, new
    /// cluster).
    UnpromotedCountsAsData,
    /// A member knows the cluster's identity only from the records it keeps: one that
    /// was down while the identity was committed reads a stranger's volume as the
    /// cluster's data, rewinds it, and replaces it by a clone (seed 2323, new cluster).
    IdentityFromRecordsOnly,
    /// The promotion check reads a stranger's server (another cluster's data) like a
    /// member's: it counts toward the majority reached, and its WAL may hold a
    /// promotion back or make a standby without acknowledged commits look complete.
    StrangerCountsAsReached,
    /// The fence and the manager's look before issue 49: any live process
    /// `postmaster.pid` names is taken for the server (`crate::postmaster::judge`
    /// skipped), so the keeper signals a stranger that reused a crashed postmaster's
    /// PID, and the manager waits on it as on a server that does not answer.
    TrustsPidFile,
    /// The promotion check reads no synchronous record: the majority rule alone.
    PromoteIgnoresRecord,
    /// The verdict before issue 49's stalls: a look at which the server runs but does
    /// not answer makes the node ineligible at once, so a disk or CPU stall of the
    /// primary's host shorter than D is a failover (src/sim/postgres/stalls.rs).
    NoUnansweredGrace,
    /// The old new-cluster rule: `initdb` whenever every other member reports no data,
    /// whatever the records and this node's notes say (the tester's empty second
    /// cluster, issue 49).
    SecondInitdb,
    /// `bully pg adopt` without its note that the node's server holds the data: a
    /// volume not mounted at the adopted member's first restart reads as a member
    /// that never had data.
    AdoptedUnnoted,
    /// A member without data clones from any member tagged `clonefrom` with a running
    /// server, whether or not its standby streams from the coordinator's primary.
    CloneFromAnyTagged,
    /// The promotion check passes over a `nofailover` member's WAL ahead (it reads as
    /// level with the coordinator's) instead of catching up from it: the commits it
    /// acknowledged before its tag are lost.
    PassesOverNofailover,
    /// The manager before WAL retention was read: a standby's upstream is never asked
    /// whether it still holds the WAL the standby needs, so a standby past retention is
    /// only ever "a standby that cannot follow", stopped and rewound. Its rewinds count
    /// until it streams (`Memory::rewind_failures`), so it is cloned afresh after the
    /// last: the sweep must still settle (the bound on the loop, alone).
    WalRemovedUnseen,
    /// The old loop (issue 49): as `WalRemovedUnseen`, and a rewind that exits 0 resets
    /// the count of failed rewinds ("no rewind required" for a standby on its
    /// upstream's timeline), so a standby past retention is stopped, rewound and started
    /// for ever and never cloned (seed 0, 3 members, quorum).
    NoOpRewindResets,
    /// The restart before issue 49's rule: while `bully pg restart` restarts the
    /// leading primary in place, the manager's looks run on and find the server not
    /// answering, so after `UNANSWERED_LOOKS` of them the node is ineligible and the
    /// office moves (4.7 s write gaps on real hosts; src/sim/postgres/restarts.rs).
    RestartThroughLooks,
    /// The restart in place before `office_kept` (src/node/postgres/manager.rs):
    /// `restart_primary_in_place` started the server as its data dir left it, a primary,
    /// without asking whether the office it began in still held. A node stopped whole
    /// mid-restart (SIGSTOP, swap) loses its lease, its keeper's fence finds no server,
    /// a standby is promoted, and the node wakes to start a second writable primary
    /// (seed 277, 5 members; src/sim/postgres/restarts.rs).
    RestartIgnoresOffice,
    /// The manager before `postgres.synchronous` was a cluster setting: its decisions
    /// read the host's file (the seed's first mode) whatever the cluster was set to
    /// since, so after `bully config set postgres.synchronous=quorum` a primary whose
    /// file says `off` acknowledges alone, and a promotion passes over those commits
    /// (src/sim/postgres/setting.rs).
    SynchronousFromFile,
    /// The promotion under `off` before the identity rule: a coordinator that read the
    /// records of fewer than a majority promoted all the same, so one cut off right after
    /// its election took a stranger's data dir for the cluster's (new cluster, seed
    /// 10626, with `postgres.synchronous` changed to `off`).
    OffPromotesUnread,
    /// The old adoption: a streaming standby takes its upstream's branch only when it is
    /// newer than its own record, so the record a failed promotion left for the
    /// timeline it would have taken outlives the standby streaming another primary's
    /// timeline of that number, older, from the same fork, and its WAL outranks the
    /// commits acknowledged on a newer branch (new cluster, seed 77889, with
    /// `postgres.synchronous` changes).
    AdoptsOnlyNewer,
    /// No backoff between clones: a failed clone is forgotten at once, so the next
    /// look starts another (src/postgres_rules/copy_backoff.rs).
    NoCopyBackoff,
    /// The replica method is never spent (`Memory::method_spent` reads as false): with a wrong stanza for good, a member
    /// without data restores another cluster's backup again and again and never gets a
    /// copy (src/sim/postgres/backups.rs).
    MethodNeverSpent,
    /// The executor starts what the replica method restored without
    /// `check_restored`: a backup of another cluster is started
    /// (src/sim/postgres/backups.rs).
    RestoredUnchecked,
    /// A reinit restores with the replica method as a clone does: the older backup
    /// replacing a standby's data leaves the commits it acknowledged on the source
    /// alone, and a failure of the source loses them
    /// (src/postgres_rules/replica_method.rs).
    ReinitByMethod,
    /// Under `postgres.standby_cluster`, the coordinator's decisions run as a normal
    /// cluster's (`Rules::standby_cluster` false for its own look while it holds the
    /// office with data): its standby leader is promoted (src/sim/postgres/remote.rs).
    StandbyLeaderPromotes,
    /// A new standby cluster runs `initdb` instead of cloning from the remote primary: its
    /// data is a system of its own, which never streams from the remote
    /// (src/sim/postgres/remote.rs).
    StandbyClusterInitDb,
}

/// What to simulate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    /// Data members (each keeps a server).
    pub members: usize,
    /// One more voter that keeps no server (docs/design.md#witnesses).
    pub witness: bool,
    pub synchronous: Synchronous,
    pub start: Start,
    pub sabotage: Option<Sabotage>,
    /// Steps during which faults are drawn.
    pub fault_steps: u64,
    /// Steps after the last fault (every member back) within which the cluster must
    /// have settled: one primary, every other member streaming from it or out.
    pub settle_steps: u64,
    /// Draw "WAL removed under the lagging standbys" (src/sim/postgres/retention.rs);
    /// off replays a seed recorded before it was modelled as it ran then.
    pub wal_removal: bool,
    /// Draw maintenance pauses (src/sim/postgres/pause.rs); off, as `wal_removal`.
    pub pauses: bool,
    /// Draw the initdb race and strangers' volumes (src/sim/postgres/strangers.rs);
    /// off, as `wal_removal`.
    pub strangers: bool,
    /// Draw servers that stall, their nodes running on (src/sim/postgres/stalls.rs);
    /// off, as `wal_removal`.
    pub server_stalls: bool,
    /// Draw the operator's `bully pg reload` and `bully pg restart N`
    /// (src/sim/postgres/restarts.rs); off, as `wal_removal`.
    pub restarts: bool,
    /// Draw how long a primary keeps counting a standby it no longer sees toward k
    /// (`Rules::standby_grace_ms`: none in half the seeds, up to the runtime's 20 looks
    /// in the rest), from a stream of its own; off, none, as `wal_removal`.
    pub standby_grace: bool,
    /// Draw the operator's `bully config set postgres.synchronous`
    /// (src/sim/postgres/setting.rs); off, as `wal_removal`.
    pub synchronous_changes: bool,
    /// Draw the members' tags (src/sim/postgres/tags.rs); off, every member's are the
    /// defaults, as `wal_removal`.
    pub tags: bool,
    /// Draw a `nofailover` member among the tags (src/sim/postgres/tags.rs); off, as
    /// `wal_removal`.
    pub nofailover: bool,
    /// The office from the members' real machines, fenced by their keepers at the
    /// grants' ends (src/sim/postgres/protocol.rs); off, modelled here.
    pub protocol: bool,
    /// Draw the replica method with its backup repository (src/sim/postgres/backups.rs)
    /// and the WAL archive (src/sim/postgres/archive.rs), each from a stream of its
    /// own; off, neither, as `wal_removal`.
    pub backups: bool,
    /// Draw a standby cluster (`postgres.standby_cluster` with a remote primary, and the
    /// operator's DR promotion) in a fraction of the seeds of a new cluster, from a stream
    /// of its own (src/sim/postgres/remote.rs); off, as `wal_removal`.
    pub standby_cluster: bool,
}

impl Spec {
    /// A running cluster of `members` under `synchronous`, the decisions as they are,
    /// faults for 120 steps and 60 to settle (the longest settling seen is well below;
    /// see tests/postgres_sim.rs).
    pub fn new(members: usize, synchronous: Synchronous) -> Spec {
        Spec {
            members,
            witness: false,
            synchronous,
            start: Start::Running,
            sabotage: None,
            fault_steps: 120,
            settle_steps: 60,
            wal_removal: true,
            pauses: true,
            strangers: true,
            server_stalls: true,
            restarts: true,
            standby_grace: true,
            synchronous_changes: true,
            tags: true,
            nofailover: true,
            protocol: false,
            backups: true,
            standby_cluster: true,
        }
    }
}

/// What one seed did, summed over seeds by [`Summary::add`]; tests print it so a
/// passing sweep shows it exercised what it claims to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    pub seeds: u64,
    pub steps: u64,
    pub elections: u64,
    pub stale_elections: u64,
    pub promotions: u64,
    pub failed_promotions: u64,
    pub rewinds: u64,
    pub failed_rewinds: u64,
    pub clones: u64,
    pub failed_clones: u64,
    /// Clones (or reinits) started after one of the same member failed: each waited
    /// its backoff (src/postgres_rules/copy_backoff.rs).
    pub clones_after_backoff: u64,
    /// Clones begun from a `clonefrom` standby rather than the primary.
    pub clones_from_a_standby: u64,
    pub reinits: u64,
    pub initdbs: u64,
    /// Maintenance pauses drawn (src/sim/postgres/pause.rs).
    pub pauses: u64,

    /// Synchronous records written, and those a majority kept.
    pub records: u64,
    pub records_committed: u64,
    pub fences: u64,
    pub commits: u64,
    /// Commits acknowledged with k as decided.
    pub acknowledged: u64,
    /// Commits acknowledged under `off`: their loss is documented and not counted.
    pub acknowledged_weak: u64,
    /// Acknowledged commits whose every copy a drawn wipe destroyed.
    pub destroyed: u64,
    /// Members legitimately out when the cluster settled (rewind failed, no reinit).
    pub out: u64,
    /// The most steps any seed needed to settle after its last fault.
    pub longest_settle: u64,
    /// Elections won on the failover priority: another candidate's WAL ranked alike and
    /// its ID was higher (src/sim/postgres/tags.rs).
    pub won_on_priority: u64,
    /// Names a primary wrote that named a `nosync` member while enough others were left
    /// for k at its full value (must stay 0).
    pub nosync_named: u64,
    /// Promotions while a `nofailover` member's WAL was ahead (one the promotion check
    /// did not reach: a majority without it holds every acknowledged commit).
    pub promoted_past_nofailover: u64,
    /// Names a primary wrote that named a `nofailover` member while the others were
    /// enough for k at its full value (must stay 0).
    pub nofailover_named: u64,
    /// Times the operator removed a `nofailover` tag the coordinator waited on
    /// (src/sim/postgres/tags.rs).
    pub untagged_nofailover: u64,
    /// Copies the replica method made (src/sim/postgres/backups.rs).
    pub method_copies: u64,
    /// Copies by the replica method that failed: it exited non-zero, the repository
    /// held no backup, the source did not say where its WAL ends, or `check_restored`
    /// refused what it restored.
    pub method_failures: u64,
    /// Backups of another cluster `check_restored` refused.
    pub foreign_backups_refused: u64,
    /// Method copies that fell short of their upstream's WAL, then replaced by
    /// `pg_basebackup` (src/sim/postgres/restored.rs).
    pub short_method_copies_replaced: u64,
    /// Steps at which a standby replayed from the WAL archive past what its upstream
    /// keeps (src/sim/postgres/archive.rs).
    pub archive_replays: u64,
    /// Seeds that began as a standby cluster (src/sim/postgres/remote.rs).
    pub standby_clusters: u64,
    /// Copies made from the remote primary (a new standby cluster's first data).
    pub clones_from_remote: u64,
    /// The first promotion after the operator unset `postgres.standby_cluster`, of a
    /// server holding the remote's data (a DR promotion).
    pub dr_promotions: u64,
    /// Faults drawn, by kind.
    pub faults: BTreeMap<&'static str, u64>,
}

impl Summary {
    /// Adds another seed's counts (the longest settle is the maximum).
    pub fn add(&mut self, other: &Summary) {
        self.seeds += other.seeds;
        self.steps += other.steps;
        self.elections += other.elections;
        self.stale_elections += other.stale_elections;
        self.promotions += other.promotions;
        self.failed_promotions += other.failed_promotions;
        self.rewinds += other.rewinds;
        self.failed_rewinds += other.failed_rewinds;
        self.clones += other.clones;
        self.failed_clones += other.failed_clones;
        self.clones_after_backoff += other.clones_after_backoff;
        self.clones_from_a_standby += other.clones_from_a_standby;
        self.reinits += other.reinits;
        self.initdbs += other.initdbs;
        self.pauses += other.pauses;

        self.records += other.records;
        self.records_committed += other.records_committed;
        self.fences += other.fences;
        self.commits += other.commits;
        self.acknowledged += other.acknowledged;
        self.acknowledged_weak += other.acknowledged_weak;
        self.destroyed += other.destroyed;
        self.out += other.out;
        self.longest_settle = self.longest_settle.max(other.longest_settle);
        self.won_on_priority += other.won_on_priority;
        self.nosync_named += other.nosync_named;
        self.promoted_past_nofailover += other.promoted_past_nofailover;
        self.untagged_nofailover += other.untagged_nofailover;
        self.nofailover_named += other.nofailover_named;
        self.method_copies += other.method_copies;
        self.method_failures += other.method_failures;
        self.foreign_backups_refused += other.foreign_backups_refused;
        self.short_method_copies_replaced += other.short_method_copies_replaced;
        self.archive_replays += other.archive_replays;
        self.standby_clusters += other.standby_clusters;
        self.clones_from_remote += other.clones_from_remote;
        self.dr_promotions += other.dr_promotions;
        for (kind, n) in &other.faults {
            *self.faults.entry(kind).or_default() += n;
        }
    }

    /// All faults drawn.
    pub fn faults_drawn(&self) -> u64 {
        self.faults.values().sum()
    }
}

/// A broken promise: which seed, what broke, and the last steps that led there, so
/// `PG_SIM_SEED=<seed>` replays it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub seed: u64,
    pub spec: Spec,
    pub step: u64,
    pub what: String,
    /// The last ~40 steps, one line per event.
    pub history: Vec<String>,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "seed {} ({} members{}, {:?}, {:?}, sabotage {:?}), step {}: {}",
            self.seed,
            self.spec.members,
            if self.spec.witness { " + witness" } else { "" },
            self.spec.synchronous,
            self.spec.start,
            self.spec.sabotage,
            self.step,
            self.what
        )?;
        writeln!(f, "history (the last steps):")?;
        for line in &self.history {
            writeln!(f, "  {line}")?;
        }
        Ok(())
    }
}

/// Runs one seed: faults for `spec.fault_steps`, then every member back and
/// `spec.settle_steps` to settle. The first broken promise ends the run.
pub fn run_seed(seed: u64, spec: &Spec) -> Result<Summary, Violation> {
    let mut world = world::World::new(seed, *spec);
    world.run().map_err(|what| world.violation(what))?;
    Ok(world.summary())
}
