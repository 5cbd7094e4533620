//! An `Act` applied to the model as the runtime would apply it, with the runtime's
//! `Memory` bookkeeping: a stop (of a primary, or of a standby that cannot follow) asks
//! for a rewind; a rewind or clone that works clears it; a rewind that fails counts,
//! and once every attempt failed without reinit allowed the member stays out.

use super::decisions::{
    identity_record, synchronous_names, Act, Cluster, Copier, Done, Office, PeerWal, REMOTE_PRIMARY,
};
use super::log::Event;
use super::server::{Data, State};
use super::world::World;
use super::Sabotage;
use crate::protocol::NodeId;

impl World {
    pub(super) fn apply(
        &mut self,
        id: NodeId,
        office: Office,
        act: Act,
        cluster: &Cluster,
        peers: &[PeerWal],
    ) -> Result<(), String> {
        if let Act::Wait(why) = act {
            let m = self.member_mut(id);
            if m.last_wait.as_deref() != Some(why.as_str()) {
                m.last_wait = Some(why.clone());
                self.event(Event::Waits { id, why });
            }
            return Ok(());
        }
        self.check_paused_act(id, &act)?;
        self.check_copy_spacing(id, &act)?;
        self.check_clone_source(id, &act)?;
        self.check_replaces_only_own(id, &act, cluster)?;
        self.check_method_again(id, &act)?;
        self.member_mut(id).last_wait = None;
        self.event(Event::Acted {
            id,
            office,
            act: act.clone(),
        });
        match act {
            Act::Wait(_) => {}
            Act::InitDb => {
                let mut data = Data::initdb(self.next_system_id);
                self.next_system_id += 1;
                data.state = State::Standby {
                    upstream: None,
                    streaming: false,
                };
                let system_id = data.system_id;
                let m = self.member_mut(id);
                m.pg = Some(data);
                m.made = Some(system_id);
                self.summary.initdbs += 1;
                // As the runtime: the identity is committed right after initdb, unless
                // a newer epoch was declared while it ran (the record is refused).
                if self.initdb_raced(id) {
                    return Ok(());
                }
                if let Office::Leading { token } = office {
                    let memory = self.member(id).engine.memory();
                    let record = identity_record(token, cluster, memory, system_id);
                    self.commit_record(id, record);
                }
            }
            Act::Clone { from, by } => self.clone_from(id, from, by)?,
            Act::Reinit { from, by } => {
                // The old directory goes aside and comes back if the clone fails
                // (src/node/postgres/manager.rs, `Act::Reinit`): a failed clone must not
                // cost the member its data (seed 55940, 5 members: three without data
                // left no majority to promote from).
                // A standby whose upstream removed its WAL is stopped first.
                if let Some(d) = self.member_mut(id).pg.as_mut() {
                    d.stop(true);
                }
                let aside = self.member_mut(id).pg.take();
                self.summary.reinits += 1;
                self.clone_from(id, from, by)?;
                if self.member(id).pg.is_none()
                    && self.spec.sabotage != Some(Sabotage::ReinitLosesData)
                {
                    self.member_mut(id).pg = aside;
                }
            }
            Act::StartStandby { upstream } => {
                if let Some(d) = self.member_mut(id).pg.as_mut().filter(|d| !d.running()) {
                    d.state = State::Standby {
                        upstream,
                        streaming: false,
                    };
                }
            }
            Act::Repoint { upstream } => {
                if let Some(d) = self.member_mut(id).pg.as_mut() {
                    if let State::Standby { .. } = d.state {
                        d.state = State::Standby {
                            upstream,
                            streaming: false,
                        };
                    }
                }
            }
            Act::Promote => return self.promote(id, office, cluster, peers),
            Act::Stop { why } => {
                self.signal_server(id, "the manager");
                let m = self.member_mut(id);
                if let Some(d) = m.pg.as_mut() {
                    d.stop(true);
                }
                self.done(id, Done::Stopped(why));
            }
            Act::Rewind { from } => self.rewind_from(id, from),
            Act::SetSynchronous { names } => {
                debug_assert_eq!(
                    names,
                    synchronous_names(
                        id,
                        cluster,
                        cluster.streaming,
                        self.rules_of(id).synchronous
                    )
                );
                if self.member(id).pg.as_ref().is_some_and(|d| d.running()) {
                    self.write_names(id, names);
                }
            }
            Act::CommitSync { record } => self.commit_record(id, record),
        }
        Ok(())
    }

