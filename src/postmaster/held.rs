//! One process held so that what is read about it and what is sent to it concern the
//! same process, even if its PID is reused meanwhile. Its /proc directory is opened
//! first (reads through that descriptor fail once the process is gone, they never
//! reach a newcomer with the same PID), then a pidfd (Linux 5.3: a signal through it
//! reaches that process or none), and the process is then seen alive through the
//! first: it held the PID all along, so both name one process. On a kernel without
//! pidfds a signal goes by PID, right after a look through the /proc descriptor.

use nix::sys::signal::Signal;
use procfs::process::{Process, Stat};
use procfs::ProcError;
use rustix::fd::OwnedFd;
use rustix::io::Errno;
use std::path::PathBuf;

/// A process opened by its PID (see the module doc).
#[derive(Debug)]
pub struct Held {
    pid: i32,
    proc_dir: Process,
    pidfd: Option<OwnedFd>,
    start_ticks: u64,
}

impl Held {
    /// Opens process `pid`; `Ok(None)` when there is none, or only its zombie.
    pub fn open(pid: i32) -> Result<Option<Held>, String> {
        match Process::new(pid) {
            Ok(proc_dir) => Held::hold(proc_dir),
            Err(ProcError::NotFound(_)) => Ok(None),
            Err(e) => Err(format!("cannot read /proc/{pid}: {e}")),
        }
    }

    /// Holds the process whose /proc directory `proc_dir` holds open.
    fn hold(proc_dir: Process) -> Result<Option<Held>, String> {
        let pid = proc_dir.pid;
        let raw = rustix::process::Pid::from_raw(pid).ok_or(format!("{pid} is not a PID"))?;
        let pidfd = match rustix::process::pidfd_open(raw, rustix::process::PidfdFlags::empty()) {
            Ok(fd) => Some(fd),
            Err(Errno::SRCH) => return Ok(None),
            Err(Errno::NOSYS) => None,
            Err(e) => return Err(format!("cannot open a pidfd for PID {pid}: {e}")),
        };
        let mut held = Held {
            pid,
            proc_dir,
            pidfd,
            start_ticks: 0,
        };
        let Some(stat) = held.stat()? else {
            return Ok(None);
        };
        held.start_ticks = stat.starttime;
        Ok(Some(held))
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// When the process started, in clock ticks since boot (`/proc/PID/stat` field 22).
    pub fn start_ticks(&self) -> u64 {
        self.start_ticks
    }

    /// Its `/proc/PID/stat`; `None` once it is gone (exited: a zombie counts as gone).
    pub fn stat(&self) -> Result<Option<Stat>, String> {
        match self.proc_dir.stat() {
            Ok(stat) if matches!(stat.state, 'Z' | 'X' | 'x') => Ok(None),
            Ok(stat) => Ok(Some(stat)),
            Err(ProcError::NotFound(_)) => Ok(None),
            Err(e) => Err(format!("cannot read /proc/{}/stat: {e}", self.pid)),
        }
    }

    /// Whether it still runs; a process whose stat cannot be read counts as running
    /// (nothing proves it gone).
    pub fn alive(&self) -> bool {
        !matches!(self.stat(), Ok(None))
    }

    /// Where `/proc/PID/cwd` points; `None` when there is no such link to read (the
    /// process is gone, or is a kernel thread).
    pub fn cwd(&self) -> Result<Option<PathBuf>, String> {
        link(self.pid, "cwd", self.proc_dir.cwd())
    }

    /// Where `/proc/PID/exe` points (see [`Held::cwd`]).
    pub fn exe(&self) -> Result<Option<PathBuf>, String> {
        link(self.pid, "exe", self.proc_dir.exe())
    }

    /// Sends `signal` to this process and no other: `Ok(true)` when sent, `Ok(false)`
    /// when it is gone; refused by the kernel (EPERM) is an error, never "gone".
    pub fn signal(&self, signal: Signal) -> Result<bool, String> {
        let sent = match &self.pidfd {
            Some(fd) => {
                let signal = rustix::process::Signal::from_named_raw(signal as i32)
                    .ok_or(format!("{signal} has no number here"))?;
                rustix::process::pidfd_send_signal(fd, signal).map_err(|e| e.raw_os_error())
            }
            None if !self.alive() => return Ok(false),
            None => nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid), signal)
                .map_err(|e| e as i32),
        };
        match sent {
            Ok(()) => Ok(true),
            Err(e) if e == Errno::SRCH.raw_os_error() => Ok(false),
            Err(e) if e == Errno::PERM.raw_os_error() => {
                Err(format!("cannot signal PID {}: permission denied", self.pid))
            }
            Err(e) => Err(format!(
                "cannot signal PID {}: {}",
                self.pid,
                std::io::Error::from_raw_os_error(e)
            )),
        }
    }

    /// The processes whose parent this one is, each held. Only a parent seen alive
    /// after the scan vouches for them: with its PID never free meanwhile, a process
    /// whose parent PID was its PID was its child.
    pub fn children(&self) -> Vec<Held> {
        let Ok(all) = procfs::process::all_processes() else {
            return Vec::new();
        };
        let children: Vec<Held> = all
            .flatten()
            .filter(|p| p.stat().is_ok_and(|s| s.ppid == self.pid))
            .filter_map(|p| Held::hold(p).ok()?)
            .collect();
        match self.alive() {
            true => children,
            false => Vec::new(),
        }
    }
}

