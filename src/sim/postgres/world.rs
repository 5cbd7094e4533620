//! The simulated cluster and its step: members (a node and its server), the office
//! with its lease (docs/design.md#q3-lease), elections by `(est, id)` among the
//! eligible members a majority of voters can reach, and the checks after each step.

use super::decisions::{
    branch_to_adopt, copier, election_rank, full_k, left_for_operator, may_promote, names_standby,
    ranks_alike, rewind_wanted, synchronous_count, synchronous_names, too_few_reached, Act,
    Cluster, Command, Decision, Done, Engine, Look, Memory, Office, PeerWal, Position, Rules,
    Server, StopReason, SyncRecord, SyncView, Tags, REMOTE_PRIMARY,
};
use super::log::{Event, Log};
use super::machines::{Protocol, STEP_MS};
use super::processes::{Claim, Processes};
use super::server::{Data, Reading, State, Wal};
use super::{Sabotage, Spec, Start, Summary, Violation};
use crate::config::postgres::Synchronous;
use crate::postmaster::PidFile;
use crate::protocol::NodeId;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::collections::VecDeque;

/// Steps a lease lasts after its last renewal.
pub(super) const LEASE: u64 = 3;
/// How many past estimates a member keeps (stale elections read one of them).
const EST_KEPT: usize = 5;
/// `REMOTE_PRIMARY` named outside a standby cluster.
const NO_REMOTE: &str = "the remote primary named outside a standby cluster";

/// A standby cluster's remote primary and its draws: defined here, beside the world
/// that holds it, and drawn and run by src/sim/postgres/remote.rs (so that module
/// depends on the world, not the other way round).
pub(super) struct Remote {
    pub(super) rng: SmallRng,
    /// The remote primary's node and server (ID `REMOTE_PRIMARY`, no member).
    pub server: Member,
    /// The operator unsets `postgres.standby_cluster` at this step (during the faults).
    pub(super) unset_at: Option<u64>,
    /// The operator did: the cluster's setting is off from then on.
    pub unset: bool,
    /// The step from which each member's node holds the list without the setting
    /// (by index; `u64::MAX` while it holds the setting).
    pub(super) reaches: Vec<u64>,
    /// The first promotion after the unset was checked.
    pub(super) promoted: bool,
}

/// One member: its node (alive, stalled, cut off) and its server (`None`: no data).
#[derive(Debug)]
pub(super) struct Member {
    pub id: NodeId,
    /// A witness votes and keeps no server.
    pub witness: bool,
    pub alive: bool,
    /// Kills so far: a kill ends the node's life, whatever comes after it in the step.
    pub life: u64,
    /// The whole node is stopped until then (no looks, no votes, no lease renewal).
    pub stalled_until: u64,
    /// Only its manager is stopped until then (no looks).
    pub manager_stalled_until: u64,
    pub cut_off_until: u64,
    /// Its standby receives nothing until then.
    pub lagging_until: u64,
    pub pg: Option<Data>,
    /// Its manager's engine (src/postgres_rules/engine.rs): the runtime's own state and
    /// decisions, driven here as the runtime drives them. A node restart starts a new one.
    pub engine: Engine,
    /// The last decision's health verdict (false until the first look).
    pub eligible: bool,
    pub last_wait: Option<String>,
    /// Drawn failures of the next promotion, rewind, clone.
    pub fail_promote: bool,
    pub fail_rewind: bool,
    pub fail_clone: bool,
    /// The engine's clock when its last clone failed, until one works.
    pub clone_failed_at: Option<u64>,
    /// Its estimate at the end of the last steps, newest last.
    pub est_history: VecDeque<u64>,
    /// What its last look reported of its server (src/node/postgres/manager.rs,
    /// `report`): the outer `None`, nothing since the node started; the inner, the
    /// timeline and branch of a running server (`None`: not running then).
    pub report: Option<Option<(u32, u64)>>,
    /// The synchronous record its node keeps (src/node/postgres/sync_store.rs): in the
    /// node's data dir, so it survives a restart; a replaced disk loses it.
    pub record: Option<SyncRecord>,
    /// Its node noted that its server held the cluster's data (the node's data dir).
    pub held: bool,
    /// A data directory whose volume is not mounted: the server sees none until the
    /// operator mounts it back (at the heal).
    pub unmounted: Option<Data>,
    /// Its standby cannot stream until then (refused by the primary: a password, an
    /// hba line), though its server and node answer.
    pub refused_until: u64,
    /// The note of a cluster its own `initdb` made, never promoted (`pg_made` in the
    /// node's data dir, src/node/postgres/held.rs): cleared by a promotion or a clone.
    pub made: Option<u64>,
    /// The others have not heard of its data nor its estimate until then (its
    /// `initdb` raced a newer epoch: src/sim/postgres/strangers.rs).
    pub unreported_until: u64,
    /// Its server runs but does not answer in this stall (src/sim/postgres/stalls.rs).
    pub server_stall: Option<ServerStall>,
    /// The PID of its server's live postmaster (src/sim/postgres/processes.rs).
    pub postmaster: Option<i32>,
    /// `postmaster.pid` in its data dir: written at a start, removed by a clean stop,
    /// left behind by a crash.
    pub pid_file: Option<PidFile>,
    /// The operator's `bully pg restart` of its leading primary, under way
    /// (src/sim/postgres/restarts.rs).
    pub restart: Option<InPlace>,
    /// The synchronous mode its node holds (src/sim/postgres/setting.rs).
    pub synchronous: Synchronous,
    /// A change on its way to its node: the step it arrives, and the mode.
    pub synchronous_next: Option<(u64, Synchronous)>,
    /// Its tags, as its host's file sets them (src/sim/postgres/tags.rs).
    pub tags: Tags,
    /// The tags its file says from its node's next restart on: the operator edited
    /// them (src/sim/postgres/tags.rs, `nofailover`).
    pub tags_next: Option<Tags>,
    /// Manager processes started before the current one (a restart forgets the
    /// memory: src/sim/postgres/restored.rs).
    pub managers: u64,
    /// Its standby's replayed position at its manager's last look, and the step it last
    /// moved (src/sim/postgres/archive.rs, `replay_settled`).
    pub replayed: (Option<u64>, u64),
}

impl Member {
    /// A new manager process: the engine starts empty, and what the checks remember of
    /// the old one's acts goes with it.
    pub fn fresh_manager(&mut self) {
        self.engine = Engine::default();
        self.clone_failed_at = None;
        self.managers += 1;
        self.replayed = (None, 0);
    }

    pub(super) fn new(id: NodeId, witness: bool, synchronous: Synchronous) -> Member {
        Member {
            id,
            witness,
            alive: true,
            life: 0,
            stalled_until: 0,
            manager_stalled_until: 0,
            cut_off_until: 0,
            lagging_until: 0,
            pg: None,
            engine: Engine::default(),
            eligible: false,
            last_wait: None,
            fail_promote: false,
            fail_rewind: false,
            fail_clone: false,
            clone_failed_at: None,
            est_history: VecDeque::new(),
            report: None,
            record: None,
            held: false,
            unmounted: None,
            refused_until: 0,
            made: None,
            unreported_until: 0,
            server_stall: None,
            postmaster: None,
            pid_file: None,
            restart: None,
            synchronous,
            synchronous_next: None,
            tags: Tags::default(),
            tags_next: None,
            managers: 0,
            replayed: (None, 0),
        }
    }

    /// Its estimate now: the rank of its running server's position and its failover
    /// priority, else 0 (`reading`: see [`Data::position`]).
    pub fn est(&self, reading: Reading) -> u64 {
        match &self.pg {
            Some(d) if d.running() => {
                election_rank(d.position(reading), self.tags.failover_priority)
            }
            _ => 0,
        }
    }
}

