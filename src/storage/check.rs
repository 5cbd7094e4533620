//! The check file (`cells.check`): a second, independent record of the newest cells,
//! beside sled's files, so that a `db` file cut short, damaged or replaced by an older
//! copy is refused instead of read back as an older term (sled 0.34 reads such a file
//! without an error when no `snap.*` file exists).
//!
//! It holds a [`Stamp`]: the write generation (+1 per save, also stored inside sled in
//! the same transaction as the cells), all the cells, and the stored member list's
//! identity. Layout: [`MAGIC`], the CRC-32 of the payload (4 bytes, little endian),
//! then the payload ([`crate::codec`]). It is rewritten with
//! [`super::durable::write_file_durably`] after sled's transaction has been flushed
//! and fsynced, so a crash leaves it at most one generation behind sled, never ahead.

use super::durable::write_file_durably;
use crate::codec::{decode_value, encode_value};
use crate::protocol::{Cells, ConfigId, Epoch};
use serde::{Deserialize, Serialize};
use std::io;
use std::path::{Path, PathBuf};

/// The check file's name in the data dir: public so tests and tools can find it beside
/// sled's files.
pub const CHECK_FILE: &str = "cells.check";

/// The first bytes of a check file: a file of another kind (or another layout of this
/// one) is reported as such, not as a checksum mismatch.
const MAGIC: &[u8; 8] = b"BULLYCK1";

/// What one save wrote: the state a store must hold to be current.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stamp {
    /// Saves since the store first had a generation (0: none yet, a fresh store or one
    /// written before the check existed).
    pub generation: u64,
    /// Every cell, `promise_ms`, `recovered` and `given_up` included; the check file
    /// leaves `awaits_survivors` out ([`Stamp::as_checked`]).
    pub cells: Cells,
    /// The stored member list's identity; `None` while none was stored.
    pub members: Option<ConfigId>,
}

impl Stamp {
    /// The stamp as the check file holds it: without `awaits_survivors`, which the file
    /// never held (it came later, and the file's form stays). Nothing is lost: the save
    /// that sets it (`bully recover`) raises the term and replaces the list, and it
    /// only goes back to false later, so a store rolled back past either save is told
    /// by those and by the generation.
    fn as_checked(&self) -> Stamp {
        let cells = Cells {
            awaits_survivors: false,
            ..self.cells
        };
        Stamp { cells, ..*self }
    }

    /// Whether `self`, a newer generation than `older`, could follow it: no cell and no
    /// member list went back (saves never move them backwards).
    fn follows(&self, older: &Stamp) -> bool {
        !super::goes_backwards(&older.cells, &self.cells) && self.members >= older.members
    }

    /// For messages: the generation and the cells an operator recognises.
    fn describe(&self) -> String {
        let accepted = self
            .cells
            .accepted
            .map_or_else(|| "none".to_string(), |e| e.to_string());
        format!(
            "generation {}, term {}, accepted epoch {accepted}",
            self.generation, self.cells.term
        )
    }
}

/// The payload as written: [`Cells`] skips `promise_ms`, `recovered` and `given_up` when
/// serialized (the event log's form), so the fields are spelled out here.
#[derive(Serialize, Deserialize)]
struct Payload {
    generation: u64,
    term: u64,
    accepted: Option<Epoch>,
    incarnation: u64,
    promise_ms: u64,
    recovered: bool,
    given_up: bool,
    members: Option<ConfigId>,
}

/// The check file's path in `dir`.
pub fn path(dir: &Path) -> PathBuf {
    dir.join(CHECK_FILE)
}

/// Replaces the check file with `stamp`, durably (a crash leaves the old or the new).
pub fn write(dir: &Path, stamp: &Stamp) -> io::Result<()> {
    let payload = encode_value(&Payload {
        generation: stamp.generation,
        term: stamp.cells.term,
        accepted: stamp.cells.accepted,
        incarnation: stamp.cells.incarnation,
        promise_ms: stamp.cells.promise_ms,
        recovered: stamp.cells.recovered,
        given_up: stamp.cells.given_up,
        members: stamp.members,
    })
    .map_err(|e| io::Error::other(format!("cannot encode the check file: {e}")))?;
    let mut bytes = Vec::with_capacity(MAGIC.len() + 4 + payload.len());
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
    bytes.extend_from_slice(&payload);
    write_file_durably(&path(dir), &bytes)
}

/// Why the check file could not be read.
pub enum ReadError {
    /// The file system refused (not "not found": a missing file is `Ok(None)`).
    Io(io::Error),
    /// The file is there but is not a whole, intact check file.
    Damaged(String),
}

/// Reads the check file; `None` if there is none.
pub fn read(dir: &Path) -> Result<Option<Stamp>, ReadError> {
    let bytes = match std::fs::read(path(dir)) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(ReadError::Io(e)),
    };
    decode(&bytes).map(Some).map_err(ReadError::Damaged)
}

