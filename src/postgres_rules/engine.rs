//! The PostgreSQL manager without I/O: everything it keeps between looks and every
//! decision it takes, in one place. The runtime's executor (src/node/postgres/manager.rs)
//! and the simulator (src/sim/postgres/world.rs) each observe their servers, hand the
//! observation to [`Engine::handle`], run the commands [`Engine::poll_command`] gives in
//! order, and report how each ended ([`Engine::on_done`]). Neither keeps bookkeeping of
//! its own, so what the simulator checks is what the runtime runs.
//!
//! The engine keeps:
//! - the [`Memory`] of acts and their outcomes (rewinds due, failures counted, the
//!   synchronous record committed, the held verdict);
//! - on a primary, the standbys known to have recorded its branch for its timeline,
//!   written to before the promotion or seen in their reports since;
//! - on a primary, when each standby was last seen streaming: `quorum` keeps counting a
//!   standby toward k for [`Rules::standby_grace_ms`] after it was last seen (and a new
//!   primary counts every standby that long), so a standby reconnecting does not lower
//!   what each commit waits for.

use super::{decide, Act, Cluster, Decision, Done, Memory, Office, PeerWal, Rules, Server};
use super::{synchronous_names, WalRemoved};
use crate::protocol::NodeId;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// The runtime's [`Rules::standby_grace_ms`]: 5 s, 20 looks at the default interval.
pub const STANDBY_GRACE_MS: u64 = 5_000;

/// One look at the local server and the cluster around it, as the executor observed
/// them.
#[derive(Debug, Clone)]
pub struct Look {
    /// A monotonic clock reading in ms (any origin; only differences count).
    pub now_ms: u64,
    pub office: Office,
    pub server: Server,
    /// The other servers' positions, read by a coordinator about to promote.
    pub peers: Vec<PeerWal>,
    /// The cluster as the executor knows it. [`Cluster::knows_branch`] lists members
    /// known to hold the branch by other means (none on the runtime); the engine adds
    /// the ones it knows of, and sets [`Cluster::streaming`].
    pub cluster: Cluster,
    /// The other members' latest reports that count as fresh: the timeline and branch
    /// of a running server (`None`: not running).
    pub reports: Vec<(NodeId, Option<(u32, u64)>)>,
    /// On a primary: the other members whose standbys stream from it now.
    pub standbys: Vec<NodeId>,
    /// What the upstream of a standby that does not stream says about its WAL.
    pub removed: Option<WalRemoved>,
}

/// What the executor runs, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Note in the node's data dir that its server holds the cluster's data (system
    /// `system_id`): from then on a missing data dir is a lost volume, not a new member.
    NoteHeld { system_id: u64 },
    /// Act on the server; its outcome comes back through [`Engine::on_done`].
    Act(Act),
}

/// The manager's state and decisions; see the module doc.
#[derive(Debug, Clone, Default)]
pub struct Engine {
    memory: Memory,
    /// On a primary: its timeline and the other members known to hold its branch.
    known: Option<(u32, BTreeSet<NodeId>)>,
    /// On a primary: when each other member's standby was last seen streaming from it.
    seen: BTreeMap<NodeId, u64>,
    /// The last look's clock reading.
    now_ms: u64,
    commands: VecDeque<Command>,
}

impl Engine {
    /// What the engine remembers between looks (shown in the status).
    pub fn memory(&self) -> &Memory {
        &self.memory
    }

    /// The memory, writable: only the simulator's sabotaged runs use it, to put an old
    /// rule back (src/sim/postgres/mod.rs, `Sabotage`).
    pub fn sabotage_memory(&mut self) -> &mut Memory {
        &mut self.memory
    }

    /// The operator's `bully pg failover --accept-loss`, heard while leading under
    /// `token` ([`Memory::accept_loss_in`]).
    pub fn accept_loss_in(&mut self, token: u64) {
        self.memory.accept_loss_in(token);
    }

    /// Takes in one look and decides. Commands for what the look itself established
    /// are queued at once; the decision's act is queued by [`Engine::settle`], which
    /// the executor calls with the decision (the simulator may put a sabotaged one in
    /// its place).
    pub fn handle(&mut self, look: Look, rules: &Rules) -> (Decision, Cluster) {
        let Look {
            now_ms,
            office,
            server,
            peers,
            mut cluster,
            reports,
            standbys,
            removed,
        } = look;
        self.now_ms = now_ms;
        self.memory.on_look(&office, &server, removed);
        let primary = match &server {
            Server::Running(r) if !r.in_recovery => Some((r.timeline, r.wal.branch)),
            _ => None,
        };
        self.confirm_branch(&server, &reports);
        for m in self.known_on(primary) {
            if !cluster.knows_branch.contains(&m) {
                cluster.knows_branch.push(m);
            }
        }
        cluster.streaming = match primary {
            Some(_) => self.live_standbys(&cluster, &standbys, rules.standby_grace_ms),
            None => 0,
        };
        let own = cluster.server_system_id;
        let ours = cluster.system_id == 0 || cluster.system_id == own;
        if matches!(server, Server::Running(_)) && own != 0 && ours {
            self.commands
                .push_back(Command::NoteHeld { system_id: own });
        }
        let decision = decide(office, &server, &peers, &cluster, &self.memory, rules);
        let decision = super::replica_method::choose(decision, &cluster, &self.memory, rules);
        let decision = super::copy_backoff::hold(decision, &self.memory, now_ms);
        (decision, cluster)
    }

