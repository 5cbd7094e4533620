//! PostgreSQL's programs as child processes: found in `[postgres] bin_dir` (or the
//! newest `/usr/lib/postgresql/*/bin`), run as `[postgres] run_as` when set, never
//! through a shell, each killed when its timeout passes. The server itself is started
//! here too, in a process group of its own, so the keeper's fence can stop every
//! backend with it (src/keeper/postgres_fence.rs).

use nix::unistd::{Gid, Uid, User};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::process::Command;

/// The user a node running as root runs the server as when `run_as` is unset.
const DEFAULT_ROOT_USER: &str = "postgres";

/// Where the programs are and whom they run as.
#[derive(Debug, Clone)]
pub struct Programs {
    bin_dir: PathBuf,
    /// The user to switch to; `None`: run as the node's own user.
    run_as: Option<RunAs>,
}

/// The user the programs run as, when not the node's own.
#[derive(Debug, Clone)]
struct RunAs {
    uid: Uid,
    gid: Gid,
    name: String,
    /// Their home directory: libpq looks for `~/.postgresql/` files under `$HOME`, and
    /// the node's own (root's, which they cannot read) made every TLS connection fail
    /// ("could not open certificate file", src/node/postgres/real_server_tests.rs).
    home: PathBuf,
}

/// What a program run gave: its exit status and what it printed.
#[derive(Debug, Clone)]
pub struct Ran {
    pub stdout: String,
    pub stderr: String,
}

impl Programs {
    /// Finds the programs and the user; an error says what is missing.
    pub fn find(bin_dir: Option<&Path>, run_as: Option<&str>) -> Result<Programs, String> {
        let bin_dir = match bin_dir {
            Some(dir) => dir.to_path_buf(),
            None => newest_debian_bin_dir().ok_or_else(|| {
                "no [postgres] bin_dir and no /usr/lib/postgresql/*/bin/postgres".to_string()
            })?,
        };
        if !bin_dir.join("postgres").is_file() {
            return Err(format!("{}/postgres does not exist", bin_dir.display()));
        }
        // As root, PostgreSQL's own user by default (Debian's package creates it).
        let root = Uid::effective().is_root();
        let run_as = match run_as.or(root.then_some(DEFAULT_ROOT_USER)) {
            None => None,
            Some(name) => match User::from_name(name) {
                Ok(Some(user)) => Some(RunAs {
                    uid: user.uid,
                    gid: user.gid,
                    name: name.to_string(),
                    home: user.dir,
                }),
                Ok(None) => return Err(format!("[postgres] run_as: no user `{name}`")),
                Err(e) => return Err(format!("[postgres] run_as: cannot look up `{name}`: {e}")),
            },
        };
        if let Some(RunAs { uid, name, .. }) = &run_as {
            if !root && *uid != Uid::effective() {
                return Err(format!(
                    "[postgres] run_as = \"{name}\": only a node running as root can run the \
                     server as another user; leave run_as out"
                ));
            }
            if uid.is_root() {
                return Err("[postgres] run_as: PostgreSQL refuses to run as root".into());
            }
        }
        Ok(Programs { bin_dir, run_as })
    }

    /// The user files handed to the server must belong to (`None`: the node's own).
    pub fn owner(&self) -> Option<(Uid, Gid)> {
        self.run_as.as_ref().map(|r| (r.uid, r.gid))
    }

    /// A command for program `name`, as the configured user, with `env` added.
    pub fn command(&self, name: &str, args: &[String], env: &[(String, String)]) -> Command {
        let mut command = Command::new(self.bin_dir.join(name));
        command.args(args).envs(env.iter().map(|(k, v)| (k, v)));
        if let Some(user) = &self.run_as {
            command.uid(user.uid.as_raw()).gid(user.gid.as_raw());
            command.env("USER", &user.name).env("LOGNAME", &user.name);
            command.env("HOME", &user.home);
        }
        command.stdin(Stdio::null());
        command
    }

    /// Runs `name` to its end, killed after `timeout`; an error names the program and
    /// says what it printed.
    pub async fn run(
        &self,
        name: &str,
        args: &[String],
        env: &[(String, String)],
        timeout: Duration,
    ) -> Result<Ran, String> {
        let command = self.command(name, args, env);
        run_bounded(command, name, None, Bound::Total(timeout)).await
    }

