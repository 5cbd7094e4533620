//! Whether the process `postmaster.pid` names is a postmaster of this data dir. A file
//! left by a crash names a PID the kernel may have given to anything since (issue 49:
//! the manager took a stranger for its server, and the fence would have signalled it),
//! so the file's claim is checked against /proc: the process's working directory is the
//! data dir (a postmaster `chdir`s there), its program is `postgres`, and it started
//! when the file's line 3 says. A postmaster of another data dir, or its copied
//! `postmaster.pid`, fails the first check; a reused PID fails the second or the third.
//! A `postgres` in this data dir whose start alone disagrees is doubtful, not foreign:
//! it is what a wall clock stepped since the postmaster started looks like, so it is
//! neither signalled nor taken for stopped (a start or a clone beside a live server
//! would be worse), and the error says why.

use super::held::Held;
use super::pid_file::PidFile;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How far the start time /proc gives may be from the file's line 3: both are whole
/// seconds (the boot time in /proc/stat too), so they differ by up to a second or so.
/// A wall clock stepped by more than this since the postmaster started makes it
/// doubtful ([`Found::Doubtful`]).
pub const START_TOLERANCE: Duration = Duration::from_secs(2);

/// A running postmaster of a data dir, verified, and held (src/postmaster/held.rs):
/// signals sent through it reach that process or none.
#[derive(Debug)]
pub struct Postmaster {
    held: Held,
    /// The data dir, canonicalised.
    data_dir: PathBuf,
}

/// What `postmaster.pid` in a data dir leads to.
#[derive(Debug)]
pub enum Found {
    /// A postmaster of this data dir runs.
    Running(Postmaster),
    /// No `postmaster.pid` (or no data dir).
    NoFile,
    /// The file names a process that is gone (stale: a crash left it).
    Stale { pid: i32 },
    /// The file names a live process that is not a postmaster of this data dir: its
    /// PID was reused, or the file was copied from another data dir.
    Foreign { pid: i32, why: String },
    /// A `postgres` in this data dir whose start disagrees with the file: its own
    /// postmaster under a stepped clock, most likely. Not signalled, not stopped.
    Doubtful { pid: i32, why: String },
    /// The file or /proc could not be read, so nothing can be said.
    Unreadable(String),
}

impl Found {
    /// Says what was found, for logs and errors.
    pub fn describe(&self) -> String {
        match self {
            Found::Running(p) => format!("a postmaster of this data dir runs (PID {})", p.pid()),
            Found::NoFile => "no postmaster.pid".into(),
            Found::Stale { pid } => format!("postmaster.pid is stale: PID {pid} is gone"),
            Found::Foreign { pid, why } => format!(
                "postmaster.pid names PID {pid}, which is not a postmaster of this data dir: {why}"
            ),
            Found::Doubtful { pid, why } => format!(
                "postmaster.pid names PID {pid}, a postgres in this data dir, but {why} \
                 (was the wall clock stepped?): it is left alone; stop it by hand if it \
                 is this data dir's server"
            ),
            Found::Unreadable(why) => why.clone(),
        }
    }
}

/// What /proc shows of a process, as the check needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// `/proc/PID/cwd`.
    pub cwd: PathBuf,
    /// `/proc/PID/exe`.
    pub exe: PathBuf,
    /// Its start, in milliseconds since the Unix epoch (from its start in clock ticks
    /// since boot and the boot time).
    pub started_ms: i64,
}

/// Why a process is not the postmaster a `postmaster.pid` claims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mismatch {
    /// Another directory or program: a stranger.
    Stranger(String),
    /// A `postgres` in the data dir that started at another time than the file says.
    Start(String),
}

/// Why the process `seen` is not the postmaster `file` claims for `data_dir`
/// (canonicalised), or `Ok` when it is.
pub fn judge(file: &PidFile, seen: &Seen, data_dir: &Path) -> Result<(), Mismatch> {
    if seen.cwd != data_dir {
        return Err(Mismatch::Stranger(format!(
            "its working directory is {}, not {}",
            seen.cwd.display(),
            data_dir.display()
        )));
    }
    if !is_postgres(&seen.exe) {
        return Err(Mismatch::Stranger(format!(
            "it runs {}, not postgres",
            seen.exe.display()
        )));
    }
    let claimed_ms = file.started.saturating_mul(1000);
    let off = seen.started_ms.abs_diff(claimed_ms);
    if off > START_TOLERANCE.as_millis() as u64 {
        return Err(Mismatch::Start(format!(
            "it started {:.1} s away from the postmaster's start in the file",
            off as f64 / 1000.0
        )));
    }
    Ok(())
}