    /// `CommitSync`: the record goes to every member whose node answers, each keeping it
    /// if it is newer than its own; it counts once a majority of the voters keep it
    /// (src/node/postgres/sync_store.rs).
    fn commit_record(&mut self, id: NodeId, record: super::decisions::SyncRecord) {
        let answering: Vec<NodeId> = self
            .members
            .iter()
            .map(|m| m.id)
            .filter(|&m| self.answers(id, m))
            .collect();
        let mut kept = 0;
        for m in answering {
            let member = self.member_mut(m);
            let newer = match &member.record {
                Some(own) => record.supersedes(own),
                None => true,
            };
            if newer {
                member.record = Some(record.clone());
            }
            kept += usize::from(newer || member.record.as_ref() == Some(&record));
        }
        let majority = kept >= self.majority();
        let trusts_older = self.spec.sabotage == Some(Sabotage::TrustsOlderRecord);
        let older = self.member(id).engine.memory().committed.clone();
        let done = Done::SyncWritten {
            record,
            kept_by_majority: majority,
        };
        self.done(id, done);
        if trusts_older && !majority {
            self.member_mut(id).engine.sabotage_memory().committed = older;
        }
        self.summary.records += 1;
        self.summary.records_committed += u64::from(majority);
    }

    /// How an act ended, told to member `id`'s engine as the runtime tells it
    /// (src/postgres_rules/engine.rs).
    pub(super) fn done(&mut self, id: NodeId, done: Done) {
        let rules = self.rules_of(id);
        let engine = &mut self.member_mut(id).engine;
        engine.on_done(done, &rules);
        if self.spec.sabotage == Some(Sabotage::NoCopyBackoff) {
            self.member_mut(id).engine.sabotage_memory().copy_failed = None;
        }
    }

    /// A clone from another member than the coordinator's primary (a `clonefrom`
    /// standby) copies data on the primary's history: the same system, its WAL a
    /// prefix of the primary's on the primary's timelines. Anything else would give the
    /// new member data the primary never had.
    pub(super) fn check_clone_source(&mut self, id: NodeId, act: &Act) -> Result<(), String> {
        let Act::Clone { from, .. } = *act else {
            return Ok(());
        };
        // The remote primary's history is the standby cluster's (src/sim/postgres/remote.rs).
        let leader = self.office.map(|h| h.leader).filter(|&l| l != from);
        let Some(leader) = leader.filter(|_| from != REMOTE_PRIMARY) else {
            return Ok(());
        };
        let (Some(primary), Some(source)) = (
            (self.member(leader).pg.as_ref()).filter(|d| self.serves(id, d)),
            self.member(from).pg.as_ref().filter(|d| d.running()),
        ) else {
            return Ok(()); // no primary now, or the source does not serve: the copy fails
        };
        if source.system_id != primary.system_id || !source.wal.follows(&primary.wal) {
            return Err(format!(
                "{id} clones from {from}, whose data is not on the primary's ({leader}) \
                 history (system {} against {}, {} commits on timeline {})",
                source.system_id,
                primary.system_id,
                source.wal.len(),
                source.wal.timeline()
            ));
        }
        self.summary.clones_from_a_standby += 1;
        Ok(())
    }

