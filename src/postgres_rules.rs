//! The PostgreSQL manager's decisions (docs/design.md#keeping-postgresql), pure: given
//! what the node's office is and what the servers answered, what to do next with the
//! local server, and whether the node may lead. [`Engine`] (src/postgres_rules/engine.rs)
//! holds what the manager keeps between looks and takes these decisions. The runtime
//! (src/node/postgres/) only observes and acts; the simulator (src/sim/postgres/) drives
//! the same engine with drawn answers (a lagging standby, a promotion or a rewind that
//! fails), which is why
//! they sit below it, beside the protocol, and not in the node's policy wing
//! (`tests/layering.rs` holds them to the same purity).
//!
//! The rules, in words:
//! - Every server starts as a standby. Only the ready coordinator promotes, and only
//!   when its server holds at least the WAL of every server it can reach, and it reached
//!   a majority of the members (itself included): a majority the acknowledged commits
//!   reached (see [`synchronous_count`]) meets it.
//! - A server that is primary without the office is stopped at once (the keeper has
//!   fenced it by the lease's deadlines already if the node stalled).
//! - A former primary (or a standby that cannot follow) rejoins by `pg_rewind` from the
//!   coordinator's server, retried a bounded number of times, then, if allowed, by a
//!   fresh clone with its old directory kept aside.
//! - A member without data clones itself from the coordinator's primary; the first
//!   coordinator of a cluster where no member has data runs `initdb`.

mod copy_backoff;
mod durability;
mod engine;
mod memory;
mod replica_method;
mod tags;

/// The synchronous mode is a cluster setting (src/protocol/settings.rs); the rules read it.
pub use crate::protocol::settings::Synchronous;
pub use copy_backoff::FIRST_RETRY_MS;
pub use durability::{uncovered, SyncRecord, SyncView};
pub use engine::{Command, Engine, Look, STANDBY_GRACE_MS};
pub use memory::{Done, Memory, UNANSWERED_LOOKS};
pub use replica_method::{check_restored, copier, Copier};
pub use tags::{election_rank, ranks_alike, Tags, MAX_FAILOVER_PRIORITY};

use crate::protocol::membership::majority_of;
use crate::protocol::NodeId;

/// The upstream a standby cluster's standby leader streams from: the remote primary of
/// `postgres.standby_cluster` (docs/postgresql.md#a-standby-cluster), in every act and
/// report that names an upstream. No member has ID 0 (src/transport/member_checks.rs),
/// so it never stands for one; the executors map it to the remote's address.
pub const REMOTE_PRIMARY: NodeId = 0;

/// How many times a rewind is tried before the manager clones afresh (or gives up).
pub const REWIND_ATTEMPTS: u32 = 3;

/// Starts in a row that never ran after which a following server is rewound (and,
/// failing that, cloned afresh).
pub const FAILED_STARTS: u32 = 3;

/// What the node's protocol says about the office, as the manager needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Office {
    /// This node is the coordinator and ready: its lease holds, any old primary is
    /// fenced (`token` is the epoch's fencing token).
    Leading { token: u64 },
    /// This node is the coordinator but not ready yet (quorum mode: not established).
    Elected,
    /// Another member leads; `server` is that member once its server's address is
    /// known (the runtime maps members to addresses).
    Following {
        leader: NodeId,
        server: Option<NodeId>,
    },
    /// No coordinator is known.
    Nobody,
}

/// The local server as the manager found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Server {
    /// No data directory (or an empty one).
    Absent,
    /// A data directory and no running server; from its control file.
    Stopped {
        /// It was a primary (shut down or crashed out of recovery).
        was_primary: bool,
        /// It was shut down cleanly (as `pg_rewind` requires).
        clean: bool,
    },
    /// Running and answering SQL.
    Running(Running),
    /// Running (its postmaster is alive) but not answering.
    Unreachable,
}

/// What a running server answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Running {
    /// `pg_is_in_recovery()`: a standby.
    pub in_recovery: bool,
    pub timeline: u32,
    /// Where the server's WAL ends: its branch, then its flushed WAL on a primary or
    /// its received (else replayed) WAL on a standby.
    pub wal: Position,
    /// The member whose server a standby's `primary_conninfo` names, if any.
    pub upstream: Option<NodeId>,
    /// A standby's WAL receiver is streaming.
    pub streaming: bool,
    /// A primary's `synchronous_standby_names`.
    pub synchronous_standby_names: String,
}

/// Another member's server, as far as the coordinator could reach it before promoting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerWal {
    pub id: NodeId,
    /// Where its WAL ends; `None`: not reachable (or not running).
    pub wal: Option<Position>,
}

/// The cluster around this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    /// This node.
    pub id: NodeId,
    /// The voting members that keep a server (witnesses and learners excluded), this
    /// node included.
    pub data_voters: Vec<NodeId>,
    /// Every voting member, witnesses included: majorities count these.
    pub voters: usize,
    /// Whether every other member reported an empty server whose node never noted
    /// holding the cluster's data (`absent`, not `missing`): no commit can be on
    /// another server. A member whose volume is not mounted, or was wiped, reports
    /// `missing` (the simulator's seed 73, 3 members, strict, promoted over one).
    pub all_absent: bool,
    /// The coordinator's server serves the cluster (known from its status): it runs as
    /// a primary, or, in a standby cluster ([`Rules::standby_cluster`]), as the standby
    /// leader. Members follow, rewind from and clone from it only then.
    pub leader_primary: bool,
    /// On a primary: how many other data voters' standbys stream from it now, whether or
    /// not they are known to hold its branch (`quorum` lowers k to these; the names
    /// gate which of them acknowledge).
    pub streaming: usize,
    /// On a primary: the other data voters known to have recorded its branch for its
    /// timeline (written to them before the promotion, or seen in their reports). Only
    /// these are named in `synchronous_standby_names`: an acknowledgement from a
    /// standby that does not know the branch would hold a commit where the promotion
    /// check ranks it below an older branch (found by the simulator, seeds 87, 40, 28).
    pub knows_branch: Vec<NodeId>,
    /// What a leading coordinator read of the synchronous records before it promotes or
    /// runs `initdb` ([`SyncView::Unread`] elsewhere).
    pub sync: SyncView,
    /// The cluster's PostgreSQL system identifier as this node knows it (from the
    /// records it keeps or read); 0: not known.
    pub system_id: u64,
    /// This server's system identifier (0: no data, or not read).
    pub server_system_id: u64,
    /// This node's server held the cluster's data before (bully notes it in the node's
    /// data dir): a missing data dir is then a volume gone, not a new member.
    pub held_data: bool,
    /// The system identifier of a cluster this node's own `initdb` made and whose
    /// server was never promoted (bully notes it in the node's data dir,
    /// src/node/postgres/held.rs); 0: none. Such data holds nothing a client wrote.
    pub made_here: u64,
    /// The cluster is paused (`bully pause`): the manager leaves the server alone.
    pub paused: bool,
    /// On a primary: the other members' standbys streaming from it, with the WAL each
    /// has flushed (`pg_stat_replication`).
    pub flushed: Vec<(NodeId, u64)>,
    /// The other data voters tagged `nosync`, as they reported it (src/postgres_rules/tags.rs).
    pub nosync: Vec<NodeId>,
    /// The data voters tagged `nofailover` (this node by its own file, the others as
    /// they reported it): never promoted, and never named while the others suffice for
    /// k. Their WAL is never passed over: a coordinator behind them streams from them
    /// first ([`catch_up_source`]).
    pub nofailover: Vec<NodeId>,
    /// The other data voters tagged `clonefrom` whose standbys stream from the
    /// coordinator's primary now (their fresh reports): a member without data clones
    /// from the first of them instead of the primary (Patroni's `clonefrom`: the
    /// primary's disks and network stay out of a big copy). A source that does not
    /// stream from the primary is never used: its data may be on another branch.
    pub clone_sources: Vec<NodeId>,
    /// Some other data voter has not reported since this node started, which began a
    /// few seconds ago: a member without data waits for it before it clones from the
    /// primary, since it may be a `clonefrom` standby.
    pub reports_pending: bool,
}

impl Cluster {
    /// The other data voters a primary on `id` names in `synchronous_standby_names`: all
    /// but those tagged `nosync` or `nofailover`; where that leaves fewer than
    /// [`full_k`], the `nosync` ones come back first, then the `nofailover` ones. k keeps
    /// its full value either way, so every acknowledged commit still meets every
    /// majority: where the tags would cost that, they yield to the guarantee.
    pub fn sync_candidates(&self, id: NodeId) -> Vec<NodeId> {
        let others = self.data_voters.iter().copied().filter(|&m| m != id);
        let wanted = full_k(id, self);
        let tiers: [&dyn Fn(NodeId) -> bool; 2] = [
            &|m| !self.nosync.contains(&m) && !self.nofailover.contains(&m),
            &|m| !self.nofailover.contains(&m),
        ];
        tiers
            .iter()
            .map(|keep| others.clone().filter(|&m| keep(m)).collect::<Vec<_>>())
            .find(|named| named.len() >= wanted)
            .unwrap_or_else(|| others.collect())
    }

    /// Whether this node's own file tags it `nofailover`: it never leads.
    pub fn never_leads(&self) -> bool {
        self.nofailover.contains(&self.id)
    }
}

