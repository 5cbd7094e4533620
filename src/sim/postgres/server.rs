//! A modelled PostgreSQL server: its WAL as a list of commit ids with the timeline
//! forks, whether it runs and as what, what its control file says when stopped, and
//! bully's branch records in its data directory (`bully.branch`).
//! Commit ids are unique and a WAL only ever grows by copying a prefix of another or
//! appending new ids, so two WALs holding the same id at a position share everything
//! before it: comparing one entry compares the prefixes.

use super::decisions::{lineage_branch, Position, Running, Server as Seen};
use crate::protocol::NodeId;
use std::collections::BTreeMap;

/// Bytes of WAL one commit takes: one commit is one step of [`rank`]'s 16-byte steps,
/// so the estimate elections compare tells every commit apart.
///
/// [`rank`]: super::decisions::rank
pub(super) const COMMIT_BYTES: u64 = 16;

/// A server's WAL: commit ids by position and the timelines it switched to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Wal {
    pub commits: Vec<u64>,
    /// (timeline, position it starts at); the first is (1, 0).
    pub forks: Vec<(u32, usize)>,
}

impl Wal {
    fn new() -> Wal {
        Wal {
            commits: Vec::new(),
            forks: vec![(1, 0)],
        }
    }

    pub fn len(&self) -> usize {
        self.commits.len()
    }

    pub fn timeline(&self) -> u32 {
        self.forks.last().map_or(1, |f| f.0)
    }

    /// Where the WAL ends, in bytes.
    pub fn lsn(&self) -> u64 {
        self.len() as u64 * COMMIT_BYTES
    }

    /// The timeline PostgreSQL picks at the next promotion: one past the newest it
    /// knows (src/node/postgres/files.rs, `next_timeline`).
    pub fn next_timeline(&self) -> u32 {
        self.forks.iter().map(|f| f.0).max().unwrap_or(1) + 1
    }

    /// Whether commit `id` is at `pos`.
    pub fn holds(&self, pos: usize, id: u64) -> bool {
        self.commits.get(pos) == Some(&id)
    }

    /// Whether a standby with this WAL can stream from `upstream`: it is a prefix of the
    /// upstream's, on one of its timelines (a standby on another branch cannot).
    pub fn follows(&self, upstream: &Wal) -> bool {
        let n = self.len();
        n <= upstream.len()
            && (n == 0 || upstream.commits[n - 1] == self.commits[n - 1])
            && upstream.forks.starts_with(&self.forks)
    }

    /// Its first `n` commits, with the timelines it had switched to by then (what an
    /// archive holds of it: src/sim/postgres/archive.rs).
    pub fn upto(&self, n: usize) -> Wal {
        let mut wal = Wal::new();
        wal.receive(&self.commits[..n.min(self.len())], &self.forks);
        wal
    }

    /// Appends what it streamed (`commits`, the next of an upstream [`Wal::follows`]
    /// allowed) and takes the upstream's timelines up to where it now is.
    pub fn receive(&mut self, commits: &[u64], upstream_forks: &[(u32, usize)]) {
        self.commits.extend_from_slice(commits);
        let len = self.len();
        self.forks = upstream_forks
            .iter()
            .copied()
            .filter(|&(_, at)| at <= len)
            .collect();
    }

    /// A promotion: a new timeline from here, the one [`Wal::next_timeline`] names
    /// (as PostgreSQL picks it).
    pub fn fork(&mut self) {
        let (next, at) = (self.next_timeline(), self.len());
        self.forks.push((next, at));
    }
}

/// What a standby receives at once: commits, and the timelines of the WAL they came
/// from (for [`Wal::receive`]).
pub(super) type Chunk = (Vec<u64>, Vec<(u32, usize)>);

/// How the runtime reads a server's branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reading {
    /// The record for the newest timeline of its history that has one (its current
    /// timeline's first: `postgres_rules::lineage_branch`).
    Lineage,
    /// The sabotage `UnknownBranchReadsZero`: the record for its current timeline (0
    /// without one).
    CurrentRecordOnly,
    /// The sabotage `TimelineNumbersOnly`: the timeline number.
    TimelineNumbers,
}

/// Whether and how the server runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    /// Not running; the control file's story.
    Stopped { was_primary: bool, clean: bool },
    /// A standby (recovery) of `upstream`.
    Standby {
        upstream: Option<NodeId>,
        streaming: bool,
    },
    /// A primary: it accepts commits.
    Primary,
}

/// A slot in a modelled data directory: where it holds WAL from (`None`: it holds
/// none) and whether `max_slot_wal_keep_size` let that go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct SlotState {
    pub restart: Option<usize>,
    pub lost: bool,
}

/// The slots of a data directory by name (`pg_replslot`: neither a clone nor a rewind
/// copies them).
pub(super) type Slots = BTreeMap<String, SlotState>;

