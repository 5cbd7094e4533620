//! The append-only event log in a node's data dir (`events.jsonl`): one JSON history
//! entry per line, queued before the action it records is revealed and written by a
//! thread of its own, so tests and the chaos runner can check I1–I5 on real processes
//! after a kill -9, and a stalled disk never stalls the node.

use super::log_writer::{ends_mid_line, Writer, FLUSH_WAIT};
use crate::history::{Entry, Record};
use crate::protocol::NodeId;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;

pub use super::log_writer::{WriteFailures, FAILURE_LOG_EVERY, QUEUE_BOUND};

/// File name of the event log inside a data dir.
pub const EVENT_LOG: &str = "events.jsonl";

/// Appends history entries for one node. Each record is stamped when it is appended
/// and queued for the log's writer thread (src/api/log_writer.rs), which writes it
/// with one `write` call on an unbuffered file, in append order: a stalled disk never
/// stalls the caller, and a killed process leaves whole lines behind (at worst the
/// newest records, still queued, are lost: a suffix, so what the checker reads stays
/// a true prefix of what the node did). Should a write be torn anyway,
/// [`EventLog::open`] ends that line before appending, so only the torn record is lost
/// (counted by [`crate::history::parse_json_lines`]).
pub struct EventLog {
    node: NodeId,
    writer: Arc<Writer>,
}

impl EventLog {
    /// Opens (or creates) the log in `data_dir` and starts its writer thread. A last
    /// line left unfinished by a kill is ended first, so the next record does not run
    /// into it.
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
            writer: Arc::new(Writer::start(file, path)?),
        })
    }

    /// A second handle on the same log, for a task that records on its own (the hook
    /// runner): both queue to one writer, so their lines interleave but never mix.
    pub fn try_clone(&self) -> std::io::Result<EventLog> {
        Ok(EventLog {
            node: self.node,
            writer: Arc::clone(&self.writer),
        })
    }

    /// The count of failed appends, shared with every clone of this handle.
    pub fn failures(&self) -> Arc<WriteFailures> {
        self.writer.failures()
    }

    /// Appends one record stamped with wall-clock time; returns at once. A record the
    /// disk does not take (a failed write, or a queue left full by a stalled disk) is
    /// lost: counted ([`EventLog::failures`]) and logged, the first of a run at once
    /// and then at most once per [`FAILURE_LOG_EVERY`].
    pub fn append(&mut self, record: Record) {
        let entry = Entry {
            at_ms: crate::wall_clock::wall_ms(),
            node: self.node,
            record,
        };
        let mut line = entry.to_json_line();
        line.push('\n');
        self.writer.send(line);
    }

    /// Waits (at most a couple of seconds) until every record appended so far through
    /// any handle is written; whether it was. For readers of the file that must see
    /// them: `bully history` through this node, tests.
    pub fn flush(&self) -> bool {
        self.writer.flush(FLUSH_WAIT)
    }
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
        assert!(log.flush());
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
        assert!(log.flush());
        assert_eq!(failures.count(), 1, "the lost record is counted");
        hooks.append(Record::Started { incarnation: 2 });
        log.append(Record::Started { incarnation: 3 });
        assert!(hooks.flush());
        assert_eq!(failures.count(), 3, "by every handle");
    }

    /// Issue 49: a disk that stalls (a FIFO nobody reads, its pipe full: every write
    /// blocks). Appends still return at once; past the queue's bound they are counted
    /// as lost; once the disk moves again, every queued record is written, in order.
    #[test]
    fn a_stalled_disk_never_stalls_the_appender() {
        use std::os::unix::fs::OpenOptionsExt;
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join(EVENT_LOG);
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
        let nonblocking = nix::fcntl::OFlag::O_NONBLOCK.bits();
        let mut reader = OpenOptions::new()
            .read(true)
            .custom_flags(nonblocking)
            .open(&path)
            .expect("reader");
        let log = EventLog::open(dir.path(), 1).expect("open the FIFO");
        let mut filler = OpenOptions::new()
            .write(true)
            .custom_flags(nonblocking)
            .open(&path)
            .expect("filler");
        while filler.write(&[b'\n'; 4096]).is_ok() {}
        let failures = log.failures();
        let appends = QUEUE_BOUND + 10;
        let (done, appended) = std::sync::mpsc::channel();
        let mut appender = log.try_clone().expect("handle");
        std::thread::spawn(move || {
            for incarnation in 0..appends as u64 {
                appender.append(Record::Started { incarnation });
            }
            let _ = done.send(appender);
        });
        let appender = appended
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("the appends returned while the disk is stalled");
        let lost = failures.count() as usize;
        assert!(
            (9..=10).contains(&lost),
            "{lost} lost: only what overflows the queue"
        );
        // The disk moves again: every queued record is written.
        let drained = std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            let mut chunk = vec![0u8; 1 << 16];
            while std::time::Instant::now() < deadline {
                match reader.read(&mut chunk) {
                    Ok(n) if n > 0 => bytes.extend_from_slice(&chunk[..n]),
                    _ => std::thread::sleep(std::time::Duration::from_millis(5)),
                }
                let lines = bytes.windows(11).filter(|w| w == b"incarnation").count();
                if lines + lost >= appends {
                    break;
                }
            }
            bytes
        });
        assert!(appender.flush(), "written once the disk moves");
        let bytes = drained.join().expect("drain");
        let written: Vec<u64> = crate::history::parse_json_lines(&bytes)
            .entries
            .into_iter()
            .filter_map(|e| match e.record {
                Record::Started { incarnation } => Some(incarnation),
                _ => None,
            })
            .collect();
        assert_eq!(written.len() + lost, appends);
        assert!(written.windows(2).all(|w| w[0] < w[1]), "in append order");
        assert_eq!(written[0], 0, "the oldest are kept, the newest dropped");
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