/// A standby's upstream no longer holds the WAL the standby needs next: its position is
/// below the oldest WAL segment the upstream keeps (read by SQL on the upstream,
/// `pg_ls_waldir()`, not from a message). No rewind brings it back (pg_rewind of a
/// standby on the upstream's timeline exits 0 with "no rewind required"); only a fresh
/// clone does. While it lasts the standby is not eligible: it holds nothing the
/// cluster lacks, and it may be far behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalRemoved {
    /// The member whose server removed it.
    pub upstream: NodeId,
    /// The standby's replay did not move since the previous look: it is not replaying
    /// a backlog from its own `pg_wal` (which would carry it past the gap).
    pub settled: bool,
}

/// Why the manager stops its server ([`Act::Stop`]), typed so the executor's
/// bookkeeping never reads words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// A primary without the office.
    PrimaryOutOfOffice,
    /// A former primary stops cleanly for its rewind.
    FormerPrimary,
    /// A standby with the right upstream that has not streamed for a while (a timeline
    /// it cannot follow): rewound, then cloned afresh if rewinds do not help.
    CannotFollow,
}

impl StopReason {
    /// The words the status and the log show.
    pub fn words(self) -> &'static str {
        match self {
            StopReason::PrimaryOutOfOffice => "a primary without the office",
            StopReason::FormerPrimary => "a former primary stops cleanly for its rewind",
            StopReason::CannotFollow => "a standby that cannot follow its upstream is rewound",
        }
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.words())
    }
}

/// The settings the decisions use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    pub synchronous: Synchronous,
    pub maximum_lag_on_failover: u64,
    pub rewind: bool,
    pub reinit_on_failed_rewind: bool,
    /// Looks in a row without streaming after which a standby is rewound.
    pub stuck_after: u32,
    /// How long after a standby was last seen streaming it still counts toward `ANY k`
    /// under `quorum`, in ms (the runtime: [`STANDBY_GRACE_MS`]; a new primary counts
    /// every standby that long).
    pub standby_grace_ms: u64,
    /// `[postgres] replica_method` is set: copies may restore from the operator's
    /// backups (src/postgres_rules/replica_method.rs).
    pub replica_method: bool,
    /// `postgres.standby_cluster` is set: the coordinator's server is the standby
    /// leader, streaming from [`REMOTE_PRIMARY`]; nothing is promoted, and a new
    /// cluster is cloned from the remote instead of made by `initdb`.
    pub standby_cluster: bool,
}

#[cfg(test)]
impl Rules {
    /// The rules the decisions' unit tests start from: `quorum`, no lag tolerated,
    /// rewind then reinit allowed, stuck after 3 looks, the runtime's standby grace.
    pub(crate) fn for_test() -> Rules {
        Rules {
            synchronous: Synchronous::Quorum,
            maximum_lag_on_failover: 0,
            rewind: true,
            reinit_on_failed_rewind: true,
            stuck_after: 3,
            standby_grace_ms: STANDBY_GRACE_MS,
            replica_method: false,
            standby_cluster: false,
        }
    }
}

/// What to do with the local server now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Act {
    /// Nothing to do; the words say why (shown in the status).
    Wait(String),
    /// `initdb`, then start as a standby (the next look promotes).
    InitDb,
    /// A copy into the (empty) data dir, then a start as a standby of member `from`'s
    /// server (src/postgres_rules/replica_method.rs says how it is made).
    Clone { from: NodeId, by: Copier },
    /// Start as a standby of member `upstream`'s server (none: of nobody yet).
    StartStandby { upstream: Option<NodeId> },
    /// Write the new upstream to the owned include file and reload.
    Repoint { upstream: Option<NodeId> },
    /// `pg_promote()`.
    Promote,
    /// Fast shutdown.
    Stop { why: StopReason },
    /// `pg_rewind` from the coordinator's server (the server is stopped cleanly).
    Rewind { from: NodeId },
    /// Stop the server if it runs, move the data directory aside and copy afresh (`by`)
    /// to stream from member `from`'s server.
    Reinit { from: NodeId, by: Copier },
    /// Set `synchronous_standby_names` and reload.
    SetSynchronous { names: String },
    /// Store `record` on every voter; it counts once a majority kept it
    /// ([`Memory::committed`]).
    CommitSync { record: SyncRecord },
}

impl Act {
    /// One word for the act, for logs and the paused manager's note.
    pub fn word(&self) -> &'static str {
        match self {
            Act::Wait(_) => "wait",
            Act::InitDb => "initdb",
            Act::Clone { .. } => "clone",
            Act::StartStandby { .. } => "start",
            Act::Repoint { .. } => "repoint",
            Act::Promote => "promote",
            Act::Stop { .. } => "stop",
            Act::Rewind { .. } => "rewind",
            Act::Reinit { .. } => "reinit",
            Act::SetSynchronous { .. } => "set the synchronous names",
            Act::CommitSync { .. } => "commit the synchronous record",
        }
    }
}

/// The decision of one look: what to do and whether the node may lead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub act: Act,
    /// Whether the node is eligible (its health verdict).
    pub eligible: bool,
}

/// Where a server's WAL ends, in the order the promotion check compares servers by: the
/// branch first, then the WAL position. The branch is the term of the office whose
/// promotion began the server's timeline (bully records it in the data dir,
/// src/node/postgres/files.rs): a server on a later branch followed a later promotion,
/// which by the promotion check held every commit acknowledged before it. PostgreSQL's
/// timeline numbers do not give this order: two promotions on two sides of a fault can
/// both pick "timeline 2" (found by the simulator, src/sim/postgres/, seed 1097).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Position {
    pub branch: u64,
    pub lsn: u64,
}

/// The application name a member's standby streams under (`bully_<id>`).
pub fn application_name(id: NodeId) -> String {
    format!("bully_{id}")
}

/// Whether `synchronous_standby_names` as a primary runs it (`ANY k (...)`, k > 0)
/// names member `id`'s standby under its own name: a quorum standby, whose
/// acknowledgements count (Patroni's `/quorum`, src/node/serve/http_patroni.rs).
pub fn names_standby(names: &str, id: NodeId) -> bool {
    let Some(rest) = names.trim().strip_prefix("ANY ") else {
        return false;
    };
    let Some((k, list)) = rest.split_once(' ') else {
        return false;
    };
    let named = list
        .trim()
        .trim_start_matches('(')
        .trim_end_matches(')')
        .split(',')
        .map(|n| n.trim().trim_matches('"'));
    k.parse::<usize>().is_ok_and(|k| k > 0) && named.into_iter().any(|n| n == application_name(id))
}

/// The branch a server's WAL ranks as: the first recorded branch along its timeline's
/// `lineage`, newest first (the timeline itself, then the ancestors its history names).
/// A timeline without a record inherits its newest recorded ancestor's branch rather
/// than read as 0: a standby that streamed past a new primary's timeline switch before
/// it could record the branch holds no commit acknowledged on the new timeline, so it
/// keeps the rank of the branch it came from (found by the simulator, seed 15963).
pub fn lineage_branch(
    lineage: impl IntoIterator<Item = u32>,
    recorded: impl Fn(u32) -> u64,
) -> u64 {
    lineage
        .into_iter()
        .map(recorded)
        .find(|&branch| branch != 0)
        .unwrap_or(0)
}

/// What a standby streaming from its upstream records of the upstream's history: the
/// upstream's reported timeline and branch, when that branch is newer than the record
/// this server holds for the timeline (`recorded`), or, once the standby's own WAL is
/// on that timeline (`own_timeline`), whenever it differs. The upstream's timeline
/// began in its branch's office, a fact to keep whether or not this standby's replay
/// reached that timeline yet; and a timeline the standby streamed in *is* the
/// upstream's, whatever an earlier record said of that number. Such a record can be
/// higher and false: a promotion that failed leaves the record of the timeline it
/// would have taken, and another primary may have taken that number from the same
/// fork under an older office (found by the simulator, seed 77889). Recording the
/// upstream's branch supersedes the claims coordinators wrote for the timeline
/// (src/node/postgres/files.rs, `record_branch`). The runtime
/// (src/node/postgres/manager.rs) and the simulator (src/sim/postgres/world.rs) both
/// ask this.
pub fn branch_to_adopt(
    report: Option<(u32, u64)>,
    own_timeline: u32,
    recorded: impl Fn(u32) -> u64,
) -> Option<(u32, u64)> {
    let (timeline, branch) = report?;
    let held = recorded(timeline);
    let adopt = held < branch || (timeline == own_timeline && held != branch);
    (branch != 0 && adopt).then_some((timeline, branch))
}

/// k of `ANY k (...)`: every commit a primary acknowledges is then on k + 1 servers,
/// and every majority of `voters` (witnesses included, all of them in the worst case)
/// meets them: k + 1 + (majority - witnesses) > data members ⇔ k ≥ voters - majority.
pub fn synchronous_count(voters: usize) -> usize {
    voters - majority_of(voters)
}

/// The name that stands in `synchronous_standby_names` for a member whose standby does
/// not know the primary's branch yet: no standby connects under it, so it never acks.
pub fn unconfirmed_name(id: NodeId) -> String {
    format!("bully_unconfirmed_{id}")
}

/// The standbys a primary names and how many of them each commit waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncSet {
    /// k of `ANY k (...)` (0: the names are empty, commits wait for no standby).
    pub k: usize,
    /// The standbys named under their own names: only these acknowledge.
    pub standbys: Vec<NodeId>,
    /// The standbys named under [`unconfirmed_name`] (they do not know the branch yet).
    pub unconfirmed: Vec<NodeId>,
}