/// Who holds the office.
#[derive(Debug, Clone, Copy)]
pub(super) struct Holder {
    pub leader: NodeId,
    pub token: u64,
    /// The step at which the lease ends unless renewed.
    pub lease_end: u64,
    /// From this step it is ready (`Leading`); before, `Elected`.
    pub leading_from: u64,
}

/// An acknowledged commit.
#[derive(Debug, Clone, Copy)]
pub(super) struct Acked {
    pub id: u64,
    pub pos: usize,
    /// Acknowledged with k below `synchronous_count` under `quorum`, or under `off`.
    pub weak: bool,
    /// Every copy was destroyed by drawn wipes.
    pub destroyed: bool,
    /// Acknowledged by a primary with fewer standbys than full under the `alone`
    /// record of this office: `bully pg failover --accept-loss` over that record
    /// accepts losing it.
    pub alone_in: Option<u64>,
    /// The operator accepted losing it (`--accept-loss` over its office's record).
    pub accepted: bool,
}

/// What the WAL retention model (src/sim/postgres/retention.rs) draws with, apart from
/// the world's RNG.
#[derive(Debug)]
pub(super) struct Retention {
    pub rng: SmallRng,
    /// `max_slot_wal_keep_size` in commits (`None`: no limit, PostgreSQL's -1).
    pub max_keep: Option<usize>,
}

impl Retention {
    pub fn new(seed: u64) -> Retention {
        let mut rng = SmallRng::seed_from_u64(seed ^ 0x5741_4c5f_4b45_4550);
        let max_keep = match rng.gen_range(0..4) {
            0 => None,
            n => Some(n * 4),
        };
        Retention { rng, max_keep }
    }
}

/// The maintenance pause's own draws and state (src/sim/postgres/pause.rs draws it).
#[derive(Debug)]
pub(super) struct Pause {
    pub rng: SmallRng,
    /// The node that led when `bully pause` ran: while paused, only it may lead.
    pub holder: Option<NodeId>,
    /// `bully resume` at this step.
    pub until: u64,
}

impl Pause {
    pub fn new(seed: u64) -> Pause {
        Pause {
            rng: SmallRng::seed_from_u64(seed ^ 0x5041_5553_455f_5f5f),
            holder: None,
            until: 0,
        }
    }
}

/// The draws of src/sim/postgres/strangers.rs.
#[derive(Debug)]
pub(super) struct Strangers {
    pub rng: SmallRng,
}

impl Strangers {
    pub fn new(seed: u64) -> Strangers {
        Strangers {
            rng: SmallRng::seed_from_u64(seed ^ 0x5354_5241_4e47_4552),
        }
    }
}

/// The draws of src/sim/postgres/stalls.rs.
#[derive(Debug)]
pub(super) struct Stalls {
    pub rng: SmallRng,
}

impl Stalls {
    pub fn new(seed: u64) -> Stalls {
        Stalls {
            rng: SmallRng::seed_from_u64(seed ^ 0x5354_414c_4c5f_5f5f),
        }
    }
}

/// The draws of src/sim/postgres/restarts.rs.
#[derive(Debug)]
pub(super) struct Restarts {
    pub rng: SmallRng,
}

impl Restarts {
    pub fn new(seed: u64) -> Restarts {
        Restarts {
            rng: SmallRng::seed_from_u64(seed ^ 0x5245_5354_4152_5453),
        }
    }
}

/// The draws of src/sim/postgres/setting.rs, and the mode the cluster was last set to.
#[derive(Debug)]
pub(super) struct SettingChanges {
    pub rng: SmallRng,
    /// The mode of the last change drawn (the seed's at first).
    pub last: Synchronous,
}

impl SettingChanges {
    pub fn new(seed: u64, first: Synchronous) -> SettingChanges {
        SettingChanges {
            rng: SmallRng::seed_from_u64(seed ^ 0x5359_4e43_4d4f_4445),
            last: first,
        }
    }
}

/// The replica method's backup repository and draws (src/sim/postgres/backups.rs), from
/// a stream of their own.
#[derive(Debug)]
pub(super) struct Repository {
    pub rng: SmallRng,
    /// `[postgres] replica_method` is set: `Rules::replica_method`.
    pub method: bool,
    /// The newest backup: a stopped copy of a data dir.
    pub newest: Option<Data>,
    /// The next backup is due at this step (taken at the first one with a primary).
    pub next_at: u64,
    /// The chance a backup is of another cluster, in percent (0 in most seeds).
    pub foreign_percent: u32,
    /// The chance a restore exits non-zero, in percent.
    pub fail_percent: u32,
    /// The method is set up with a wrong stanza for the whole run: every backup it
    /// restores is of another cluster (one method seed in eight).
    pub wrong_stanza: bool,
}

impl Repository {
    /// The draws of `seed`: the method in about half the seeds, never when
    /// `spec.backups` is off.
    pub fn new(seed: u64, spec: &Spec) -> Repository {
        let mut rng = SmallRng::seed_from_u64(seed ^ 0x4241_434b_5550_5321);
        let method = spec.backups && rng.gen_bool(0.5);
        let foreign_percent = match rng.gen_ratio(1, 3) {
            true => rng.gen_range(20..60),
            false => 0,
        };
        let fail_percent = rng.gen_range(0..25);
        let wrong_stanza = method && rng.gen_ratio(1, 8);
        Repository {
            rng,
            method,
            newest: None,
            next_at: 0,
            foreign_percent,
            fail_percent,
            wrong_stanza,
        }
    }
}

/// The WAL archive's draws and what it holds (src/sim/postgres/archive.rs), from a
/// stream of its own.
#[derive(Debug)]
pub(super) struct Archive {
    pub rng: SmallRng,
    /// `restore_command` is set.
    pub on: bool,
    /// The most commits the archive lags behind the primary.
    pub max_lag: usize,
    /// The archived WAL and its system identifier.
    pub held: Option<(u64, Wal)>,
}

impl Archive {
    /// The draws of `seed`: an archive in two seeds of five, never when
    /// `spec.backups` is off.
    pub fn new(seed: u64, spec: &Spec) -> Archive {
        let mut rng = SmallRng::seed_from_u64(seed ^ 0x4152_4348_4956_4521);
        let on = spec.backups && rng.gen_ratio(2, 5);
        let max_lag = rng.gen_range(0..4);
        Archive {
            rng,
            on,
            max_lag,
            held: None,
        }
    }
}

/// A restart in place of the leading primary (src/sim/postgres/restarts.rs): its
/// server is stopped until then, and its manager runs no look meanwhile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct InPlace {
    /// The server starts again at the first step from then at which its node and
    /// manager run.
    pub until: u64,
    /// [`World::faults_logged`] when it began: another fault since excuses an office
    /// change.
    pub faults_before: u64,
    /// Its node took part in the protocol with a majority and its lease outlived the
    /// step when it began: nothing but another fault can cost it the lease then.
    pub sound: bool,
    /// The office it began in: the server starts again as a primary only within it.
    pub token: u64,
}

/// One server's stall (src/sim/postgres/stalls.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ServerStall {
    /// It answers again from this step.
    pub until: u64,
    /// Its node had sent an eligible verdict when the stall began (the one a grace
    /// holds).
    pub eligible_before: bool,
}

