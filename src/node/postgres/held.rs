//! Whether this node's server held the cluster's data: `pg_held` in the node's data
//! dir (not the server's), holding the system identifier of the data its server ran
//! with. A member whose server's data dir is then missing has lost a volume (not
//! mounted after a reboot, say) rather than joined new: the decisions leave it for the
//! operator instead of creating anything in its place (src/postgres_rules.rs, `absent`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// File name of the note inside the node's data dir.
pub const HELD_FILE: &str = "pg_held";

/// The note in one node's data dir. Only this node writes it, so it is read from disk
/// once and then kept in memory (every look asks; clones share what was read).
#[derive(Debug, Clone)]
pub struct Held {
    path: PathBuf,
    known: Arc<Mutex<Option<Option<u64>>>>,
}

impl Held {
    pub fn new(node_data_dir: &Path) -> Held {
        Held {
            path: node_data_dir.join(HELD_FILE),
            known: Arc::default(),
        }
    }

    /// The system identifier noted (`None`: never held data, or the note is unreadable:
    /// an unreadable note counts as held, so nothing is created over a lost volume).
    pub fn system_id(&self) -> Option<u64> {
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        *known.get_or_insert_with(|| match std::fs::read_to_string(&self.path) {
            Ok(text) => Some(text.trim().parse().unwrap_or(0)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(_) => Some(0),
        })
    }

    /// Notes that the server runs with the data of `system_id` (durably: a crash right
    /// after must not forget it).
    pub fn note(&self, system_id: u64) -> Result<(), String> {
        if self.system_id() == Some(system_id) {
            return Ok(());
        }
        crate::storage::write_file_durably(&self.path, format!("{system_id}\n").as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", self.path.display()))?;
        *self.known.lock().unwrap_or_else(|e| e.into_inner()) = Some(Some(system_id));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_is_kept_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let held = Held::new(dir.path());
        assert_eq!(held.system_id(), None);
        held.note(7_300_000_000_000_000_001).unwrap();
        assert_eq!(held.system_id(), Some(7_300_000_000_000_000_001));
        std::fs::write(dir.path().join(HELD_FILE), "garbage").unwrap();
        assert_eq!(
            Held::new(dir.path()).system_id(),
            Some(0),
            "unreadable counts as held"
        );
    }
}