/// Whether `exe` (a `/proc/PID/exe` link) is PostgreSQL's server program, also once an
/// upgrade replaced the file under a running server (`… (deleted)`).
pub fn is_postgres(exe: &Path) -> bool {
    let text = exe.to_string_lossy();
    let path = text.strip_suffix(" (deleted)").unwrap_or(&text);
    Path::new(path).file_name().is_some_and(|n| n == "postgres")
}

/// What the `postmaster.pid` in `data_dir` leads to (see the module doc).
pub fn find(data_dir: &Path) -> Found {
    let data_dir = match std::fs::canonicalize(data_dir) {
        Ok(dir) => dir,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Found::NoFile,
        Err(e) => return Found::Unreadable(format!("cannot resolve {}: {e}", data_dir.display())),
    };
    let file = match PidFile::read(&data_dir) {
        Ok(Some(file)) => file,
        Ok(None) => return Found::NoFile,
        Err(why) => return Found::Unreadable(why),
    };
    let pid = file.pid;
    let held = match Held::open(pid) {
        Ok(Some(held)) => held,
        Ok(None) => return Found::Stale { pid },
        Err(why) => return Found::Unreadable(why),
    };
    let postmaster = Postmaster { held, data_dir };
    if trusts_the_file() {
        return Found::Running(postmaster);
    }
    match postmaster.seen() {
        Ok(Some(seen)) => match judge(&file, &seen, &postmaster.data_dir) {
            Ok(()) => Found::Running(postmaster),
            Err(Mismatch::Stranger(why)) => Found::Foreign { pid, why },
            Err(Mismatch::Start(why)) => Found::Doubtful { pid, why },
        },
        Ok(None) if !postmaster.held.alive() => Found::Stale { pid },
        Ok(None) => Found::Foreign {
            pid,
            why: "it has no working directory or program to read (a kernel thread)".into(),
        },
        Err(why) => Found::Unreadable(why),
    }
}

/// The running postmaster of `data_dir`, verified; `None` for anything else (no file,
/// a stale or foreign one, or one that cannot be read).
pub fn running(data_dir: &Path) -> Option<Postmaster> {
    match find(data_dir) {
        Found::Running(postmaster) => Some(postmaster),
        _ => None,
    }
}

impl Postmaster {
    pub fn pid(&self) -> i32 {
        self.held.pid()
    }

    /// When it started, in clock ticks since boot: with the PID, who it is.
    pub fn start_ticks(&self) -> u64 {
        self.held.start_ticks()
    }

    /// Whether it still runs (a zombie does not).
    pub fn alive(&self) -> bool {
        self.held.alive()
    }

    /// Checks again that it is a postmaster of the data dir it was found for: `Ok(true)`
    /// when it is, `Ok(false)` when it is gone, an error when it no longer looks like
    /// one (it cannot change program or directory and stay PostgreSQL).
    pub fn verify(&self) -> Result<bool, String> {
        if trusts_the_file() {
            return Ok(self.alive());
        }
        match self.seen()? {
            None => Ok(false),
            Some(seen) if seen.cwd != self.data_dir || !is_postgres(&seen.exe) => Err(format!(
                "PID {} is no longer a postmaster of {}: it runs {} in {}",
                self.pid(),
                self.data_dir.display(),
                seen.exe.display(),
                seen.cwd.display()
            )),
            Some(_) => Ok(self.alive()),
        }
    }

    /// Sends `signal`, verified first: `Ok(false)` when it is gone (nothing sent).
    pub fn signal(&self, signal: nix::sys::signal::Signal) -> Result<bool, String> {
        match self.verify()? {
            true => self.held.signal(signal),
            false => Ok(false),
        }
    }

    /// Its children (they each lead a session of their own: found by their parent),
    /// held, while it is verified; none once it is not.
    pub fn children(&self) -> Vec<Held> {
        let children = self.held.children();
        match self.verify() {
            Ok(true) => children,
            _ => Vec::new(),
        }
    }

    /// Whether it leads its process group (then the group is the server's), verified.
    pub fn leads_its_group(&self) -> bool {
        let leads = matches!(self.held.stat(), Ok(Some(s)) if s.pgrp == self.pid());
        leads && matches!(self.verify(), Ok(true))
    }

    /// Its directory, program and start as /proc shows them; `None` when it is gone or
    /// shows no links.
    fn seen(&self) -> Result<Option<Seen>, String> {
        let (Some(cwd), Some(exe)) = (self.held.cwd()?, self.held.exe()?) else {
            return Ok(None);
        };
        use procfs::CurrentSI;
        let boot = procfs::KernelStats::current()
            .map_err(|e| format!("cannot read the boot time from /proc/stat: {e}"))?
            .btime;
        let ticks = procfs::ticks_per_second().max(1);
        let since_boot_ms = self.start_ticks().saturating_mul(1000) / ticks;
        Ok(Some(Seen {
            cwd,
            exe,
            started_ms: (boot.saturating_mul(1000).saturating_add(since_boot_ms)) as i64,
        }))
    }
}