/// The cluster.
pub(super) struct World {
    pub seed: u64,
    pub spec: Spec,
    pub rules: Rules,
    pub rng: SmallRng,
    pub now: u64,
    pub members: Vec<Member>,
    pub office: Option<Holder>,
    pub token: u64,
    /// No election before this step (an election takes a while after an office ends).
    pub no_election_before: u64,
    /// The next election reads estimates this many steps old.
    pub stale_next: Option<usize>,
    pub acked: Vec<Acked>,
    pub next_commit: u64,
    pub log: Log,
    pub summary: Summary,
    /// Faults are over from this step (set when healed).
    pub healed_at: Option<u64>,
    /// The system identifier the next `initdb` draws.
    pub next_system_id: u64,
    /// The system identifier of the first server promoted: every later primary must
    /// have it (one cluster, never a second `initdb`'s).
    pub served_system: Option<u64>,
    /// WAL retention's own draws (src/sim/postgres/retention.rs).
    pub retention: Retention,
    /// The maintenance pause and its own draws (src/sim/postgres/pause.rs).
    pub pause: Pause,
    /// The initdb race's and strangers' volumes' draws.
    pub strangers: Strangers,
    /// The host's processes, for `postmaster.pid` (src/sim/postgres/processes.rs).
    pub processes: Processes,
    /// Servers' stalls' own draws (src/sim/postgres/stalls.rs).
    pub stalls: Stalls,
    /// A signal sent to a process that was not the member's postmaster: the run fails.
    pub foreign_signal: Option<String>,
    /// The operator's `bully pg` orders' own draws (src/sim/postgres/restarts.rs).
    pub restarts: Restarts,
    /// The operator's changes of the synchronous mode (src/sim/postgres/setting.rs).
    pub settings: SettingChanges,
    /// Faults logged so far, whatever drew them (a restart in place checks that none
    /// came during it).
    pub faults_logged: u64,
    /// With `Spec::protocol`: the members' real machines, which hold the office
    /// (src/sim/postgres/protocol.rs); `None`: the office is modelled here.
    pub protocol: Option<Protocol>,
    /// The replica method's backup repository (src/sim/postgres/backups.rs).
    pub backups: Repository,
    /// The WAL archive (src/sim/postgres/archive.rs).
    pub archive: Archive,
    /// A standby cluster's remote primary and draws (src/sim/postgres/remote.rs);
    /// `None`: the cluster is no standby cluster.
    pub remote: Option<Remote>,
}

/// `Rules::standby_grace_ms` for `seed`: the runtime's is 20 looks; shorter ones (none in
/// half the seeds) let the faults drawn reach a primary that lowers k. Drawn from a
/// stream of its own, so a seed without it runs as it did before it was drawn.
fn standby_grace(seed: u64, spec: &Spec) -> u64 {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x9e37_79b9_7f4a_7c15);
    match spec.standby_grace && rng.gen_bool(0.5) {
        true => STEP_MS * rng.gen_range(1..=20),
        false => 0,
    }
}

impl World {
    pub fn new(seed: u64, spec: Spec) -> World {
        let mut rng = SmallRng::seed_from_u64(seed);
        let backups = Repository::new(seed, &spec);
        let rules = Rules {
            synchronous: spec.synchronous,
            // Up to 3 commits of WAL.
            maximum_lag_on_failover: rng.gen_range(0..4) * super::server::COMMIT_BYTES,
            rewind: rng.gen_bool(0.8),
            reinit_on_failed_rewind: rng.gen_bool(0.7),
            stuck_after: rng.gen_range(2..5),
            standby_grace_ms: standby_grace(seed, &spec),
            replica_method: backups.method,
            standby_cluster: false,
        };
        let mut members: Vec<Member> = (1..=spec.members as NodeId)
            .map(|id| Member::new(id, false, spec.synchronous))
            .collect();
        for (m, tags) in members.iter_mut().zip(super::tags::draw(seed, &spec)) {
            m.tags = tags;
        }
        if let Some((at, from_start)) = super::tags::draw_nofailover(seed, &spec) {
            let m = &mut members[at];
            let tags = super::tags::never_leading(m.tags);
            match from_start {
                true => m.tags = tags,
                false => m.tags_next = Some(tags),
            }
        }
        if spec.witness {
            members.push(Member::new(
                spec.members as NodeId + 1,
                true,
                spec.synchronous,
            ));
        }
        let mut world = World {
            seed,
            spec,
            rules,
            rng,
            now: 0,
            members,
            office: None,
            token: 0,
            no_election_before: 0,
            stale_next: None,
            acked: Vec::new(),
            next_commit: 1,
            log: Log::default(),
            summary: Summary {
                seeds: 1,
                ..Summary::default()
            },
            healed_at: None,
            next_system_id: 1,
            served_system: None,
            retention: Retention::new(seed),
            pause: Pause::new(seed),
            strangers: Strangers::new(seed),
            processes: Processes::new(seed, spec.strangers),
            stalls: Stalls::new(seed),
            foreign_signal: None,
            restarts: Restarts::new(seed),
            settings: SettingChanges::new(seed, spec.synchronous),
            faults_logged: 0,
            protocol: None,
            backups,
            archive: Archive::new(seed, &spec),
            remote: Remote::draw(seed, &spec),
        };
        if spec.protocol {
            let ids: Vec<NodeId> = world.members.iter().map(|m| m.id).collect();
            let witness = world.members.iter().find(|m| m.witness).map(|m| m.id);
            world.protocol = Some(Protocol::new(seed, &ids, witness));
        }
        match spec.start {
            Start::Running => world.bootstrapped(),
            start => world.adopted(start),
        }
        world.start_standby_cluster();
        world
    }

    /// Member 1 leads with a primary; the others stream from it. As the runtime leaves
    /// a new cluster: member 1 ran `initdb` and promoted in office 1 (timeline 2,
    /// recorded as branch 1), the others cloned it.
    fn bootstrapped(&mut self) {
        let mut first = Data::initdb(self.next_system_id);
        self.next_system_id += 1;
        self.served_system = Some(first.system_id);
        first.record_branch(first.wal.next_timeline(), 1);
        first.wal.fork();
        for m in self.members.iter_mut().filter(|m| !m.witness) {
            let mut data = Data::copy_of(&first);
            data.state = match m.id {
                1 => State::Primary,
                _ => State::Standby {
                    upstream: Some(1),
                    streaming: true,
                },
            };
            m.pg = Some(data);
            m.eligible = true;
            m.held = true;
            // Each node sent an eligible verdict before the run begins.
            m.engine.settle(Decision {
                act: Act::Wait("bootstrapped".into()),
                eligible: true,
            });
            while m.engine.poll_command().is_some() {}
        }
        // Every standby cloned the primary: each knows its branch, and the names are
        // the ones the engine gives a promotion told so (every standby named).
        let others: Vec<NodeId> = self
            .data_members()
            .map(|m| m.id)
            .filter(|&m| m != 1)
            .collect();
        let (cluster, rules) = (self.cluster_for(1), self.rules_of(1));
        let names = self
            .member_mut(1)
            .engine
            .promoting(2, &others, &cluster, &rules);
        self.write_names(1, names);
        // The identity record the first primary committed before it promoted.
        let everyone: Vec<NodeId> = self
            .data_members()
            .map(|m| m.id)
            .filter(|&m| m != 1)
            .collect();
        let record = SyncRecord {
            token: 1,
            seq: 1,
            primary: 1,
            k: synchronous_count(self.voters()).min(everyone.len()),
            standbys: everyone,
            system_id: self.served_system.unwrap_or(0),
            alone: false,
        };
        for m in &mut self.members {
            m.record = Some(record.clone());
        }
        let done = Done::SyncWritten {
            record,
            kept_by_majority: true,
        };
        self.done(1, done);
        self.token = 1;
        self.office = Some(Holder {
            leader: 1,
            token: 1,
            lease_end: LEASE,
            leading_from: 0,
        });
    }

