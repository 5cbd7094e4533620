//! The append-only event log in a node's data dir (`events.jsonl`): one JSON history
//! entry per line, written before the action it records is revealed, so tests and the
//! chaos runner can check I1–I5 on real processes after a kill -9.

use crate::history::{Entry, Record};
use crate::protocol::NodeId;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// File name of the event log inside a data dir.
pub const EVENT_LOG: &str = "events.jsonl";

/// After the first failed append of a run of failures (logged at once), how often
/// another is logged: a full disk fails every record, and one error line per record
/// would fill the journal too.
pub const FAILURE_LOG_EVERY: Duration = Duration::from_secs(60);

/// Appends that failed (a full or failing disk: the record is lost), shared by every
/// handle on one log, so a node can export the count
/// (`bully_event_log_write_errors_total`): the checker and `bully history` read this
/// log, and a record lost without a trace would go unnoticed.
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

/// Appends history entries for one node. Each line is one `write` call on an
/// unbuffered file, so a killed process leaves whole lines behind; should a write be
/// torn anyway, [`EventLog::open`] ends that line before appending, so only the torn
/// record is lost (counted by [`crate::history::parse_json_lines`]).
pub struct EventLog {
    node: NodeId,
    file: File,
    path: PathBuf,
    failures: Arc<WriteFailures>,
}

impl EventLog {
    /// Opens (or creates) the log in `data_dir`. A last line left unfinished by a
    /// kill is ended first, so the next record does not run into it.
    pub fn open(data_dir: &Path, node: NodeId) -> std::io::Result<EventLog> {
        let path = data_dir.join(EVENT_LOG);
        let mut file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(&path)?;
        if ends_mid_line(&mut file)? {
            file.write_all(b"\n")?;
        }
        Ok(EventLog {
            node,
            file,
            path,
            failures: Arc::default(),
        })
    }

    /// A second handle on the same open file, for a task that records on its own (the
    /// hook runner): both append whole lines to one file description, so their lines
    /// interleave but never mix.
    pub fn try_clone(&self) -> std::io::Result<EventLog> {
        Ok(EventLog {
            node: self.node,
            file: self.file.try_clone()?,
            path: self.path.clone(),
            failures: Arc::clone(&self.failures),
        })
    }

    /// The count of failed appends, shared with every clone of this handle.
    pub fn failures(&self) -> Arc<WriteFailures> {
        Arc::clone(&self.failures)
    }

    /// Appends one record stamped with wall-clock time. A failed write loses the
    /// record: it is counted ([`EventLog::failures`]) and logged, the first of a run
    /// at once and then at most once per [`FAILURE_LOG_EVERY`].
    pub fn append(&mut self, record: Record) {
        let entry = Entry {
            at_ms: crate::wall_clock::wall_ms(),
            node: self.node,
            record,
        };
        let mut line = entry.to_json_line();
        line.push('\n');
        if self.failures.failing.load(Ordering::Relaxed) {
            // A failed write may have left part of a line: end it, as `open` does, so
            // this record does not run into it.
            if ends_mid_line(&mut self.file).unwrap_or(false) {
                let _ = self.file.write_all(b"\n");
            }
        }
        match self.file.write_all(line.as_bytes()) {
            Ok(()) => {
                if self.failures.succeeded() {
                    let total = self.failures.count();
                    tracing::warn!(
                        total,
                        "appending to {} works again; records were lost while it failed",
                        self.path.display()
                    );
                }
            }
            Err(e) => match self.failures.failed(Instant::now()) {
                Some(Loud::First) => tracing::error!(
                    "cannot append to {}: {e}; event-log records are lost until writes \
                     work again (counted in bully_event_log_write_errors_total)",
                    self.path.display()
                ),
                Some(Loud::Again { lost }) => tracing::error!(
                    lost,
                    total = self.failures.count(),
                    "still cannot append to {}: {e}",
                    self.path.display()
                ),
                None => {}
            },
        }
    }
}

/// Whether the file's last byte is something other than a newline.
fn ends_mid_line(file: &mut File) -> std::io::Result<bool> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(false);
    }
    let mut last = [0u8; 1];
    file.seek(SeekFrom::Start(len - 1))?;
    file.read_exact(&mut last)?;
    Ok(last[0] != b'\n')
}