    /// As [`Programs::run`], with `input` written to the program's standard input (a
    /// single-user server's statements: src/node/postgres/adopt.rs).
    pub async fn run_with_input(
        &self,
        name: &str,
        args: &[String],
        env: &[(String, String)],
        input: &str,
        timeout: Duration,
    ) -> Result<Ran, String> {
        let mut command = self.command(name, args, env);
        command.stdin(Stdio::piped());
        run_bounded(command, name, Some(input), Bound::Total(timeout)).await
    }

    /// Runs `name` to its end for as long as it keeps writing into `dir`: killed once
    /// `dir` has not grown for `quiet` (a clone of any size takes what it takes; a stuck
    /// one is ended).
    pub async fn run_while_growing(
        &self,
        name: &str,
        args: &[String],
        env: &[(String, String)],
        dir: &Path,
        quiet: Duration,
    ) -> Result<Ran, String> {
        let command = self.command(name, args, env);
        run_bounded(command, name, None, Bound::Growing { dir, quiet }).await
    }
}

/// How long a program may run.
#[derive(Debug, Clone, Copy)]
enum Bound<'a> {
    /// At most this long in all.
    Total(Duration),
    /// As long as `dir` grows: killed once it has not for `quiet`.
    Growing { dir: &'a Path, quiet: Duration },
}

/// Runs `command` (program `name`) to its end within `bound`, in a process group of
/// its own, killed when the bound is passed, with `input` written to its standard
/// input (piped by the caller); an error says what it printed.
async fn run_bounded(
    mut command: Command,
    name: &str,
    input: Option<&str>,
    bound: Bound<'_>,
) -> Result<Ran, String> {
    command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot start {name}: {e}"))?;
    if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
        use tokio::io::AsyncWriteExt as _;
        // Written before the output is read: the input is small (a few statements), so
        // the pipe takes it whole while the program has not answered yet.
        stdin
            .write_all(input.as_bytes())
            .await
            .map_err(|e| format!("cannot write to {name}: {e}"))?;
    }
    let waited = child.wait_with_output();
    let output = match bound {
        Bound::Total(timeout) => match tokio::time::timeout(timeout, waited).await {
            Ok(output) => output,
            Err(_) => return Err(format!("{name} did not finish within {timeout:?}; killed")),
        },
        Bound::Growing { dir, quiet } => tokio::select! {
            output = waited => output,
            () = stalled(dir, quiet) => {
                return Err(format!(
                    "{name} wrote nothing into {} for {quiet:?}; killed",
                    dir.display()
                ))
            }
        },
    }
    .map_err(|e| format!("{name}: {e}"))?;
    let ran = Ran {
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    match output.status.success() {
        true => Ok(ran),
        false => Err(format!(
            "{name} failed ({}): {}",
            output.status,
            last_lines(&ran.stderr, 3)
        )),
    }
}

/// Returns once `dir` has not grown for `quiet`: its size is read every tenth of it
/// (between 50 ms and 10 s).
async fn stalled(dir: &Path, quiet: Duration) {
    let every = (quiet / 10).clamp(Duration::from_millis(50), Duration::from_secs(10));
    let mut last = None;
    let mut since = tokio::time::Instant::now();
    loop {
        tokio::time::sleep(every).await;
        let measured = dir.to_path_buf();
        let size = tokio::task::spawn_blocking(move || size_of(&measured))
            .await
            .unwrap_or(0);
        if last != Some(size) {
            last = Some(size);
            since = tokio::time::Instant::now();
        } else if since.elapsed() >= quiet {
            return;
        }
    }
}

/// The bytes of the files under `dir`, what cannot be read counting as nothing. A link
/// to a directory is followed (`pg_tblspc/<oid>`, a `pg_wal` moved elsewhere: a clone
/// writes its tablespaces there first), at most [`LINK_DEPTH`] deep, so a loop ends.
fn size_of(dir: &Path) -> u64 {
    size_within(dir, LINK_DEPTH)
}