    pub fn run(&mut self) -> Result<(), String> {
        self.start_protocol()?;
        for _ in 0..self.spec.fault_steps {
            self.step(true)?;
        }
        self.heal();
        let healed = self.now;
        // A standby past its upstream's WAL waits longer with an archive (archive.rs).
        let bound = self.spec.settle_steps + self.archive_settle_steps();
        for _ in 0..bound {
            self.step(false)?;
            if self.settled().is_ok() {
                self.summary.longest_settle = self.now - healed;
                return self.finish();
            }
        }
        self.settled().map_err(|why| {
            format!(
                "no progress {bound} steps after the last fault: {why}; {}",
                self.states()
            )
        })?;
        self.finish()
    }

    /// The last checks: the primary holds every acknowledged commit.
    fn finish(&mut self) -> Result<(), String> {
        self.summary.out = self
            .data_members()
            .filter(|m| self.legitimately_out(m))
            .count() as u64;
        Ok(())
    }

    pub fn summary(&self) -> Summary {
        let mut summary = self.summary.clone();
        summary.steps = self.now;
        summary.acknowledged = self.acked.iter().filter(|a| !a.weak).count() as u64;
        summary.acknowledged_weak = self.acked.iter().filter(|a| a.weak).count() as u64;
        summary.destroyed = self.acked.iter().filter(|a| a.destroyed).count() as u64;
        summary
    }

    pub fn violation(&self, what: String) -> Violation {
        Violation {
            seed: self.seed,
            spec: self.spec,
            step: self.now,
            what,
            history: self.log.lines(),
        }
    }

    pub fn event(&mut self, event: Event) {
        self.faults_logged += u64::from(matches!(event, Event::Fault(_)));
        self.log.push(self.now, event);
    }

    pub fn data_members(&self) -> impl Iterator<Item = &Member> {
        self.members.iter().filter(|m| !m.witness)
    }

    /// Member `id`, or for `REMOTE_PRIMARY` a standby cluster's remote primary
    /// (src/sim/postgres/remote.rs): an upstream or a copy source resolves as a member.
    pub fn member(&self, id: NodeId) -> &Member {
        match id {
            REMOTE_PRIMARY => &self.remote.as_ref().expect(NO_REMOTE).server,
            _ => &self.members[id as usize - 1],
        }
    }

    pub fn member_mut(&mut self, id: NodeId) -> &mut Member {
        match id {
            REMOTE_PRIMARY => &mut self.remote.as_mut().expect(NO_REMOTE).server,
            _ => &mut self.members[id as usize - 1],
        }
    }

    pub fn voters(&self) -> usize {
        self.members.len()
    }

    pub fn majority(&self) -> usize {
        crate::protocol::membership::majority_of(self.voters())
    }

    /// Alive and not cut off: it reaches (and is reached by) the others.
    pub fn connected(&self, id: NodeId) -> bool {
        let m = self.member(id);
        m.alive && m.cut_off_until <= self.now
    }

    pub fn reach(&self, a: NodeId, b: NodeId) -> bool {
        a == b && self.member(a).alive || self.connected(a) && self.connected(b)
    }

    /// Taking part in the protocol: connected and not stopped.
    pub(super) fn voting(&self, id: NodeId) -> bool {
        self.connected(id) && self.member(id).stalled_until <= self.now
    }

    pub(super) fn majority_votes(&self) -> bool {
        let n = self.members.iter().filter(|m| self.voting(m.id)).count();
        n >= self.majority()
    }

    /// One step.
    fn step(&mut self, faults: bool) -> Result<(), String> {
        self.now += 1;
        if faults {
            self.draw_faults();
        } else {
            self.operate();
        }
        self.draw_pause(faults);
        self.draw_stranger(faults);
        self.draw_server_stall(faults);
        self.draw_order(faults);
        self.draw_setting_change(faults);
        self.draw_standby_cluster(faults);
        match self.protocol.is_some() {
            true => self.run_protocol()?,
            false => self.end_office_if_due()?,
        }
        if let Some(why) = self.foreign_signal.take() {
            return Err(why);
        }
        let modelled = self.protocol.is_none();
        if modelled && self.office.is_none() && self.now >= self.no_election_before {
            self.elect();
        }
        let mut order: Vec<NodeId> = self.data_members().map(|m| m.id).collect();
        order.shuffle(&mut self.rng);
        for id in order {
            self.look(id)?;
            self.check_one_primary()?;
            self.check_standby_cluster()?;
        }
        match modelled {
            true => self.renew_office()?,
            false => self.tell_verdicts(),
        }
        self.commit();
        self.remote_commit();
        self.archive_wal();
        self.back_up();
        self.replicate();
        self.retain(faults);
        self.acknowledge();
        self.check_one_primary()?;
        self.check_standby_cluster()?;
        let reading = self.reading();
        for m in &mut self.members {
            let est = m.est(reading);
            m.est_history.push_back(est);
            if m.est_history.len() > EST_KEPT {
                m.est_history.pop_front();
            }
        }
        Ok(())
    }

    /// The office this member's node is in.
    pub fn office_of(&self, id: NodeId) -> Office {
        match self.office {
            Some(h) if h.leader == id => match self.now >= h.leading_from {
                true => Office::Leading { token: h.token },
                false => Office::Elected,
            },
            Some(h) if self.reach(id, h.leader) => Office::Following {
                leader: h.leader,
                server: Some(h.leader),
            },
            _ => Office::Nobody,
        }
    }

    /// The lease ended: the office ends and the keeper fences the old primary, whatever
    /// its manager is doing (a failure if only a restart in place could explain it:
    /// [`World::check_office_kept`]).
    fn end_office_if_due(&mut self) -> Result<(), String> {
        if let Some(h) = self.office {
            if h.lease_end <= self.now {
                self.check_office_kept(h.leader, "its lease ended")?;
                self.end_office("the lease ended");
            }
        }
        Ok(())
    }

    /// Ends the office now (lease end or resignation) and fences its primary.
    pub fn end_office(&mut self, why: &'static str) {
        let Some(h) = self.office.take() else {
            return;
        };
        self.event(Event::OfficeEnded { id: h.leader, why });
        self.no_election_before = self.now + self.rng.gen_range(1..3);
        self.fence(h.leader);
    }

    /// The keeper's fence of member `id`'s server, through the pid file's check: a
    /// primary stops (the sabotage `NoFence`: nothing happens).
    pub(super) fn fence(&mut self, id: NodeId) {
        if self.spec.sabotage == Some(Sabotage::NoFence) {
            return;
        }
        if !self.signal_server(id, "the keeper's fence") {
            return;
        }
        let leader = self.member_mut(id);
        if let Some(data) = leader.pg.as_mut().filter(|d| d.primary()) {
            data.stop(true);
            self.summary.fences += 1;
            self.event(Event::Fenced(id));
        }
    }

    /// The term of the office whose fencing token is `token`: the modelled office's
    /// counter is both; a real epoch's token folds its leader in
    /// (src/protocol/epoch.rs).
    pub(super) fn term_of(&self, token: u64) -> u64 {
        match self.protocol {
            Some(_) => token >> crate::protocol::TOKEN_LEADER_BITS,
            None => token,
        }
    }