impl SyncSet {
    /// `synchronous_standby_names` for this set, in the data voters' order.
    pub fn names(&self) -> String {
        if self.k == 0 {
            return String::new();
        }
        let mut named: Vec<(NodeId, String)> = self
            .standbys
            .iter()
            .map(|&m| (m, application_name(m)))
            .chain(self.unconfirmed.iter().map(|&m| (m, unconfirmed_name(m))))
            .collect();
        named.sort();
        let names: Vec<String> = named.into_iter().map(|(_, n)| n).collect();
        format!("ANY {} ({})", self.k, names.join(", "))
    }
}

/// The set a primary on `id` with `streaming` standbys live keeps: every other data
/// voter not tagged `nosync` or `nofailover` ([`Cluster::sync_candidates`]) is named, under its own name once it knows the primary's branch
/// ([`Cluster::knows_branch`]) and under [`unconfirmed_name`] until then; k is
/// [`full_k`], lowered to the live standbys under `quorum` (never under `strict`), and 0
/// under `off`.
pub fn sync_set(id: NodeId, cluster: &Cluster, streaming: usize, mode: Synchronous) -> SyncSet {
    let (standbys, unconfirmed): (Vec<NodeId>, Vec<NodeId>) = cluster
        .sync_candidates(id)
        .into_iter()
        .partition(|m| cluster.knows_branch.contains(m));
    let named = standbys.len() + unconfirmed.len();
    let wanted = full_k(id, cluster);
    let k = match mode {
        Synchronous::Off => 0,
        Synchronous::Quorum => wanted.min(streaming),
        Synchronous::Strict => wanted.max(usize::from(named > 0)),
    };
    SyncSet {
        k,
        standbys,
        unconfirmed,
    }
}

/// k at its full value for a primary on `id`: [`synchronous_count`], at most the other
/// data voters. A primary with fewer relies on a committed [`SyncRecord`].
pub fn full_k(id: NodeId, cluster: &Cluster) -> usize {
    let others = cluster.data_voters.iter().filter(|&&m| m != id).count();
    synchronous_count(cluster.voters).min(others)
}

/// `synchronous_standby_names` for a primary on `id` with `streaming` standbys live
/// ([`sync_set`]).
pub fn synchronous_names(
    id: NodeId,
    cluster: &Cluster,
    streaming: usize,
    mode: Synchronous,
) -> String {
    sync_set(id, cluster, streaming, mode).names()
}

/// How many servers the promotion check reached, counting the coordinator's own, and
/// whether they and the witnesses make a majority of the voters.
pub fn reached_majority(reached_peers: usize, cluster: &Cluster) -> (usize, bool) {
    let reached = 1 + reached_peers;
    let witnesses = cluster.voters - cluster.data_voters.len();
    (reached, reached + witnesses >= majority_of(cluster.voters))
}

/// Whether the promotion check needs a majority: not under `off`, nor when no other
/// member's server ever held data ([`Cluster::all_absent`]: no commit exists elsewhere).
fn majority_needed(cluster: &Cluster, rules: &Rules) -> bool {
    rules.synchronous != Synchronous::Off && !cluster.all_absent
}

/// The cluster has an identity: a record this node keeps or read names its system.
fn initialized(cluster: &Cluster) -> bool {
    cluster.system_id != 0 || cluster.sync.system_id() != 0
}

/// Whether too few servers answered for the promotion check: a coordinator that hears
/// this keeps its office and waits (a resignation would only pass the same wait on,
/// and the keeper's fence of its server would take one more server out of reach).
pub fn too_few_reached(peers: &[PeerWal], cluster: &Cluster, rules: &Rules) -> bool {
    let (_, majority) = reached_majority(peers.iter().filter(|p| p.wal.is_some()).count(), cluster);
    majority_needed(cluster, rules) && !majority
}

/// Whether the coordinator's server may be promoted, given the other servers' WAL
/// positions it reached: `Ok` or why not.
pub fn may_promote(
    own: Position,
    peers: &[PeerWal],
    cluster: &Cluster,
    rules: &Rules,
) -> Result<(), String> {
    let (reached, majority) =
        reached_majority(peers.iter().filter(|p| p.wal.is_some()).count(), cluster);
    if let Some(ahead) = ahead_of(own, peers).max_by_key(|&(_, wal)| wal) {
        if ahead.1.branch != own.branch {
            return Err(format!(
                "node {} is on a later branch (term {}, this server's: {})",
                ahead.0, ahead.1.branch, own.branch
            ));
        }
        let behind = ahead.1.lsn - own.lsn;
        let tolerated = match rules.synchronous {
            Synchronous::Off => rules.maximum_lag_on_failover,
            _ => 0,
        };
        if behind > tolerated {
            return Err(format!(
                "node {} holds newer WAL ({behind} bytes ahead of this server)",
                ahead.0
            ));
        }
    }
    if majority_needed(cluster, rules) && !majority {
        return Err(format!(
            "reached {reached} of the servers, and a majority ({} of {} members) is needed \
             to know this one holds every acknowledged commit",
            majority_of(cluster.voters),
            cluster.voters
        ));
    }
    Ok(())
}

/// The next step for the local server. `peers` are the other servers' positions, read
/// only by a coordinator about to promote (empty otherwise).
pub fn decide(
    office: Office,
    server: &Server,
    peers: &[PeerWal],
    cluster: &Cluster,
    memory: &Memory,
    rules: &Rules,
) -> Decision {
    let decision = decide_unpaused(office, server, peers, cluster, memory, rules);
    let decision = never_leading(decision, server, cluster);
    match cluster.paused {
        true => paused(decision, server),
        false => decision,
    }
}

/// The reached servers whose WAL ends past `own`, with their positions.
fn ahead_of(own: Position, peers: &[PeerWal]) -> impl Iterator<Item = (NodeId, Position)> + '_ {
    peers
        .iter()
        .filter_map(|p| p.wal.map(|wal| (p.id, wal)))
        .filter(move |&(_, wal)| wal > own)
}

/// The member a coordinator behind streams from before it promotes, when every reached
/// server ahead of `own` never leads: the freshest of them. Their WAL may hold
/// acknowledged commits (one named before its tag, a record's primary, or named where
/// the others were too few; a primary's record need not say which, as its names widen
/// without a new record) and none of them may be promoted, so the coordinator's standby
/// fetches it first (pg_auto_failover's fast-forward) rather than pass over it or
/// resign to no one.
fn catch_up_source(own: Position, peers: &[PeerWal], cluster: &Cluster) -> Option<NodeId> {
    let ahead: Vec<(NodeId, Position)> = ahead_of(own, peers).collect();
    let all_never_lead = ahead.iter().all(|(id, _)| cluster.nofailover.contains(id));
    match all_never_lead {
        true => ahead.iter().max_by_key(|&&(_, wal)| wal).map(|&(id, _)| id),
        false => None,
    }
}

/// A member tagged `nofailover` is never eligible, and never promotes, commits the
/// identity record that comes before a promotion, or runs `initdb`, should it hold the
/// office all the same (its tag just set, before it resigns). A primary it still runs
/// keeps its synchronous bookkeeping until it stops.
fn never_leading(decision: Decision, server: &Server, cluster: &Cluster) -> Decision {
    if !cluster.never_leads() {
        return decision;
    }
    let primary = matches!(server, Server::Running(r) if !r.in_recovery);
    let refused = match decision.act {
        Act::Promote | Act::InitDb => true,
        Act::CommitSync { .. } => !primary,
        _ => false,
    };
    let act = match refused {
        true => Act::Wait(
            "tagged nofailover: never promoted (another member leads, or none can)".into(),
        ),
        false => decision.act,
    };
    Decision {
        act,
        eligible: false,
    }
}

/// While the cluster is paused the manager starts, stops, promotes, rewinds and clones
/// nothing (Patroni's pause): only the synchronous bookkeeping of a running primary goes
/// on, which keeps what it acknowledges safe.
fn paused(decision: Decision, server: &Server) -> Decision {
    let primary = matches!(server, Server::Running(r) if !r.in_recovery);
    let act = match decision.act {
        act @ Act::Wait(_) => act,
        act @ (Act::SetSynchronous { .. } | Act::CommitSync { .. }) if primary => act,
        other => Act::Wait(format!(
            "paused: leaves the server as it is (would: {})",
            other.word()
        )),
    };
    Decision { act, ..decision }
}

/// Why this server's data is not the cluster's, if it is not: both system identifiers
/// known and different.
pub fn foreign(cluster: &Cluster) -> Option<String> {
    let (ours, theirs) = (cluster.system_id, cluster.server_system_id);
    (ours != 0 && theirs != 0 && ours != theirs).then(|| {
        format!(
            "the data dir holds another cluster (system identifier {theirs}; the cluster's \
             is {ours}): it is left as it is, never promoted, rewound or cloned from; move \
             it away, or `bully pg reinit {}` clones this member afresh (the old data dir \
             is kept)",
            cluster.id
        )
    })
}

