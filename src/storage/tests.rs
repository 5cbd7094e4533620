use super::*;
use crate::protocol::Epoch;
use std::time::{Duration, Instant};

fn cells(term: u64, leader: u64, incarnation: u64) -> Cells {
    Cells {
        term,
        accepted: Some(Epoch { term, leader }),
        incarnation,
        promise_ms: 0,
        recovered: false,
        given_up: false,
        awaits_survivors: false,
    }
}

/// A fresh temporary data dir (not yet created, so `open` creates it).
fn data_dir() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().expect("create temp dir");
    let dir = tmp.path().join("node1");
    (tmp, dir)
}

/// Opens a store this test has just dropped (see [`Storage::open_waiting`]).
fn open_after_close(dir: &Path) -> Result<Storage, StorageError> {
    Storage::open_waiting(dir, Duration::from_secs(5)).map(|(storage, _)| storage)
}

fn reopen(dir: &Path) -> Storage {
    open_after_close(dir).expect("reopen a released store")
}

/// A store holding `saved`, closed again.
fn closed_store_with(saved: Cells) -> (tempfile::TempDir, PathBuf) {
    let (tmp, dir) = data_dir();
    Storage::open(&dir).unwrap().save(&saved).unwrap();
    (tmp, dir)
}

#[test]
fn fresh_store_loads_default_cells() {
    let (_tmp, dir) = data_dir();
    let storage = Storage::open(&dir).unwrap();
    assert!(dir.join("db").is_file(), "open creates the store");
    assert_eq!(storage.load().unwrap(), Cells::default());
}

#[test]
fn saved_cells_round_trip() {
    let (_tmp, dir) = data_dir();
    let storage = Storage::open(&dir).unwrap();
    for saved in [
        Cells {
            term: 0,
            accepted: None,
            incarnation: 1,
            promise_ms: 0,
            recovered: false,
            given_up: false,
            awaits_survivors: false,
        },
        cells(3, 2, 1),
        Cells {
            promise_ms: 3000,
            recovered: false,
            given_up: false,
            awaits_survivors: true,
            ..cells(4, 2, 2)
        },
        cells(u64::MAX, u64::MAX, u64::MAX),
    ] {
        storage.save(&saved).unwrap();
        assert_eq!(storage.load().unwrap(), saved);
    }
}

#[test]
fn cells_survive_drop_and_reopen() {
    let (_tmp, dir) = closed_store_with(cells(7, 3, 2));
    let storage = reopen(&dir);
    assert_eq!(storage.load().unwrap(), cells(7, 3, 2));
    storage.save(&cells(8, 5, 3)).unwrap();
    drop(storage);
    assert_eq!(reopen(&dir).load().unwrap(), cells(8, 5, 3));
}

#[test]
fn a_forced_recoverys_wait_survives_a_reopen_and_ends() {
    let waiting = Cells {
        awaits_survivors: true,
        ..cells(7, 3, 2)
    };
    let (_tmp, dir) = closed_store_with(waiting);
    let storage = reopen(&dir);
    assert_eq!(
        storage.load().unwrap(),
        waiting,
        "the check file accepts it"
    );
    storage.save(&cells(7, 3, 3)).unwrap();
    drop(storage);
    assert_eq!(reopen(&dir).load().unwrap(), cells(7, 3, 3));
}

#[test]
fn repeated_save_of_same_cells_is_accepted() {
    let (_tmp, dir) = data_dir();
    let storage = Storage::open(&dir).unwrap();
    storage.save(&cells(4, 1, 1)).unwrap();
    storage.save(&cells(4, 1, 1)).unwrap();
    assert_eq!(storage.load().unwrap(), cells(4, 1, 1));
}

#[test]
fn second_open_of_a_held_dir_is_locked_with_a_clear_message() {
    let (_tmp, dir) = data_dir();
    let first = Storage::open(&dir).unwrap();
    let err = Storage::open(&dir).expect_err("second open must fail");
    assert!(matches!(err, StorageError::Locked { .. }), "{err:?}");
    assert_eq!(err.dir(), dir);
    let text = err.to_string();
    assert!(
        text.contains(&dir.display().to_string()) && text.contains("in use by another bully"),
        "{text}"
    );
    // Releasing the first handle releases the lock.
    drop(first);
    reopen(&dir);
}