    /// Queues the decision's act and returns the health verdict the node sends: the
    /// decision's, held through a short silence of the server ([`Memory::verdict`]).
    pub fn settle(&mut self, decision: Decision) -> bool {
        let verdict = self.memory.verdict(decision.eligible);
        self.commands.push_back(Command::Act(decision.act));
        verdict
    }

    /// The clock reading of the last look (ms), which a failed act is dated by
    /// ([`Done::CopyFailed`]).
    pub fn now_ms(&self) -> u64 {
        self.now_ms
    }

    /// The next command to run, if any.
    pub fn poll_command(&mut self) -> Option<Command> {
        self.commands.pop_front()
    }

    /// How an act ended.
    pub fn on_done(&mut self, done: Done, rules: &Rules) {
        self.memory.on_done(done, rules);
    }

    /// A promotion under way: the branch of timeline `next` was recorded on the
    /// servers of `told` before it. They are the first members known to hold it, and
    /// every other data voter counts toward k for [`Rules::standby_grace_ms`] (the new
    /// primary has not seen any stream yet). Returns the synchronous names to write
    /// before promoting: every standby known to hold the branch under its own name.
    pub fn promoting(
        &mut self,
        next: u32,
        told: &[NodeId],
        cluster: &Cluster,
        rules: &Rules,
    ) -> String {
        self.known = Some((next, told.iter().copied().collect()));
        for &m in cluster.data_voters.iter().filter(|&&m| m != cluster.id) {
            self.seen.insert(m, self.now_ms);
        }
        let mut knowing = cluster.clone();
        knowing.knows_branch = told.to_vec();
        synchronous_names(
            cluster.id,
            &knowing,
            cluster.data_voters.len(),
            rules.synchronous,
        )
    }

    /// The members known to hold the branch of this primary's timeline.
    pub fn knows_branch(&self, timeline: u32) -> Vec<NodeId> {
        match &self.known {
            Some((t, known)) if *t == timeline => known.iter().copied().collect(),
            _ => Vec::new(),
        }
    }

    /// Adds every member whose report shows this primary's timeline and branch; a set
    /// for another timeline is dropped. A server seen as anything but a primary keeps
    /// none; one that does not answer keeps what it had.
    fn confirm_branch(&mut self, server: &Server, reports: &[(NodeId, Option<(u32, u64)>)]) {
        let (timeline, branch) = match server {
            Server::Running(r) if !r.in_recovery => (r.timeline, r.wal.branch),
            Server::Unreachable => return,
            _ => {
                self.known = None;
                return;
            }
        };
        let known = match self.known.take() {
            Some((t, known)) if t == timeline => known,
            _ => BTreeSet::new(),
        };
        let shown = reports
            .iter()
            .filter(|(_, r)| *r == Some((timeline, branch)))
            .map(|(m, _)| *m);
        self.known = Some((timeline, known.into_iter().chain(shown).collect()));
    }

    fn known_on(&self, primary: Option<(u32, u64)>) -> Vec<NodeId> {
        primary.map_or_else(Vec::new, |(timeline, _)| self.knows_branch(timeline))
    }

    /// The other data voters whose standbys stream now or did within the grace. Every
    /// live standby counts toward k, known to hold the branch or not: the names alone
    /// gate which of them acknowledge (one not known yet stands under a name nothing
    /// connects as), so commits wait for one to learn it rather than be acknowledged by
    /// the primary alone.
    fn live_standbys(&mut self, cluster: &Cluster, standbys: &[NodeId], grace_ms: u64) -> usize {
        for &m in standbys {
            self.seen.insert(m, self.now_ms);
        }
        let now = self.now_ms;
        cluster
            .sync_candidates(cluster.id)
            .iter()
            .filter(|m| {
                standbys.contains(m)
                    || self
                        .seen
                        .get(m)
                        .is_some_and(|&at| now.saturating_sub(at) < grace_ms)
            })
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Position, Running, SyncView};
    use super::*;

    fn rules(grace_ms: u64) -> Rules {
        Rules {
            standby_grace_ms: grace_ms,
            ..Rules::for_test()
        }
    }

    fn cluster() -> Cluster {
        Cluster {
            id: 1,
            data_voters: vec![1, 2, 3],
            voters: 3,
            all_absent: false,
            leader_primary: false,
            streaming: 0,
            knows_branch: Vec::new(),
            sync: SyncView::Unread,
            system_id: 7,
            server_system_id: 7,
            held_data: true,
            made_here: 0,
            paused: false,
            flushed: Vec::new(),
            nosync: Vec::new(),
            nofailover: Vec::new(),
            clone_sources: Vec::new(),
            reports_pending: false,
        }
    }