fn decide_unpaused(
    office: Office,
    server: &Server,
    peers: &[PeerWal],
    cluster: &Cluster,
    memory: &Memory,
    rules: &Rules,
) -> Decision {
    if let Some(why) = &memory.out {
        return stay_out(office, server, why);
    }
    if let Some(why) = foreign(cluster) {
        return match cluster.made_here == cluster.server_system_id {
            true => replace_own_initdb(office, server, cluster),
            false => left_alone(office, server, &why),
        };
    }
    if let Some(decision) = standby_leader(office, server, memory, rules) {
        return decision;
    }
    match server {
        Server::Absent => absent(office, cluster, memory, rules),
        Server::Unreachable => Decision {
            act: Act::Wait("the server runs but does not answer".into()),
            eligible: false,
        },
        Server::Stopped { was_primary, clean } => {
            stopped(office, *was_primary, *clean, cluster, memory, rules)
        }
        Server::Running(running) => match running.in_recovery {
            false => primary(office, running, cluster, memory, rules),
            true => standby(office, running, peers, cluster, memory, rules),
        },
    }
}

/// A server the manager gave up on: stop it if it is a primary out of office, and
/// never lead.
fn stay_out(office: Office, server: &Server, why: &str) -> Decision {
    let act = match (office, server) {
        (Office::Leading { .. }, Server::Stopped { .. }) => Act::Wait(format!("out: {why}")),
        // Its WAL still counts toward a coordinator's promotion check (a member out and
        // one without data left no majority to promote from: the simulator's seed 1432,
        // a new cluster): a standby of nobody never writes.
        (_, Server::Stopped { .. }) => Act::StartStandby { upstream: None },
        _ => return left_alone(office, server, why),
    };
    Decision {
        act,
        eligible: false,
    }
}

/// A server the operator must see to (another cluster's data, or given up on): a
/// primary without the office is stopped, anything else is left as it is, and the node
/// never leads.
fn left_alone(office: Office, server: &Server, why: &str) -> Decision {
    let act = match (office, server) {
        (Office::Leading { .. }, _) => Act::Wait(format!("out: {why}")),
        (_, Server::Running(r)) if !r.in_recovery => Act::Stop {
            why: StopReason::PrimaryOutOfOffice,
        },
        _ => Act::Wait(format!("out: {why}")),
    };
    Decision {
        act,
        eligible: false,
    }
}

/// A data dir of another cluster that this node's own `initdb` made and never promoted:
/// two coordinators in quick succession each found every data dir empty, and the other
/// one's identity was committed (the real-process race in
/// tests/postgres_unstreamable.rs's start, the simulator's `initdb race` draw). It holds
/// nothing a client wrote, so it is replaced by a clone (kept aside all the same) once
/// the coordinator's server runs as a primary; any other foreign data dir is left for
/// the operator.
fn replace_own_initdb(office: Office, server: &Server, cluster: &Cluster) -> Decision {
    match office {
        Office::Following {
            server: Some(from), ..
        } if cluster.leader_primary => Decision {
            act: Act::Reinit {
                from,
                by: Copier::BaseBackup,
            },
            eligible: false,
        },
        _ => left_alone(
            office,
            server,
            &format!(
                "the data dir holds a cluster this node's initdb made and never promoted \
                 (system identifier {}; the cluster's is {}): it is replaced by a clone \
                 once the coordinator's server runs as a primary",
                cluster.server_system_id, cluster.system_id
            ),
        ),
    }
}

/// The coordinator of a standby cluster with data: its server is the standby leader,
/// which streams from the remote primary and is never promoted. A stopped one starts as
/// the remote's standby; a running standby is pointed at the remote. `None` for the
/// rest, which the usual rules take: a member without data, a follower, and a server
/// that runs or ran as a primary of this cluster. Such a primary keeps serving, and one
/// stopped is never rewound onto the remote: the setting never throws away what this
/// cluster acknowledged (docs/postgresql.md#a-standby-cluster).
fn standby_leader(
    office: Office,
    server: &Server,
    memory: &Memory,
    rules: &Rules,
) -> Option<Decision> {
    if !rules.standby_cluster || !matches!(office, Office::Leading { .. } | Office::Elected) {
        return None;
    }
    let remote = Some(REMOTE_PRIMARY);
    match server {
        Server::Stopped { was_primary, .. } if !rewind_wanted(*was_primary, memory) => {
            Some(start(remote))
        }
        Server::Running(r) if r.in_recovery && r.upstream != remote => Some(Decision {
            act: Act::Repoint { upstream: remote },
            eligible: true,
        }),
        Server::Running(r) if r.in_recovery => Some(Decision {
            act: Act::Wait(match r.streaming {
                true => "the standby leader: streams from the remote primary".into(),
                false => "the standby leader: not streaming from the remote primary".into(),
            }),
            eligible: true,
        }),
        _ => None,
    }
}

fn absent(office: Office, cluster: &Cluster, memory: &Memory, rules: &Rules) -> Decision {
    if cluster.held_data {
        return Decision {
            act: Act::Wait(format!(
                "the data dir is missing, though this member's server held the cluster's \
                 data (a volume not mounted?): nothing is created in its place; mount it \
                 back, or `bully pg reinit {}` clones afresh",
                cluster.id
            )),
            eligible: false,
        };
    }
    let initialized = initialized(cluster);
    match office {
        Office::Leading { .. } if cluster.all_absent && !initialized => match cluster.sync {
            SyncView::Read(_) => Decision {
                act: match rules.standby_cluster {
                    true => Act::Clone {
                        from: REMOTE_PRIMARY,
                        by: Copier::BaseBackup,
                    },
                    false => Act::InitDb,
                },
                eligible: true,
            },
            SyncView::Unread => Decision {
                act: Act::Wait(
                    "a new cluster? initdb waits for a majority of the members to answer \
                     that none keeps the identity of an existing one"
                        .into(),
                ),
                eligible: true,
            },
        },
        Office::Following {
            server: Some(primary),
            ..
        } if cluster.leader_primary => Decision {
            // After a failed copy the primary serves: a source that cannot (its
            // walsenders taken, its disk) is not tried for ever.
            act: match cluster.clone_sources.first() {
                Some(&source) if memory.copy_failed.is_none() => Act::Clone {
                    from: source,
                    by: Copier::BaseBackup,
                },
                None if cluster.reports_pending && memory.copy_failed.is_none() => Act::Wait(
                    "waits for every member's first report before it clones from the \
                     primary (a clonefrom standby among them would serve the copy)"
                        .into(),
                ),
                _ => Act::Clone {
                    from: primary,
                    by: Copier::BaseBackup,
                },
            },
            eligible: false,
        },
        _ => Decision {
            act: Act::Wait(match (cluster.all_absent, initialized) {
                (true, false) if rules.standby_cluster => "a new standby cluster: the first \
                     coordinator copies the remote primary"
                    .into(),
                (true, false) => "a new cluster: the first coordinator runs initdb".into(),
                (true, true) => format!(
                    "no member reached holds the cluster's data (system identifier {}): \
                     no second initdb; bring back a data dir",
                    cluster.system_id.max(cluster.sync.system_id())
                ),
                (false, _) => "no data yet: waiting for a primary to clone from".into(),
            }),
            // A new cluster elects the member that will run initdb; a member without
            // data in a cluster with data must never lead.
            eligible: cluster.all_absent && !initialized,
        },
    }
}

fn stopped(
    office: Office,
    was_primary: bool,
    clean: bool,
    cluster: &Cluster,
    memory: &Memory,
    rules: &Rules,
) -> Decision {
    let cannot_start = memory.failed_starts >= FAILED_STARTS;
    let rewind_wanted = rewind_wanted(was_primary, memory);
    match office {
        Office::Following {
            server: Some(from), ..
        } if rewind_wanted && cluster.leader_primary => {
            if !clean && !cannot_start {
                // pg_rewind needs a clean shutdown: start as a standby of nobody
                // (recovery finishes, it never writes), the next look stops it cleanly.
                return start(None);
            }
            rejoin(from, memory, rules)
        }
        Office::Following { server, .. } if !rewind_wanted => start(server),
        Office::Leading { .. } | Office::Elected | Office::Nobody => start(None),
        // No primary to rewind from yet: run as a standby of nobody (it never
        // writes), so the coordinator's promotion check reaches this WAL (found by the
        // simulator, src/sim/postgres/: waiting stopped starved the majority).
        Office::Following { .. } => start(None),
    }
}

fn start(upstream: Option<NodeId>) -> Decision {
    Decision {
        act: Act::StartStandby { upstream },
        eligible: false,
    }
}

/// Whether a stopped server must be rewound before it follows: it was primary, it could
/// not follow, or it failed to start [`FAILED_STARTS`] times in a row.
pub fn rewind_wanted(was_primary: bool, memory: &Memory) -> bool {
    memory.needs_rewind || was_primary || memory.failed_starts >= FAILED_STARTS
}

/// Whether a server that must rejoin may still be rewound: rewinding is on and fewer
/// than [`REWIND_ATTEMPTS`] failed.
fn may_rewind(memory: &Memory, rules: &Rules) -> bool {
    rules.rewind && memory.rewind_failures < REWIND_ATTEMPTS
}

/// Whether a server that must rejoin has no way left: no rewind may be tried and
/// cloning afresh is off. It waits, out, for the operator.
pub fn cannot_rejoin(memory: &Memory, rules: &Rules) -> bool {
    !may_rewind(memory, rules) && !rules.reinit_on_failed_rewind
}

