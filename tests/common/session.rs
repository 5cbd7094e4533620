//! An interactive `bully` command (such as `bully local`) driven through its stdin: a
//! thread forwards its stdout lines, waits are bounded, and the whole process group is
//! killed by ID when the session is dropped, also on panic (see `browser::Group`).
//! Included with `#[path = "common/session.rs"]` next to `browser.rs`.
#![allow(dead_code)]

use super::browser::Group;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A running command, its stdin and its stdout lines.
pub struct Session {
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    /// Declared last: dropped (killed) after the pipes are closed.
    _group: Group,
}

impl Session {
    /// `bully local --nodes 3 --timing fast` (the `bully` binary at `binary`) in
    /// `dir/cluster`, returned once node 3 leads and all three agree.
    pub fn local_three(
        binary: &std::path::Path,
        dir: &std::path::Path,
        within: Duration,
    ) -> Session {
        let mut command = Command::new(binary);
        command
            .args(["local", "--nodes", "3", "--timing", "fast", "--dir"])
            .arg(dir.join("cluster"));
        let local = Session::spawn(command);
        local.lines_until("coordinator 3 (3 of 3 reachable agree)", within);
        local
    }

    /// Spawns `command` in its own process group with piped stdin and stdout.
    pub fn spawn(mut command: Command) -> Session {
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .process_group(0);
        let mut group = Group(command.spawn().expect("run the command"));
        let stdin = group.0.stdin.take().expect("stdin");
        let stdout = group.0.stdout.take().expect("stdout");
        let (lines_tx, lines) = mpsc::channel::<String>();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                eprintln!("| {line}");
                if lines_tx.send(line).is_err() {
                    return;
                }
            }
        });
        Session {
            stdin,
            lines,
            _group: group,
        }
    }

    /// The command's process ID (it leads its process group).
    pub fn pid(&self) -> u32 {
        self._group.0.id()
    }

    /// Waits up to `within` for the command to exit; its status, if it did.
    pub fn wait_exit(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self._group.0.try_wait().expect("try_wait") {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Types one line.
    pub fn type_line(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").expect("type into the session");
    }

    /// Every line printed until one that contains `what` (included); panics after
    /// `within`.
    pub fn lines_until(&self, what: &str, within: Duration) -> Vec<String> {
        let deadline = Instant::now() + within;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let done = line.contains(what);
                    seen.push(line);
                    if done {
                        return seen;
                    }
                }
                Err(_) => panic!("never printed `{what}` within {within:?}; printed {seen:#?}"),
            }
        }
    }
}