/// A link of /proc/PID read: `None` when it is not there.
fn link(
    pid: i32,
    name: &str,
    read: procfs::ProcResult<PathBuf>,
) -> Result<Option<PathBuf>, String> {
    match read {
        Ok(path) => Ok(Some(path)),
        Err(ProcError::NotFound(_)) => Ok(None),
        Err(e) => Err(format!("cannot read /proc/{pid}/{name}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Child, Command};
    use std::time::{Duration, Instant};

    /// A child killed and reaped when the test ends, also on panic.
    struct Reaped(Child);

    impl Drop for Reaped {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    fn sleeper() -> Reaped {
        Reaped(Command::new("sleep").arg("60").spawn().unwrap())
    }

    #[test]
    fn this_process_is_held_with_its_links_and_start() {
        let me = Held::open(std::process::id() as i32)
            .unwrap()
            .expect("alive");
        assert!(me.alive());
        assert!(me.start_ticks() > 0);
        assert_eq!(me.cwd().unwrap(), Some(std::env::current_dir().unwrap()));
        assert_eq!(me.exe().unwrap(), Some(std::env::current_exe().unwrap()));
    }

    #[test]
    fn a_reaped_process_is_gone_and_a_signal_to_it_says_so() {
        let mut child = sleeper();
        let held = Held::open(child.0.id() as i32)
            .unwrap()
            .expect("just started");
        child.0.kill().unwrap();
        child.0.wait().unwrap();
        assert!(!held.alive());
        assert_eq!(held.signal(Signal::SIGTERM), Ok(false));
    }

    #[test]
    fn a_zombie_is_gone() {
        let child = Reaped(Command::new("true").spawn().unwrap());
        let pid = child.0.id() as i32;
        // Not reaped yet: a zombie once it has exited (a bounded wait for that).
        let deadline = Instant::now() + Duration::from_secs(10);
        while Process::new(pid)
            .and_then(|p| p.stat())
            .is_ok_and(|s| s.state != 'Z')
        {
            assert!(Instant::now() < deadline, "`true` did not exit");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(Held::open(pid).unwrap().is_none());
    }

    #[test]
    fn a_child_is_found_by_its_parent() {
        let child = sleeper();
        let me = Held::open(std::process::id() as i32).unwrap().unwrap();
        assert!(me.children().iter().any(|c| c.pid() == child.0.id() as i32));
    }
}
