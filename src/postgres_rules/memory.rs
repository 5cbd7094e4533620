//! What the PostgreSQL manager remembers of its acts between looks. The engine
//! (src/postgres_rules/engine.rs) keeps it: it notes what each look saw
//! ([`Memory::on_look`]) and how each act ended ([`Memory::on_done`]), as the runtime's
//! executor and the simulator tell it; neither touches a field itself.

use super::REWIND_ATTEMPTS;
use super::{Copier, Office, Position, Rules, Server, StopReason, SyncRecord, WalRemoved};

/// What the manager remembers between looks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Memory {
    /// This server must be rewound before it follows (it was primary, or could not
    /// follow its upstream).
    pub needs_rewind: bool,
    /// Rewinds tried and failed since the last success. For a standby stopped because
    /// it could not follow ([`StopReason::CannotFollow`]) a rewind that exits 0 counts
    /// too, until the server is seen streaming: pg_rewind says "no rewind required" for
    /// a standby whose upstream removed the WAL it needs, and a count reset by that
    /// looped for ever without reaching the clone (issue 49).
    pub rewind_failures: u32,
    /// A rewind failed every attempt and cloning afresh is not allowed: stay out.
    pub out: Option<String>,
    /// Looks in a row a standby with the right upstream neither streamed nor replayed:
    /// one whose WAL moves (a backlog in its own `pg_wal`, a gap fetched from the
    /// archive by `restore_command`, which may take hours after an old backup) is not
    /// stuck.
    pub not_streaming: u32,
    /// Where the running server's WAL ended at the last look.
    pub last_wal: Option<Position>,
    /// Starts in a row after which the server was not seen running (a data dir it
    /// cannot start from, e.g. a rewind from a source not yet checkpointed).
    pub failed_starts: u32,
    /// The last synchronous record this node wrote, if a majority stored it. A write
    /// that did not reach a majority may still surface later as the newest record (a
    /// minority kept it), so after one nothing relies on an older record: `None`.
    pub committed: Option<SyncRecord>,
    /// The office token and number of the last record written (stored by a majority
    /// or not): the next one of the office takes the next number, so no two records
    /// share one.
    pub sync_written: (u64, u64),
    /// The office in which the operator accepted losing commits to promote
    /// (`bully pg failover --accept-loss`).
    pub accept_loss: Option<u64>,
    /// On a primary: its `synchronous_standby_names` as first seen set, and where its
    /// WAL ended then. A record that lets the majority rule count again waits until
    /// `k` named standbys flushed past that point.
    pub names_from: Option<(String, u64)>,
    /// It was stopped because it could not follow its upstream: its rewinds count as
    /// failed until it streams ([`Memory::rewind_failures`]).
    pub could_not_follow: bool,
    /// What the last look learnt from the upstream of a standby that does not stream:
    /// the WAL it needs next is no longer there ([`WalRemoved`]); `None`: it is, or it
    /// could not be asked. The executor sets it every look.
    pub wal_removed: Option<WalRemoved>,
    /// Looks in a row at which the server ran but did not answer (a disk or CPU stall,
    /// a slow checkpoint): [`Memory::verdict`] holds the last verdict through the first
    /// [`UNANSWERED_LOOKS`]` - 1` of them.
    pub unanswered: u32,
    /// The health verdict the last look sent (`None` before the first).
    pub sent_verdict: Option<bool>,
    /// Clones failed in a row, when the next may start (the engine's clock) and why
    /// the last failed (src/postgres_rules/copy_backoff.rs); `None` since the last
    /// one that worked.
    pub copy_failed: Option<(u32, u64, String)>,
    /// The replica method failed: copies go by `pg_basebackup` until one works
    /// (src/postgres_rules/replica_method.rs).
    pub method_spent: bool,
}

/// Looks in a row a running server may miss before its node is ineligible: a stall
/// shorter than that (on real hosts two SQL timeouts and a pause: over 1 s, more than
/// D at the default timing) costs the coordinator no office, so a busy database host
/// sees no failover storm (issue 49).
pub const UNANSWERED_LOOKS: u32 = 2;

impl Memory {
    /// What a look saw of the server, noted before the decision (by the manager and the
    /// simulator alike): a primary's names as they first appear, with where its WAL
    /// ended then.
    pub fn observe(&mut self, server: &Server) {
        match server {
            Server::Running(r) if !r.in_recovery => {
                let same = matches!(&self.names_from,
                    Some((names, _)) if *names == r.synchronous_standby_names);
                if !same {
                    self.names_from = Some((r.synchronous_standby_names.clone(), r.wal.lsn));
                }
            }
            Server::Running(_) | Server::Absent | Server::Stopped { .. } => self.names_from = None,
            Server::Unreachable => {}
        }
    }

