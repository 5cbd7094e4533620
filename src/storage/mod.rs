//! The durable storage cells (term, accepted epoch, incarnation, the D of the node's
//! promises, and the member list once one was stored) in a sled database.
//!
//! The state machine's [`Action::Persist`](crate::protocol::Action) must be durable
//! before the next action runs (invariant I3), so [`Storage::save`] returns only when:
//! 1. all the cells, and the write generation (+1 per save), are written in ONE sled
//!    transaction (a crash never leaves a new term beside an old epoch), each under its
//!    own key, encoded by [`crate::codec`];
//! 2. sled has flushed its buffers to the files (`Db::flush`);
//! 3. the store's files and directory are fsynced ([`durable`]; sled's flush alone
//!    survives `kill -9` but not a power cut, sled#1452);
//! 4. the check file (`cells.check`, [`check`]) holds the same generation, cells and
//!    member list identity, under a CRC-32, replaced durably.
//!
//! A save that would move a cell backwards is refused ([`StorageError::Regression`]).
//! The machine never asks for that, so it can only come from a bug or a second writer;
//! a refused save is loud, a silently rewound fencing token is not.
//!
//! A store is checked before it is trusted. sled 0.34 cannot tell a damaged log entry
//! from the torn tail of a crash: a `db` file cut short, with garbage in it, deleted or
//! replaced by an older copy opens without an error as an older or empty store (it
//! notices only when a `snap.*` file exists, which a node killed with -9 often lacks).
//! So [`Storage::open`] compares sled's generation and cells with the check file's
//! (rules: [`check::judge`]) and refuses a store that went back
//! ([`StorageError::RolledBack`]) or a check file that is damaged or disagrees in a way
//! no crash leaves behind ([`StorageError::Damaged`]); the node exits with status 2.
//! Because the check file is written only after sled's write is flushed and fsynced, a
//! crash between the two leaves sled one generation ahead: that store is current, and
//! open brings the check file up to it. A store without a check file is accepted: a
//! store written before this check existed (its next save writes one), or a fresh one.
//! What this cannot catch: the whole data dir (check file included) replaced by an
//! older copy, which is consistent with itself; only the peers could tell.
//!
//! A damaged `conf` file, a value that does not decode or a missing cell is reported
//! as [`StorageError::Corrupt`].

mod check;
mod durable;
mod error;
#[cfg(test)]
mod tests;

pub use check::CHECK_FILE;
pub(crate) use durable::{create_dir_durably, remove_file_durably, write_file_durably};
pub use error::StorageError;

use crate::codec::{decode_value, encode_value};
use crate::protocol::membership::{
    ListBeforePgSettings, ListBeforeSettings, ListBeforeStandbyCluster,
};
use crate::protocol::{Cells, Member, Membership};
use serde::de::DeserializeOwned;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The key of each cell. Separate keys keep each value small and let a future cell be
/// added without rewriting the others.
const TERM: &str = "term";
const ACCEPTED: &str = "accepted";
const INCARNATION: &str = "incarnation";
/// The D this node's promises may still bind under (`Cells::promise_ms`); absent in
/// stores written before it existed, which read as 0.
const PROMISE: &str = "promise";
/// Whether the store has completed a store recovery (`Cells::recovered`); absent in
/// stores written before it existed, which read as false.
const RECOVERED: &str = "recovered";
/// Whether a forced recovery gave this node up (`Cells::given_up`); absent in stores
/// from before it existed (read as false).
const GIVEN_UP: &str = "given_up";
/// Whether a forced recovery still waits for the other survivors' terms
/// (`Cells::awaits_survivors`); absent in stores from before it existed (read as false).
const AWAITS_SURVIVORS: &str = "awaits_survivors";
/// Every key of a cell, in [`decode_cells`]'s order.
const CELL_KEYS: [&str; 7] = [
    TERM,
    ACCEPTED,
    INCARNATION,
    PROMISE,
    RECOVERED,
    GIVEN_UP,
    AWAITS_SURVIVORS,
];
/// The members this store's forced recovery gave up (`bully recover`), whom the
/// transport refuses as given up rather than as strangers; absent: none.
const GAVE_UP: &str = "gave_up";
/// The member list (docs/design.md#membership); absent until the first one is stored.
const MEMBERS: &str = "members";
/// The mode the cluster runs (`quorum` or `classic`), stored at this store's first
/// start: cluster state, not the config file's (src/node/drive/start.rs).
const MODE: &str = "mode";
/// The write generation, +1 per save, written with the cells it counts: what the
/// check file is compared with on open. Absent in stores written before the check
/// existed, which read as 0.
const GENERATION: &str = "generation";