    /// Signals member `id`'s server as the runtime does, through `postmaster.pid`
    /// judged against the process it names (src/postmaster.rs): whether its postmaster
    /// was signalled. A signal to any other process fails the run.
    pub(super) fn signal_server(&mut self, id: NodeId, who: &str) -> bool {
        self.reconcile_process(id);
        let trusting = self.spec.sabotage == Some(Sabotage::TrustsPidFile);
        let m = self.member(id);
        match self.processes.claim(m.pid_file.as_ref(), id, trusting) {
            Claim::Ours(pid) if self.processes.is_postmaster_of(pid, id) => true,
            Claim::Ours(pid) => {
                let why = format!(
                    "{who} of {id} signalled PID {pid}, which is not its server's postmaster \
                     (postmaster.pid left by a crash, the PID reused)"
                );
                self.foreign_signal.get_or_insert(why);
                false
            }
            Claim::Nothing | Claim::Stranger(..) => false,
        }
    }

    /// Brings member `id`'s processes in line with its server: a postmaster (and its
    /// pid file) for a running server, none for a stopped one (the file stays after a
    /// crash, and its PID may be reused at once).
    pub(super) fn reconcile_process(&mut self, id: NodeId) {
        let now = self.now;
        let m = self.member(id);
        let state = m.pg.as_ref().map(|d| (d.running(), d.state));
        match (state, m.postmaster) {
            (Some((true, _)), None) => {
                let file = self.processes.start_postmaster(id, now);
                let m = self.member_mut(id);
                m.postmaster = Some(file.pid);
                m.pid_file = Some(file);
            }
            (Some((true, _)), Some(_)) => {}
            (state, Some(pid)) => {
                let crashed = matches!(state, Some((_, State::Stopped { clean: false, .. })));
                let reused = self.processes.exit(pid, !crashed, now);
                let m = self.member_mut(id);
                m.postmaster = None;
                if !crashed {
                    m.pid_file = None;
                }
                if reused.is_some() {
                    self.fault("a crashed postmaster's PID reused", id);
                }
            }
            (None, None) => self.member_mut(id).pid_file = None,
            (Some(_), None) => {}
        }
    }

    /// The eligible member with the highest `(est, id)` among those a majority of
    /// voters reaches takes the office; it is ready a step or two later.
    fn elect(&mut self) {
        if !self.majority_votes() {
            return;
        }
        let stale = self.stale_next.take();
        let candidates: Vec<(u64, NodeId)> = self
            .data_members()
            .filter(|m| self.voting(m.id) && m.eligible && self.may_lead(m.id))
            .map(|m| {
                let est = match stale {
                    Some(age) if m.est_history.len() > age => {
                        m.est_history[m.est_history.len() - 1 - age]
                    }
                    _ => m.est(self.reading()),
                };
                let est = match m.unreported_until > self.now {
                    true => 0,
                    false => est,
                };
                (est, m.id)
            })
            .collect();
        let Some((est, leader)) = candidates.iter().copied().max() else {
            return;
        };
        // Another's WAL ranked alike and its ID was higher: the priority decided.
        if est != 0
            && candidates
                .iter()
                .any(|&(other, id)| ranks_alike(other, est) && id > leader)
        {
            self.summary.won_on_priority += 1;
        }
        self.token += 1;
        let ready = self.rng.gen_range(1..3);
        self.office = Some(Holder {
            leader,
            token: self.token,
            lease_end: self.now + LEASE,
            leading_from: self.now + ready,
        });
        self.summary.elections += 1;
        self.summary.stale_elections += u64::from(stale.is_some());
        self.event(Event::Elected {
            id: leader,
            est,
            stale: stale.is_some(),
            token: self.token,
        });
    }

    /// A leader that is running, reaches a majority and is still eligible renews its
    /// lease; an ineligible one resigns (a failure over a stall its verdict should
    /// have held through: [`World::check_resigned`]).
    fn renew_office(&mut self) -> Result<(), String> {
        let Some(h) = self.office else {
            return Ok(());
        };
        let leader = self.member(h.leader);
        if leader.stalled_until > self.now || !leader.alive {
            return Ok(());
        }
        if !leader.eligible && leader.manager_stalled_until <= self.now {
            self.check_resigned(h.leader)?;
            self.check_office_kept(h.leader, "it resigned, ineligible")?;
            self.end_office("it resigned (ineligible)");
            return Ok(());
        }
        if self.voting(h.leader) && self.majority_votes() {
            if let Some(h) = self.office.as_mut() {
                h.lease_end = self.now + LEASE;
            }
        }
        Ok(())
    }

    /// The manager's look: what its executor observes handed to the engine, and the
    /// commands the engine gives run in order.
    fn look(&mut self, id: NodeId) -> Result<(), String> {
        let m = self.member(id);
        if !m.alive
            || m.stalled_until > self.now
            || m.manager_stalled_until > self.now
            || self.looks_held(id)
        {
            return Ok(());
        }
        self.adopt_branch(id);
        self.reconcile_process(id);
        let m = self.member(id);
        let office = self.office_of(id);
        // A restart in place under way is looked at only under `RestartThroughLooks`:
        // the server starting answers nothing yet.
        let server = match &m.pg {
            Some(_) if self.server_stalled(id) || m.restart.is_some() => Server::Unreachable,
            Some(d) => d.seen(self.reading()),
            None => Server::Absent,
        };
        // A pid file naming a live process the check takes for the postmaster, while
        // no server runs: "the server runs but does not answer" (the tester's hang).
        let trusting = self.spec.sabotage == Some(Sabotage::TrustsPidFile);
        let claimed = self.processes.claim(m.pid_file.as_ref(), id, trusting);
        let server = match (server, claimed) {
            (Server::Stopped { .. }, Claim::Ours(_)) => Server::Unreachable,
            (server, _) => server,
        };
        let peers: Vec<PeerWal> = match office {
            Office::Leading { .. } => self.peers_of(id),
            _ => Vec::new(),
        };
        let cluster = self.cluster_for(id);
        let reported = match self.reading() {
            Reading::TimelineNumbers => Reading::Lineage,
            reading => reading,
        };
        // What this look reports (the runtime sends it after acting, as observed).
        let report = Some(match &server {
            Server::Running(r) => {
                m.pg.as_ref()
                    .map(|d| (r.timeline, d.position(reported).branch))
            }
            _ => None,
        });
        let settled = self.replay_settled(id, &server);
        let removed = self.wal_removed_seen(id, &server, office, &cluster, settled);
        self.note_method_copy(id, removed);
        let look = Look {
            now_ms: self.now * STEP_MS,
            office,
            server: server.clone(),
            peers: peers.clone(),
            reports: self.reports_seen_by(id),
            standbys: self.standbys_counted(id),
            cluster,
            removed,
        };
        let rules = self.rules_of(id);
        let m = self.member_mut(id);
        m.report = report;
        let (decision, cluster) = m.engine.handle(look, &rules);
        if let (Act::Promote, Server::Running(r)) = (&decision.act, &server) {
            let (own, peers) = (r.wal, peers.clone());
            self.event(Event::Read { id, own, peers });
        }
        let decision = self.sabotaged(id, decision, office, &server, &cluster, &peers);
        let graceless = self.spec.sabotage == Some(Sabotage::NoUnansweredGrace);
        let decided = decision.eligible;
        let m = self.member_mut(id);
        let verdict = m.engine.settle(decision);
        m.eligible = if graceless { decided } else { verdict };
        while let Some(command) = self.member_mut(id).engine.poll_command() {
            match command {
                Command::NoteHeld { .. } => self.member_mut(id).held = true,
                Command::Act(act) => self.apply(id, office, act, &cluster, &peers)?,
            }
        }
        self.keep_slots(id, &cluster);
        Ok(())
    }