    /// What a look saw, noted before `decide`: the server's state (a stopped former
    /// primary must be rewound; a running one started), whether a standby of the
    /// coordinator's server streams (looks in a row it did not; streaming proves a
    /// rejoin worked), and whether its upstream removed the WAL it needs.
    pub fn on_look(&mut self, office: &Office, server: &Server, removed: Option<WalRemoved>) {
        self.observe(server);
        self.unanswered = match server {
            Server::Unreachable => self.unanswered.saturating_add(1),
            _ => 0,
        };
        match server {
            Server::Stopped {
                was_primary: true, ..
            } => self.needs_rewind = true,
            Server::Running(_) => self.failed_starts = 0,
            _ => {}
        }
        let wal = match server {
            Server::Running(r) => Some(r.wal),
            _ => None,
        };
        let moved = wal.is_some() && self.last_wal.is_some() && wal != self.last_wal;
        self.last_wal = wal;
        match on_time(office, server) {
            Some(false) if moved => self.not_streaming = 0,
            Some(false) => self.not_streaming = self.not_streaming.saturating_add(1),
            Some(true) => {
                self.not_streaming = 0;
                self.rewind_failures = 0;
                self.could_not_follow = false;
            }
            None => self.not_streaming = 0,
        }
        self.wal_removed = removed;
    }

    /// The health verdict this look sends, given the one its decision reached: a server
    /// that missed fewer than [`UNANSWERED_LOOKS`] looks in a row keeps the verdict it
    /// had; one that stays silent gets the decision's (ineligible). Noted for the next
    /// look, as the executor and the simulator both send it.
    pub fn verdict(&mut self, decided: bool) -> bool {
        let verdict = match (self.unanswered, self.sent_verdict) {
            (n, Some(held)) if (1..UNANSWERED_LOOKS).contains(&n) => held,
            _ => decided,
        };
        self.sent_verdict = Some(verdict);
        verdict
    }

    /// The operator's `bully pg failover --accept-loss`, heard while leading under
    /// `token`: that office may promote over commits the newest record vouches for. A
    /// later office does not inherit it.
    pub fn accept_loss_in(&mut self, token: u64) {
        self.accept_loss = Some(token);
    }

    /// How an act the executor ran ended.
    pub fn on_done(&mut self, done: Done, rules: &Rules) {
        match done {
            Done::Starting => self.failed_starts = self.failed_starts.saturating_add(1),
            Done::Stopped(why) => {
                // Every reason to stop ends in a rewind before the server follows.
                self.needs_rewind = true;
                self.not_streaming = 0;
                self.could_not_follow |= why == StopReason::CannotFollow;
            }
            Done::Copied { by } => {
                self.copy_failed = None;
                // A repository that was down is tried again after a copy that worked.
                if by == Copier::BaseBackup {
                    self.method_spent = false;
                }
                self.rejoined();
                self.rewind_failures = 0;
                self.could_not_follow = false;
            }
            Done::Rewound => {
                self.rejoined();
                // For a standby that could not follow, exiting 0 proves nothing ("no
                // rewind required" when its upstream removed the WAL it needs): the
                // attempt counts until it streams.
                match self.could_not_follow {
                    true => self.rewind_failures += 1,
                    false => self.rewind_failures = 0,
                }
            }
            Done::RewindFailed(why) => {
                self.rewind_failures += 1;
                if self.rewind_failures >= REWIND_ATTEMPTS && !rules.reinit_on_failed_rewind {
                    self.out = Some(format!(
                        "pg_rewind failed {} times: {why}",
                        self.rewind_failures
                    ));
                }
            }
            // The method failing is no reason to wait: `pg_basebackup` goes next.
            Done::CopyFailed {
                by: Copier::Method { .. },
                ..
            } => self.method_spent = true,
            Done::CopyFailed { why, at_ms, .. } => {
                let failures = self.copy_failed.as_ref().map_or(0, |f| f.0) + 1;
                let next = at_ms + super::copy_backoff::retry_after_ms(failures);
                self.copy_failed = Some((failures, next, why));
            }
            Done::Promoted => self.rejoined(),
            Done::SyncWritten {
                record,
                kept_by_majority,
            } => {
                self.sync_written = (record.token, record.seq);
                // A write no majority kept may still surface later as the newest record
                // (a minority kept it): nothing relies on an older one after it.
                self.committed = kept_by_majority.then_some(record);
            }
        }
    }

    /// The server holds data it may follow with (or lead from) as it is: no rewind due.
    fn rejoined(&mut self) {
        self.needs_rewind = false;
        self.failed_starts = 0;
        self.not_streaming = 0;
    }
}

/// How an act ended, as the memory needs it: typed, so no bookkeeping reads words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Done {
    /// A start was asked for (it counts until the server is seen running).
    Starting,
    /// The server was stopped, for this reason.
    Stopped(StopReason),
    /// A clone (or a reinit) made `by` replaced the data dir.
    Copied { by: Copier },
    /// A clone (or a reinit) made `by` failed, saying this, at the engine's clock
    /// reading (ms): after `pg_basebackup` the next waits
    /// (src/postgres_rules/copy_backoff.rs); after the method, `pg_basebackup` goes.
    CopyFailed { why: String, at_ms: u64, by: Copier },
    /// `pg_rewind` exited 0.
    Rewound,
    /// `pg_rewind` failed, saying this.
    RewindFailed(String),
    /// The server was promoted.
    Promoted,
    /// A synchronous record was written to the voters; a majority kept it or not.
    SyncWritten {
        record: SyncRecord,
        kept_by_majority: bool,
    },
}

