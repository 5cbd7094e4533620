//! A real crash test for the storage cells (invariant I3: kill -9 at any instant loses
//! no epoch that was revealed).
//!
//! The test binary re-executes itself as the writer: with `CHILD_ENV` set, the child
//! test bumps the epoch in a loop, printing each one only after `Storage::save` has
//! returned. The parent SIGKILLs it at random moments, reopens the store and checks:
//! - the open is clean (no lock left behind, no corruption);
//! - the stored epoch is at least the last one the child printed, and at most one
//!   higher (the save that was in flight);
//! - term and accepted epoch moved together (one transaction), and nothing went back.
//!
//! Phases per round: spawn the writer, let it run (a random 5–80 ms after it is ready,
//! or every fifth round a random 0–40 ms after spawn, to hit sled's recovery and the
//! first save), kill it, reopen and check. `CRASH_SEED` and `CRASH_KILLS` reproduce or
//! extend a run.

use bully::protocol::{Cells, Epoch};
use bully::storage::{Storage, StorageError};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Set (to the data dir) only in the re-executed child; without it the child test is
/// a no-op, so a plain `cargo test` runs it harmlessly.
const CHILD_ENV: &str = "BULLY_STORAGE_CRASH_CHILD_DIR";
/// The child's test name, passed to `--exact`.
const CHILD_TEST: &str = "crash_child_bumps_epochs_until_killed";
/// The leader ID the writer uses; any fixed value works.
const LEADER: u64 = 1;
/// The child stops by itself after this long, in case the parent died without
/// killing it.
const CHILD_LIFETIME: Duration = Duration::from_secs(30);
/// Overall budget: stop starting rounds after this, whatever the kill count.
const BUDGET: Duration = Duration::from_secs(20);

fn epoch_cells(term: u64, incarnation: u64) -> Cells {
    Cells {
        term,
        accepted: Some(Epoch {
            term,
            leader: LEADER,
        }),
        incarnation,
        promise_ms: 0,
        recovered: false,
        given_up: false,
        awaits_survivors: false,
    }
}

/// The writer. One line per event, flushed: `READY <term>` once the store is open and
/// the incarnation saved, `EPOCH <term>` after each save returned, `ERROR <why>` if
/// anything fails (the parent fails the test on it).
#[test]
fn crash_child_bumps_epochs_until_killed() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    if let Err(e) = bump_until_killed(Path::new(&dir)) {
        say(&format!("ERROR {e}"));
        std::process::exit(3);
    }
}

fn bump_until_killed(dir: &Path) -> Result<(), StorageError> {
    let storage = Storage::open(dir)?;
    let mut cells = storage.load()?;
    cells.incarnation += 1;
    storage.save(&cells)?;
    say(&format!("READY {}", cells.term));
    let started = Instant::now();
    while started.elapsed() < CHILD_LIFETIME {
        cells = epoch_cells(cells.term + 1, cells.incarnation);
        storage.save(&cells)?;
        say(&format!("EPOCH {}", cells.term));
    }
    Ok(())
}