    /// How branches are read: from the records along the timeline's history, or every
    /// branch as the timeline (the sabotage `TimelineNumbersOnly`), or from the
    /// current timeline's record alone (the sabotage `UnknownBranchReadsZero`).
    pub fn reading(&self) -> Reading {
        match self.spec.sabotage {
            Some(Sabotage::TimelineNumbersOnly) => Reading::TimelineNumbers,
            Some(Sabotage::UnknownBranchReadsZero) => Reading::CurrentRecordOnly,
            _ => Reading::Lineage,
        }
    }

    /// A streaming standby records its upstream's reported (timeline, branch) when its
    /// records do not say so yet, whether or not it has streamed that timeline yet, and
    /// when they say otherwise of the timeline its WAL is on
    /// (src/node/postgres/manager.rs, `adopt_branch`).
    fn adopt_branch(&mut self, id: NodeId) {
        let Some(d) = &self.member(id).pg else {
            return;
        };
        let State::Standby {
            upstream: Some(upstream),
            streaming: true,
        } = d.state
        else {
            return;
        };
        let report = self.report_seen_by(id, upstream).flatten();
        let own_timeline = match self.spec.sabotage {
            Some(Sabotage::AdoptsOnlyNewer) => 0,
            _ => d.wal.timeline(),
        };
        let Some((timeline, branch)) = branch_to_adopt(report, own_timeline, |tl| d.branch_of(tl))
        else {
            return;
        };
        if let Some(d) = self.member_mut(id).pg.as_mut() {
            d.record_branch(timeline, branch);
        }
    }

    /// The other data members' reports as member `id`'s node has them fresh
    /// ([`World::report_seen_by`]), for the engine.
    fn reports_seen_by(&self, id: NodeId) -> Vec<(NodeId, Option<(u32, u64)>)> {
        self.data_members()
            .filter(|m| m.id != id)
            .filter_map(|m| Some((m.id, self.report_seen_by(id, m.id)?)))
            .collect()
    }

    /// Member `of`'s last report as `reader`'s node has it (src/node/postgres/peers.rs):
    /// a fresh one only while the two reach each other and `of`'s node answers (a node
    /// stopped whole does not; an answer older than a few looks no longer counts).
    fn report_seen_by(&self, reader: NodeId, of: NodeId) -> Option<Option<(u32, u64)>> {
        let m = self.member(of);
        let answers =
            self.reach(reader, of) && m.stalled_until <= self.now && m.unreported_until <= self.now;
        m.report.filter(|_| answers)
    }

    /// The flaw a sabotaged run puts around the decisions.
    fn sabotaged(
        &self,
        id: NodeId,
        decided: Decision,
        office: Office,
        server: &Server,
        cluster: &Cluster,
        peers: &[PeerWal],
    ) -> Decision {
        let Decision { act, eligible } = decided;
        let memory = self.member(id).engine.memory();
        let standby = match server {
            Server::Running(r) if r.in_recovery => Some(r),
            _ => None,
        };
        let following = matches!(office, Office::Following { .. });
        let (act, eligible) = match (&act, self.spec.sabotage) {
            (Act::Wait(_), Some(Sabotage::SkipMajority))
                if standby.is_some()
                    && matches!(office, Office::Leading { .. })
                    && too_few_reached(peers, cluster, &self.rules_of(id)) =>
            {
                (Act::Promote, true)
            }
            (Act::Wait(_), Some(Sabotage::PromotesWithoutIdentity))
                if standby.is_some_and(|r| {
                    may_promote(r.wal, peers, cluster, &self.rules_of(id)).is_ok()
                }) && matches!(office, Office::Leading { .. })
                    && cluster.all_absent
                    && cluster.sync == SyncView::Unread =>
            {
                (Act::Promote, true)
            }
            // The old decisions: a standby to be rewound stopped as soon as it followed
            // anyone, primary or not.
            (Act::Wait(_), Some(Sabotage::RewindWaits))
                if standby.is_some()
                    && following
                    && memory.needs_rewind
                    && !cluster.leader_primary =>
            {
                (
                    Act::Stop {
                        why: StopReason::FormerPrimary,
                    },
                    false,
                )
            }
            // ... a stuck standby too ...
            (Act::Wait(_), Some(Sabotage::RewindWaits))
                if standby.is_some_and(|r| {
                    !r.streaming && r.upstream.is_some() && matches!(office, Office::Following { server, .. } if server == r.upstream)
                }) && memory.not_streaming >= self.rules_of(id).stuck_after
                    && !cluster.leader_primary =>
            {
                (
                    Act::Stop {
                        why: StopReason::CannotFollow,
                    },
                    true,
                )
            }
            // ... and a stopped server to be rewound waited, stopped and ineligible.
            (Act::StartStandby { upstream: None }, Some(Sabotage::RewindWaits))
                if following
                    && matches!(server, Server::Stopped { was_primary, .. }
                        if rewind_wanted(*was_primary, memory)) =>
            {
                let why = "a former primary waits for the coordinator's server";
                (Act::Wait(why.into()), false)
            }
            // The old promotion under `off`: the records' identity not needed.
            (Act::Wait(_), Some(Sabotage::OffPromotesUnread))
                if standby.is_some()
                    && matches!(office, Office::Leading { .. })
                    && self.rules_of(id).synchronous == Synchronous::Off
                    && cluster.sync == SyncView::Unread
                    && !cluster.all_absent
                    && may_promote(standby.expect("a standby").wal, peers, cluster, &self.rules_of(id)).is_ok() =>
            {
                (Act::Promote, true)
            }
            // The old names: a narrower set at once, with no record kept first.
            (Act::CommitSync { record }, Some(Sabotage::NarrowsUncommitted))
                if server_is_primary(server) && record.alone =>
            {
                let names = synchronous_names(
                    id,
                    cluster,
                    cluster.streaming,
                    self.rules_of(id).synchronous,
                );
                (Act::SetSynchronous { names }, eligible)
            }
            // The method never spent: a clone goes by it whatever its last one did.
            (&Act::Clone { from, .. }, Some(Sabotage::MethodNeverSpent)) => {
                let unspent = Memory {
                    method_spent: false,
                    ..memory.clone()
                };
                let by = copier(cluster, &unspent, &self.rules_of(id));
                (Act::Clone { from, by }, eligible)
            }
            // A new standby cluster made by initdb rather than cloned from the remote.
            (&Act::Clone { from, .. }, Some(Sabotage::StandbyClusterInitDb))
                if from == REMOTE_PRIMARY =>
            {
                (Act::InitDb, eligible)
            }
            // The rule before: a reinit restores a backup as a clone would.
            (&Act::Reinit { from, .. }, Some(Sabotage::ReinitByMethod)) => {
                let by = copier(cluster, memory, &self.rules_of(id));
                (Act::Reinit { from, by }, eligible)
            }
            _ => (act, eligible),
        };
        Decision { act, eligible }
    }

