//! The host's processes as `postmaster.pid` names them (issue 49, "a fence that cannot
//! hit a stranger"): each running server's postmaster has a PID and a pid file in its
//! data dir; a crash leaves the file behind, and the PID may be reused at once by
//! another program, or by a postgres of another data dir. What the manager's look and
//! the keeper's fence make of a file is decided by the runtime's own check
//! (`crate::postmaster::judge`: /proc's cwd, exe and start time against the file), so
//! the simulator fails a run whose fence would signal a process that is not the
//! member's postmaster, and (with the sabotage that trusts the file) one whose manager
//! hangs on a stranger taken for its server.

use crate::postmaster::{judge, PidFile, Seen};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The chance a crashed postmaster's PID is taken by another process at once, in
/// percent.
const REUSE_PERCENT: u32 = 30;

/// The live processes by PID, and the draws of PID reuse.
#[derive(Debug)]
pub(super) struct Processes {
    rng: SmallRng,
    next_pid: i32,
    live: BTreeMap<i32, Seen>,
    /// Whether PIDs are reused (`Spec::strangers`).
    reuse: bool,
}

/// What a pid file leads to, as the runtime's check judges it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Claim {
    /// No file, or the PID it names is gone.
    Nothing,
    /// The postmaster of this data dir.
    Ours(i32),
    /// A live process that is not this data dir's postmaster (why).
    Stranger(i32, String),
}

/// The data dir of member `id`'s server (a path only the checks compare).
pub(super) fn data_dir(id: u64) -> PathBuf {
    PathBuf::from(format!("/sim/node{id}/pgdata"))
}

impl Processes {
    pub fn new(seed: u64, reuse: bool) -> Processes {
        Processes {
            rng: SmallRng::seed_from_u64(seed ^ 0x5049_445f_5245_5553),
            next_pid: 1000,
            live: BTreeMap::new(),
            reuse,
        }
    }

    /// A postmaster starts for member `id` at step `now`: its PID and the pid file it
    /// writes.
    pub fn start_postmaster(&mut self, id: u64, now: u64) -> PidFile {
        self.next_pid += 1;
        let pid = self.next_pid;
        let started = now as i64;
        self.live.insert(
            pid,
            Seen {
                cwd: data_dir(id),
                exe: PathBuf::from("/usr/lib/postgresql/15/bin/postgres"),
                started_ms: started * 1000,
            },
        );
        PidFile {
            pid,
            data_dir: data_dir(id),
            started,
        }
    }

    /// The postmaster `pid` is gone. After a crash (`clean` false) its PID may be
    /// taken at once by another program or by a postgres of another data dir; returns
    /// what took it.
    pub fn exit(&mut self, pid: i32, clean: bool, now: u64) -> Option<String> {
        self.live.remove(&pid);
        if clean || !self.reuse || !self.rng.gen_ratio(REUSE_PERCENT, 100) {
            return None;
        }
        let (cwd, exe) = match self.rng.gen_bool(0.5) {
            true => ("/", "/usr/bin/stress-ng"),
            false => ("/srv/other/pgdata", "/usr/lib/postgresql/15/bin/postgres"),
        };
        self.live.insert(
            pid,
            Seen {
                cwd: PathBuf::from(cwd),
                exe: PathBuf::from(exe),
                started_ms: now as i64 * 1000 + 500,
            },
        );
        Some(format!("PID {pid} reused by {exe} in {cwd}"))
    }

    /// What member `id`'s pid file leads to; `trusting` is the sabotage that takes
    /// any live process the file names for the postmaster.
    pub fn claim(&self, file: Option<&PidFile>, id: u64, trusting: bool) -> Claim {
        let Some(file) = file else {
            return Claim::Nothing;
        };
        let Some(seen) = self.live.get(&file.pid) else {
            return Claim::Nothing;
        };
        if trusting {
            return Claim::Ours(file.pid);
        }
        match judge(file, seen, &data_dir(id)) {
            Ok(()) => Claim::Ours(file.pid),
            Err(why) => Claim::Stranger(file.pid, format!("{why:?}")),
        }
    }

    /// Whether `pid` is the live postmaster of member `id`'s data dir (the checker's
    /// truth, whatever a check decided).
    pub fn is_postmaster_of(&self, pid: i32, id: u64) -> bool {
        self.live.get(&pid).is_some_and(|seen| {
            seen.cwd == data_dir(id) && crate::postmaster::is_postgres(&seen.exe)
        })
    }
}
