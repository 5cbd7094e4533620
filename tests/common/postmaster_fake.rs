//! Processes a `postmaster.pid` can name, for the fence's identity tests
//! (`tests/postmaster_identity.rs` and its sabotage twin): a stranger (`sleep`), and a
//! fake postmaster (a copy of `sleep` or `sh` under the name `postgres`, run in the data
//! dir) that passes every check /proc allows. Each is killed by its PID when dropped,
//! also when a test panics. Included with `#[path = "common/postmaster_fake.rs"] mod
//! postmaster_fake;`.
#![allow(dead_code)]

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// An hour: a start time this far off is no process's start time.
pub const HOUR: u64 = 3600;

/// A child process of the test, killed and reaped by its PID on drop.
pub struct Proc {
    pub child: Child,
    /// Its start in seconds since the Unix epoch, read just before it was spawned.
    pub started: u64,
}

impl Proc {
    /// Starts `command` (and notes the time it starts at).
    pub fn spawn(command: &mut Command) -> Proc {
        // A binary the test just copied may still be open for writing in a child another
        // test thread is forking ("text file busy"): try again, a bounded number of times.
        for _ in 0..100 {
            let started = now_secs();
            match command.spawn() {
                Ok(child) => return Proc { child, started },
                Err(e) if e.raw_os_error() == Some(nix::libc::ETXTBSY) => {
                    std::thread::sleep(std::time::Duration::from_millis(20))
                }
                Err(e) => panic!("spawn: {e}"),
            }
        }
        panic!("spawn: the binary stayed busy for 2 s")
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Whether it still runs (not exited; it is reaped here if it did).
    pub fn running(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_none()
    }

    /// The signal that ended it, waiting up to `within` for it to end.
    pub fn ended_by(&mut self, within: Duration) -> Option<i32> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status.signal();
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// `sleep 60` in `cwd`: a stranger (its program is not postgres).
pub fn stranger(cwd: &Path) -> Proc {
    Proc::spawn(Command::new("sleep").arg("60").current_dir(cwd))
}

/// A copy of the system's `program` named `postgres` in `dir`: a process run from it
/// looks like PostgreSQL's server to /proc.
pub fn named_postgres(dir: &Path, program: &str) -> PathBuf {
    let found = which(program);
    let bin = dir.join(format!("bin-{program}"));
    std::fs::create_dir_all(&bin).unwrap();
    let copy = bin.join("postgres");
    std::fs::copy(found, &copy).unwrap();
    copy
}

/// `program` on the PATH.
pub fn which(program: &str) -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join(program))
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| panic!("{program} not on the PATH"))
}

/// Writes `postmaster.pid` into `data_dir` naming `pid`, started at `started`.
pub fn write_pid_file(data_dir: &Path, pid: i32, started: u64) {
    let text = format!(
        "{pid}\n{}\n{started}\n5432\n/tmp\n*\n  0 0\nready   \n",
        data_dir.display()
    );
    std::fs::write(data_dir.join("postmaster.pid"), text).unwrap();
}