    /// The cluster as member `id`'s executor knows it (the engine adds which standbys
    /// know its branch, and how many stream: [`Look::cluster`]).
    pub fn cluster_for(&self, id: NodeId) -> Cluster {
        let m = self.member(id);
        let sync = match self.office_of(id) {
            Office::Leading { .. } => self.sync_view(id),
            _ => SyncView::Unread,
        };
        // Its server serves the cluster (src/sim/postgres/remote.rs, `serves`).
        let leader_primary = self.office.and_then(|h| {
            let leader = self.member(h.leader).pg.as_ref();
            leader.filter(|d| self.serves(id, d) && self.reach(id, h.leader))
        });
        // The records' identity, else (as the runtime: src/node/postgres/manager.rs,
        // `cluster`) the coordinator's primary's as its report shows it.
        let system_id = match sync.system_id() {
            0 => m.record.as_ref().map_or(0, |r| r.system_id),
            read => read,
        };
        let from_leader = self.spec.sabotage != Some(Sabotage::IdentityFromRecordsOnly);
        let system_id = match (system_id, leader_primary) {
            (0, Some(leader)) if from_leader => leader.system_id,
            (known, _) => known,
        };
        let system_id = match self.spec.sabotage {
            Some(Sabotage::SecondInitdb) => 0,
            _ => system_id,
        };
        let leader_primary = leader_primary.is_some();
        Cluster {
            id,
            data_voters: self.data_members().map(|m| m.id).collect(),
            voters: self.voters(),
            // A member without data reports `missing` when its node noted holding the
            // cluster's data (src/node/postgres/held.rs), `absent` only when it never did;
            // one whose data its own initdb made, never promoted, counts as absent.
            all_absent: self.data_members().filter(|m| m.id != id).all(|m| {
                let made_unpromoted = m.pg.as_ref().is_some_and(|d| {
                    m.made == Some(d.system_id)
                        && self.spec.sabotage != Some(Sabotage::UnpromotedCountsAsData)
                });
                self.reach(id, m.id) && (m.pg.is_none() && !m.held || made_unpromoted)
                    || m.unreported_until > self.now
            }),
            leader_primary,
            streaming: 0,
            // Under the sabotage `NamesIgnoreBranch`, every other data voter.
            knows_branch: match self.spec.sabotage {
                Some(Sabotage::NamesIgnoreBranch) => self
                    .data_members()
                    .map(|m| m.id)
                    .filter(|&m| m != id)
                    .collect(),
                _ => Vec::new(),
            },
            sync,
            system_id,
            server_system_id: m.pg.as_ref().map_or(0, |d| d.system_id),
            held_data: m.held && self.spec.sabotage != Some(Sabotage::SecondInitdb),
            made_here: match self.spec.sabotage {
                Some(Sabotage::KeepsOwnInitdb) => 0,
                Some(Sabotage::ReplacesStrangers) => m.pg.as_ref().map_or(0, |d| d.system_id),
                _ => m.made.unwrap_or(0),
            },
            paused: self.pause_seen(),
            flushed: self.flushed(id),
            nosync: self
                .data_members()
                .filter(|m| m.id != id && m.tags.nosync)
                .map(|m| m.id)
                .collect(),
            nofailover: self
                .data_members()
                .filter(|m| m.tags.never_leads())
                .map(|m| m.id)
                .collect(),
            clone_sources: self.clone_sources(id),
            // The model's reports are there from the first look.
            reports_pending: false,
        }
    }

    /// As the runtime's `Cluster::clone_sources` for member `id` following the
    /// coordinator: the other members tagged `clonefrom` that `id` reaches, whose
    /// standbys stream from the coordinator's server that serves (a primary, or a
    /// standby cluster's standby leader; the sabotage `CloneFromAnyTagged`: any tagged
    /// member with a running server).
    fn clone_sources(&self, id: NodeId) -> Vec<NodeId> {
        let Some(leader) = self.office.map(|h| h.leader).filter(|&l| l != id) else {
            return Vec::new();
        };
        let Some(primary) = (self.member(leader).pg.as_ref()).filter(|d| self.serves(id, d)) else {
            return Vec::new();
        };
        let any = self.spec.sabotage == Some(Sabotage::CloneFromAnyTagged);
        self.data_members()
            .filter(|m| m.id != id && m.id != leader && m.tags.clonefrom && self.reach(id, m.id))
            .filter(|m| {
                m.pg.as_ref().is_some_and(|d| match d.state {
                    State::Standby {
                        upstream: Some(u),
                        streaming: true,
                    } => u == leader && d.system_id == primary.system_id,
                    _ => any && d.running(),
                })
            })
            .map(|m| m.id)
            .collect()
    }

    /// What a leading coordinator reads of the synchronous records
    /// (src/node/postgres/manager.rs, `read_records`): the newest among the members whose
    /// nodes answer, if they are a majority of the voters. The sabotage
    /// `PromoteIgnoresRecord` reads none; `SecondInitdb` the old way: as if none kept one.
    pub fn sync_view(&self, id: NodeId) -> SyncView {
        if matches!(
            self.spec.sabotage,
            Some(Sabotage::PromoteIgnoresRecord | Sabotage::SecondInitdb)
        ) {
            return SyncView::Read(None);
        }
        let answering: Vec<&Member> = self
            .members
            .iter()
            .filter(|m| self.answers(id, m.id))
            .collect();
        match answering.len() >= self.majority() {
            true => SyncView::Read(SyncRecord::newest(
                answering.iter().filter_map(|m| m.record.as_ref()),
            )),
            false => SyncView::Unread,
        }
    }

    /// Whether `of`'s node answers `asker`'s requests now.
    pub fn answers(&self, asker: NodeId, of: NodeId) -> bool {
        self.reach(asker, of) && self.member(of).stalled_until <= self.now
    }

    /// The other data members whose standbys stream from `id`'s server now, as its
    /// executor tells the engine (the sabotage `StreamingOnlyKnown`: only those known
    /// to hold its branch).
    fn standbys_counted(&self, id: NodeId) -> Vec<NodeId> {
        let timeline = self.member(id).pg.as_ref().map(|d| d.wal.timeline());
        let known = timeline.map_or_else(Vec::new, |t| self.member(id).engine.knows_branch(t));
        self.streaming_standbys(id)
            .filter(|m| {
                self.spec.sabotage != Some(Sabotage::StreamingOnlyKnown) || known.contains(m)
            })
            .collect()
    }

    /// What each standby streaming from `id`'s server has flushed of its WAL, as the
    /// primary reads it in `pg_stat_replication`.
    fn flushed(&self, id: NodeId) -> Vec<(NodeId, u64)> {
        let Some(primary) = self.member(id).pg.as_ref().filter(|d| d.primary()) else {
            return Vec::new();
        };
        self.streaming_standbys(id)
            .filter_map(|s| {
                let d = self.member(s).pg.as_ref()?;
                d.wal.follows(&primary.wal).then(|| (s, d.wal.lsn()))
            })
            .collect()
    }

