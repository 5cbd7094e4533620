//! Gathers a run's history while it happens: follows every node's `events.jsonl` as it
//! grows (reading only the new bytes each time) and records the runner's own fault
//! records (`Crashed`, `Paused`, `Resumed`, `Partitioned`, `Healed`, wall-clock ms)
//! into `chaos-events.jsonl` beside the nodes' data, so a kept run dir holds the whole
//! story and the same [`crate::checker`] judges it.

use crate::api::event_log::EVENT_LOG;
use crate::history::{Entry, Record};
use crate::protocol::NodeId;
use crate::wall_clock::wall_ms;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// File name of the runner's own records in the run dir.
pub const RUNNER_LOG: &str = "chaos-events.jsonl";

/// Follows one node's event log from where it was last read.
#[derive(Debug)]
struct Tail {
    path: PathBuf,
    offset: u64,
    /// Bytes after the last newline: a line still being written.
    partial: Vec<u8>,
}

impl Tail {
    /// Appends the complete new lines to `out`; returns how many did not parse (a line
    /// torn by a kill is the only expected case). A missing file is not an error: the
    /// node has not started yet.
    fn poll(&mut self, out: &mut Vec<Entry>) -> usize {
        let Ok(mut file) = File::open(&self.path) else {
            return 0;
        };
        if file.seek(SeekFrom::Start(self.offset)).is_err() {
            return 0;
        }
        let mut fresh = Vec::new();
        let Ok(read) = file.read_to_end(&mut fresh) else {
            return 0;
        };
        self.offset += read as u64;
        self.partial.extend_from_slice(&fresh);
        let Some(end) = self.partial.iter().rposition(|&b| b == b'\n') else {
            return 0;
        };
        let complete: Vec<u8> = self.partial.drain(..=end).collect();
        let parsed = crate::history::parse_json_lines(&complete);
        out.extend(parsed.entries);
        parsed.unparsed
    }
}

/// The history of a run so far: every node's entries and the runner's, in arrival
/// order per source. [`Collector::history`] gives the merged, time-ordered view.
#[derive(Debug)]
pub struct Collector {
    tails: Vec<(NodeId, Tail)>,
    /// Per node, its entries in log order.
    nodes: Vec<Vec<Entry>>,
    runner: Vec<Entry>,
    runner_file: File,
    runner_path: PathBuf,
    /// Lines that did not parse (torn by a kill): reported, not fatal.
    pub bad_lines: usize,
}

impl Collector {
    /// Follows the event logs in `data_dirs` (one per node) and writes the runner's
    /// records to `run_dir/chaos-events.jsonl`.
    pub fn new(run_dir: &Path, data_dirs: &[(NodeId, PathBuf)]) -> std::io::Result<Collector> {
        let runner_path = run_dir.join(RUNNER_LOG);
        let runner_file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&runner_path)?;
        Ok(Collector {
            tails: data_dirs
                .iter()
                .map(|(id, dir)| {
                    (
                        *id,
                        Tail {
                            path: dir.join(EVENT_LOG),
                            offset: 0,
                            partial: Vec::new(),
                        },
                    )
                })
                .collect(),
            nodes: vec![Vec::new(); data_dirs.len()],
            runner: Vec::new(),
            runner_file,
            runner_path,
            bad_lines: 0,
        })
    }

    /// Follows node `id`'s event log in `data_dir` from its start: a node added at
    /// runtime, or one whose store was lost (its entries so far are kept).
    pub fn follow(&mut self, id: NodeId, data_dir: &Path) {
        let tail = Tail {
            path: data_dir.join(EVENT_LOG),
            offset: 0,
            partial: Vec::new(),
        };
        match self.tails.iter_mut().find(|(n, _)| *n == id) {
            Some((_, old)) => *old = tail,
            None => {
                self.tails.push((id, tail));
                self.nodes.push(Vec::new());
            }
        }
    }

    /// Reads what the nodes wrote since the last poll; returns the new entries.
    pub fn poll(&mut self) -> Vec<Entry> {
        let mut fresh = Vec::new();
        for (index, (_, tail)) in self.tails.iter_mut().enumerate() {
            let before = fresh.len();
            self.bad_lines += tail.poll(&mut fresh);
            self.nodes[index].extend_from_slice(&fresh[before..]);
        }
        fresh
    }

    /// Stamps a runner record with the wall clock, appends it to the runner log and
    /// keeps it. A write error is reported on stderr and does not stop the run: the
    /// record is still kept in memory and checked.
    pub fn record(&mut self, node: NodeId, record: Record) -> Entry {
        let entry = Entry {
            at_ms: wall_ms(),
            node,
            record,
        };
        let line = entry.to_json_line() + "\n";
        if let Err(e) = self.runner_file.write_all(line.as_bytes()) {
            eprintln!("warning: cannot write {}: {e}", self.runner_path.display());
        }
        self.runner.push(entry.clone());
        entry
    }

    /// The whole history so far, ordered by time. Each source keeps its own order
    /// among equal times, node logs before runner records (a stable sort).
    pub fn history(&self) -> Vec<Entry> {
        crate::history::merge(
            self.nodes
                .iter()
                .cloned()
                .chain(std::iter::once(self.runner.clone())),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Cells;

    fn line(at_ms: u64, node: NodeId) -> String {
        Entry {
            at_ms,
            node,
            record: Record::Persisted(Cells::default()),
        }
        .to_json_line()
    }

    #[test]
    fn follows_growing_logs_skips_torn_lines_and_merges_runner_records() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("node1");
        std::fs::create_dir_all(&data).unwrap();
        let log = data.join(EVENT_LOG);
        let mut c = Collector::new(
            dir.path(),
            &[(1, data.clone()), (2, dir.path().join("none"))],
        )
        .unwrap();
        assert!(c.poll().is_empty(), "no log yet is not an error");

        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap();
        write!(f, "{}\n{}", line(10, 1), &line(20, 1)[..7]).unwrap();
        assert_eq!(c.poll().len(), 1, "only the complete line");
        writeln!(f, "{}", &line(20, 1)[7..]).unwrap();
        assert_eq!(c.poll()[0].at_ms, 20, "the rest of a line arrives later");
        writeln!(f, "{{\"at_ms\":").unwrap();
        assert!(c.poll().is_empty());
        assert_eq!(c.bad_lines, 1);

        let crashed = c.record(1, Record::Crashed);
        let history = c.history();
        assert_eq!(history.len(), 3);
        assert_eq!(history.last(), Some(&crashed));
        let written = std::fs::read_to_string(dir.path().join(RUNNER_LOG)).unwrap();
        assert!(written.contains("crashed"), "{written}");
    }
}