    /// A clone or reinit starts no sooner than the shortest backoff after the last
    /// one of this member failed (src/postgres_rules/copy_backoff.rs).
    pub(super) fn check_copy_spacing(&mut self, id: NodeId, act: &Act) -> Result<(), String> {
        if !matches!(act, Act::Clone { .. } | Act::Reinit { .. }) {
            return Ok(());
        }
        let m = self.member(id);
        let now = m.engine.now_ms();
        match m.clone_failed_at {
            Some(at) if now < at + crate::postgres_rules::FIRST_RETRY_MS => Err(format!(
                "{id} started another clone {} ms after one failed (at least {} ms apart)",
                now - at,
                crate::postgres_rules::FIRST_RETRY_MS
            )),
            _ => {
                self.summary.clones_after_backoff += u64::from(m.clone_failed_at.is_some());
                Ok(())
            }
        }
    }

    /// The source of a copy, if it can serve one: reachable and running.
    fn source(&self, id: NodeId, from: NodeId) -> Option<NodeId> {
        let source = from;
        let serves = self.member(source).pg.as_ref().is_some_and(|d| d.running());
        (self.reach(id, source) && serves).then_some(source)
    }

    /// A clone or rewind that worked: the source's WAL, settings and branch records, the rewind
    /// forgotten, and (as the runtime does) the server started streaming from it.
    fn copy_from(&mut self, id: NodeId, source: NodeId) {
        let src = self.member(source).pg.as_ref().expect("a running source");
        let data = Data::copy_of(src);
        self.install(id, data, source);
    }

    /// A copy (`data`) in member `id`'s data dir, its server started as a standby of
    /// `upstream`, noted as held: a new copy was never made by this node's `initdb`.
    pub(super) fn install(&mut self, id: NodeId, mut data: Data, upstream: NodeId) {
        data.state = State::Standby {
            upstream: Some(upstream),
            streaming: false,
        };
        let m = self.member_mut(id);
        m.pg = Some(data);
        m.made = None;
        // The runtime notes a clone's data as held at once (src/node/postgres/held.rs).
        m.held = true;
    }

    /// A copy into an empty directory, made `by` `pg_basebackup` or the replica method
    /// (src/sim/postgres/backups.rs).
    fn clone_from(&mut self, id: NodeId, from: NodeId, by: Copier) -> Result<(), String> {
        if let Copier::Method { system_id } = by {
            return self.restore_for(id, from, system_id);
        }
        let source = self.source(id, from);
        let m = self.member_mut(id);
        let failed = std::mem::take(&mut m.fail_clone);
        match source {
            Some(source) if !failed => {
                self.copy_from(id, source);
                self.note_copy_from(source);
                self.member_mut(id).clone_failed_at = None;
                self.done(id, Done::Copied { by });
                self.summary.clones += 1;
            }
            _ => {
                self.summary.failed_clones += 1;
                self.event(Event::Failed { id, what: "clone" });
                let at_ms = self.member(id).engine.now_ms();
                self.member_mut(id).clone_failed_at = Some(at_ms);
                let why = "the clone failed".to_string();
                self.done(id, Done::CopyFailed { why, at_ms, by });
            }
        }
        Ok(())
    }

    /// `pg_rewind` of a cleanly stopped server: it ends with the source's WAL.
    fn rewind_from(&mut self, id: NodeId, from: NodeId) {
        let source = self.source(id, from);
        let m = self.member_mut(id);
        let failed = std::mem::take(&mut m.fail_rewind);
        let clean = matches!(
            m.pg.as_ref().map(|d| d.state),
            Some(State::Stopped { clean: true, .. })
        );
        match source {
            Some(source) if !failed && clean => {
                let src = self.member(source).pg.as_ref().expect("a running source");
                let own = self.member(id).pg.as_ref().expect("a stopped server");
                // Its WAL a prefix of the source's: "no rewind required", nothing
                // changes (modelled as the copy it amounts to while the source still
                // holds the rest for it to stream).
                let no_op = own.wal.follows(&src.wal) && own.wal.len() < src.kept_from;
                match no_op {
                    true => {
                        if let Some(d) = self.member_mut(id).pg.as_mut() {
                            d.state = State::Standby {
                                upstream: Some(source),
                                streaming: false,
                            };
                        }
                    }
                    false => self.copy_from(id, source),
                }
                self.done(id, Done::Rewound);
                // The old loop: a rewind that exits 0 resets the count.
                if self.spec.sabotage == Some(Sabotage::NoOpRewindResets) {
                    let m = self.member_mut(id);
                    let memory = m.engine.sabotage_memory();
                    memory.rewind_failures = 0;
                    memory.could_not_follow = false;
                }
                self.summary.rewinds += 1;
            }
            _ => {
                self.done(id, Done::RewindFailed("the drawn failure".into()));
                self.summary.failed_rewinds += 1;
                self.event(Event::Failed { id, what: "rewind" });
            }
        }
    }