/// The debug-only sabotage `trust_pid_file` (src/sabotage.rs): any live process the
/// file names passes for its postmaster, as before issue 49.
#[cfg(debug_assertions)]
fn trusts_the_file() -> bool {
    crate::sabotage::trust_pid_file()
}

/// Release builds carry no sabotage.
#[cfg(not(debug_assertions))]
fn trusts_the_file() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(started: i64) -> PidFile {
        PidFile {
            pid: 4242,
            data_dir: PathBuf::from("/srv/pg"),
            started,
        }
    }

    fn seen(cwd: &str, exe: &str, started_ms: i64) -> Seen {
        Seen {
            cwd: PathBuf::from(cwd),
            exe: PathBuf::from(exe),
            started_ms,
        }
    }

    const PG: &str = "/usr/lib/postgresql/15/bin/postgres";

    #[test]
    fn the_postmaster_of_this_data_dir_passes() {
        let dir = Path::new("/srv/pg");
        assert_eq!(
            judge(&file(1000), &seen("/srv/pg", PG, 1_000_400), dir),
            Ok(())
        );
        // Whole seconds on both sides: up to the tolerance either way passes.
        assert_eq!(
            judge(&file(1000), &seen("/srv/pg", PG, 998_000), dir),
            Ok(())
        );
        assert_eq!(
            judge(&file(1000), &seen("/srv/pg", PG, 1_002_000), dir),
            Ok(())
        );
    }

    #[test]
    fn another_directory_or_program_is_a_stranger_and_another_start_doubtful() {
        let dir = Path::new("/srv/pg");
        let stranger = |seen: Seen| match judge(&file(1000), &seen, dir) {
            Err(Mismatch::Stranger(why)) => why,
            other => panic!("{seen:?}: {other:?}"),
        };
        let why = stranger(seen("/srv/other", PG, 1_000_000));
        assert!(why.contains("working directory is /srv/other"), "{why}");
        let why = stranger(seen("/srv/pg", "/usr/bin/sleep", 1_000_000));
        assert!(why.contains("runs /usr/bin/sleep"), "{why}");
        // Another directory is a stranger whenever it started.
        stranger(seen("/srv/other", PG, 4_600_000));
        for started_ms in [1_002_001, 997_999, 4_600_000] {
            match judge(&file(1000), &seen("/srv/pg", PG, started_ms), dir) {
                Err(Mismatch::Start(why)) => assert!(why.contains("started"), "{why}"),
                other => panic!("{started_ms}: {other:?}"),
            }
        }
    }

    #[test]
    fn postgres_is_known_by_its_name_also_once_replaced() {
        assert!(is_postgres(Path::new(PG)));
        assert!(is_postgres(Path::new(
            "/usr/lib/postgresql/15/bin/postgres (deleted)"
        )));
        assert!(is_postgres(Path::new("postgres")));
        for other in [
            "/usr/bin/sleep",
            "/opt/postgres/bin/pg_ctl",
            "/usr/bin/postgres-exporter",
            "/usr/bin/postgres (deleted) (deleted)",
            "/",
        ] {
            assert!(!is_postgres(Path::new(other)), "{other}");
        }
    }

    #[test]
    fn a_missing_dir_or_file_is_no_file_and_a_garbled_one_unreadable() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(find(&dir.path().join("none")), Found::NoFile));
        assert!(matches!(find(dir.path()), Found::NoFile));
        std::fs::write(dir.path().join("postmaster.pid"), "42\n").unwrap();
        assert!(matches!(find(dir.path()), Found::Unreadable(_)));
    }

    #[test]
    fn this_test_process_named_by_a_pid_file_elsewhere_is_foreign() {
        let dir = tempfile::tempdir().unwrap();
        let me = std::process::id();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let text = format!("{me}\n{}\n{now}\n", dir.path().display());
        std::fs::write(dir.path().join("postmaster.pid"), text).unwrap();
        match find(dir.path()) {
            Found::Foreign { pid, why } => {
                assert_eq!(pid, me as i32);
                assert!(why.contains("working directory"), "{why}");
            }
            other => panic!("{}", other.describe()),
        }
        assert!(running(dir.path()).is_none());
    }

    #[test]
    fn the_start_time_from_proc_is_this_process_start() {
        // This process's start, as `seen` computes it, lies between the boot and now.
        let me = Held::open(std::process::id() as i32).unwrap().unwrap();
        let postmaster = Postmaster {
            held: me,
            data_dir: PathBuf::from("/"),
        };
        let seen = postmaster.seen().unwrap().unwrap();
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        // A test process is minutes old at most.
        assert!(seen.started_ms <= now_ms + 1000, "{seen:?} now {now_ms}");
        assert!(
            seen.started_ms > now_ms - 3_600_000,
            "{seen:?} now {now_ms}"
        );
    }
}