/// sled caches pages in memory; three tiny keys need almost none.
const CACHE_BYTES: u64 = 1 << 20;

/// One node's durable cells. Holding it holds sled's lock on the directory, so a second
/// node pointed at the same `data_dir` fails with [`StorageError::Locked`].
pub struct Storage {
    db: sled::Db,
    dir: PathBuf,
}

/// Shows the directory only: sled's own debug output is the whole tree.
impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Storage").field("dir", &self.dir).finish()
    }
}

impl Storage {
    /// Opens (creating if needed) the store in `dir`. Fails with `Locked` if another
    /// process or handle holds it, `Corrupt` if sled cannot recover it, `Io` otherwise.
    pub fn open(dir: &Path) -> Result<Storage, StorageError> {
        durable::create_dir_durably(dir).map_err(|e| StorageError::io(dir, e))?;
        // No background flusher: every save flushes and fsyncs itself before it returns,
        // and the flusher would only wake an idle node (and fsync) twice a second.
        let config = sled::Config::new()
            .path(dir)
            .cache_capacity(CACHE_BYTES)
            .flush_every_ms(None);
        // sled 0.34 may panic instead of erroring on some damaged files; a node must
        // report that as corruption, not crash with a backtrace.
        let db = match catch_unwind(AssertUnwindSafe(|| config.open())) {
            Ok(Ok(db)) => db,
            Ok(Err(e)) => return Err(StorageError::from_sled(dir, e)),
            Err(panic) => {
                return Err(StorageError::corrupt(
                    dir,
                    format!("sled panicked while opening: {}", panic_text(&panic)),
                ))
            }
        };
        // The files sled just created (db, conf, blobs/) must outlive a machine crash.
        durable::sync_store(dir).map_err(|e| StorageError::io(dir, e))?;
        let storage = Storage {
            db,
            dir: dir.to_path_buf(),
        };
        storage.verify()?;
        Ok(storage)
    }

    /// Compares what sled holds with the check file ([`check::judge`]): refuses a store
    /// that went back or disagrees with it, and brings a check file left one save
    /// behind by a crash up to sled (else the next save, crashing the same way, would
    /// leave it two behind, which no crash explains).
    fn verify(&self) -> Result<(), StorageError> {
        let stored = check::Stamp {
            generation: self.load_generation()?,
            cells: self.load()?,
            members: self.load_members()?.map(|list| list.id),
        };
        let recorded = match check::read(&self.dir) {
            Ok(recorded) => recorded,
            Err(check::ReadError::Io(e)) => return Err(StorageError::io(&self.dir, e)),
            Err(check::ReadError::Damaged(detail)) => {
                return Err(StorageError::Damaged {
                    dir: self.dir.clone(),
                    detail,
                })
            }
        };
        match check::judge(&stored, recorded.as_ref()) {
            check::Verdict::Current => {
                if recorded.is_none() && stored.generation > 1 {
                    tracing::warn!(
                        dir = %self.dir.display(),
                        generation = stored.generation,
                        "{CHECK_FILE} is missing beside a store that had one; using the \
                         store as it is, the next save writes a new one"
                    );
                }
                Ok(())
            }
            check::Verdict::CatchUp => {
                check::write(&self.dir, &stored).map_err(|e| StorageError::io(&self.dir, e))
            }
            check::Verdict::RolledBack => {
                let expected = recorded.unwrap_or_default();
                Err(StorageError::RolledBack {
                    dir: self.dir.clone(),
                    found_generation: stored.generation,
                    found_term: stored.cells.term,
                    expected_generation: expected.generation,
                    expected_term: expected.cells.term,
                })
            }
            check::Verdict::Mismatch(detail) => Err(StorageError::Damaged {
                dir: self.dir.clone(),
                detail,
            }),
        }
    }

