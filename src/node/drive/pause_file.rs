//! The maintenance pause as this node keeps it: `pause.json` in the data dir, read at
//! start and replaced durably (written beside, fsynced, renamed) before the node acts
//! on a new one, so a restart or a crash keeps it (src/api/pause.rs says what it means).

use crate::api::Pause;
use crate::node::shared::error::NodeError;
use crate::protocol::NodeId;
use crate::storage::write_file_durably;
use std::path::{Path, PathBuf};

/// File name of the pause record inside a data dir.
pub const PAUSE_FILE: &str = "pause.json";

/// The newest pause this node has kept, and where it keeps it.
#[derive(Debug)]
pub struct PauseFile {
    path: PathBuf,
    current: Pause,
}

impl PauseFile {
    /// Reads the record in `data_dir`; none there is "never paused". A file that cannot
    /// be read or parsed stops the start with the path and the fix: guessing would
    /// either end an operator's pause or invent one.
    pub fn open(data_dir: &Path) -> Result<PauseFile, NodeError> {
        let path = data_dir.join(PAUSE_FILE);
        let current = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| NodeError::PauseFile {
                path: path.display().to_string(),
                why: e.to_string(),
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Pause::default(),
            Err(e) => {
                return Err(NodeError::PauseFile {
                    path: path.display().to_string(),
                    why: e.to_string(),
                })
            }
        };
        Ok(PauseFile { path, current })
    }

    /// The record this node lives by.
    pub fn current(&self) -> &Pause {
        &self.current
    }

    /// Why the current record keeps node `me` from leading, if it does
    /// ([`Pause::holds_back`]); in a debug build with the sabotage `ignore_pause`
    /// (src/sabotage.rs), never.
    pub fn holds_back(&self, me: NodeId) -> Option<String> {
        #[cfg(debug_assertions)]
        if crate::sabotage::ignore_pause() {
            return None;
        }
        self.current.holds_back(me)
    }

    /// Keeps `pause` if it supersedes the current record: written durably first, then
    /// current. `Ok(false)`: it did not supersede, nothing changed. The file is written
    /// on a blocking thread, like the cells: an fsync must not stall the node's one
    /// runtime thread (and its links' heartbeats).
    pub async fn keep(&mut self, pause: Pause) -> std::io::Result<bool> {
        if !pause.supersedes(&self.current) {
            return Ok(false);
        }
        let mut json = serde_json::to_vec_pretty(&pause).map_err(std::io::Error::other)?;
        json.push(b'\n');
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || write_file_durably(&path, &json))
            .await
            .map_err(std::io::Error::other)??;
        self.current = pause;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paused(generation: u64) -> Pause {
        Pause {
            generation,
            paused: true,
            holder: Some(3),
            set_at_ms: 1,
        }
    }

    #[tokio::test]
    async fn a_kept_pause_survives_reopening_and_an_older_one_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = PauseFile::open(dir.path()).unwrap();
        assert_eq!(file.current(), &Pause::default());
        assert!(file.keep(paused(2)).await.unwrap());
        assert!(
            !file.keep(paused(1)).await.unwrap(),
            "an older record changes nothing"
        );
        let reopened = PauseFile::open(dir.path()).unwrap();
        assert_eq!(reopened.current(), &paused(2));
    }

    #[test]
    fn a_damaged_file_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(PAUSE_FILE), b"{not json").unwrap();
        let err = PauseFile::open(dir.path()).unwrap_err().to_string();
        assert!(err.contains(PAUSE_FILE) && err.contains("remove"), "{err}");
    }
}