/// Reads a node's event log; lines torn by a kill are skipped with a warning.
pub fn read_log(data_dir: &Path) -> std::io::Result<Vec<Entry>> {
    let path = data_dir.join(EVENT_LOG);
    let parsed = crate::history::parse_json_lines(&std::fs::read(&path)?);
    if parsed.unparsed > 0 {
        tracing::warn!(
            "{}: skipped {} line(s) that are not history entries (torn by a kill?)",
            path.display(),
            parsed.unparsed
        );
    }
    Ok(parsed.entries)
}
/// The newest lines of an event log, as a node sends them to `bully history`: the
/// JSON lines themselves, so a client parses them with
/// [`crate::history::parse_json_lines`] and a record kind it does not know is one
/// skipped line, not an undecodable reply.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RecentEvents {
    /// Oldest first.
    pub lines: Vec<String>,
    /// Older lines since the time asked for were left out: the reply reached its cap
    /// ([`REPLY_BUDGET`], the count asked for) or the scan its [`SCAN_LIMIT`].
    pub truncated: bool,
    /// Lines that were not history entries (torn by a kill).
    pub unparsed: usize,
}

/// Bytes of lines one reply carries at most: under the codec's frame cap
/// ([`crate::codec::MAX_FRAME`]) with room for the framing of each line.
pub const REPLY_BUDGET: usize = crate::codec::MAX_FRAME - 4096;

/// Bytes of a log read backwards at most for one reply, so a request for a long span
/// of a large log costs a bounded read.
pub const SCAN_LIMIT: u64 = 64 * 1024 * 1024;

/// Bytes read per step backwards.
const CHUNK: u64 = 64 * 1024;

/// The lines of `data_dir`'s event log written at or after `since_ms`, newest kept
/// when there are more than `max` or more than [`REPLY_BUDGET`] bytes of them. Read
/// from the end backwards, stopping at the first older line, so the cost follows the
/// span asked for, not the log's size. [`Record::Persisted`] lines are left out: one
/// per flushed write, they repeat what the Fact and View lines say and would crowd
/// them out of the reply.
pub fn read_recent(data_dir: &Path, since_ms: u64, max: usize) -> std::io::Result<RecentEvents> {
    let mut file = File::open(data_dir.join(EVENT_LOG))?;
    let len = file.metadata()?.len();
    let mut recent = RecentEvents::default();
    let mut bytes = 0;
    // Newest first; `Some(truncated)` ends the scan.
    let mut take = |line: &[u8], recent: &mut RecentEvents| -> Option<bool> {
        let entry = match crate::history::parse_json_line(line)? {
            Ok(entry) => entry,
            Err(_) => {
                recent.unparsed += 1;
                return None;
            }
        };
        if entry.at_ms < since_ms {
            return Some(false);
        }
        if matches!(entry.record, Record::Persisted(_)) {
            return None;
        }
        // A line costs its bytes and a length prefix of at most 8 bytes.
        if recent.lines.len() >= max || bytes + line.len() + 8 > REPLY_BUDGET {
            return Some(true);
        }
        bytes += line.len() + 8;
        recent
            .lines
            .push(String::from_utf8_lossy(line).into_owned());
        None
    };
    let mut pos = len;
    // The start of the oldest line read so far, whose beginning lies further back.
    let mut head: Vec<u8> = Vec::new();
    let truncated = loop {
        if pos == 0 {
            break take(&head, &mut recent).unwrap_or(false);
        }
        if len - pos >= SCAN_LIMIT {
            break true;
        }
        let start = pos.saturating_sub(CHUNK);
        let mut chunk = vec![0u8; (pos - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut chunk)?;
        chunk.extend_from_slice(&head);
        pos = start;
        let mut lines = chunk.split(|&b| b == b'\n');
        // Before the chunk's first newline: part of a line that started earlier.
        let first = lines.next().unwrap_or_default();
        let stop = lines.rev().find_map(|line| take(line, &mut recent));
        if let Some(truncated) = stop {
            break truncated;
        }
        head = first.to_vec();
    };
    recent.lines.reverse();
    recent.truncated = truncated;
    Ok(recent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_after_a_torn_line_is_kept() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut log = EventLog::open(dir.path(), 1).expect("open");
        log.append(Record::Started { incarnation: 1 });
        drop(log);
        // A kill mid-write leaves half a record and no newline.
        let mut file = OpenOptions::new()
            .append(true)
            .open(dir.path().join(EVENT_LOG))
            .expect("reopen");
        file.write_all(b"{\"at_ms\":12,\"node\":1,\"rec")
            .expect("torn write");
        drop(file);
        let mut log = EventLog::open(dir.path(), 1).expect("open after the kill");
        log.append(Record::Started { incarnation: 2 });
        let incarnations: Vec<u64> = read_log(dir.path())
            .expect("read")
            .into_iter()
            .filter_map(|e| match e.record {
                Record::Started { incarnation } => Some(incarnation),
                _ => None,
            })
            .collect();
        assert_eq!(incarnations, [1, 2]);
    }

    /// Issue 38: a disk that fills while the node runs. `/dev/full` takes the log's
    /// place (every write fails with ENOSPC); each lost record is counted, in every
    /// handle on the log.
    #[test]
    fn a_failed_append_is_counted() {
        let full = Path::new("/dev/full");
        assert!(full.exists(), "this test needs /dev/full");
        let dir = tempfile::tempdir().expect("temp dir");
        std::os::unix::fs::symlink(full, dir.path().join(EVENT_LOG)).expect("symlink");
        let mut log = EventLog::open(dir.path(), 1).expect("open /dev/full");
        let mut hooks = log.try_clone().expect("a second handle");
        let failures = log.failures();
        assert_eq!(failures.count(), 0);
        log.append(Record::Started { incarnation: 1 });
        assert_eq!(failures.count(), 1, "the lost record is counted");
        hooks.append(Record::Started { incarnation: 2 });
        log.append(Record::Started { incarnation: 3 });
        assert_eq!(failures.count(), 3, "by every handle");
    }

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
        let mut log = EventLog::open(dir.path(), 1).expect("open");
        log.append(Record::Started { incarnation: 1 });
        // A write cut short by a full disk: part of a line, then the error.
        let mut file = OpenOptions::new()
            .append(true)
            .open(dir.path().join(EVENT_LOG))
            .expect("reopen");
        file.write_all(b"{\"at_ms\":12,\"node\":1,\"rec").unwrap();
        log.failures.failed(Instant::now());
        log.append(Record::Started { incarnation: 2 });
        let kept = read_log(dir.path()).expect("read");
        assert_eq!(kept.len(), 2, "{kept:?}");
    }
}