/// Whether the rules leave this member's server for the operator: rewinds failed (or
/// are off) with cloning afresh off, or the WAL its standby needs is gone with cloning
/// afresh off. Its manager waits and says so; the simulator's progress check accepts
/// exactly these members not streaming.
pub fn left_for_operator(was_primary: bool, memory: &Memory, rules: &Rules) -> bool {
    memory.out.is_some()
        || cannot_rejoin(memory, rules) && rewind_wanted(was_primary, memory)
        || !rules.reinit_on_failed_rewind && memory.wal_removed.is_some_and(|r| r.settled)
}

/// Rewind, or clone afresh after too many failed rewinds (when allowed).
fn rejoin(from: NodeId, memory: &Memory, rules: &Rules) -> Decision {
    let act = if may_rewind(memory, rules) {
        Act::Rewind { from }
    } else if rules.reinit_on_failed_rewind {
        Act::Reinit {
            from,
            by: Copier::BaseBackup,
        }
    } else {
        Act::Wait("rewinding failed and reinit_on_failed_rewind is off".into())
    };
    Decision {
        act,
        eligible: false,
    }
}

fn primary(
    office: Office,
    running: &Running,
    cluster: &Cluster,
    memory: &Memory,
    rules: &Rules,
) -> Decision {
    match office {
        Office::Leading { token } => Decision {
            act: synchronous_act(token, running, cluster, memory, rules),
            eligible: true,
        },
        Office::Elected => Decision {
            act: Act::Wait("elected, waiting to be ready".into()),
            eligible: true,
        },
        Office::Following { .. } | Office::Nobody => Decision {
            act: Act::Stop {
                why: StopReason::PrimaryOutOfOffice,
            },
            eligible: false,
        },
    }
}

/// A standby whose upstream removed the WAL it needs ([`WalRemoved`]): never eligible;
/// cloned afresh from the upstream once its own replay stopped (when
/// `reinit_on_failed_rewind` allows), else out, saying why.
fn wal_removed(from: NodeId, removed: WalRemoved, rules: &Rules) -> Decision {
    let gone = format!("node {from}'s server removed the WAL this standby needs");
    let act = match (removed.settled, rules.reinit_on_failed_rewind) {
        (false, _) => Act::Wait(format!("{gone}; replaying its own WAL first")),
        (true, true) => Act::Reinit {
            from,
            by: Copier::BaseBackup,
        },
        (true, false) => Act::Wait(format!(
            "{gone}, and reinit_on_failed_rewind is off: `bully pg reinit` clones it"
        )),
    };
    Decision {
        act,
        eligible: false,
    }
}

/// A physical replication slot on a server, as `pg_replication_slots` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    pub name: String,
    /// A WAL sender streams with it now.
    pub active: bool,
    /// It holds WAL (`restart_lsn` is set).
    pub reserved: bool,
    /// `wal_status = 'lost'`: `max_slot_wal_keep_size` let the WAL it held go.
    pub lost: bool,
}

/// A change to a server's slots ([`slot_changes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlotChange {
    /// `pg_create_physical_replication_slot(name, reserve)`.
    Create { name: String, reserve: bool },
    /// `pg_drop_replication_slot(name)`.
    Drop { name: String },
}

/// Whether the slot `name` is one bully manages (`bully_<id>`, [`application_name`]):
/// every other slot is the user's (or a former manager's, as Patroni's) and left alone.
pub fn bully_slot(name: &str) -> bool {
    name.strip_prefix("bully_")
        .is_some_and(|id| id.parse::<NodeId>().is_ok())
}

/// What makes a server's slots one per other data voter, named as the member's standby
/// streams (`bully_<id>`, its `primary_slot_name`), so the WAL a standby needs stays on
/// the primary while the standby is down (up to `max_slot_wal_keep_size`):
/// - a missing slot is created: reserving WAL from now on the leading primary
///   (`leading_primary`), without reserving anywhere else, so a standby about to be
///   promoted already has the slots its peers stream with and they need not wait for
///   them (a walreceiver that names a missing slot retries only every 5 s);
/// - on the leading primary, an unused slot that holds no WAL or lost it is created
///   again reserving WAL from now (after a failover the new primary holds WAL for a
///   member that is down);
/// - elsewhere, an unused slot that holds WAL is created again without (a former
///   primary's slots would keep WAL on a standby);
/// - a slot of a member no longer among the data voters is dropped once unused.
///
/// Slots whose names are not bully's are the user's and stay as they are.
pub fn slot_changes(cluster: &Cluster, leading_primary: bool, slots: &[Slot]) -> Vec<SlotChange> {
    let wanted: Vec<String> = cluster
        .data_voters
        .iter()
        .filter(|&&m| m != cluster.id)
        .map(|&m| application_name(m))
        .collect();
    let mut changes = Vec::new();
    for slot in slots.iter().filter(|s| bully_slot(&s.name) && !s.active) {
        let renew = match leading_primary {
            true => !slot.reserved || slot.lost,
            false => slot.reserved,
        };
        let keep = wanted.contains(&slot.name);
        if !keep || renew {
            changes.push(SlotChange::Drop {
                name: slot.name.clone(),
            });
        }
        if keep && renew {
            changes.push(SlotChange::Create {
                name: slot.name.clone(),
                reserve: leading_primary,
            });
        }
    }
    for name in wanted {
        if !slots.iter().any(|s| s.name == name) {
            changes.push(SlotChange::Create {
                name,
                reserve: leading_primary,
            });
        }
    }
    changes
}

/// A primary keeps `synchronous_standby_names` as [`synchronous_names`] says for the
/// standbys streaming from it now.
fn synchronous_act(
    token: u64,
    running: &Running,
    cluster: &Cluster,
    memory: &Memory,
    rules: &Rules,
) -> Act {
    let wanted = sync_set(cluster.id, cluster, cluster.streaming, rules.synchronous);
    let names = wanted.names();
    let set = names == running.synchronous_standby_names;
    if rules.synchronous == Synchronous::Off {
        return match set {
            true => Act::Wait("primary".into()),
            false => Act::SetSynchronous { names },
        };
    }
    let office = memory.committed.as_ref().filter(|c| c.token == token);
    let alone = wanted.k < full_k(cluster.id, cluster);
    match (alone, office) {
        // Fewer standbys to wait for only once a majority keeps a record saying so: no
        // promotion then passes over what this primary acknowledges alone.
        (true, Some(record)) if record.alone => match set {
            true => Act::Wait("primary, acknowledging without a majority".into()),
            false => Act::SetSynchronous { names },
        },
        (true, _) => commit(token, cluster, memory, &wanted, true),
        (false, _) if !set => Act::SetSynchronous { names },
        (false, Some(record)) if !record.alone => Act::Wait("primary".into()),
        // The names are full again (or new with the office): the record follows once
        // k named standbys hold everything this primary acknowledged before.
        (false, _) if caught_up(&wanted, cluster, memory) => {
            commit(token, cluster, memory, &wanted, false)
        }
        (false, _) => Act::Wait(
            "primary; waits for its standbys to catch up before it records the full set".into(),
        ),
    }
}

/// Whether `k` of the standbys `set` names flushed past where the primary's WAL ended
/// when its names were first seen as they are.
fn caught_up(set: &SyncSet, cluster: &Cluster, memory: &Memory) -> bool {
    let Some((_, from)) = &memory.names_from else {
        return false;
    };
    let past = cluster
        .flushed
        .iter()
        .filter(|(id, lsn)| set.standbys.contains(id) && lsn >= from)
        .count();
    past >= set.k
}

/// The record of `set` for a primary of office `token`, numbered after the last one
/// the office wrote.
fn commit(token: u64, cluster: &Cluster, memory: &Memory, set: &SyncSet, alone: bool) -> Act {
    let seq = match memory.sync_written {
        (written, seq) if written == token => seq + 1,
        _ => 1,
    };
    Act::CommitSync {
        record: SyncRecord {
            token,
            seq,
            primary: cluster.id,
            k: set.k,
            standbys: set.standbys.clone(),
            system_id: cluster.server_system_id,
            alone,
        },
    }
}

/// A coordinator whose server may be promoted by its WAL: promote, unless the newest
/// synchronous record says some acknowledged commit may be on servers it did not reach
/// (it waits, keeping the office), or the cluster's identity is not committed yet (it
/// commits a record naming its server's system first: a new cluster's first primary).
fn promote_act(
    token: u64,
    peers: &[PeerWal],
    cluster: &Cluster,
    memory: &Memory,
    rules: &Rules,
) -> Act {
    let holders: Vec<NodeId> = std::iter::once(cluster.id)
        .chain(peers.iter().filter(|p| p.wal.is_some()).map(|p| p.id))
        .collect();
    let checked = rules.synchronous != Synchronous::Off
        && !cluster.all_absent
        && memory.accept_loss != Some(token);
    if let Some(why) = uncovered(&cluster.sync, &holders).filter(|_| checked) {
        return Act::Wait(format!("waits to promote: {why}"));
    }
    let identity_kept = cluster.sync.system_id() != 0
        || memory
            .committed
            .as_ref()
            .is_some_and(|c| c.token == token && c.system_id == cluster.server_system_id);
    let read = matches!(cluster.sync, SyncView::Read(_));
    // Under `off` no record bounds the loss, but the cluster's identity still must be
    // known: a coordinator that reads the records of a minority only (cut off right
    // after its election) could take a stranger's data dir, or its own raced `initdb`,
    // for the cluster's (PostgreSQL simulator, new cluster, seed 10626 with
    // `postgres.synchronous` changed to `off`). A new cluster too: a coordinator cut off
    // right after its own `initdb` (whose identity record was refused), the other
    // member's raced `initdb` counted absent, promoted with no identity anywhere, and
    // the other then committed its own and served a second system (two members and a
    // witness, new cluster, seed 9677).
    if !read && !identity_kept {
        return Act::Wait(format!(
            "waits to promote: {} (the cluster's identity)",
            uncovered(&SyncView::Unread, &holders).unwrap_or_default()
        ));
    }
    if read && !identity_kept && cluster.server_system_id != 0 {
        return Act::CommitSync {
            record: identity_record(token, cluster, memory, cluster.server_system_id),
        };
    }
    Act::Promote
}

