//! The append-only event log in a node's data dir (`events.jsonl`): one JSON history
//! entry per line, written before the action it records is revealed, so tests and the
//! chaos runner can check I1–I5 on real processes after a kill -9.

use crate::history::{Entry, Record};
use crate::protocol::NodeId;
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