    fn primary(timeline: u32, branch: u64) -> Server {
        Server::Running(Running {
            in_recovery: false,
            timeline,
            wal: Position { branch, lsn: 100 },
            upstream: None,
            streaming: false,
            synchronous_standby_names: String::new(),
        })
    }

    fn look(
        now_ms: u64,
        server: Server,
        reports: Vec<(NodeId, Option<(u32, u64)>)>,
        standbys: Vec<NodeId>,
    ) -> Look {
        Look {
            now_ms,
            office: Office::Leading { token: 4 },
            server,
            peers: Vec::new(),
            cluster: cluster(),
            reports,
            standbys,
            removed: None,
        }
    }

    /// The standbys told the branch before the promotion are known at once; one whose
    /// report shows the primary's timeline and branch joins them and stays; a server
    /// on another timeline starts a new set, and one seen as a standby keeps none.
    #[test]
    fn the_branch_is_known_to_those_told_and_those_whose_reports_show_it() {
        let (mut engine, rules) = (Engine::default(), rules(0));
        engine.promoting(3, &[2], &cluster(), &rules);
        let (_, seen) = engine.handle(
            look(0, primary(3, 4), vec![(3, Some((2, 1)))], vec![]),
            &rules,
        );
        assert_eq!(
            seen.knows_branch,
            vec![2],
            "node 3's report shows an older timeline"
        );
        let (_, seen) = engine.handle(
            look(250, primary(3, 4), vec![(3, Some((3, 4)))], vec![]),
            &rules,
        );
        assert_eq!(seen.knows_branch, vec![2, 3]);
        let (_, seen) = engine.handle(look(500, primary(3, 4), vec![], vec![]), &rules);
        assert_eq!(
            seen.knows_branch,
            vec![2, 3],
            "a report gone stale forgets nothing"
        );
        let (_, seen) = engine.handle(look(750, primary(5, 6), vec![], vec![]), &rules);
        assert!(seen.knows_branch.is_empty(), "another timeline: {seen:?}");
        engine.handle(look(1000, Server::Absent, vec![], vec![]), &rules);
        assert!(engine.knows_branch(5).is_empty());
    }

    /// A standby counts toward k while it streams and for the grace after; a new
    /// primary counts every other data voter for the grace; without a grace only the
    /// standbys streaming now count.
    #[test]
    fn standbys_count_toward_k_for_the_grace_after_they_were_seen() {
        let (mut engine, rules) = (Engine::default(), rules(5_000));
        engine.handle(look(0, primary(2, 1), vec![], vec![]), &rules);
        engine.promoting(3, &[], &cluster(), &rules);
        let (_, c) = engine.handle(look(4_999, primary(3, 4), vec![], vec![]), &rules);
        assert_eq!(c.streaming, 2, "a new primary counts both for the grace");
        let (_, c) = engine.handle(look(5_000, primary(3, 4), vec![], vec![2]), &rules);
        assert_eq!(c.streaming, 1, "only node 2 is seen once the grace is over");
        let (_, c) = engine.handle(look(9_999, primary(3, 4), vec![], vec![]), &rules);
        assert_eq!(c.streaming, 1, "node 2 still counts within the grace");
        let (_, c) = engine.handle(look(10_000, primary(3, 4), vec![], vec![]), &rules);
        assert_eq!(c.streaming, 0);
        let (mut engine, rules) = (Engine::default(), super::tests::rules(0));
        let (_, c) = engine.handle(look(0, primary(3, 4), vec![], vec![3]), &rules);
        assert_eq!(c.streaming, 1, "no grace: the standby streaming now counts");
        let (_, c) = engine.handle(look(250, primary(3, 4), vec![], vec![]), &rules);
        assert_eq!(c.streaming, 0);
    }

    /// A running server of the cluster's system is noted as held before the act; one of
    /// another system, or no server, is not; the act comes after, once settled.
    #[test]
    fn commands_note_held_data_then_act() {
        let (mut engine, rules) = (Engine::default(), rules(0));
        let (decision, _) = engine.handle(look(0, primary(2, 1), vec![], vec![]), &rules);
        assert_eq!(
            engine.poll_command(),
            Some(Command::NoteHeld { system_id: 7 })
        );
        assert_eq!(engine.poll_command(), None, "no act before it is settled");
        let act = decision.act.clone();
        engine.settle(decision);
        assert_eq!(engine.poll_command(), Some(Command::Act(act)));
        let mut stranger = look(250, primary(2, 1), vec![], vec![]);
        stranger.cluster.server_system_id = 8;
        let (decision, _) = engine.handle(stranger, &rules);
        engine.settle(decision);
        assert!(
            matches!(engine.poll_command(), Some(Command::Act(_))),
            "not held"
        );
    }
}
