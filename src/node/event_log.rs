//! The append-only event log in a node's data dir (`events.jsonl`): one JSON history
//! entry per line, written before the action it records is revealed, so tests and the
//! chaos runner can check I1–I5 on real processes after a kill -9.

use crate::history::{Entry, Record};
use crate::protocol::NodeId;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// File name of the event log inside a data dir.
pub const EVENT_LOG: &str = "events.jsonl";

/// Appends history entries for one node. Each line is one `write` call on an
/// unbuffered file, so a killed process leaves only whole lines behind (the kernel
/// keeps what was written; a torn last line is skipped by [`read_log`]).
pub struct EventLog {
    node: NodeId,
    file: File,
    path: PathBuf,
}

impl EventLog {
    /// Opens (or creates) the log in `data_dir`.
    pub fn open(data_dir: &Path, node: NodeId) -> std::io::Result<EventLog> {
        let path = data_dir.join(EVENT_LOG);
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
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

/// Reads a node's event log, skipping a torn last line left by a kill.
pub fn read_log(data_dir: &Path) -> std::io::Result<Vec<Entry>> {
    let text = std::fs::read_to_string(data_dir.join(EVENT_LOG))?;
    Ok(text
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect())
}
