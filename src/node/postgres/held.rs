//! Two notes bully keeps in the node's data dir (not the server's), each holding one
//! PostgreSQL system identifier:
//! - `pg_held`: the data this node's server ran with. A member whose server's data dir
//!   is then missing has lost a volume (not mounted after a reboot, say) rather than
//!   joined new: the decisions leave it for the operator instead of creating anything
//!   in its place (src/postgres_rules.rs, `absent`).
//! - `pg_made`: a cluster this node's own `initdb` made, noted until its server is
//!   promoted or the data dir is replaced by a clone. Such a data dir holds nothing
//!   any client wrote, so if another coordinator's `initdb` became the cluster's (two
//!   coordinators in quick succession, each finding every data dir empty) the
//!   decisions replace it by a clone rather than leave it for the operator
//!   (src/postgres_rules.rs, `replace_own_initdb`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// File name of the note of the data the server ran with.
pub const HELD_FILE: &str = "pg_held";
/// File name of the note of a cluster this node's `initdb` made, never promoted.
pub const MADE_FILE: &str = "pg_made";

/// One note in one node's data dir. Only this node writes it, so it is read from disk
/// once and then kept in memory (every look asks; clones share what was read).
#[derive(Debug, Clone)]
pub struct IdNote {
    path: PathBuf,
    known: Arc<Mutex<Option<Option<u64>>>>,
}

impl IdNote {
    /// The note `file` (`HELD_FILE`, `MADE_FILE`) of the node whose data dir is
    /// `node_data_dir`.
    pub fn new(node_data_dir: &Path, file: &str) -> IdNote {
        IdNote {
            path: node_data_dir.join(file),
            known: Arc::default(),
        }
    }

    /// The system identifier noted (`None`: nothing noted; `Some(0)`: the note is
    /// unreadable, which counts as held and matches no server, so nothing is created
    /// over a lost volume and nothing replaced).
    pub fn system_id(&self) -> Option<u64> {
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        *known.get_or_insert_with(|| match std::fs::read_to_string(&self.path) {
            Ok(text) => Some(text.trim().parse().unwrap_or(0)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(_) => Some(0),
        })
    }

    /// Notes `system_id` (durably: a crash right after must not forget it).
    pub fn note(&self, system_id: u64) -> Result<(), String> {
        if self.system_id() == Some(system_id) {
            return Ok(());
        }
        crate::storage::write_file_durably(&self.path, format!("{system_id}\n").as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", self.path.display()))?;
        self.remember(Some(system_id));
        Ok(())
    }

    /// Removes the note (durably: the directory entry is synced).
    pub fn clear(&self) -> Result<(), String> {
        if self.system_id().is_none() {
            return Ok(());
        }
        crate::storage::remove_file_durably(&self.path)
            .map_err(|e| format!("cannot remove {}: {e}", self.path.display()))?;
        self.remember(None);
        Ok(())
    }

    fn remember(&self, noted: Option<u64>) {
        *self.known.lock().unwrap_or_else(|e| e.into_inner()) = Some(noted);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_is_kept_read_back_and_cleared() {
        let dir = tempfile::tempdir().unwrap();
        let held = IdNote::new(dir.path(), HELD_FILE);
        assert_eq!(held.system_id(), None);
        held.note(7_300_000_000_000_000_001).unwrap();
        assert_eq!(held.system_id(), Some(7_300_000_000_000_000_001));
        assert_eq!(
            IdNote::new(dir.path(), HELD_FILE).system_id(),
            Some(7_300_000_000_000_000_001),
            "read back from disk"
        );
        std::fs::write(dir.path().join(HELD_FILE), "garbage").unwrap();
        assert_eq!(
            IdNote::new(dir.path(), HELD_FILE).system_id(),
            Some(0),
            "unreadable counts as held"
        );
        let made = IdNote::new(dir.path(), MADE_FILE);
        made.note(5).unwrap();
        made.clear().unwrap();
        assert_eq!(made.system_id(), None);
        assert_eq!(IdNote::new(dir.path(), MADE_FILE).system_id(), None);
        assert!(dir.path().join(HELD_FILE).exists(), "the other note stays");
    }
}