#[test]
fn saving_an_older_epoch_is_refused_and_changes_nothing() {
    let (_tmp, dir) = data_dir();
    let storage = Storage::open(&dir).unwrap();
    storage.save(&cells(5, 2, 1)).unwrap();
    for older in [
        cells(4, 2, 1), // older term and epoch
        cells(5, 1, 1), // same term, lower leader
        cells(5, 2, 0), // older incarnation
        Cells {
            term: 5,
            accepted: None,
            incarnation: 1,
            promise_ms: 0,
            recovered: false,
            given_up: false,
            awaits_survivors: false,
        },
    ] {
        let err = storage.save(&older).expect_err("regression refused");
        match &err {
            StorageError::Regression {
                stored, attempted, ..
            } => {
                assert_eq!(**stored, cells(5, 2, 1));
                assert_eq!(**attempted, older);
            }
            other => panic!("expected Regression, got {other:?}"),
        }
        assert!(err.to_string().contains(&dir.display().to_string()));
    }
    assert_eq!(storage.load().unwrap(), cells(5, 2, 1));
}

#[test]
fn undecodable_value_is_corrupt_and_names_the_cell() {
    let (_tmp, dir) = data_dir();
    let storage = Storage::open(&dir).unwrap();
    storage.save(&cells(5, 2, 1)).unwrap();
    // An Option tag of 7 is not a valid Option<Epoch>.
    storage.db.insert(ACCEPTED, &[7u8, 1, 2][..]).unwrap();
    let err = storage.load().expect_err("load must fail");
    assert!(matches!(err, StorageError::Corrupt { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("\"accepted\"") && text.contains(&dir.display().to_string()));
    // Saving over a corrupt store is refused too: the stored epoch is unknown.
    let err = storage.save(&cells(9, 2, 1)).expect_err("save must fail");
    assert!(matches!(err, StorageError::Corrupt { .. }), "{err:?}");
}

#[test]
fn trailing_bytes_after_a_value_are_corrupt() {
    let (_tmp, dir) = data_dir();
    let storage = Storage::open(&dir).unwrap();
    storage.save(&cells(5, 2, 1)).unwrap();
    let mut term = encode_value(&5u64).unwrap();
    term.push(0);
    storage.db.insert(TERM, term).unwrap();
    let err = storage.load().expect_err("load must fail");
    assert!(err.to_string().contains("\"term\""), "{err}");
}

#[test]
fn a_missing_cell_beside_the_others_is_corrupt() {
    let (_tmp, dir) = data_dir();
    let storage = Storage::open(&dir).unwrap();
    storage.save(&cells(5, 2, 1)).unwrap();
    storage.db.remove(INCARNATION).unwrap();
    let err = storage.load().expect_err("load must fail");
    assert!(
        matches!(&err, StorageError::Corrupt { detail, .. } if detail.contains("\"incarnation\" is missing")),
        "{err:?}"
    );
}

#[test]
fn garbage_config_file_is_corrupt_not_a_panic() {
    let (_tmp, dir) = closed_store_with(cells(5, 2, 1));
    std::fs::write(dir.join("conf"), b"this is not a sled config").unwrap();
    let err = open_after_close(&dir).expect_err("open must fail");
    assert!(matches!(err, StorageError::Corrupt { .. }), "{err:?}");
    assert!(err.to_string().contains(&dir.display().to_string()));
}

/// A named way to damage a file's bytes.
type Damage = (&'static str, fn(&mut Vec<u8>));

/// sled 0.34 treats a damaged log entry as the torn tail of a crash: recovery stops
/// there and keeps the prefix, so garbage in `db` would open as an older (or empty)
/// store. The check refuses that; what opens is the newest store, and nothing panics.
#[test]
fn garbage_in_the_log_never_panics() {
    let (_tmp, dir) = data_dir();
    {
        let storage = Storage::open(&dir).unwrap();
        for term in 1..20 {
            storage.save(&cells(term, 2, 1)).unwrap();
        }
    }
    let pristine = std::fs::read(dir.join("db")).unwrap();
    let damages: [Damage; 3] = [
        ("scrambled", |b| {
            let mut x: u32 = 0x9e37_79b9;
            for byte in b.iter_mut() {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                *byte = x as u8;
            }
        }),
        ("truncated", |b| b.truncate(b.len() / 2)),
        ("bit-flipped", |b| {
            let len = b.len();
            b[len / 4..len / 2].iter_mut().for_each(|x| *x ^= 0x5a)
        }),
    ];
    for (name, damage) in damages {
        let mut bytes = pristine.clone();
        damage(&mut bytes);
        std::fs::write(dir.join("db"), &bytes).unwrap();
        match open_after_close(&dir) {
            Err(e) => assert!(
                e.to_string().contains(&dir.display().to_string()),
                "{name}: {e}"
            ),
            Ok(storage) => match storage.load() {
                Err(e) => assert!(matches!(e, StorageError::Corrupt { .. }), "{name}: {e:?}"),
                Ok(loaded) => {
                    assert_eq!(
                        loaded,
                        cells(19, 2, 1),
                        "{name}: only the newest store opens"
                    );
                    storage.save(&cells(50, 2, 1)).unwrap();
                    assert_eq!(storage.load().unwrap(), cells(50, 2, 1), "{name}");
                }
            },
        }
    }
}

#[test]
fn a_file_where_the_dir_should_be_is_an_io_error_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("not-a-dir");
    std::fs::write(&dir, b"x").unwrap();
    let err = Storage::open(&dir).expect_err("open must fail");
    assert!(matches!(err, StorageError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("not-a-dir"), "{err}");
}

#[test]
fn nested_missing_dirs_are_created() {
    let (_tmp, dir) = data_dir();
    let nested = dir.join("a").join("b");
    Storage::open(&nested)
        .unwrap()
        .save(&cells(1, 1, 1))
        .unwrap();
    assert_eq!(reopen(&nested).load().unwrap(), cells(1, 1, 1));
}

/// The cost of one durable save (transaction + flush + fsyncs). Run in release:
/// `cargo test --release --lib storage::tests::save_latency -- --ignored --nocapture`
/// (SAVES=n to change the count).
#[test]
#[ignore]
fn save_latency() {
    let count: u64 = std::env::var("SAVES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let (_tmp, dir) = data_dir();
    let storage = Storage::open(&dir).unwrap();
    let mut took: Vec<Duration> = Vec::with_capacity(count as usize);
    let all = Instant::now();
    for term in 1..=count {
        let started = Instant::now();
        storage.save(&cells(term, 1, 1)).unwrap();
        took.push(started.elapsed());
    }
    let total = all.elapsed();
    took.sort();
    let at = |q: f64| took[((took.len() - 1) as f64 * q).round() as usize];
    println!(
        "{count} saves in {total:?} on {}: p50 {:?}, p90 {:?}, p99 {:?}, max {:?}",
        dir.display(),
        at(0.50),
        at(0.90),
        at(0.99),
        at(1.0)
    );
}

/// A one-member list stamped `(term, 1)`, version `version`.
fn one_member_list(term: u64, version: u64) -> Membership {
    let mut list = Membership::seeded(vec![crate::protocol::Member {
        id: 1,
        seat: crate::protocol::Seat::Voter,
        learner: false,
        addr: "127.0.0.1:7001".into(),
    }]);
    list.id = crate::protocol::ConfigId {
        stamp: Some(Epoch { term, leader: 1 }),
        version,
    };
    list
}

#[test]
fn cells_list_and_given_up_members_are_saved_together_and_an_older_list_is_refused_with_them() {
    let (_tmp, dir) = closed_store_with(cells(3, 2, 1));
    let storage = reopen(&dir);
    assert!(storage.load_gave_up().unwrap().is_empty(), "none before");
    let raised = Cells {
        term: 5,
        ..cells(3, 2, 1)
    };
    let gave_up = one_member_list(5, 2).members;
    storage
        .save_forced_recovery(&raised, &one_member_list(5, 2), &gave_up)
        .unwrap();
    drop(storage);
    let storage = reopen(&dir);
    assert_eq!(storage.load().unwrap(), raised);
    assert_eq!(storage.load_members().unwrap(), Some(one_member_list(5, 2)));
    assert_eq!(storage.load_gave_up().unwrap(), gave_up);
    let higher = Cells { term: 6, ..raised };
    let refused = storage.save_forced_recovery(&higher, &one_member_list(4, 9), &[]);
    assert!(
        matches!(refused, Err(StorageError::Corrupt { .. })),
        "{refused:?}"
    );
    assert_eq!(
        storage.load().unwrap(),
        raised,
        "neither cell nor list moved"
    );
    assert_eq!(
        storage.load_gave_up().unwrap(),
        gave_up,
        "nor the given-up members"
    );
}

#[test]
fn the_given_up_mark_never_goes_back() {
    let (_tmp, dir) = closed_store_with(cells(3, 2, 1));
    let storage = reopen(&dir);
    let given_up = Cells {
        given_up: true,
        ..cells(3, 2, 1)
    };
    storage.save(&given_up).unwrap();
    let refused = storage.save(&cells(3, 2, 1));
    assert!(
        matches!(refused, Err(StorageError::Regression { .. })),
        "{refused:?}"
    );
    drop(storage);
    assert_eq!(reopen(&dir).load().unwrap(), given_up);
}

#[test]
fn a_store_from_before_the_promise_cell_loads_with_promise_zero() {
    // The three cells as a node before `Cells::promise_ms` wrote them: no "promise" key.
    let (_tmp, dir) = data_dir();
    {
        let storage = Storage::open(&dir).unwrap();
        storage.save(&cells(5, 2, 3)).unwrap();
        storage.db.remove(PROMISE).unwrap();
        storage.db.flush().unwrap();
    }
    let loaded = reopen(&dir).load().unwrap();
    assert_eq!(loaded, cells(5, 2, 3));
    assert_eq!(
        loaded.promise_ms, 0,
        "the hold-off then uses the D the node starts with"
    );
}

/// A store saved at terms 1..=9 (one generation each), closed, and its `db` file's
/// bytes as they were after the save of term `copy_at`. sled's `snap.*` files are
/// removed, as a node killed with -9 often leaves none: with one, sled notices some
/// damage itself (`Corrupt`); without, it reads a damaged log as an older store.
fn nine_generations(copy_at: u64) -> (tempfile::TempDir, PathBuf, Vec<u8>) {
    let (tmp, dir) = data_dir();
    let mut copy = Vec::new();
    for term in 1..=9 {
        let storage = open_after_close(&dir).unwrap();
        storage.save(&cells(term, 2, 1)).unwrap();
        drop(storage);
        if term == copy_at {
            // Reopened once more so sled has let go of the file before it is read.
            drop(reopen(&dir));
            copy = std::fs::read(dir.join("db")).unwrap();
        }
    }
    forget_snapshots(&dir);
    (tmp, dir, copy)
}

/// Removes sled's `snap.*` files from a closed store, as a kill -9 often leaves it.
fn forget_snapshots(dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("snap.")
        {
            std::fs::remove_file(path).unwrap();
        }
    }
}

/// How much of a `db` file sled wrote: up to its last non-zero byte. A cleanly closed
/// store's file is a whole 512 KiB segment, written only at the front.
fn written_len(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .rposition(|b| *b != 0)
        .map_or(0, |last| last + 1)
}

/// Opening `dir` must fail with one of the check's errors, naming the dir and saying
/// what to do; it never hands back the older cells.
fn assert_refused(dir: &Path, case: &str) -> StorageError {
    let err = match open_after_close(dir) {
        Ok(storage) => panic!("{case}: opened, loading {:?}", storage.load()),
        Err(err) => err,
    };
    assert!(
        matches!(
            err,
            StorageError::RolledBack { .. } | StorageError::Damaged { .. }
        ),
        "{case}: {err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains(&dir.display().to_string()) && text.contains("restore the newest copy"),
        "{case}: {text}"
    );
    err
}

#[test]
fn a_db_cut_to_half_of_its_log_is_refused() {
    let (_tmp, dir, _) = nine_generations(0);
    let db = dir.join("db");
    let written = written_len(&std::fs::read(&db).unwrap());
    std::fs::OpenOptions::new()
        .write(true)
        .open(&db)
        .unwrap()
        .set_len(written as u64 / 2)
        .unwrap();
    let err = assert_refused(&dir, "truncated");
    eprintln!("truncated db: {err}");
}

#[test]
fn a_flipped_byte_in_the_middle_of_the_log_is_refused() {
    let (_tmp, dir, _) = nine_generations(0);
    let db = dir.join("db");
    let mut bytes = std::fs::read(&db).unwrap();
    let middle = written_len(&bytes) / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&db, &bytes).unwrap();
    assert_refused(&dir, "flipped");
}

#[test]
fn a_deleted_db_is_refused() {
    let (_tmp, dir, _) = nine_generations(0);
    std::fs::remove_file(dir.join("db")).unwrap();
    let err = assert_refused(&dir, "deleted");
    assert!(
        matches!(
            err,
            StorageError::RolledBack {
                found_generation: 0,
                expected_generation: 9,
                expected_term: 9,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn a_db_replaced_by_an_older_copy_is_refused() {
    let (_tmp, dir, copy) = nine_generations(5);
    std::fs::write(dir.join("db"), &copy).unwrap();
    let err = assert_refused(&dir, "older copy");
    assert!(
        matches!(
            err,
            StorageError::RolledBack {
                found_generation: 5,
                found_term: 5,
                expected_generation: 9,
                expected_term: 9,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("holds generation 5 (term 5)"),
        "{err}"
    );
}

#[test]
fn a_damaged_check_file_is_refused() {
    let (_tmp, dir, _) = nine_generations(0);
    let path = dir.join(CHECK_FILE);
    let pristine = std::fs::read(&path).unwrap();
    let damages: [Damage; 3] = [
        ("flipped", |b| {
            let last = b.len() - 1;
            b[last] ^= 0x01
        }),
        ("truncated", |b| b.truncate(b.len() - 1)),
        ("emptied", |b| b.clear()),
    ];
    for (name, damage) in damages {
        let mut bytes = pristine.clone();
        damage(&mut bytes);
        std::fs::write(&path, &bytes).unwrap();
        let err = assert_refused(&dir, name);
        assert!(
            matches!(&err, StorageError::Damaged { detail, .. } if detail.contains(CHECK_FILE)),
            "{name}: {err:?}"
        );
    }
    // The intact file again: the store was never touched.
    std::fs::write(&path, &pristine).unwrap();
    assert_eq!(reopen(&dir).load().unwrap(), cells(9, 2, 1));
}

/// A crash after sled's write was flushed but before the check file was replaced: the
/// check file is one generation behind, sled's write is complete and current.
#[test]
fn a_crash_between_the_store_and_the_check_file_loads_the_newest_cells() {
    let (_tmp, dir, _) = nine_generations(0);
    let behind = std::fs::read(dir.join(CHECK_FILE)).unwrap();
    {
        let storage = reopen(&dir);
        storage.save(&cells(10, 2, 1)).unwrap();
    }
    std::fs::write(dir.join(CHECK_FILE), &behind).unwrap();
    let storage = reopen(&dir);
    assert_eq!(storage.load().unwrap(), cells(10, 2, 1));
    // The same crash again on the next save is still one behind, not two: open
    // brought the check file up to sled.
    let caught_up = std::fs::read(dir.join(CHECK_FILE)).unwrap();
    assert_ne!(caught_up, behind);
    storage.save(&cells(11, 2, 1)).unwrap();
    drop(storage);
    std::fs::write(dir.join(CHECK_FILE), &caught_up).unwrap();
    assert_eq!(reopen(&dir).load().unwrap(), cells(11, 2, 1));
}

/// A store written before the check existed: no check file, no generation key.
#[test]
fn an_old_store_without_a_check_file_loads_and_gets_one_at_its_next_save() {
    let (_tmp, dir) = data_dir();
    {
        let storage = Storage::open(&dir).unwrap();
        storage.save(&cells(5, 2, 3)).unwrap();
        storage.db.remove(GENERATION).unwrap();
        storage.db.flush().unwrap();
    }
    std::fs::remove_file(dir.join(CHECK_FILE)).unwrap();
    let storage = reopen(&dir);
    assert_eq!(storage.load().unwrap(), cells(5, 2, 3));
    assert!(!dir.join(CHECK_FILE).exists(), "open writes none");
    storage.save(&cells(6, 2, 3)).unwrap();
    assert!(dir.join(CHECK_FILE).is_file(), "the save wrote one");
    drop(storage);
    // From now on it is checked: sled cut back to nothing is refused.
    forget_snapshots(&dir);
    std::fs::remove_file(dir.join("db")).unwrap();
    assert_refused(&dir, "deleted after the upgrade");
}

/// The member list is part of what is checked, whichever save wrote it.
#[test]
fn the_member_list_is_checked_too() {
    let (_tmp, dir) = closed_store_with(cells(3, 2, 1));
    let copy = std::fs::read(dir.join("db")).unwrap();
    {
        let storage = reopen(&dir);
        storage.save_members(&one_member_list(3, 2)).unwrap();
        storage.save_members(&one_member_list(3, 3)).unwrap();
    }
    let storage = reopen(&dir);
    assert_eq!(storage.load_members().unwrap(), Some(one_member_list(3, 3)));
    assert_eq!(storage.load().unwrap(), cells(3, 2, 1));
    drop(storage);
    forget_snapshots(&dir);
    std::fs::write(dir.join("db"), &copy).unwrap();
    assert_refused(&dir, "list rolled back");
}

#[test]
fn the_mode_is_stored_once_and_survives_a_reopen() {
    let (_tmp, dir) = data_dir();
    let storage = Storage::open(&dir).unwrap();
    assert_eq!(
        storage.load_mode().unwrap(),
        None,
        "a fresh store holds none"
    );
    storage.save_mode(crate::protocol::Mode::Classic).unwrap();
    drop(storage);
    let mode = reopen(&dir).load_mode().unwrap();
    assert_eq!(mode, Some(crate::protocol::Mode::Classic));
}

/// A list stored before the cluster settings were part of it still loads, without
/// settings (its node lives by its file's until the next list is written); a list
/// with settings loads with them; bytes that are neither are corrupt.
#[test]
fn a_list_stored_before_the_settings_loads_without_them() {
    let (_tmp, dir) = closed_store_with(cells(3, 2, 1));
    let storage = reopen(&dir);
    let list = one_member_list(3, 2);
    let old = ListBeforeSettings {
        id: list.id,
        members: list.members.clone(),
    };
    let bytes = crate::codec::encode_value(&old).unwrap();
    storage.db.insert(MEMBERS, bytes).unwrap();
    assert_eq!(storage.load_members().unwrap(), Some(list.clone()));
    let settings = crate::protocol::ClusterSettings::new(
        crate::protocol::Timing::default(),
        crate::protocol::Preempt::Never,
    );
    let with = list.clone().with_settings(settings.clone());
    let bytes = crate::codec::encode_value(&with).unwrap();
    storage.db.insert(MEMBERS, bytes).unwrap();
    assert_eq!(storage.load_members().unwrap(), Some(with.clone()));
    // Stored before PostgreSQL's parameters were settings: the timing and preemption
    // load, the parameters are unknown (the node fills them from its file).
    let before_pg = crate::protocol::membership::ListBeforePgSettings {
        id: list.id,
        members: list.members.clone(),
        settings: Some(crate::protocol::settings::SettingsBeforePg {
            timing: settings.timing,
            preempt: settings.preempt,
        }),
    };
    let bytes = crate::codec::encode_value(&before_pg).unwrap();
    storage.db.insert(MEMBERS, bytes).unwrap();
    assert_eq!(storage.load_members().unwrap(), Some(with));
    let full = list.with_settings(
        settings.with_pg_parameters([("work_mem".to_string(), "8MB".to_string())].into()),
    );
    let bytes = crate::codec::encode_value(&full).unwrap();
    storage.db.insert(MEMBERS, bytes).unwrap();
    assert_eq!(storage.load_members().unwrap(), Some(full.clone()));
    // Stored before the standby cluster was a setting: everything else loads, and the
    // cluster is not a standby cluster.
    let s = full.settings.clone().unwrap();
    let before_standby = crate::protocol::membership::ListBeforeStandbyCluster {
        id: full.id,
        members: full.members.clone(),
        settings: Some(crate::protocol::settings::SettingsBeforeStandbyCluster {
            timing: s.timing,
            preempt: s.preempt,
            pg_parameters: s.pg_parameters.clone(),
            pg_synchronous: s.pg_synchronous,
        }),
    };
    let bytes = crate::codec::encode_value(&before_standby).unwrap();
    storage.db.insert(MEMBERS, bytes).unwrap();
    assert_eq!(storage.load_members().unwrap(), Some(full.clone()));
    let mut standby = full;
    standby.settings.as_mut().unwrap().pg_standby_cluster = Some("dr:5432".into());
    let bytes = crate::codec::encode_value(&standby).unwrap();
    storage.db.insert(MEMBERS, bytes).unwrap();
    assert_eq!(storage.load_members().unwrap(), Some(standby));
    storage.db.insert(MEMBERS, &[9u8, 9, 9][..]).unwrap();
    let err = storage.load_members().unwrap_err().to_string();
    assert!(err.contains("the member list does not decode"), "{err}");
}