/// A data directory (its absence is the `Absent` server).
#[derive(Debug, Clone)]
pub(super) struct Data {
    pub wal: Wal,
    pub state: State,
    /// `synchronous_standby_names` as last set (kept in the data directory, so a clone
    /// or a rewind copies the source's).
    pub names: String,
    /// The decisions set the names on this data directory since it was last copied
    /// (false: the names are inherited; the sabotage `KMinusOne` applies one less k
    /// to names the decisions set).
    pub decided: bool,
    /// The names were written while the node held `off` (src/sim/postgres/setting.rs):
    /// the commits they acknowledge are not promised. Copied with the names.
    pub names_off: bool,
    /// Commits this primary wrote and has not acknowledged yet: (position, id).
    pub pending: Vec<(usize, u64)>,
    /// `bully.branch`: (timeline, term) lines in the order written; the last line for
    /// a timeline wins. A file in the data directory: a clone or a rewind copies the
    /// source's, a wipe loses it.
    pub branches: Vec<(u32, u64)>,
    /// `bully.branch.<timeline>.<term>`: the records coordinators wrote into this data
    /// directory before promoting (src/node/postgres/files.rs, `written_name`); copied
    /// and lost with the directory as `branches`.
    pub written: Vec<(u32, u64)>,
    /// PostgreSQL's system identifier, drawn at `initdb` and copied by clones.
    pub system_id: u64,
    /// Positions below this one were recycled: a standby that needs one cannot stream
    /// from this server (src/sim/postgres/retention.rs).
    pub kept_from: usize,
    /// Its replication slots (`pg_replslot`, not copied by a clone or a rewind).
    pub slots: Slots,
    /// The replica method restored it and its standby has not streamed since
    /// (src/sim/postgres/restored.rs); a copy of it is no such copy.
    pub method_copy: Option<MethodCopy>,
}

/// What the checks know of a data dir the replica method restored, until its standby
/// streams (src/sim/postgres/restored.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct MethodCopy {
    /// The manager process that restored it (`Member::managers`): only its memory knows
    /// the data dir for a method copy.
    pub by_manager: u64,
    /// That manager was told the WAL it needs is gone from its upstream, and no archive
    /// carried its replay past the gap (`WalRemoved::settled`): it fell short.
    pub fell_short: bool,
}

impl Data {
    /// What `initdb` leaves: an empty WAL on timeline 1, shut down cleanly, no branch
    /// recorded.
    pub fn initdb(system_id: u64) -> Data {
        Data {
            system_id,
            wal: Wal::new(),
            state: State::Stopped {
                was_primary: false,
                clean: true,
            },
            names: String::new(),
            decided: false,
            names_off: false,
            pending: Vec::new(),
            branches: Vec::new(),
            written: Vec::new(),
            kept_from: 0,
            slots: Default::default(),
            method_copy: None,
        }
    }

    /// A copy of a source's data directory (`pg_basebackup`, or `pg_rewind`, which
    /// cuts to the common prefix and copies the rest, `bully.branch` included): its
    /// WAL, settings and branch records, stopped cleanly as a standby.
    pub fn copy_of(source: &Data) -> Data {
        Data {
            wal: source.wal.clone(),
            names: source.names.clone(),
            names_off: source.names_off,
            branches: source.branches.clone(),
            written: source.written.clone(),
            kept_from: source.kept_from,
            ..Data::initdb(source.system_id)
        }
    }

    /// The term recorded for `timeline`: the highest of `bully.branch`'s last record for
    /// it and the records coordinators wrote; 0 when none is (src/node/postgres/files.rs,
    /// `branch_of`).
    pub fn branch_of(&self, timeline: u32) -> u64 {
        let own = self
            .branches
            .iter()
            .rev()
            .find(|&&(tl, _)| tl == timeline)
            .map_or(0, |&(_, term)| term);
        self.written
            .iter()
            .filter(|&&(tl, _)| tl == timeline)
            .map(|&(_, term)| term)
            .fold(own, u64::max)
    }

    /// A coordinator about to promote wrote `term` for `timeline` here (`write_branch`).
    pub fn write_branch(&mut self, timeline: u32, term: u64) {
        self.written.push((timeline, term));
    }

    /// Records that `timeline` began in the office of `term` (`record_branch`): the
    /// claims written for it are superseded.
    pub fn record_branch(&mut self, timeline: u32, term: u64) {
        self.branches.push((timeline, term));
        self.written.retain(|&(tl, _)| tl != timeline);
    }

    /// Where the WAL ends as the runtime reads it locally ([`Reading`]).
    pub fn position(&self, reading: Reading) -> Position {
        let timeline = self.wal.timeline();
        Position {
            branch: match reading {
                Reading::TimelineNumbers => u64::from(timeline),
                Reading::CurrentRecordOnly => self.branch_of(timeline),
                Reading::Lineage => {
                    lineage_branch(self.wal.forks.iter().rev().map(|&(tl, _)| tl), |tl| {
                        self.branch_of(tl)
                    })
                }
            },
            lsn: self.wal.lsn(),
        }
    }