    /// The stored write generation; 0 in a fresh store or one from before it existed.
    fn load_generation(&self) -> Result<u64, StorageError> {
        let raw = self
            .db
            .get(GENERATION)
            .map_err(|e| StorageError::from_sled(&self.dir, e))?;
        decode_generation(raw.as_deref()).map_err(|detail| StorageError::corrupt(&self.dir, detail))
    }

    /// Like [`Storage::open`], but waits up to `wait` while the store is `Locked`, and
    /// says how many times it found it locked. The lock outlives its holder for a
    /// moment: sled's io threads can hold the files briefly after the last handle in
    /// this process is dropped, and a killed process holds them until the kernel has
    /// torn it down. For reopening a store one knows was just released.
    pub fn open_waiting(dir: &Path, wait: Duration) -> Result<(Storage, u32), StorageError> {
        let deadline = Instant::now() + wait;
        let mut locked = 0;
        loop {
            match Storage::open(dir) {
                Err(StorageError::Locked { .. }) if Instant::now() < deadline => {
                    locked += 1;
                    std::thread::sleep(Duration::from_millis(10));
                }
                other => return other.map(|storage| (storage, locked)),
            }
        }
    }

    /// Reads the cells; a fresh store gives `Cells::default()`. A value that does not
    /// decode, or a cell missing beside the others, is `Corrupt`.
    pub fn load(&self) -> Result<Cells, StorageError> {
        let get = |key: &str| {
            self.db
                .get(key)
                .map_err(|e| StorageError::from_sled(&self.dir, e))
        };
        let mut raw = Vec::with_capacity(CELL_KEYS.len());
        for key in CELL_KEYS {
            raw.push(get(key)?);
        }
        decode_cells(&raw).map_err(|detail| StorageError::corrupt(&self.dir, detail))
    }

    /// Reads the stored member list; `None` if none was ever stored (the config file's
    /// peers seed it). A value that does not decode is `Corrupt`.
    pub fn load_members(&self) -> Result<Option<Membership>, StorageError> {
        let raw = self
            .db
            .get(MEMBERS)
            .map_err(|e| StorageError::from_sled(&self.dir, e))?;
        raw.map(|bytes| {
            decode_value::<Membership>(&bytes)
                .or_else(|e| {
                    // A store from before the standby cluster was a setting (none:
                    // the cluster ran its own primary), before PostgreSQL's parameters
                    // were settings, or before the settings were part of the list: its
                    // holder fills what is missing from its file until the next list
                    // is written.
                    decode_value::<ListBeforeStandbyCluster>(&bytes)
                        .map(Membership::from)
                        .or_else(|_| {
                            decode_value::<ListBeforePgSettings>(&bytes).map(Membership::from)
                        })
                        .or_else(|_| {
                            decode_value::<ListBeforeSettings>(&bytes).map(Membership::from)
                        })
                        .map_err(|_| e)
                })
                .map_err(|e| {
                    StorageError::corrupt(
                        &self.dir,
                        format!("the member list does not decode: {e}"),
                    )
                })
        })
        .transpose()
    }

    /// Writes the member list, flushed, fsynced and checked like [`Storage::save`].
    /// Refuses a list older than the stored one (the machine only ever stores newer
    /// ones).
    pub fn save_members(&self, list: &Membership) -> Result<(), StorageError> {
        self.write(None, Some(list), None)
    }

    /// Writes all the cells in one transaction, flushes, fsyncs and updates the check
    /// file; returns once a machine crash can no longer lose them. Refuses a cell older
    /// than the stored one.
    pub fn save(&self, cells: &Cells) -> Result<(), StorageError> {
        self.write(Some(cells), None, None)
    }

    /// Writes the cells, the member list and the members a forced recovery gives up
    /// in ONE transaction, flushed and fsynced like [`Storage::save`]: `bully recover`
    /// (src/node/drive/forced_recovery.rs) raises the term and stores a new list
    /// together, so a crash keeps all or nothing. Refuses a cell or a list older than
    /// the stored one.
    pub fn save_forced_recovery(
        &self,
        cells: &Cells,
        list: &Membership,
        gave_up: &[Member],
    ) -> Result<(), StorageError> {
        self.write(Some(cells), Some(list), Some(gave_up))
    }