    /// The other data members whose standbys stream from `id`'s server now.
    fn streaming_standbys(&self, id: NodeId) -> impl Iterator<Item = NodeId> + '_ {
        self.data_members()
            .filter(move |m| m.id != id)
            .filter(move |m| {
                m.pg.as_ref().is_some_and(|d| {
                    d.state
                        == State::Standby {
                            upstream: Some(id),
                            streaming: true,
                        }
                })
            })
            .map(|m| m.id)
    }

    /// The other servers' positions as the coordinator reads them before promoting
    /// (src/node/postgres/manager.rs, `peer_wals`): a running server's LSN and its branch
    /// from its own `bully.branch`, by SQL; a member without data is not reached (the sabotage `AbsentCountsAsReached`:
    /// reached at `Position::default()`), nor is one without a fresh report, down, cut
    /// off or stopped.
    pub(super) fn peers_of(&self, id: NodeId) -> Vec<PeerWal> {
        let reading = self.reading();
        let absent = match self.spec.sabotage {
            Some(Sabotage::AbsentCountsAsReached) => Some(Position::default()),
            _ => None,
        };
        // A stranger's server (another cluster's data, as the coordinator reads its
        // system identifier) holds none of the cluster's commits: not reached.
        let own_system = self.member(id).pg.as_ref().map(|d| d.system_id);
        let stranger = |d: &Data| {
            own_system.is_some_and(|own| own != d.system_id)
                && self.spec.sabotage != Some(Sabotage::StrangerCountsAsReached)
        };
        // The sabotage `PassesOverNofailover`: such a member's WAL ahead reads as level.
        let own = self.member(id).pg.as_ref().map(|d| d.position(reading));
        let passed_over = |m: &Member, wal: Position| match own {
            Some(own)
                if self.spec.sabotage == Some(Sabotage::PassesOverNofailover)
                    && m.tags.never_leads() =>
            {
                wal.min(own)
            }
            _ => wal,
        };
        self.data_members()
            .filter(|m| m.id != id)
            .map(|m| PeerWal {
                id: m.id,
                wal: match (&m.pg, self.report_seen_by(id, m.id)) {
                    (_, None) => None,
                    (None, Some(_)) => absent,
                    (Some(d), Some(_))
                        if d.running() && !stranger(d) && !self.server_stalled(m.id) =>
                    {
                        Some(passed_over(m, d.position(reading)))
                    }
                    (Some(_), Some(_)) => None,
                },
            })
            .collect()
    }

    /// A promotion of `id`'s server: under `quorum` or `strict` it holds every commit
    /// promised ([`World::check_holds_acknowledged`]); under `off` the commits it lacks
    /// are lost by the operator's choice (src/sim/postgres/setting.rs), and no later
    /// promotion is held to them.
    pub(super) fn check_promotion(&mut self, id: NodeId) -> Result<(), String> {
        if self.member(id).synchronous != Synchronous::Off {
            return self.check_holds_acknowledged(id);
        }
        let Some(data) = self.member(id).pg.as_ref() else {
            return Ok(());
        };
        let lacks: Vec<usize> = (self.acked.iter().enumerate())
            .filter(|(_, a)| !data.wal.holds(a.pos, a.id))
            .map(|(i, _)| i)
            .collect();
        for i in lacks {
            self.acked[i].accepted = true;
        }
        Ok(())
    }

    /// Whether the commits primary `id` acknowledges go unchecked: only when its names
    /// were written under `off` (src/sim/postgres/setting.rs). Under `quorum` a
    /// primary that lowers k does so once a majority keeps the narrower set
    /// (src/postgres_rules/durability.rs), so its commits are checked like any other.
    pub(super) fn weak(&self, id: NodeId) -> bool {
        self.member(id).pg.as_ref().is_some_and(|d| d.names_off)
    }

    /// The decisions set member `id`'s `synchronous_standby_names` (on a server that has
    /// data): they promise what its node's mode says.
    pub(super) fn write_names(&mut self, id: NodeId, names: String) {
        let k = full_k(id, &self.cluster_for(id));
        let others: Vec<Tags> = self
            .data_members()
            .filter(|m| m.id != id)
            .map(|m| m.tags)
            .collect();
        let ids: Vec<NodeId> = self
            .data_members()
            .filter(|m| m.id != id)
            .map(|m| m.id)
            .collect();
        let named = |i: usize| names_standby(&names, ids[i]);
        let plain = others
            .iter()
            .filter(|t| !t.nosync && !t.never_leads())
            .count();
        if plain >= k && (0..ids.len()).any(|i| others[i].nosync && named(i)) {
            self.summary.nosync_named += 1;
        }
        let leading = others.iter().filter(|t| !t.never_leads()).count();
        if leading >= k && (0..ids.len()).any(|i| others[i].never_leads() && named(i)) {
            self.summary.nofailover_named += 1;
        }
        let off = self.member(id).synchronous == Synchronous::Off;
        if let Some(d) = self.member_mut(id).pg.as_mut() {
            d.names = names;
            d.decided = true;
            d.names_off = off;
        }
    }

    /// Never two writable primaries at once.
    fn check_one_primary(&self) -> Result<(), String> {
        let primaries: Vec<NodeId> = self
            .data_members()
            .filter(|m| m.pg.as_ref().is_some_and(|d| d.primary()))
            .map(|m| m.id)
            .collect();
        match primaries.len() {
            0 | 1 => Ok(()),
            _ => Err(format!("two writable primaries at once: {primaries:?}")),
        }
    }

    /// Every acknowledged commit (not weak, not destroyed, not lost by a promotion under
    /// `off`) is on `id`'s server.
    pub fn check_holds_acknowledged(&self, id: NodeId) -> Result<(), String> {
        let Some(data) = &self.member(id).pg else {
            return Ok(());
        };
        match self
            .acked
            .iter()
            .find(|a| !a.weak && !a.destroyed && !a.accepted && !data.wal.holds(a.pos, a.id))
        {
            None => Ok(()),
            Some(a) => Err(format!(
                "acknowledged commit #{} (position {}) is not on {id}, promoted \
                 (its WAL has {} commits, timeline {}, branch {}, last #{:?})",
                a.id,
                a.pos,
                data.wal.len(),
                data.wal.timeline(),
                data.branch_of(data.wal.timeline()),
                data.wal.commits.last()
            )),
        }
    }

    /// Every data member's server, memory and last wait, for a progress violation.
    fn states(&self) -> String {
        let states: Vec<String> = self
            .data_members()
            .map(|m| {
                let server = m.pg.as_ref().map(|d| {
                    let timeline = d.wal.timeline();
                    (
                        d.state,
                        d.system_id,
                        timeline,
                        d.branch_of(timeline),
                        d.wal.len(),
                    )
                });
                format!(
                    "{}: server {server:?}, {:?}, eligible {}, waits {:?}",
                    m.id,
                    m.engine.memory(),
                    m.eligible,
                    m.last_wait
                )
            })
            .collect();
        states.join("; ")
    }

    /// Whether `m` stays out as the decisions allow: rewinding failed (or is off) and
    /// cloning afresh is not allowed.
    fn legitimately_out(&self, m: &Member) -> bool {
        let memory = m.engine.memory();
        let was_primary = matches!(
            m.pg.as_ref().map(|d| d.state),
            Some(State::Stopped {
                was_primary: true,
                ..
            })
        );
        left_for_operator(was_primary, memory, &self.rules_of(m.id))
    }

    /// Settled: a ready leader with a primary (in a standby cluster, its standby leader
    /// streaming from the remote), every other data member streaming from it (or out
    /// as allowed).
    fn settled(&self) -> Result<(), String> {
        let Some(h) = self.office else {
            return Err("no one holds the office".into());
        };
        if self.now < h.leading_from {
            return Err(format!("{} is elected, not ready", h.leader));
        }
        let Some(primary) = (self.member(h.leader).pg.as_ref()).filter(|d| self.serves_settled(d))
        else {
            return Err(match self.standby_cluster_set() {
                true => format!(
                    "the leader {}'s server does not stream from the remote primary",
                    h.leader
                ),
                false => format!("the leader {}'s server is not a primary", h.leader),
            });
        };
        for m in self.data_members().filter(|m| m.id != h.leader) {
            if self.legitimately_out(m) {
                continue;
            }
            let ok = m.pg.as_ref().is_some_and(|d| {
                d.state
                    == State::Standby {
                        upstream: Some(h.leader),
                        streaming: true,
                    }
                    && d.wal.follows(&primary.wal)
            });
            if !ok {
                return Err(format!(
                    "{} does not stream from {} (server {:?}, memory {:?}, last wait {:?})",
                    m.id,
                    h.leader,
                    m.pg.as_ref().map(|d| d.state),
                    m.engine.memory(),
                    m.last_wait
                ));
            }
        }
        Ok(())
    }
}

/// Whether the manager sees its server running as a primary.
fn server_is_primary(server: &Server) -> bool {
    matches!(server, Server::Running(r) if !r.in_recovery)
}