fn say(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    // The parent reads these; if it is gone there is no one to tell.
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// What the child printed, parsed. libtest may put its own text before ours on the
/// same line, so the marker is searched for, not expected at the start.
#[derive(Debug, PartialEq)]
enum Line {
    Ready(u64),
    Epoch(u64),
    Error(String),
}

fn parse(line: &str) -> Option<Line> {
    let number = |rest: &str| rest.trim().parse::<u64>().ok();
    if let Some((_, rest)) = line.split_once("EPOCH ") {
        number(rest).map(Line::Epoch)
    } else if let Some((_, rest)) = line.split_once("READY ") {
        number(rest).map(Line::Ready)
    } else {
        line.split_once("ERROR ")
            .map(|(_, rest)| Line::Error(rest.trim().to_string()))
    }
}

/// The writer process. Killed (SIGKILL, by PID) and reaped on drop, also when the
/// test panics.
struct Writer {
    child: Child,
    lines: Receiver<Line>,
    stdout: Option<JoinHandle<()>>,
    /// stderr is drained so the child never blocks on it, and kept for diagnostics.
    stderr: Option<JoinHandle<String>>,
}

impl Writer {
    fn spawn(dir: &Path) -> Writer {
        let exe = std::env::current_exe().expect("path of the test binary");
        let mut child = Command::new(exe)
            .args(["--exact", CHILD_TEST, "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the writer");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut stderr = child.stderr.take().expect("piped stderr");
        let (tx, lines) = mpsc::channel();
        let stdout = thread::spawn(move || {
            let mut stdout = BufReader::new(stdout);
            let mut line = String::new();
            // Only whole lines count: a line cut by the kill was never fully printed.
            while matches!(stdout.read_line(&mut line), Ok(n) if n > 0) {
                if line.ends_with('\n') {
                    if let Some(parsed) = parse(&line) {
                        let _ = tx.send(parsed);
                    }
                }
                line.clear();
            }
        });
        let stderr = thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        Writer {
            child,
            lines,
            stdout: Some(stdout),
            stderr: Some(stderr),
        }
    }

    /// Waits (bounded) for the READY line, collecting every line up to it.
    fn wait_ready(&self, limit: Duration, seen: &mut Vec<Line>) -> Result<(), String> {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let ready = matches!(line, Line::Ready(_));
                    seen.push(line);
                    if ready {
                        return Ok(());
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    return Err(format!("writer not ready within {limit:?}"))
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err("writer exited before it was ready".into())
                }
            }
        }
    }

    /// SIGKILLs the child, reaps it and returns the whole lines it printed that were
    /// not taken yet, and its stderr.
    fn kill(mut self) -> (Vec<Line>, String) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // The pipes close with the process: both readers reach end of file.
        if let Some(handle) = self.stdout.take() {
            let _ = handle.join();
        }
        let stderr = self
            .stderr
            .take()
            .and_then(|handle| handle.join().ok())
            .unwrap_or_default();
        (self.lines.try_iter().collect(), stderr)
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Opens the store after a kill. The kernel drops the dead writer's flock when it is
/// reaped, so `Locked` should not happen; wait briefly (bounded) in case it lingers.
fn reopen(dir: &Path) -> (Storage, u32) {
    Storage::open_waiting(dir, Duration::from_secs(1))
        .unwrap_or_else(|e| panic!("reopen after kill failed: {e}"))
}

#[test]
fn sigkill_during_epoch_bumps_never_loses_a_printed_epoch() {
    let seed: u64 = std::env::var("CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::thread_rng().gen());
    let kills: u32 = std::env::var("CRASH_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(50);
    println!("seed {seed} (CRASH_SEED={seed} reproduces the kill timings), up to {kills} kills");
    let mut rng = SmallRng::seed_from_u64(seed);
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path().join("store");

    let started = Instant::now();
    let mut stored = Cells::default();
    let (mut done, mut early_kills, mut bumps, mut lock_retries) = (0u32, 0u32, 0u64, 0u32);
    while done < kills && started.elapsed() < BUDGET {
        let round = done + 1;
        // Phase 1: start the writer and pick the kill moment.
        let writer = Writer::spawn(&dir);
        let mut lines = Vec::new();
        if round % 5 == 0 {
            early_kills += 1;
            thread::sleep(Duration::from_millis(rng.gen_range(0..=40)));
        } else {
            if let Err(e) = writer.wait_ready(Duration::from_secs(10), &mut lines) {
                let (_, stderr) = writer.kill();
                panic!("round {round}: {e}; stderr:\n{stderr}");
            }
            thread::sleep(Duration::from_millis(rng.gen_range(5..=80)));
        }
        // Phase 2: kill it.
        let (rest, stderr) = writer.kill();
        lines.extend(rest);
        done += 1;

        // Phase 3: what did it reveal?
        let mut printed: Option<u64> = None;
        for line in &lines {
            match line {
                Line::Ready(term) => assert_eq!(
                    *term, stored.term,
                    "round {round}: the writer loaded another term than the parent"
                ),
                Line::Epoch(term) => {
                    let expected = printed.unwrap_or(stored.term) + 1;
                    assert_eq!(*term, expected, "round {round}: epochs out of order");
                    printed = Some(*term);
                    bumps += 1;
                }
                Line::Error(why) => panic!("round {round}: writer failed: {why}\n{stderr}"),
            }
        }

        // Phase 4: reopen and check.
        let (storage, retries) = reopen(&dir);
        lock_retries += retries;
        let loaded = storage
            .load()
            .unwrap_or_else(|e| panic!("round {round}: load after kill failed: {e}"));
        drop(storage);
        let floor = printed.unwrap_or(stored.term);
        assert!(
            loaded.term >= floor,
            "round {round}: lost epochs: stored {loaded:?}, but the writer printed {printed:?}"
        );
        assert!(
            loaded.term <= floor + 1,
            "round {round}: stored {loaded:?} is beyond the one save in flight after {floor}"
        );
        if loaded.term > 0 {
            assert_eq!(
                loaded.accepted,
                Some(Epoch {
                    term: loaded.term,
                    leader: LEADER
                }),
                "round {round}: term and epoch were not written together"
            );
        }
        assert!(
            loaded.incarnation >= stored.incarnation
                && loaded.incarnation <= stored.incarnation + 1,
            "round {round}: incarnation went from {} to {}",
            stored.incarnation,
            loaded.incarnation
        );
        stored = loaded;
    }
    println!(
        "{done} kills ({early_kills} during start-up) in {:?}: highest epoch {}, {bumps} bumps printed, {} incarnations, {lock_retries} lock retries",
        started.elapsed(),
        stored.term,
        stored.incarnation,
    );
    assert!(done >= 10, "only {done} kills fit in {BUDGET:?}");
    assert!(bumps > 0, "the writer never completed a save");
}