    /// The mode stored at the store's first start (`None`: never started, or started
    /// by a version that did not store it).
    pub fn load_mode(&self) -> Result<Option<crate::protocol::Mode>, StorageError> {
        let raw = self
            .db
            .get(MODE)
            .map_err(|e| StorageError::from_sled(&self.dir, e))?;
        raw.map(|bytes| {
            decode_value(&bytes).map_err(|e| {
                StorageError::corrupt(&self.dir, format!("the stored mode does not decode: {e}"))
            })
        })
        .transpose()
    }

    /// Stores `mode` as the cluster's, flushed and fsynced (a crash keeps it or none).
    pub fn save_mode(&self, mode: crate::protocol::Mode) -> Result<(), StorageError> {
        let bytes = encode_value(&mode).map_err(|e| {
            StorageError::corrupt(&self.dir, format!("cannot encode the mode: {e}"))
        })?;
        self.db
            .insert(MODE, bytes)
            .map_err(|e| StorageError::from_sled(&self.dir, e))?;
        self.db
            .flush()
            .map_err(|e| StorageError::from_sled(&self.dir, e))?;
        durable::sync_store(&self.dir).map_err(|e| StorageError::io(&self.dir, e))
    }

    /// The members a forced recovery on this store gave up, with the addresses the list
    /// before it held (empty: none ever did).
    pub fn load_gave_up(&self) -> Result<Vec<Member>, StorageError> {
        let raw = self
            .db
            .get(GAVE_UP)
            .map_err(|e| StorageError::from_sled(&self.dir, e))?;
        raw.map_or(Ok(Vec::new()), |bytes| {
            decode_value::<Vec<Member>>(&bytes).map_err(|e| {
                StorageError::corrupt(
                    &self.dir,
                    format!("the given-up members do not decode: {e}"),
                )
            })
        })
    }

    /// The one transaction behind [`Storage::save`], [`Storage::save_forced_recovery`] and
    /// [`Storage::save_members`]: the given cells and/or list and the next generation,
    /// flushed and fsynced, then the check file. The check file comes last, so a crash
    /// between leaves it one generation behind a complete sled write (accepted on open).
    fn write(
        &self,
        cells: Option<&Cells>,
        list: Option<&Membership>,
        gave_up: Option<&[Member]>,
    ) -> Result<(), StorageError> {
        let encode_err = |e| StorageError::corrupt(&self.dir, format!("cannot encode cells: {e}"));
        let cell_bytes = cells
            .map(|cells| {
                Ok::<_, StorageError>([
                    (TERM, encode_value(&cells.term).map_err(encode_err)?),
                    (ACCEPTED, encode_value(&cells.accepted).map_err(encode_err)?),
                    (
                        INCARNATION,
                        encode_value(&cells.incarnation).map_err(encode_err)?,
                    ),
                    (
                        PROMISE,
                        encode_value(&cells.promise_ms).map_err(encode_err)?,
                    ),
                    (
                        RECOVERED,
                        encode_value(&cells.recovered).map_err(encode_err)?,
                    ),
                    (GIVEN_UP, encode_value(&cells.given_up).map_err(encode_err)?),
                    (
                        AWAITS_SURVIVORS,
                        encode_value(&cells.awaits_survivors).map_err(encode_err)?,
                    ),
                ])
            })
            .transpose()?;
        let members = list
            .map(|list| {
                encode_value(list).map_err(|e| {
                    StorageError::corrupt(&self.dir, format!("cannot encode the member list: {e}"))
                })
            })
            .transpose()?;
        let gave_up = gave_up
            .map(|members| {
                encode_value(&members).map_err(|e| {
                    StorageError::corrupt(&self.dir, format!("cannot encode given-up members: {e}"))
                })
            })
            .transpose()?;

        // The closure may run again after a conflict: it only reads and overwrites the
        // same keys with bytes computed from what it read, so a re-run is harmless.
        let outcome = self.db.transaction(|tx| {
            let abort = |e| sled::transaction::ConflictableTransactionError::Abort(e);
            let corrupt = |detail| abort(StorageError::corrupt(&self.dir, detail));
            let mut raw = Vec::with_capacity(CELL_KEYS.len());
            for key in CELL_KEYS {
                raw.push(tx.get(key)?);
            }
            let stored = decode_cells(&raw).map_err(corrupt)?;
            let generation = decode_generation(tx.get(GENERATION)?.as_deref()).map_err(corrupt)?;
            let stored_list = tx
                .get(MEMBERS)?
                .map(|raw| {
                    decode_value::<Membership>(&raw)
                        .map_err(|e| corrupt(format!("the member list does not decode: {e}")))
                })
                .transpose()?;
            if let Some(cells) = cells {
                if goes_backwards(&stored, cells) {
                    return sled::transaction::abort(StorageError::Regression {
                        dir: self.dir.clone(),
                        stored: Box::new(stored),
                        attempted: Box::new(*cells),
                    });
                }
            }
            if let (Some(list), Some(stored)) = (list, &stored_list) {
                if stored.id > list.id {
                    return sled::transaction::abort(StorageError::corrupt(
                        &self.dir,
                        format!(
                            "refused to store member list {} over the newer {}",
                            list.id, stored.id
                        ),
                    ));
                }
            }
            if let Some(bytes) = &members {
                tx.insert(MEMBERS, bytes.as_slice())?;
            }
            if let Some(bytes) = &gave_up {
                tx.insert(GAVE_UP, bytes.as_slice())?;
            }
            for (key, bytes) in cell_bytes.iter().flatten() {
                tx.insert(*key, bytes.as_slice())?;
            }
            let stamp = check::Stamp {
                generation: generation + 1,
                cells: cells.copied().unwrap_or(stored),
                members: list.or(stored_list.as_ref()).map(|list| list.id),
            };
            let generation = encode_value(&stamp.generation)
                .map_err(|e| corrupt(format!("cannot encode the generation: {e}")))?;
            tx.insert(GENERATION, generation)?;
            Ok(stamp)
        });
        let stamp = match outcome {
            Ok(stamp) => stamp,
            Err(sled::transaction::TransactionError::Abort(e)) => return Err(e),
            Err(sled::transaction::TransactionError::Storage(e)) => {
                return Err(StorageError::from_sled(&self.dir, e))
            }
        };
        #[cfg(debug_assertions)]
        if crate::sabotage::skip_flush() {
            return Ok(());
        }
        self.db
            .flush()
            .map_err(|e| StorageError::from_sled(&self.dir, e))?;
        durable::sync_store(&self.dir).map_err(|e| StorageError::io(&self.dir, e))?;
        check::write(&self.dir, &stamp).map_err(|e| StorageError::io(&self.dir, e))
    }
}