#[cfg(test)]
mod recent_tests {
    use super::*;
    use crate::protocol::{Cells, Fact};

    fn write(dir: &Path, entries: &[Entry], tail: &str) {
        let mut text: String = entries.iter().map(|e| e.to_json_line() + "\n").collect();
        text.push_str(tail);
        std::fs::write(dir.join(EVENT_LOG), text).expect("write log");
    }

    fn started(at_ms: u64) -> Entry {
        Entry {
            at_ms,
            node: 1,
            record: Record::Started { incarnation: at_ms },
        }
    }

    fn times(recent: &RecentEvents) -> Vec<u64> {
        let parsed = crate::history::parse_json_lines(recent.lines.join("\n").as_bytes());
        parsed.entries.iter().map(|e| e.at_ms).collect()
    }

    #[test]
    fn lines_since_the_time_oldest_first_without_persisted_and_torn_ones() {
        let dir = tempfile::tempdir().expect("temp dir");
        let persisted = Entry {
            at_ms: 25,
            node: 1,
            record: Record::Persisted(Cells::default()),
        };
        let fact = Entry {
            at_ms: 30,
            node: 1,
            record: Record::Fact(Fact::ElectionStarted),
        };
        let entries = [started(10), started(20), persisted, fact, started(40)];
        write(dir.path(), &entries, "{\"at_ms\":50,\"no");
        let recent = read_recent(dir.path(), 20, 100).expect("read");
        assert_eq!(times(&recent), [20, 30, 40]);
        assert_eq!(recent.unparsed, 1, "the torn last line");
        assert!(!recent.truncated);

        let two = read_recent(dir.path(), 0, 2).expect("read");
        assert_eq!(times(&two), [30, 40], "the newest two");
        assert!(two.truncated);
    }

    #[test]
    fn a_large_log_is_read_across_chunks_and_the_reply_fits_a_frame() {
        let dir = tempfile::tempdir().expect("temp dir");
        // About 40 bytes a line: several chunks, far more than one reply holds.
        let entries: Vec<Entry> = (0..20_000).map(started).collect();
        write(dir.path(), &entries, "");
        let all = read_recent(dir.path(), 0, usize::MAX).expect("read");
        assert!(all.truncated, "capped");
        let got = times(&all);
        assert_eq!(got.last(), Some(&19_999), "the newest line is kept");
        assert!(got.windows(2).all(|w| w[1] == w[0] + 1), "no line lost");
        assert!(got.len() > 500, "{} lines", got.len());
        crate::codec::encode_frame(&crate::api::Response::Events(all)).expect("fits a frame");

        let since = read_recent(dir.path(), 19_500, usize::MAX).expect("read");
        assert_eq!(times(&since), (19_500..20_000).collect::<Vec<_>>());
        assert!(!since.truncated);
    }
}
