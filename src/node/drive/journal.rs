//! What a node writes down about itself, in order: its durable cells (sled, flushed)
//! and the event log the checker reads. Persisting is "save, flush, then log": the log
//! never claims a state the disk does not hold (I3).

use crate::api::event_log::{EventLog, WriteFailures};
use crate::history::Record;
use crate::node::shared::error::NodeError;
use crate::protocol::{Cells, Membership, NodeId};
use crate::storage::Storage;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The node's storage and event log.
pub struct Journal {
    storage: Arc<Storage>,
    event_log: EventLog,
}

impl Journal {
    /// Opens both in `data_dir` (refusing a locked or corrupted store); the cells as
    /// last flushed.
    pub fn open(data_dir: &Path, id: NodeId) -> Result<(Journal, Cells), NodeError> {
        let storage = Arc::new(Storage::open(data_dir)?);
        let cells = storage.load()?;
        let event_log = EventLog::open(data_dir, id).map_err(|source| NodeError::EventLog {
            dir: data_dir.display().to_string(),
            source,
        })?;
        Ok((Journal { storage, event_log }, cells))
    }

    /// Appends `record` to the event log.
    pub fn log(&mut self, record: Record) {
        self.event_log.append(record);
    }

    /// The event log's count of failed appends (every handle's), for the metrics.
    pub fn event_log_failures(&self) -> Arc<WriteFailures> {
        self.event_log.failures()
    }

    /// Another handle on the event log, for the hook runner's [`Record::HookRan`].
    pub fn event_log(&self) -> std::io::Result<EventLog> {
        self.event_log.try_clone()
    }

    /// The stored member list, if one was ever stored.
    pub fn load_members(&self) -> Result<Option<Membership>, NodeError> {
        Ok(self.storage.load_members()?)
    }

    /// The mode stored at the store's first start (src/node/drive/start.rs).
    pub fn load_mode(&self) -> Result<Option<crate::protocol::Mode>, NodeError> {
        Ok(self.storage.load_mode()?)
    }

    /// Stores the cluster's mode (flushed): at the first start, or `--change-mode`.
    pub fn save_mode(&self, mode: crate::protocol::Mode) -> Result<(), NodeError> {
        Ok(self.storage.save_mode(mode)?)
    }

    /// The members a forced recovery on this store gave up (`bully recover`).
    pub fn load_gave_up(&self) -> Result<Vec<crate::protocol::Member>, NodeError> {
        Ok(self.storage.load_gave_up()?)
    }

    /// Writes and flushes the member list at start, before the runtime runs
    /// (src/node/drive/start.rs stores the config file's list on a first start).
    pub fn save_members(&self, list: &Membership) -> Result<(), NodeError> {
        Ok(self.storage.save_members(list)?)
    }

    /// Writes and flushes the member list (docs/design.md#membership).
    pub async fn persist_members(&mut self, list: Membership) -> Result<(), NodeError> {
        let storage = Arc::clone(&self.storage);
        tokio::task::spawn_blocking(move || storage.save_members(&list)).await??;
        Ok(())
    }

    /// Writes and flushes `cells`, then logs them; how long the write and flush took.
    pub async fn persist(&mut self, cells: Cells) -> Result<Duration, NodeError> {
        let storage = Arc::clone(&self.storage);
        let started = Instant::now();
        tokio::task::spawn_blocking(move || storage.save(&cells)).await??;
        let took = started.elapsed();
        self.event_log.append(Record::Persisted(cells));
        Ok(took)
    }
}