/// The record that commits the cluster's identity (`system_id`) for a coordinator of
/// office `token`: every other data voter named at full k. The manager and the
/// simulator commit it right after `initdb`, so a second coordinator that finds every
/// data dir empty (this one's server not answering yet) runs no second `initdb`; and
/// before the first promotion if that did not reach a majority.
pub fn identity_record(
    token: u64,
    cluster: &Cluster,
    memory: &Memory,
    system_id: u64,
) -> SyncRecord {
    let everyone = SyncSet {
        k: full_k(cluster.id, cluster),
        standbys: cluster
            .data_voters
            .iter()
            .copied()
            .filter(|&m| m != cluster.id)
            .collect(),
        unconfirmed: Vec::new(),
    };
    let Act::CommitSync { mut record } = commit(token, cluster, memory, &everyone, false) else {
        unreachable!("commit makes a CommitSync");
    };
    record.system_id = system_id;
    record
}

fn standby(
    office: Office,
    running: &Running,
    peers: &[PeerWal],
    cluster: &Cluster,
    memory: &Memory,
    rules: &Rules,
) -> Decision {
    match office {
        Office::Leading { token } => match may_promote(running.wal, peers, cluster, rules) {
            Ok(()) => Decision {
                act: promote_act(token, peers, cluster, memory, rules),
                eligible: true,
            },
            // Too few answered: keep the office and wait for a majority to answer.
            Err(why) if too_few_reached(peers, cluster, rules) => Decision {
                act: Act::Wait(format!("waits to promote: {why}")),
                eligible: true,
            },
            // Behind only members that never lead: it fetches their WAL first,
            // keeping the office.
            Err(why) => match catch_up_source(running.wal, peers, cluster) {
                Some(source) if running.upstream != Some(source) => Decision {
                    act: Act::Repoint {
                        upstream: Some(source),
                    },
                    eligible: true,
                },
                Some(source) => Decision {
                    act: Act::Wait(format!(
                        "catches up from node {source} (tagged nofailover) before it \
                         promotes: {why}"
                    )),
                    eligible: true,
                },
                // Behind: ineligible, the coordinator resigns, and the fresher server's
                // node wins the next election by its estimate.
                None => Decision {
                    act: Act::Wait(format!("refuses to promote: {why}")),
                    eligible: false,
                },
            },
        },
        Office::Elected => Decision {
            act: Act::Wait("elected, waiting to be ready before promoting".into()),
            eligible: true,
        },
        Office::Following { .. } if memory.needs_rewind && cluster.leader_primary => Decision {
            act: Act::Stop {
                why: StopReason::FormerPrimary,
            },
            eligible: false,
        },
        Office::Following { .. } if memory.needs_rewind => Decision {
            act: Act::Wait("to be rewound once the coordinator's server is primary".into()),
            eligible: true,
        },
        Office::Following {
            server: Some(from), ..
        } if cluster.leader_primary && memory.wal_removed.is_some_and(|r| r.upstream == from) => {
            let removed = memory.wal_removed.expect("just matched");
            wal_removed(from, removed, rules)
        }
        Office::Following { server, .. } if running.upstream != server => Decision {
            act: Act::Repoint { upstream: server },
            eligible: true,
        },
        Office::Following {
            server: Some(_), ..
        } if !running.streaming
            && memory.not_streaming >= rules.stuck_after
            && cluster.leader_primary =>
        {
            Decision {
                act: Act::Stop {
                    why: StopReason::CannotFollow,
                },
                eligible: true,
            }
        }
        Office::Following { .. } | Office::Nobody => Decision {
            act: Act::Wait(match running.streaming {
                true => "streaming".into(),
                false => "a standby, not streaming".into(),
            }),
            eligible: true,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: NodeId = 2;

    /// The member whose server a test names (no addresses in the decisions).
    fn addr(member: NodeId) -> NodeId {
        member
    }

    fn cluster(voters: &[NodeId]) -> Cluster {
        Cluster::of(ME, voters)
    }

    fn rules(synchronous: Synchronous) -> Rules {
        Rules {
            synchronous,
            maximum_lag_on_failover: 100,
            ..Rules::for_test()
        }
    }

    fn at(lsn: u64) -> Position {
        Position { branch: 1, lsn }
    }

    fn standby(wal: u64, upstream: Option<NodeId>) -> Server {
        Server::Running(Running {
            in_recovery: true,
            timeline: 1,
            wal: at(wal),
            upstream,
            streaming: upstream.is_some(),
            synchronous_standby_names: String::new(),
        })
    }

    fn primary(names: &str) -> Server {
        Server::Running(Running {
            in_recovery: false,
            timeline: 2,
            wal: at(10),
            upstream: None,
            streaming: false,
            synchronous_standby_names: names.into(),
        })
    }

    fn act(office: Office, server: &Server, peers: &[PeerWal], memory: &Memory) -> Decision {
        decide(
            office,
            server,
            peers,
            &cluster(&[1, 2, 3]),
            memory,
            &rules(Synchronous::Quorum),
        )
    }

    const LEADING: Office = Office::Leading { token: 7 };

    fn following() -> Office {
        Office::Following {
            leader: 3,
            server: Some(addr(3)),
        }
    }

    #[test]
    fn k_lets_every_majority_meet_the_acknowledged_commits() {
        for voters in 1..=9usize {
            let k = synchronous_count(voters);
            let majority = majority_of(voters);
            // The commit is on k + 1 servers; the smallest majority of the others
            // (the primary dead) must still meet it.
            assert!(k + majority > voters - 1, "voters {voters}: k {k}");
            // And k is the least that does.
            assert!(
                k == 0 || (k - 1) + majority < voters,
                "voters {voters}: k {k}"
            );
        }
        assert_eq!(synchronous_count(3), 1);
        assert_eq!(synchronous_count(5), 2);
    }

    #[test]
    fn a_standby_is_named_only_under_its_own_name_with_k_above_0() {
        let names = "ANY 1 (bully_1, bully_unconfirmed_3)";
        assert!(names_standby(names, 1));
        assert!(
            !names_standby(names, 3),
            "an unconfirmed name acknowledges nothing"
        );
        assert!(!names_standby(names, 2));
        assert!(names_standby("ANY 2 (\"bully_2\", bully_12)", 12));
        assert!(!names_standby("ANY 0 (bully_1)", 1));
        assert!(!names_standby("", 1));
        assert!(!names_standby("bully_1", 1));
    }

    #[test]
    fn synchronous_names_follow_the_mode_and_the_live_standbys() {
        let c = cluster(&[1, 2, 3, 4, 5]);
        let all = "bully_1, bully_3, bully_4, bully_5";
        assert_eq!(
            synchronous_names(ME, &c, 4, Synchronous::Quorum),
            format!("ANY 2 ({all})")
        );
        assert_eq!(
            synchronous_names(ME, &c, 1, Synchronous::Quorum),
            format!("ANY 1 ({all})")
        );
        assert_eq!(synchronous_names(ME, &c, 0, Synchronous::Quorum), "");
        assert_eq!(
            synchronous_names(ME, &c, 0, Synchronous::Strict),
            format!("ANY 2 ({all})")
        );
        assert_eq!(synchronous_names(ME, &c, 4, Synchronous::Off), "");
        let mut unknown = c.clone();
        unknown.knows_branch = vec![1, 4];
        assert_eq!(
            synchronous_names(ME, &unknown, 2, Synchronous::Quorum),
            "ANY 2 (bully_1, bully_unconfirmed_3, bully_4, bully_unconfirmed_5)",
            "only a standby that knows the branch may acknowledge"
        );
        let mut witnessed = cluster(&[1, 2]);
        witnessed.voters = 3;
        assert_eq!(
            synchronous_names(ME, &witnessed, 1, Synchronous::Quorum),
            "ANY 1 (bully_1)"
        );
    }

    #[test]
    fn a_later_branch_ranks_above_a_longer_older_one() {
        let pos = |branch, lsn| Position { branch, lsn };
        assert!(election_rank(pos(3, 10), 1) > election_rank(pos(2, 1 << 40), 1));
        assert!(pos(2, 11) > pos(2, 10), "exact for the promotion check");
    }

    #[test]
    fn the_coordinator_promotes_only_holding_the_newest_wal_of_a_majority() {
        let peers = [
            PeerWal {
                id: 1,
                wal: Some(at(90)),
            },
            PeerWal { id: 3, wal: None },
        ];
        assert_eq!(
            act(LEADING, &standby(100, None), &peers, &Memory::default()).act,
            Act::Promote
        );
        let ahead = [
            PeerWal {
                id: 1,
                wal: Some(at(101)),
            },
            PeerWal { id: 3, wal: None },
        ];
        let refused = act(LEADING, &standby(100, None), &ahead, &Memory::default());
        assert!(!refused.eligible, "a refusing coordinator resigns");
        assert!(matches!(&refused.act, Act::Wait(w) if w.contains("node 1 holds newer WAL")));
        let alone = [PeerWal { id: 1, wal: None }, PeerWal { id: 3, wal: None }];
        let waits = act(LEADING, &standby(100, None), &alone, &Memory::default());
        assert!(
            matches!(&waits.act, Act::Wait(w) if w.contains("majority")),
            "{waits:?}"
        );
        assert!(waits.eligible, "too few answered: keep the office and wait");
        // Asynchronous: a lag within the bound is tolerated, and no majority is needed.
        let off = |peers: &[PeerWal]| {
            decide(
                LEADING,
                &standby(100, None),
                peers,
                &cluster(&[1, 2, 3]),
                &Memory::default(),
                &rules(Synchronous::Off),
            )
            .act
        };
        assert_eq!(
            off(&[PeerWal {
                id: 1,
                wal: Some(at(150))
            }]),
            Act::Promote
        );
        assert!(matches!(
            off(&[PeerWal {
                id: 1,
                wal: Some(at(201))
            }]),
            Act::Wait(_)
        ));
        assert_eq!(off(&alone), Act::Promote);
    }

    #[test]
    fn a_primary_without_the_office_is_stopped_and_rewound_before_it_follows() {
        for office in [following(), Office::Nobody] {
            let d = act(office, &primary(""), &[], &Memory::default());
            assert!(matches!(d.act, Act::Stop { .. }), "{office:?}: {d:?}");
            assert!(!d.eligible);
        }
        let stopped = Server::Stopped {
            was_primary: true,
            clean: true,
        };
        assert_eq!(
            act(following(), &stopped, &[], &Memory::default()).act,
            Act::Rewind { from: addr(3) }
        );
        // Crashed: recover as a standby of nobody first, then stop cleanly, then rewind.
        let crashed = Server::Stopped {
            was_primary: true,
            clean: false,
        };
        assert_eq!(
            act(following(), &crashed, &[], &Memory::default()).act,
            Act::StartStandby { upstream: None }
        );
        let memory = Memory {
            needs_rewind: true,
            ..Memory::default()
        };
        assert!(matches!(
            act(following(), &standby(5, None), &[], &memory).act,
            Act::Stop { .. }
        ));
    }

    #[test]
    fn failed_rewinds_end_in_a_fresh_clone_or_stay_out_when_not_allowed() {
        let stopped = Server::Stopped {
            was_primary: true,
            clean: true,
        };
        let memory = Memory {
            needs_rewind: true,
            rewind_failures: REWIND_ATTEMPTS,
            ..Memory::default()
        };
        assert_eq!(
            act(following(), &stopped, &[], &memory).act,
            Act::Reinit {
                from: addr(3),
                by: Copier::BaseBackup
            }
        );
        let mut no_reinit = rules(Synchronous::Quorum);
        no_reinit.reinit_on_failed_rewind = false;
        let d = decide(
            following(),
            &stopped,
            &[],
            &cluster(&[1, 2, 3]),
            &memory,
            &no_reinit,
        );
        assert!(matches!(d.act, Act::Wait(_)) && !d.eligible, "{d:?}");
    }

    /// A standby cluster: a new one is cloned from the remote primary, not made by
    /// initdb; the coordinator's server streams from the remote and is never promoted,
    /// whatever its peers hold; a member without data clones from the standby leader; a
    /// primary of the cluster itself keeps serving and one that ran as a primary is
    /// never started onto the remote. Unset, the same standby leader promotes.
    #[test]
    fn a_standby_cluster_follows_the_remote_and_never_promotes() {
        let standby_cluster = Rules {
            standby_cluster: true,
            ..rules(Synchronous::Quorum)
        };
        let decide_in = |office, server: &Server, cluster: &Cluster, memory: &Memory| {
            decide(office, server, &[], cluster, memory, &standby_cluster)
        };
        let mut fresh = cluster(&[1, 2, 3]);
        fresh.all_absent = true;
        let d = decide_in(LEADING, &Server::Absent, &fresh, &Memory::default());
        assert_eq!(
            d.act,
            Act::Clone {
                from: REMOTE_PRIMARY,
                by: Copier::BaseBackup
            }
        );
        let whole = cluster(&[1, 2, 3]);
        let d = decide_in(LEADING, &standby(5, None), &whole, &Memory::default());
        assert_eq!(
            d.act,
            Act::Repoint {
                upstream: Some(REMOTE_PRIMARY)
            }
        );
        let leader = standby(5, Some(REMOTE_PRIMARY));
        let d = decide_in(LEADING, &leader, &whole, &Memory::default());
        assert!(matches!(d.act, Act::Wait(_)) && d.eligible, "{d:?}");
        let stopped = Server::Stopped {
            was_primary: false,
            clean: true,
        };
        let d = decide_in(LEADING, &stopped, &whole, &Memory::default());
        assert_eq!(
            d.act,
            Act::StartStandby {
                upstream: Some(REMOTE_PRIMARY)
            }
        );
        let was_primary = Server::Stopped {
            was_primary: true,
            clean: true,
        };
        let d = decide_in(LEADING, &was_primary, &whole, &Memory::default());
        assert_eq!(d.act, Act::StartStandby { upstream: None });
        let d = decide_in(LEADING, &primary(""), &whole, &Memory::default());
        assert!(matches!(d.act, Act::SetSynchronous { .. }), "{d:?}");
        let d = decide_in(following(), &Server::Absent, &whole, &Memory::default());
        assert_eq!(
            d.act,
            Act::Clone {
                from: addr(3),
                by: Copier::BaseBackup
            }
        );
        let peers = [1, 3].map(|id| PeerWal {
            id,
            wal: Some(at(4)),
        });
        let d = act(LEADING, &leader, &peers, &Memory::default());
        assert!(
            matches!(d.act, Act::Promote | Act::CommitSync { .. }),
            "unset: the standby leader promotes: {d:?}"
        );
    }

    #[test]
    fn only_a_new_cluster_runs_initdb_and_a_member_without_data_clones_and_never_leads() {
        let mut fresh = cluster(&[1, 2, 3]);
        fresh.all_absent = true;
        fresh.leader_primary = false;
        let rules = rules(Synchronous::Quorum);
        let d = decide(
            LEADING,
            &Server::Absent,
            &[],
            &fresh,
            &Memory::default(),
            &rules,
        );
        assert_eq!(d.act, Act::InitDb);
        let d = act(LEADING, &Server::Absent, &[], &Memory::default());
        assert!(
            matches!(d.act, Act::Wait(_)) && !d.eligible,
            "data elsewhere: never initdb"
        );
        let d = act(following(), &Server::Absent, &[], &Memory::default());
        assert_eq!(
            d.act,
            Act::Clone {
                from: addr(3),
                by: Copier::BaseBackup
            }
        );
        assert!(!d.eligible);
    }

    #[test]
    fn a_member_without_data_clones_a_clonefrom_standby_and_waits_for_first_reports() {
        let rules = rules(Synchronous::Quorum);
        let clone = |sources: Vec<NodeId>, pending: bool| {
            let cluster = Cluster {
                clone_sources: sources,
                reports_pending: pending,
                ..cluster(&[1, 2, 3, 4])
            };
            let memory = Memory::default();
            decide(following(), &Server::Absent, &[], &cluster, &memory, &rules).act
        };
        assert_eq!(
            clone(vec![2, 4], false),
            Act::Clone {
                from: 2,
                by: Copier::BaseBackup
            }
        );
        assert_eq!(
            clone(vec![2], true),
            Act::Clone {
                from: 2,
                by: Copier::BaseBackup
            }
        );
        assert!(matches!(clone(vec![], true), Act::Wait(w) if w.contains("first report")));
        assert_eq!(
            clone(vec![], false),
            Act::Clone {
                from: addr(3),
                by: Copier::BaseBackup
            }
        );
        let failed = Memory {
            copy_failed: Some((1, 0, "no walsender left".into())),
            ..Memory::default()
        };
        let cluster = Cluster {
            clone_sources: vec![2],
            ..cluster(&[1, 2, 3, 4])
        };
        let d = decide(following(), &Server::Absent, &[], &cluster, &failed, &rules);
        assert_eq!(
            d.act,
            Act::Clone {
                from: addr(3),
                by: Copier::BaseBackup
            },
            "the primary after a failure"
        );
    }

    #[test]
    fn standbys_follow_the_coordinator_and_a_stuck_one_is_rewound() {
        let d = act(
            following(),
            &standby(5, Some(addr(1))),
            &[],
            &Memory::default(),
        );
        assert_eq!(
            d.act,
            Act::Repoint {
                upstream: Some(addr(3))
            }
        );
        let mut stuck = standby(5, Some(addr(3)));
        if let Server::Running(r) = &mut stuck {
            r.streaming = false;
        }
        assert!(matches!(
            act(following(), &stuck, &[], &Memory::default()).act,
            Act::Wait(_)
        ));
        let memory = Memory {
            not_streaming: 3,
            ..Memory::default()
        };
        assert!(matches!(
            act(following(), &stuck, &[], &memory).act,
            Act::Stop { .. }
        ));
    }

    #[test]
    fn the_leading_primary_keeps_its_synchronous_names() {
        let d = act(LEADING, &primary(""), &[], &Memory::default());
        assert_eq!(
            d.act,
            Act::SetSynchronous {
                names: "ANY 1 (bully_1, bully_3)".into()
            }
        );
        let kept = Memory {
            committed: Some(SyncRecord {
                token: 7,
                seq: 1,
                primary: ME,
                k: 1,
                standbys: vec![1, 3],
                system_id: 0,
                alone: false,
            }),
            ..Memory::default()
        };
        let d = act(LEADING, &primary("ANY 1 (bully_1, bully_3)"), &[], &kept);
        assert!(matches!(d.act, Act::Wait(_)) && d.eligible);
    }
}

/// A cluster of data voters `voters` around `id`, every other one streaming and known
/// to hold the branch, the coordinator's server a primary: the decisions' tests start
/// from it.
#[cfg(test)]
impl Cluster {
    fn of(id: NodeId, voters: &[NodeId]) -> Cluster {
        Cluster {
            id,
            data_voters: voters.to_vec(),
            voters: voters.len(),
            all_absent: false,
            leader_primary: true,
            streaming: voters.len() - 1,
            knows_branch: voters.to_vec(),
            sync: SyncView::Read(None),
            system_id: 0,
            server_system_id: 0,
            held_data: false,
            made_here: 0,
            paused: false,
            flushed: Vec::new(),
            nosync: Vec::new(),
            nofailover: Vec::new(),
            clone_sources: Vec::new(),
            reports_pending: false,
        }
    }
}

#[cfg(test)]
mod durability_decisions;

#[cfg(test)]
mod wal_tests {
    use super::*;

    fn cluster() -> Cluster {
        Cluster {
            streaming: 1,
            knows_branch: vec![1, 3],
            ..Cluster::of(2, &[1, 2, 3])
        }
    }

    fn rules(reinit: bool) -> Rules {
        Rules {
            reinit_on_failed_rewind: reinit,
            ..Rules::for_test()
        }
    }

    fn stuck_standby() -> Server {
        Server::Running(Running {
            in_recovery: true,
            timeline: 2,
            wal: Position { branch: 1, lsn: 16 },
            upstream: Some(3),
            streaming: false,
            synchronous_standby_names: String::new(),
        })
    }

    const FOLLOWING: Office = Office::Following {
        leader: 3,
        server: Some(3),
    };

    fn removed(upstream: NodeId, settled: bool) -> Memory {
        Memory {
            wal_removed: Some(WalRemoved { upstream, settled }),
            ..Memory::default()
        }
    }

    #[test]
    fn a_standby_whose_wal_was_removed_is_cloned_afresh_and_never_eligible() {
        let decide = |memory: &Memory, reinit| {
            decide(
                FOLLOWING,
                &stuck_standby(),
                &[],
                &cluster(),
                memory,
                &rules(reinit),
            )
        };
        let d = decide(&removed(3, true), true);
        assert_eq!(
            d.act,
            Act::Reinit {
                from: 3,
                by: Copier::BaseBackup
            }
        );
        assert!(!d.eligible);
        let replaying = decide(&removed(3, false), true);
        assert!(
            matches!(&replaying.act, Act::Wait(w) if w.contains("replaying")),
            "{replaying:?}"
        );
        assert!(!replaying.eligible, "not eligible while its WAL is gone");
        let out = decide(&removed(3, true), false);
        assert!(
            matches!(&out.act, Act::Wait(w) if w.contains("reinit_on_failed_rewind is off")),
            "{out:?}"
        );
        assert!(!out.eligible);
        // Removed from another server than the coordinator's: not this upstream's word.
        let other = decide(&removed(1, true), true);
        assert!(
            other.eligible && matches!(other.act, Act::Wait(_)),
            "{other:?}"
        );
    }

    #[test]
    fn a_rewind_that_did_not_help_counts_and_ends_in_a_clone() {
        // The stuck standby is stopped (typed), its rewinds counted until it streams.
        let stuck = Memory {
            not_streaming: 3,
            ..Memory::default()
        };
        let d = decide(
            FOLLOWING,
            &stuck_standby(),
            &[],
            &cluster(),
            &stuck,
            &rules(true),
        );
        assert_eq!(
            d.act,
            Act::Stop {
                why: StopReason::CannotFollow
            }
        );
        let stopped = Server::Stopped {
            was_primary: false,
            clean: true,
        };
        let after = |failures| Memory {
            needs_rewind: true,
            could_not_follow: true,
            rewind_failures: failures,
            ..Memory::default()
        };
        let act = |m: &Memory| decide(FOLLOWING, &stopped, &[], &cluster(), m, &rules(true)).act;
        assert_eq!(act(&after(REWIND_ATTEMPTS - 1)), Act::Rewind { from: 3 });
        assert_eq!(
            act(&after(REWIND_ATTEMPTS)),
            Act::Reinit {
                from: 3,
                by: Copier::BaseBackup
            }
        );
    }

    fn slot(name: &str, active: bool, reserved: bool, lost: bool) -> Slot {
        Slot {
            name: name.into(),
            active,
            reserved,
            lost,
        }
    }

    #[test]
    fn the_leading_primary_keeps_a_reserved_slot_per_other_data_voter() {
        let create = |name: &str, reserve| SlotChange::Create {
            name: name.into(),
            reserve,
        };
        let drop = |name: &str| SlotChange::Drop { name: name.into() };
        assert_eq!(
            slot_changes(&cluster(), true, &[]),
            vec![create("bully_1", true), create("bully_3", true)]
        );
        assert_eq!(
            slot_changes(&cluster(), false, &[]),
            vec![create("bully_1", false), create("bully_3", false)],
            "a standby keeps them without holding WAL, ready for its promotion"
        );
        let after_failover = [
            slot("bully_1", true, true, false),
            slot("bully_3", false, false, false),
            slot("bully_4", false, false, false),
            slot("bully_2", false, false, false),
            slot("user_slot", false, true, false),
        ];
        assert_eq!(
            slot_changes(&cluster(), true, &after_failover),
            vec![
                drop("bully_3"),
                create("bully_3", true),
                drop("bully_4"),
                drop("bully_2"),
            ],
            "a member that is down gets WAL held from now; a member gone, or this node \
             itself, has none; the user's slot stays"
        );
        let lost = [
            slot("bully_1", false, true, true),
            slot("bully_3", false, true, false),
        ];
        assert_eq!(
            slot_changes(&cluster(), true, &lost),
            vec![drop("bully_1"), create("bully_1", true)]
        );
        let former_primary = [
            slot("bully_1", false, true, false),
            slot("bully_3", true, true, false),
        ];
        assert_eq!(
            slot_changes(&cluster(), false, &former_primary),
            vec![drop("bully_1"), create("bully_1", false)],
            "a standby holds no WAL for a slot no one streams with"
        );
        let settled = [
            slot("bully_1", false, true, false),
            slot("bully_3", true, true, false),
        ];
        assert!(slot_changes(&cluster(), true, &settled).is_empty());
    }
}

#[cfg(test)]
mod start_tests {
    use super::*;

    #[test]
    fn a_server_that_never_runs_after_its_starts_is_rewound_then_cloned() {
        let cluster = Cluster {
            streaming: 0,
            knows_branch: vec![1, 3],
            ..Cluster::of(2, &[1, 2, 3])
        };
        let rules = Rules::for_test();
        let following = Office::Following {
            leader: 3,
            server: Some(3),
        };
        let crashed_standby = Server::Stopped {
            was_primary: false,
            clean: false,
        };
        let act = |memory: &Memory| {
            decide(following, &crashed_standby, &[], &cluster, memory, &rules).act
        };
        let fresh = Memory::default();
        assert_eq!(act(&fresh), Act::StartStandby { upstream: Some(3) });
        let stuck = Memory {
            failed_starts: FAILED_STARTS,
            ..Memory::default()
        };
        assert_eq!(act(&stuck), Act::Rewind { from: 3 });
        let rewinds_failed = Memory {
            rewind_failures: REWIND_ATTEMPTS,
            ..stuck
        };
        assert_eq!(
            act(&rewinds_failed),
            Act::Reinit {
                from: 3,
                by: Copier::BaseBackup
            }
        );
    }

    #[test]
    fn a_standby_takes_a_newer_branch_ahead_and_its_upstreams_for_the_timeline_it_is_on() {
        // Held: timeline 6 recorded as term 7 (a promotion to 6 that failed).
        let held = |tl: u32| if tl == 6 { 7 } else { 3 };
        // Still on 5: a lower record for 6 is not the standby's to correct yet.
        assert_eq!(branch_to_adopt(Some((6, 5)), 5, held), None);
        // A newer one is kept ahead of the switch.
        assert_eq!(branch_to_adopt(Some((6, 9)), 5, held), Some((6, 9)));
        // On 6, streamed from an upstream whose 6 began at term 5: the upstream's.
        assert_eq!(branch_to_adopt(Some((6, 5)), 6, held), Some((6, 5)));
        // Agreeing, or an upstream that knows no branch: nothing.
        assert_eq!(branch_to_adopt(Some((6, 7)), 6, held), None);
        assert_eq!(branch_to_adopt(Some((6, 0)), 6, held), None);
        assert_eq!(branch_to_adopt(None, 6, held), None);
    }
}
