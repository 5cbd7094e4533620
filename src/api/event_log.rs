//! The append-only event log in a node's data dir (`events.jsonl`): one JSON history
//! entry per line, written before the action it records is revealed, so tests and the
//! chaos runner can check I1–I5 on real processes after a kill -9.

use crate::history::{Entry, Record};
use crate::protocol::NodeId;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// File name of the event log inside a data dir.
pub const EVENT_LOG: &str = "events.jsonl";

/// Appends history entries for one node. Each line is one `write` call on an
/// unbuffered file, so a killed process leaves whole lines behind; should a write be
/// torn anyway, [`EventLog::open`] ends that line before appending, so only the torn
/// record is lost (counted by [`crate::history::parse_json_lines`]).
pub struct EventLog {
    node: NodeId,
    file: File,
    path: PathBuf,
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
        Ok(EventLog { node, file, path })
    }

    /// A second handle on the same open file, for a task that records on its own (the
    /// hook runner): both append whole lines to one file description, so their lines
    /// interleave but never mix.
    pub fn try_clone(&self) -> std::io::Result<EventLog> {
        Ok(EventLog {
            node: self.node,
            file: self.file.try_clone()?,
            path: self.path.clone(),
        })
    }

    /// Appends one record stamped with wall-clock time.
    pub fn append(&mut self, record: Record) {
        let entry = Entry {
            at_ms: crate::wall_clock::wall_ms(),
            node: self.node,
            record,
        };
        let mut line = entry.to_json_line();
        line.push('\n');
        if let Err(e) = self.file.write_all(line.as_bytes()) {
            tracing::error!("cannot append to {}: {e}", self.path.display());
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
