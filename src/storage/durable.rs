//! fsync for the store's files and directories.
//!
//! sled 0.34's `flush()` ends in `sync_file_range` on Linux (sled issue 1452): the data
//! reaches the page cache and survives a killed process, but neither the file's metadata
//! nor the device cache is forced, so a power cut could lose an epoch that peers have
//! already seen. Only sled's background flusher calls `sync_all`, every 500 ms. We fsync
//! everything ourselves after each flush, and fsync directories so that newly created
//! files (the store at first open, snapshots sled renames into place) are durable too.

use std::fs::{self, File};
use std::io;
use std::path::Path;

/// fsyncs every regular file in `dir` and one level of subdirectories (sled keeps
/// `db`, `conf`, `snap.*` at the top and large values in `blobs/`), then the
/// subdirectories and `dir` itself. Files that vanish meanwhile (sled removes old
/// snapshots in the background) are skipped: there is nothing of them left to keep.
pub(crate) fn sync_store(dir: &Path) -> io::Result<()> {
    sync_dir_contents(dir, 1)
}

fn sync_dir_contents(dir: &Path, depth: usize) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let kind = match entry.file_type() {
            Ok(kind) => kind,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        if kind.is_file() {
            skip_vanished(sync_path(&entry.path()))?;
        } else if kind.is_dir() && depth > 0 {
            skip_vanished(sync_dir_contents(&entry.path(), depth - 1))?;
        }
    }
    sync_path(dir)
}

fn skip_vanished(result: io::Result<()>) -> io::Result<()> {
    match result {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// Replaces the small file `path` with `bytes` so that a crash leaves either the old
/// file or the new one, never a torn one: written beside it, fsynced, renamed over it,
/// and the directory fsynced (the rename itself must survive a machine crash).
pub(crate) fn write_file_durably(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    let temp = dir.join(name);
    {
        let mut file = File::create(&temp)?;
        io::Write::write_all(&mut file, bytes)?;
        file.sync_all()?;
    }
    fs::rename(&temp, path)?;
    sync_path(dir)
}

/// Removes the small file `path` (gone already is fine) and fsyncs its directory, so
/// the removal survives a machine crash.
pub(crate) fn remove_file_durably(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    sync_path(path.parent().unwrap_or(Path::new(".")))
}

/// fsyncs one file or directory. On Linux a read-only handle may be fsynced, and a
/// directory can only be opened read-only.
pub(crate) fn sync_path(path: &Path) -> io::Result<()> {
    File::open(path)?.sync_all()
}

/// Creates `dir` and any missing parents, then fsyncs each created directory's parent
/// so the new entries survive a machine crash. Does nothing if `dir` exists.
pub(crate) fn create_dir_durably(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    // The first ancestor that exists: everything below it is new.
    let mut missing = Vec::new();
    let mut cursor = Some(dir);
    while let Some(path) = cursor {
        if path.as_os_str().is_empty() || path.exists() {
            break;
        }
        missing.push(path);
        cursor = path.parent();
    }
    fs::create_dir_all(dir)?;
    for created in missing {
        match created.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => sync_path(parent)?,
            _ => sync_path(Path::new("."))?,
        }
    }
    Ok(())
}
