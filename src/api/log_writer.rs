//! The thread that writes a node's event log (src/api/event_log.rs). An append is
//! queued and returns at once: a disk that stalls (a checkpoint, a bulk load, a base
//! backup flooding it with writes) stalls this thread, never the node's runtime, which
//! runs on one thread and must keep its heartbeats. Only the cells' flush
//! (src/storage/) is on the protocol's path; the event log is for the checker and
//! `bully history`, and safety does not wait for it.
//!
//! The queue is bounded ([`QUEUE_BOUND`] lines): a disk stalled for longer drops the
//! newest records, each counted as a failed append, rather than grow without end.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// After the first failed append of a run of failures (logged at once), how often
/// another is logged: a full disk fails every record, and one error line per record
/// would fill the journal too.
pub const FAILURE_LOG_EVERY: Duration = Duration::from_secs(60);

/// Lines queued for the writer at most (a few hundred bytes each): about a minute of
/// a busy node's records, a few megabytes at worst.
pub const QUEUE_BOUND: usize = 4096;

/// How long a flush, or the last handle's drop, waits for the queued lines to be
/// written: a stopping node waits this long for a stalled disk, then goes.
pub const FLUSH_WAIT: Duration = Duration::from_secs(2);

/// How often a flush tries again to queue itself behind a full queue.
const FLUSH_STEP: Duration = Duration::from_millis(5);

/// Appends that failed (a full or failing disk, or a queue left full by a stalled
/// one: the record is lost), shared by every handle on one log, so a node can export
/// the count (`bully_event_log_write_errors_total`): the checker and `bully history`
/// read this log, and a record lost without a trace would go unnoticed.
#[derive(Debug, Default)]
pub struct WriteFailures {
    count: AtomicU64,
    /// Whether the last append failed: the next success ends the run of failures.
    failing: AtomicBool,
    /// When a failure was last logged and the count then; `None` outside a run.
    logged: Mutex<Option<(Instant, u64)>>,
}

impl WriteFailures {
    /// Appends that failed so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Counts one failed append at `now`; whether and how to log it: the first of a
    /// run of failures at once, then at most one line per [`FAILURE_LOG_EVERY`].
    fn failed(&self, now: Instant) -> Option<Loud> {
        let total = self.count.fetch_add(1, Ordering::Relaxed) + 1;
        self.failing.store(true, Ordering::Relaxed);
        let mut logged = self.logged.lock().unwrap_or_else(|e| e.into_inner());
        let loud = match *logged {
            None => Loud::First,
            Some((at, then)) if now.saturating_duration_since(at) >= FAILURE_LOG_EVERY => {
                Loud::Again { lost: total - then }
            }
            Some(_) => return None,
        };
        *logged = Some((now, total));
        Some(loud)
    }

    /// An append succeeded: ends a run of failures (the next failure is logged at
    /// once again); whether one ended.
    fn succeeded(&self) -> bool {
        if !self.failing.swap(false, Ordering::Relaxed) {
            return false;
        }
        *self.logged.lock().unwrap_or_else(|e| e.into_inner()) = None;
        true
    }
}

/// Which line a failed append gets.
#[derive(Debug, PartialEq, Eq)]
enum Loud {
    /// The first failure of a run.
    First,
    /// Still failing: `lost` records since the last line.
    Again { lost: u64 },
}

/// What the writer thread is asked to do, in queue order.
enum Job {
    /// Append one line (ending in a newline).
    Line(String),
    /// Answer once every line queued before this one is written (or failed).
    Flush(mpsc::Sender<()>),
}

/// The writer thread and its queue, shared by every handle on one log. Dropped with
/// the last handle: the queue closes, the thread writes what is left (waiting at most
/// [`FLUSH_WAIT`]) and closes the file.
pub(super) struct Writer {
    queue: Option<SyncSender<Job>>,
    /// Answers once the thread has written everything and closed the file.
    finished: Mutex<Receiver<()>>,
    thread: Option<JoinHandle<()>>,
    path: PathBuf,
    failures: Arc<WriteFailures>,
}

impl Writer {
    /// Starts the thread that appends to `file` (opened for appending at `path`).
    pub(super) fn start(file: File, path: PathBuf) -> std::io::Result<Writer> {
        let (queue, jobs) = mpsc::sync_channel(QUEUE_BOUND);
        let (finish, finished) = mpsc::channel();
        let failures = Arc::<WriteFailures>::default();
        let mut lines = Lines {
            file,
            path: path.clone(),
            failures: Arc::clone(&failures),
        };
        let thread = std::thread::Builder::new()
            .name("event-log".into())
            .spawn(move || {
                for job in jobs {
                    match job {
                        Job::Line(line) => lines.append(&line),
                        Job::Flush(done) => {
                            let _ = done.send(());
                        }
                    }
                }
                drop(lines);
                let _ = finish.send(());
            })?;
        Ok(Writer {
            queue: Some(queue),
            finished: Mutex::new(finished),
            thread: Some(thread),
            path,
            failures,
        })
    }

    /// The count of failed appends.
    pub(super) fn failures(&self) -> Arc<WriteFailures> {
        Arc::clone(&self.failures)
    }

