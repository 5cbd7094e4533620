//! Why the storage cells could not be opened, read or written. Every message names the
//! data directory, so an operator with several nodes on one machine knows which one.

use crate::protocol::Cells;
use std::io;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// The ways the durable cells can fail. None of them is a panic: a node that cannot
/// trust its cells must refuse to start (or stop acting) with a clear message.
#[derive(Debug, Error)]
pub enum StorageError {
    /// Another process (or another handle in this process) has the directory open;
    /// two nodes sharing one set of cells would break fencing (I1, I2).
    #[error("data dir {} is in use by another bully process", dir.display())]
    Locked { dir: PathBuf },

    /// The store or one of its values cannot be decoded; starting from defaults instead
    /// would silently forget epochs this node already revealed.
    #[error("data dir {} is corrupt: {detail}", dir.display())]
    Corrupt { dir: PathBuf, detail: String },

    /// The file system refused an operation (permissions, disk full, not a directory).
    #[error("data dir {}: {source}", dir.display())]
    Io {
        dir: PathBuf,
        #[source]
        source: io::Error,
    },

    /// A save would move a cell backwards. The state machine never asks for that (it
    /// debug-asserts I1), so this means a bug or two writers; refusing keeps the
    /// fencing token monotone instead of silently rewinding it.
    #[error(
        "data dir {}: refusing to save {attempted:?}: it is older than the stored {stored:?}",
        dir.display()
    )]
    Regression {
        dir: PathBuf,
        /// Boxed: the error travels in every storage `Result`, which stays small.
        stored: Box<Cells>,
        attempted: Box<Cells>,
    },

    /// sled's files hold an older save than the check file says was written (the `db`
    /// file cut short, damaged, deleted or replaced by an older copy; sled 0.34 reads
    /// those back without an error). Used as current, the node would vote again in
    /// terms it already voted in.
    #[error(
        "data dir {} went back: its store holds generation {found_generation} (term \
         {found_term}) but {check_file} records generation {expected_generation} (term \
         {expected_term}) as written; the db file was cut short, damaged or replaced by \
         an older copy. Refusing to use it: {remedy}",
        dir.display(),
        check_file = super::check::CHECK_FILE,
        remedy = REMEDY
    )]
    RolledBack {
        dir: PathBuf,
        found_generation: u64,
        found_term: u64,
        expected_generation: u64,
        expected_term: u64,
    },

    /// The check file is damaged, or sled and the check file disagree in a way no crash
    /// leaves behind: which of the two is current cannot be told, so neither is used.
    #[error(
        "data dir {} fails its check: {detail}. Refusing to use it: {remedy}",
        dir.display(),
        remedy = REMEDY
    )]
    Damaged { dir: PathBuf, detail: String },
}

/// What an operator can do about a store that went back or fails its check.
const REMEDY: &str = "restore the newest copy of this data dir, or delete the data dir so \
     the node starts on an empty store and recovers its term from its peers \
     (docs/design.md#store-recovery; one node at a time)";

impl StorageError {
    /// The directory the error is about.
    pub fn dir(&self) -> &Path {
        match self {
            StorageError::Locked { dir }
            | StorageError::Corrupt { dir, .. }
            | StorageError::Io { dir, .. }
            | StorageError::Regression { dir, .. }
            | StorageError::RolledBack { dir, .. }
            | StorageError::Damaged { dir, .. } => dir,
        }
    }

    /// Wraps a plain I/O error (our own fsyncs and directory creation).
    pub(crate) fn io(dir: &Path, source: io::Error) -> StorageError {
        StorageError::Io {
            dir: dir.to_path_buf(),
            source,
        }
    }

    /// Wraps a description of something undecodable.
    pub(crate) fn corrupt(dir: &Path, detail: impl Into<String>) -> StorageError {
        StorageError::Corrupt {
            dir: dir.to_path_buf(),
            detail: detail.into(),
        }
    }

    /// Sorts a sled error into our cases. sled 0.34.7 reports a held file lock only as
    /// an `Io` error of kind `Other` whose text starts "could not acquire lock"
    /// (config.rs, `try_lock`); the version is pinned and a unit test pins this too.
    pub(crate) fn from_sled(dir: &Path, err: sled::Error) -> StorageError {
        match err {
            sled::Error::Io(e)
                if e.kind() == io::ErrorKind::Other
                    && e.to_string().contains("could not acquire lock") =>
            {
                StorageError::Locked {
                    dir: dir.to_path_buf(),
                }
            }
            sled::Error::Io(e) => StorageError::io(dir, e),
            sled::Error::Corruption { at, .. } => {
                StorageError::corrupt(dir, format!("sled found corruption at {at:?}"))
            }
            sled::Error::Unsupported(s) => {
                StorageError::corrupt(dir, format!("sled cannot use this store: {s}"))
            }
            sled::Error::ReportableBug(s) => {
                StorageError::corrupt(dir, format!("sled internal error: {s}"))
            }
            sled::Error::CollectionNotFound(name) => StorageError::corrupt(
                dir,
                format!(
                    "sled collection {:?} not found",
                    String::from_utf8_lossy(&name)
                ),
            ),
        }
    }
}