    /// `pg_promote()`: a new timeline; the server must hold every acknowledged commit.
    /// Before it, the runtime (src/node/postgres/manager.rs, `Act::Promote`) records the
    /// office's term for the timeline PostgreSQL will pick, in its own data directory and
    /// in that of every peer its promotion check reached (`peers` with a position) whose
    /// timeline is below that one (the sabotage `PeerBranchAtAnyTimeline`: every reached
    /// peer); those peers are the first [`Cluster::knows_branch`], and the names it writes for the
    /// standbys (k as for every standby live) use them. A promotion that then fails
    /// leaves every record. The sabotage `NamesIgnoreBranch` writes no peer's record and
    /// names every standby under its own name (the runtime before the fix).
    fn promote(
        &mut self,
        id: NodeId,
        office: Office,
        cluster: &Cluster,
        peers: &[PeerWal],
    ) -> Result<(), String> {
        // The office's term, as the runtime records it.
        let term = match office {
            Office::Leading { token } => self.term_of(token),
            _ => 0,
        };
        let Some(next) = self.member(id).pg.as_ref().filter(|d| d.running()) else {
            return Ok(());
        };
        let next = next.wal.next_timeline();
        self.check_nofailover_promotion(id)?;
        let knows_branch: Vec<NodeId> = match self.spec.sabotage {
            Some(Sabotage::NamesIgnoreBranch) => cluster.knows_branch.clone(),
            _ => {
                let any_timeline = self.spec.sabotage == Some(Sabotage::PeerBranchAtAnyTimeline);
                let reached: Vec<NodeId> = peers
                    .iter()
                    .filter(|p| p.wal.is_some())
                    .map(|p| p.id)
                    .filter(|&p| {
                        any_timeline
                            || self
                                .member(p)
                                .pg
                                .as_ref()
                                .is_some_and(|d| d.wal.timeline() < next)
                    })
                    .collect();
                for &peer in &reached {
                    if let Some(d) = self.member_mut(peer).pg.as_mut() {
                        d.write_branch(next, term);
                    }
                }
                reached
            }
        };
        let rules = self.rules_of(id);
        let m = self.member_mut(id);
        let names = m.engine.promoting(next, &knows_branch, cluster, &rules);
        if let Some(d) = m.pg.as_mut() {
            d.record_branch(next, term);
        }
        if std::mem::take(&mut m.fail_promote) {
            self.summary.failed_promotions += 1;
            self.event(Event::Failed {
                id,
                what: "promotion",
            });
            return Ok(());
        }
        let Some(d) =
            m.pg.as_mut()
                .filter(|d| matches!(d.state, State::Standby { .. }))
        else {
            return Ok(());
        };
        d.state = State::Primary;
        d.wal.fork();
        d.pending.clear();
        self.write_names(id, names);
        let d = self.member(id).pg.as_ref().expect("the promoted server");
        let timeline = d.wal.timeline();
        let (branch, at) = (d.branch_of(timeline), d.wal.len());
        let system = d.system_id;
        self.member_mut(id).made = None;
        self.done(id, Done::Promoted);
        self.summary.promotions += 1;
        match self.served_system {
            Some(served) if served != system => {
                return Err(format!(
                    "a second system served: {id} promoted a server of system {system}, \
                     the cluster's is {served}"
                ))
            }
            _ => self.served_system = Some(system),
        }
        self.event(Event::Promoted {
            id,
            timeline,
            branch,
            at,
            knows: knows_branch,
        });
        self.check_dr_promotion(id)?;
        self.check_promotion(id)
    }
}