    /// Queues `line`; never waits. A full queue (the disk has stalled for a while)
    /// loses the line, counted and logged as a failed append.
    pub(super) fn send(&self, line: String) {
        let Some(queue) = &self.queue else { return };
        let why = match queue.try_send(Job::Line(line)) {
            Ok(()) => return,
            Err(TrySendError::Full(_)) => format!(
                "{QUEUE_BOUND} records wait for a disk that does not take them \
                 (stalled?)"
            ),
            Err(TrySendError::Disconnected(_)) => "its writer thread has ended".to_string(),
        };
        report(&self.failures, &self.path, &why);
    }

    /// Waits up to `within` for every line queued so far to be written; whether they
    /// were. A full queue is waited on in steps of [`FLUSH_STEP`].
    pub(super) fn flush(&self, within: Duration) -> bool {
        let Some(queue) = &self.queue else {
            return false;
        };
        let deadline = Instant::now() + within;
        let (done, written) = mpsc::channel();
        let mut job = Job::Flush(done);
        loop {
            match queue.try_send(job) {
                Ok(()) => break,
                Err(TrySendError::Full(again)) if Instant::now() < deadline => {
                    job = again;
                    std::thread::sleep(FLUSH_STEP);
                }
                Err(_) => return false,
            }
        }
        written
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .is_ok()
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        drop(self.queue.take());
        let finished = self.finished.get_mut().unwrap_or_else(|e| e.into_inner());
        match finished.recv_timeout(FLUSH_WAIT) {
            Ok(()) => {
                if let Some(thread) = self.thread.take() {
                    let _ = thread.join();
                }
            }
            Err(_) => tracing::warn!(
                "{}: records still queued after {FLUSH_WAIT:?} (a stalled disk?) are \
                 left to the writer thread, and lost if the process ends first",
                self.path.display()
            ),
        }
    }
}

/// The writer thread's side: the file and the failure count.
struct Lines {
    file: File,
    path: PathBuf,
    failures: Arc<WriteFailures>,
}

impl Lines {
    /// Appends one line with a single `write` call on the unbuffered file, so a
    /// killed process leaves whole lines behind.
    fn append(&mut self, line: &str) {
        if self.failures.failing.load(Ordering::Relaxed) {
            // A failed write may have left part of a line: end it, as opening the log
            // does, so this record does not run into it.
            if ends_mid_line(&mut self.file).unwrap_or(false) {
                let _ = self.file.write_all(b"\n");
            }
        }
        match self.file.write_all(line.as_bytes()) {
            Ok(()) => {
                if self.failures.succeeded() {
                    tracing::warn!(
                        total = self.failures.count(),
                        "appending to {} works again; records were lost while it failed",
                        self.path.display()
                    );
                }
            }
            Err(e) => report(&self.failures, &self.path, &e.to_string()),
        }
    }
}

/// Counts one lost record and logs it: the first of a run at once, then at most once
/// per [`FAILURE_LOG_EVERY`].
fn report(failures: &WriteFailures, path: &std::path::Path, why: &str) {
    match failures.failed(Instant::now()) {
        Some(Loud::First) => tracing::error!(
            "cannot append to {}: {why}; event-log records are lost until writes work \
             again (counted in bully_event_log_write_errors_total)",
            path.display()
        ),
        Some(Loud::Again { lost }) => tracing::error!(
            lost,
            total = failures.count(),
            "still cannot append to {}: {why}",
            path.display()
        ),
        None => {}
    }
}

/// Whether the file's last byte is something other than a newline (a FIFO or other
/// file without a length never is).
pub(super) fn ends_mid_line(file: &mut File) -> std::io::Result<bool> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(false);
    }
    let mut last = [0u8; 1];
    file.seek(SeekFrom::Start(len - 1))?;
    file.read_exact(&mut last)?;
    Ok(last[0] != b'\n')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_logged_first_at_once_then_at_a_bounded_rate() {
        let failures = WriteFailures::default();
        let t0 = Instant::now();
        assert_eq!(failures.failed(t0), Some(Loud::First));
        let soon = t0 + FAILURE_LOG_EVERY / 2;
        assert_eq!(failures.failed(soon), None, "within the interval");
        assert_eq!(failures.failed(soon), None);
        let later = t0 + FAILURE_LOG_EVERY;
        assert_eq!(
            failures.failed(later),
            Some(Loud::Again { lost: 3 }),
            "the lines in between are summed"
        );
        assert_eq!(failures.failed(later), None);
        assert!(failures.succeeded(), "a run of failures ended");
        assert!(!failures.succeeded(), "only once");
        assert_eq!(
            failures.failed(later),
            Some(Loud::First),
            "a new run is loud again"
        );
        assert_eq!(failures.count(), 6);
    }

    #[test]
    fn a_line_left_by_a_failed_write_is_ended_before_the_next_record() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("log");
        std::fs::write(&path, "one\n{\"torn").unwrap();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .append(true)
            .open(&path)
            .unwrap();
        let failures = Arc::<WriteFailures>::default();
        let mut lines = Lines {
            file,
            path: path.clone(),
            failures: Arc::clone(&failures),
        };
        failures.failed(Instant::now());
        lines.append("two\n");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "one\n{\"torn\ntwo\n"
        );
        assert_eq!(failures.count(), 1);
        assert!(!failures.failing.load(Ordering::Relaxed), "the run ended");
    }
}
