//! The synchronous record this node keeps for the cluster (src/postgres_rules/
//! durability.rs says what it means): `pg_sync.json` in the node's data dir, read at
//! start and replaced durably (written beside, fsynced, renamed) before the node
//! answers that it kept a newer one, so a restart or a crash keeps it. A witness keeps
//! one too: the record is the voters', not the servers'.

use crate::postgres_rules::SyncRecord;
use crate::storage::write_file_durably;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::sync::Mutex;

/// File name of the record inside a node's data dir.
pub const SYNC_FILE: &str = "pg_sync.json";

/// The newest record this node has kept, shared by the client API (which stores what
/// a primary sends) and the node's own manager.
#[derive(Clone, Debug)]
pub struct SyncStore {
    inner: Arc<Mutex<Kept>>,
}

#[derive(Debug)]
struct Kept {
    path: PathBuf,
    current: Option<SyncRecord>,
}

impl SyncStore {
    /// Reads the record in `data_dir` (none there: none kept yet). A file that cannot
    /// be read or parsed stops the start with the path: guessing would forget which
    /// servers hold the acknowledged commits.
    pub fn open(data_dir: &Path) -> Result<SyncStore, String> {
        let current = Self::peek(data_dir)?;
        Ok(SyncStore {
            inner: Arc::new(Mutex::new(Kept {
                path: data_dir.join(SYNC_FILE),
                current,
            })),
        })
    }

    /// The record in `data_dir` without keeping it (`bully pg adopt` checks which
    /// cluster the node belongs to); an error as [`SyncStore::open`]'s.
    pub fn peek(data_dir: &Path) -> Result<Option<SyncRecord>, String> {
        let path = data_dir.join(SYNC_FILE);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
                format!(
                    "{} cannot be read as a synchronous record ({e}); restore it from a \
                     backup, or copy another member's",
                    path.display()
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("cannot read {}: {e}", path.display())),
        }
    }

    /// The record kept now.
    pub async fn current(&self) -> Option<SyncRecord> {
        self.inner.lock().await.current.clone()
    }

    /// Keeps `record` if it supersedes the one kept (durably first), and returns the
    /// record kept afterwards: `record` itself when it was kept or already there. The
    /// file is written on a blocking thread: an fsync must not stall the node's runtime.
    pub async fn keep(&self, record: SyncRecord) -> Result<Option<SyncRecord>, String> {
        let mut kept = self.inner.lock().await;
        let newer = match &kept.current {
            Some(own) => record.supersedes(own),
            None => true,
        };
        if newer {
            let mut json = serde_json::to_vec_pretty(&record).map_err(|e| e.to_string())?;
            json.push(b'\n');
            let path = kept.path.clone();
            tokio::task::spawn_blocking(move || write_file_durably(&path, &json))
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| format!("cannot keep {}: {e}", kept.path.display()))?;
            kept.current = Some(record);
        }
        Ok(kept.current.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(token: u64, seq: u64) -> SyncRecord {
        SyncRecord {
            token,
            seq,
            primary: 1,
            k: 1,
            standbys: vec![2, 3],
            system_id: 9,
            alone: false,
        }
    }

    #[tokio::test]
    async fn only_a_newer_record_replaces_the_kept_one_and_it_survives_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let store = SyncStore::open(dir.path()).unwrap();
        assert_eq!(store.current().await, None);
        assert_eq!(store.keep(record(2, 1)).await.unwrap(), Some(record(2, 1)));
        assert_eq!(store.keep(record(1, 9)).await.unwrap(), Some(record(2, 1)));
        assert_eq!(store.keep(record(2, 2)).await.unwrap(), Some(record(2, 2)));
        let reopened = SyncStore::open(dir.path()).unwrap();
        assert_eq!(reopened.current().await, Some(record(2, 2)));
    }

    #[test]
    fn a_damaged_file_stops_the_start_with_its_path() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(SYNC_FILE), b"{ not json").unwrap();
        let e = SyncStore::open(dir.path()).unwrap_err();
        assert!(e.contains(SYNC_FILE) && e.contains("another member"), "{e}");
    }
}