/// For a standby of the coordinator's server: whether it streams from it (the proof a
/// rewind or a clone worked); `None` for any other server or office.
pub fn on_time(office: &Office, server: &Server) -> Option<bool> {
    match (office, server) {
        (
            Office::Following {
                server: Some(up), ..
            },
            Server::Running(r),
        ) if r.in_recovery && r.upstream == Some(*up) => Some(r.streaming),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Position, Running};
    use super::*;

    fn rules(reinit: bool) -> Rules {
        Rules {
            reinit_on_failed_rewind: reinit,
            ..Rules::for_test()
        }
    }

    /// A standby of member 1, the coordinator.
    const FOLLOWING: Office = Office::Following {
        leader: 1,
        server: Some(1),
    };

    /// A running standby of member 1 at position 5 on branch 1.
    fn standby(streaming: bool) -> Server {
        Server::Running(Running {
            in_recovery: true,
            timeline: 1,
            wal: Position { branch: 1, lsn: 5 },
            upstream: Some(1),
            streaming,
            synchronous_standby_names: String::new(),
        })
    }

    /// The old loop (issue 49): a standby past its upstream's WAL retention is stopped,
    /// rewound ("no rewind required", exit 0) and started for ever. Its rewinds count
    /// until it streams, so the bound is reached and it is cloned (or left out).
    #[test]
    fn a_rewind_that_exits_0_counts_until_the_standby_streams() {
        let mut m = Memory::default();
        for attempt in 1..=REWIND_ATTEMPTS {
            m.on_look(&FOLLOWING, &standby(false), None);
            m.on_done(Done::Stopped(StopReason::CannotFollow), &rules(false));
            assert!(m.needs_rewind);
            m.on_done(Done::Rewound, &rules(false));
            assert_eq!(m.rewind_failures, attempt, "counted");
            assert!(!m.needs_rewind);
        }
        m.on_look(&FOLLOWING, &standby(true), None);
        assert_eq!((m.rewind_failures, m.could_not_follow), (0, false));
    }

    /// Failed rewinds leave the member out once every attempt failed without reinit,
    /// and never with it (the decisions clone it then).
    #[test]
    fn failed_rewinds_leave_the_member_out_only_without_reinit() {
        for reinit in [false, true] {
            let mut m = Memory::default();
            for _ in 0..REWIND_ATTEMPTS {
                m.on_done(Done::RewindFailed("refused".into()), &rules(reinit));
            }
            assert_eq!(m.out.is_some(), !reinit, "reinit {reinit}");
            m.on_done(
                Done::Copied {
                    by: Copier::BaseBackup,
                },
                &rules(reinit),
            );
            assert_eq!(m.rewind_failures, 0);
        }
    }

    /// Looks in a row a standby of the coordinator's server did not stream are counted;
    /// any other office or server resets the count.
    #[test]
    fn looks_without_streaming_are_counted_in_a_row() {
        let mut m = Memory::default();
        m.on_look(&FOLLOWING, &standby(false), None);
        m.on_look(&FOLLOWING, &standby(false), None);
        assert_eq!(m.not_streaming, 2);
        m.on_look(&Office::Nobody, &standby(false), None);
        assert_eq!(m.not_streaming, 0);
    }

    /// A standby that does not stream but whose WAL moves (replaying from the archive)
    /// is not stuck: its count starts over at each look that moved.
    #[test]
    fn a_standby_replaying_without_streaming_is_not_stuck() {
        let mut m = Memory::default();
        let at = |lsn: u64| match standby(false) {
            Server::Running(r) => Server::Running(super::super::Running {
                wal: Position { branch: 1, lsn },
                ..r
            }),
            other => other,
        };
        m.on_look(&FOLLOWING, &at(5), None);
        m.on_look(&FOLLOWING, &at(5), None);
        assert_eq!(m.not_streaming, 2);
        m.on_look(&FOLLOWING, &at(9), None);
        assert_eq!(m.not_streaming, 0, "it replayed");
        m.on_look(&FOLLOWING, &at(9), None);
        assert_eq!(m.not_streaming, 1);
    }
}

#[test]
fn a_silent_server_keeps_the_verdict_for_fewer_looks_than_the_grace() {
    let mut memory = Memory::default();
    let office = Office::Nobody;
    assert!(
        memory.verdict(true),
        "an answered look's verdict is the decision's"
    );
    memory.on_look(&office, &Server::Unreachable, None);
    assert!(
        memory.verdict(false),
        "the first silent look keeps the eligible verdict"
    );
    for _ in 1..UNANSWERED_LOOKS {
        memory.on_look(&office, &Server::Unreachable, None);
    }
    assert!(
        !memory.verdict(false),
        "a server silent for the grace: ineligible"
    );
    memory.on_look(&office, &Server::Absent, None);
    assert_eq!(memory.unanswered, 0, "an answer ends the streak");
    assert!(memory.verdict(true));
    let mut fresh = Memory::default();
    fresh.on_look(&office, &Server::Unreachable, None);
    assert!(
        !fresh.verdict(false),
        "no verdict to keep before the first one"
    );
}