/// Whether `new` moves any cell below what is stored (equal is fine: saves repeat).
fn goes_backwards(stored: &Cells, new: &Cells) -> bool {
    new.term < stored.term
        || new.accepted < stored.accepted
        || new.incarnation < stored.incarnation
        || (stored.given_up && !new.given_up)
}

/// Turns the raw values of [`CELL_KEYS`] into cells: all absent is a fresh store; one of
/// the first three absent, or any undecodable, is corruption (saves always write them
/// together). The later cells may be absent: a store from before they existed (read as
/// 0 and false).
fn decode_cells(raw: &[Option<sled::IVec>]) -> Result<Cells, String> {
    if raw.iter().all(Option::is_none) {
        return Ok(Cells::default());
    }
    let at = |i: usize| raw.get(i).and_then(|v| v.as_deref());
    let later = |i: usize| at(i).map_or(Ok(false), |bytes| decode_cell(CELL_KEYS[i], Some(bytes)));
    Ok(Cells {
        term: decode_cell(TERM, at(0))?,
        accepted: decode_cell(ACCEPTED, at(1))?,
        incarnation: decode_cell(INCARNATION, at(2))?,
        promise_ms: at(3).map_or(Ok(0), |bytes| decode_cell(PROMISE, Some(bytes)))?,
        recovered: later(4)?,
        given_up: later(5)?,
        awaits_survivors: later(6)?,
    })
}

/// The stored generation: absent (a fresh store, or one from before the check
/// existed) is 0.
fn decode_generation(bytes: Option<&[u8]>) -> Result<u64, String> {
    bytes.map_or(Ok(0), |bytes| decode_cell(GENERATION, Some(bytes)))
}

fn decode_cell<T: DeserializeOwned>(key: &str, bytes: Option<&[u8]>) -> Result<T, String> {
    let bytes = bytes.ok_or_else(|| format!("cell {key:?} is missing beside the others"))?;
    decode_value(bytes).map_err(|e| format!("cell {key:?} does not decode: {e}"))
}

/// The message of a caught panic, whichever payload type it carried.
fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}