/// How many directory levels [`size_of`] descends.
const LINK_DEPTH: u32 = 16;

fn size_within(dir: &Path, depth: u32) -> u64 {
    let Some(below) = depth.checked_sub(1) else {
        return 0;
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match std::fs::metadata(entry.path()) {
            Ok(meta) if meta.is_dir() => size_within(&entry.path(), below),
            Ok(meta) if meta.is_file() => meta.len(),
            _ => 0,
        })
        .sum()
}

/// The last `n` lines of `text`, joined, for an error message.
pub fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join(" / ")
}

/// The `bin` directory of the newest PostgreSQL under Debian's `/usr/lib/postgresql`.
fn newest_debian_bin_dir() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let version: u32 = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("postgres").is_file().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shell(script: &str) -> Command {
        let mut command = Command::new("sh");
        command.arg("-c").arg(script);
        command
    }

    #[tokio::test]
    async fn a_copy_that_keeps_writing_runs_past_its_quiet_bound() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("base");
        // 1.5 s in all, a write every 0.1 s: longer than the 0.6 s quiet bound.
        let script = format!(
            "for i in $(seq 15); do echo chunk >> {}; sleep 0.1; done",
            file.display()
        );
        let bound = Bound::Growing {
            dir: dir.path(),
            quiet: Duration::from_millis(600),
        };
        let ran = run_bounded(shell(&script), "copy", None, bound).await;
        assert!(ran.is_ok(), "{ran:?}");
        assert_eq!(std::fs::read_to_string(&file).unwrap().lines().count(), 15);
    }

    #[tokio::test]
    async fn a_copy_that_writes_nothing_is_killed_once_quiet() {
        let dir = tempfile::tempdir().unwrap();
        let started = std::time::Instant::now();
        let bound = Bound::Growing {
            dir: dir.path(),
            quiet: Duration::from_millis(300),
        };
        let killed = run_bounded(shell("sleep 30"), "copy", None, bound)
            .await
            .unwrap_err();
        assert!(killed.contains("wrote nothing into"), "{killed}");
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "ended well before the sleep"
        );
    }

    #[tokio::test]
    async fn a_total_bound_still_kills_and_a_failure_says_what_it_printed() {
        let late = run_bounded(
            shell("sleep 30"),
            "prog",
            None,
            Bound::Total(Duration::from_millis(200)),
        );
        assert!(late.await.unwrap_err().contains("did not finish within"));
        let failed = run_bounded(
            shell("echo nope >&2; exit 3"),
            "prog",
            None,
            Bound::Total(Duration::from_secs(10)),
        );
        let failed = failed.await.unwrap_err();
        assert!(
            failed.contains("nope") && failed.contains("prog failed"),
            "{failed}"
        );
    }

    #[tokio::test]
    async fn input_reaches_the_program_whole() {
        let mut command = shell("tr a-z A-Z");
        command.stdin(Stdio::piped());
        let text = "single-user statements\n".repeat(100);
        let ran = run_bounded(
            command,
            "tr",
            Some(&text),
            Bound::Total(Duration::from_secs(10)),
        );
        assert_eq!(ran.await.unwrap().stdout, text.to_uppercase());
    }

    #[test]
    fn the_size_counts_files_in_subdirectories() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("base")).unwrap();
        std::fs::write(dir.path().join("PG_VERSION"), "15\n").unwrap();
        std::fs::write(dir.path().join("base/1"), [0u8; 100]).unwrap();
        assert_eq!(size_of(dir.path()), 103);
        assert_eq!(size_of(&dir.path().join("missing")), 0);
        // A tablespace elsewhere, linked as pg_tblspc/<oid>, counts; a loop ends.
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::write(elsewhere.path().join("16384"), [0u8; 1000]).unwrap();
        std::fs::create_dir(dir.path().join("pg_tblspc")).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), dir.path().join("pg_tblspc/16400")).unwrap();
        assert_eq!(size_of(dir.path()), 1103);
        std::os::unix::fs::symlink(dir.path(), dir.path().join("base/loop")).unwrap();
        assert!(
            size_of(dir.path()) > 1103,
            "a loop is followed a bounded number of times"
        );
    }
}