fn decode(bytes: &[u8]) -> Result<Stamp, String> {
    let body = bytes
        .strip_prefix(MAGIC.as_slice())
        .ok_or_else(|| format!("{CHECK_FILE} does not start with {MAGIC:?}"))?;
    if body.len() < 4 {
        return Err(format!("{CHECK_FILE} is cut short ({} bytes)", bytes.len()));
    }
    let (crc, payload) = body.split_at(4);
    let expected = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
    let found = crc32fast::hash(payload);
    if found != expected {
        return Err(format!(
            "{CHECK_FILE}'s checksum does not match its content (stored {expected:08x}, \
             computed {found:08x})"
        ));
    }
    let p: Payload = decode_value(payload)
        .map_err(|e| format!("{CHECK_FILE} passes its checksum but does not decode: {e}"))?;
    Ok(Stamp {
        generation: p.generation,
        cells: Cells {
            term: p.term,
            accepted: p.accepted,
            incarnation: p.incarnation,
            promise_ms: p.promise_ms,
            recovered: p.recovered,
            given_up: p.given_up,
            awaits_survivors: false,
        },
        members: p.members,
    })
}

/// Whether a store whose sled files hold `stored` may be used, given the check file's
/// `check`. The accepted combinations, and nothing else:
/// - no check file: a fresh store, a store written before the check existed, or a
///   crash before the first check file was in place; its next save writes one;
/// - the same generation and the same content: the normal case;
/// - sled exactly one generation ahead, no cell or list behind the check file's: a
///   crash between sled's write and the check file's. sled's newer write is complete
///   (flushed and fsynced before the check file is touched), so it is current, and the
///   check file must be brought up to it ([`Verdict::CatchUp`]) before the next save.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Use the store as it is.
    Current,
    /// Use the store, after rewriting the check file to `stored`.
    CatchUp,
    /// sled holds an older generation than the check file: refuse.
    RolledBack,
    /// Any other mismatch (the detail says which): refuse.
    Mismatch(String),
}

/// Applies the rules of [`Verdict`].
pub fn judge(stored: &Stamp, check: Option<&Stamp>) -> Verdict {
    let Some(check) = check else {
        return Verdict::Current;
    };
    let stored = &stored.as_checked();
    if stored.generation < check.generation {
        Verdict::RolledBack
    } else if stored.generation == check.generation {
        if stored == check {
            Verdict::Current
        } else {
            Verdict::Mismatch(format!(
                "the store holds {} but {CHECK_FILE} holds {} at the same generation",
                stored.describe(),
                check.describe()
            ))
        }
    } else if stored.generation == check.generation + 1 && stored.follows(check) {
        Verdict::CatchUp
    } else if stored.generation == check.generation + 1 {
        Verdict::Mismatch(format!(
            "the store holds {}, one save after {CHECK_FILE}'s {}, but with a cell or \
             the member list behind it",
            stored.describe(),
            check.describe()
        ))
    } else {
        Verdict::Mismatch(format!(
            "the store holds {}, {} saves after {CHECK_FILE}'s {}: a crash leaves the \
             check file one save behind at most, so it was replaced by an older copy",
            stored.describe(),
            stored.generation - check.generation,
            check.describe()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(generation: u64, term: u64) -> Stamp {
        Stamp {
            generation,
            cells: Cells {
                term,
                accepted: Some(Epoch { term, leader: 2 }),
                incarnation: 1,
                promise_ms: 1500,
                recovered: false,
                given_up: false,
                awaits_survivors: false,
            },
            members: None,
        }
    }

    #[test]
    fn a_stamp_round_trips_with_its_promise() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let written = Stamp {
            members: Some(ConfigId {
                stamp: Some(Epoch { term: 4, leader: 1 }),
                version: 3,
            }),
            ..stamp(7, 4)
        };
        write(dir, &written).unwrap();
        assert!(matches!(read(dir), Ok(Some(s)) if s == written));
    }

    #[test]
    fn the_accepted_combinations_and_no_others() {
        let check = stamp(5, 5);
        assert_eq!(judge(&stamp(3, 3), None), Verdict::Current);
        assert_eq!(judge(&stamp(5, 5), Some(&check)), Verdict::Current);
        assert_eq!(judge(&stamp(6, 6), Some(&check)), Verdict::CatchUp);
        assert_eq!(judge(&stamp(4, 4), Some(&check)), Verdict::RolledBack);
        assert_eq!(judge(&Stamp::default(), Some(&check)), Verdict::RolledBack);
        for refused in [stamp(5, 4), stamp(6, 4), stamp(7, 7)] {
            assert!(
                matches!(judge(&refused, Some(&check)), Verdict::Mismatch(_)),
                "{refused:?}"
            );
        }
    }

    #[test]
    fn a_forced_recoverys_wait_is_not_in_the_check_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut stored = stamp(5, 5);
        stored.cells.awaits_survivors = true;
        write(dir.path(), &stored).unwrap();
        let Ok(Some(recorded)) = read(dir.path()) else {
            panic!("the check file was written")
        };
        assert!(!recorded.cells.awaits_survivors, "the file's form stays");
        assert_eq!(judge(&stored, Some(&recorded)), Verdict::Current);
    }
}