    pub fn running(&self) -> bool {
        !matches!(self.state, State::Stopped { .. })
    }

    pub fn primary(&self) -> bool {
        self.state == State::Primary
    }

    /// Stops the server: cleanly (a fast shutdown) or by a crash. Unacknowledged
    /// commits are never acknowledged now.
    pub fn stop(&mut self, clean: bool) {
        if self.running() {
            self.state = State::Stopped {
                was_primary: self.primary(),
                clean,
            };
        }
        self.pending.clear();
    }

    /// The server as the manager finds it (`reading`: see [`Data::position`]).
    pub fn seen(&self, reading: Reading) -> Seen {
        match self.state {
            State::Stopped { was_primary, clean } => Seen::Stopped { was_primary, clean },
            State::Standby {
                upstream,
                streaming,
            } => Seen::Running(Running {
                in_recovery: true,
                timeline: self.wal.timeline(),
                wal: self.position(reading),
                upstream,
                streaming,
                synchronous_standby_names: self.names.clone(),
            }),
            State::Primary => Seen::Running(Running {
                in_recovery: false,
                timeline: self.wal.timeline(),
                wal: self.position(reading),
                upstream: None,
                streaming: false,
                synchronous_standby_names: self.names.clone(),
            }),
        }
    }
}

/// `ANY k (bully_1, ...)` read back: k and the members named (empty: k = 0).
pub(super) fn parse_names(names: &str) -> (usize, Vec<NodeId>) {
    let Some(rest) = names.trim().strip_prefix("ANY ") else {
        return (0, Vec::new());
    };
    let Some((k, list)) = rest.split_once(' ') else {
        return (0, Vec::new());
    };
    let k = k.parse().unwrap_or(0);
    let members = list
        .trim_matches(|c| c == '(' || c == ')')
        .split(',')
        .filter_map(|name| name.trim().strip_prefix("bully_")?.parse().ok())
        .collect();
    (k, members)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_back_as_written() {
        assert_eq!(parse_names(""), (0, vec![]));
        assert_eq!(
            parse_names("ANY 2 (bully_1, bully_3, bully_4)"),
            (2, vec![1, 3, 4])
        );
    }

    #[test]
    fn a_standby_on_another_branch_cannot_stream() {
        let mut primary = Wal::new();
        primary.commits = vec![1, 2, 3];
        let mut standby = primary.clone();
        standby.commits.truncate(2);
        assert!(standby.follows(&primary));
        let mut promoted = standby.clone();
        promoted.fork();
        promoted.commits.push(4);
        assert!(!primary.follows(&promoted), "3 is not on the new timeline");
        assert!(standby.follows(&promoted));
        standby.receive(&promoted.commits[2..3], &promoted.forks);
        assert_eq!(standby.timeline(), 2);
    }

    #[test]
    fn the_highest_of_the_last_record_and_the_written_ones_wins_and_copies_carry_them() {
        let mut data = Data::initdb(1);
        assert_eq!(data.position(Reading::Lineage), Position::default());
        data.record_branch(2, 5);
        data.record_branch(3, 6);
        data.record_branch(2, 7);
        assert_eq!(data.branch_of(2), 7);
        assert_eq!(data.branch_of(3), 6);
        assert_eq!(data.branch_of(1), 0, "initdb's timeline has no record");
        data.write_branch(3, 4);
        assert_eq!(data.branch_of(3), 6, "the highest record counts");
        data.write_branch(3, 9);
        assert_eq!(data.branch_of(3), 9, "a coordinator's record counts too");
        data.record_branch(3, 6);
        assert_eq!(data.branch_of(3), 6, "a record supersedes the claims");
        data.wal.fork();
        data.wal.commits.push(1);
        assert_eq!(data.wal.timeline(), 2);
        assert_eq!(
            data.position(Reading::Lineage),
            Position {
                branch: 7,
                lsn: COMMIT_BYTES
            }
        );
        assert_eq!(
            data.position(Reading::TimelineNumbers).branch,
            2,
            "the sabotage's old rank"
        );
        data.wal.fork();
        assert_eq!(data.wal.timeline(), 3);
        data.branches.clear();
        data.written.clear();
        data.record_branch(2, 7);
        assert_eq!(
            data.position(Reading::Lineage).branch,
            7,
            "an unrecorded timeline ranks as its newest recorded ancestor"
        );
        assert_eq!(
            data.position(Reading::CurrentRecordOnly).branch,
            0,
            "the sabotage's old reading"
        );
        let copy = Data::copy_of(&data);
        assert_eq!(copy.branches, data.branches);
        assert_eq!(copy.written, data.written);
        assert_eq!(
            copy.position(Reading::Lineage),
            data.position(Reading::Lineage)
        );
    }
}
