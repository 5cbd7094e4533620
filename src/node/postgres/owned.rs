//! Files the server's user must own, and private ones (mode 0600 from their first
//! byte): the one place the manager hands files over, so the include file, the
//! passfile, the password files and the TLS copies are written alike
//! (`files.rs`, `secrets.rs`, `tls.rs`).

use nix::unistd::{chown, Gid, Uid};
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Hands `path` to `owner`, if one is set.
pub fn give(path: &Path, owner: Option<(Uid, Gid)>) -> Result<(), String> {
    match owner {
        None => Ok(()),
        Some((uid, gid)) => chown(path, Some(uid), Some(gid))
            .map_err(|e| format!("cannot hand {} to uid {uid}: {e}", path.display())),
    }
}

/// Replaces `path` with `text`, private ([`create_private`]) from its first byte: a
/// file beside it (`<path>.tmp`), then renamed over it, so a reader sees the old file
/// or the new one.
pub fn replace_private(path: &Path, text: &str, owner: Option<(Uid, Gid)>) -> Result<(), String> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let _ = std::fs::remove_file(&tmp);
    create_private(&tmp, text, owner)?;
    std::fs::rename(&tmp, path).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Creates `path` with `text`, mode 0600 from its first byte (never an existing file),
/// flushed, then handed to `owner`.
pub fn create_private(path: &Path, text: &str, owner: Option<(Uid, Gid)>) -> Result<(), String> {
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    out.write_all(text.as_bytes())
        .and_then(|_| out.sync_all())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    give(path, owner)
}
