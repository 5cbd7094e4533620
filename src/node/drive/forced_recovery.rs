//! `bully recover`: makes a stopped survivor's store hold a new configuration of the
//! survivors only, after the rest of the cluster, a majority, was lost for good
//! (docs/design.md#recovery-from-a-lost-majority; the plan itself is the pure
//! `protocol/majority_loss.rs`). Offline on purpose: the node must not be running, so
//! the new term and list are written in one transaction with no machine racing them,
//! and a plain `bully node` start afterwards lives by them (the stored list rules
//! over the config file's peers, see `members.rs`).

use crate::api::event_log::EventLog;
use crate::config::NodeConfig;
use crate::history::Record;
use crate::protocol::majority_loss::{self, ForcedRecovery, RecoverRefused};
use crate::protocol::NodeId;
use crate::storage::{Storage, StorageError};
use std::collections::BTreeSet;
use std::time::Duration;
use thiserror::Error;

/// How long to wait for sled's lock when the node was only just stopped: a killed
/// process holds it until the kernel has torn it down (see `Storage::open_waiting`).
const LOCK_WAIT: Duration = Duration::from_secs(2);

/// Why `bully recover` did nothing.
#[derive(Debug, Error)]
pub enum RecoverError {
    /// The node (or another bully process) holds the data dir.
    #[error(
        "data dir {} is in use: stop the node first (recover works on a stopped node only)",
        dir.display()
    )]
    Running { dir: std::path::PathBuf },
    /// The store cannot be read or written.
    #[error("{0}")]
    Storage(StorageError),
    /// The data dir is missing or holds no term: a wrong path, or a node that never ran.
    #[error(
        "data dir {} is missing or holds no term and no member list: is it this node's \
         data dir? A node that never ran has nothing to recover",
        dir.display()
    )]
    EmptyStore { dir: std::path::PathBuf },
    /// The survivors named cannot form a new configuration.
    #[error("{0}")]
    Refused(RecoverRefused),
}

impl From<StorageError> for RecoverError {
    fn from(e: StorageError) -> RecoverError {
        match e {
            StorageError::Locked { dir } => RecoverError::Running { dir },
            other => RecoverError::Storage(other),
        }
    }
}

/// An opened store and what recovering it would write: inspect [`Prepared::plan`],
/// then [`Prepared::apply`] it or drop it (nothing is written until then).
pub struct Prepared {
    storage: Storage,
    config: NodeConfig,
    plan: ForcedRecovery,
}

/// Opens the store of the node `config` describes (it must be stopped) and works out
/// the recovery that keeps `survivors` only.
pub fn prepare(config: &NodeConfig, survivors: &[NodeId]) -> Result<Prepared, RecoverError> {
    // Opening creates a missing store: a wrong path must not leave an empty one behind.
    if !config.data_dir.is_dir() {
        return Err(RecoverError::EmptyStore {
            dir: config.data_dir.clone(),
        });
    }
    let (storage, _) = Storage::open_waiting(&config.data_dir, LOCK_WAIT)?;
    let cells = storage.load()?;
    let stored = storage.load_members()?;
    if cells.term == 0 && cells.accepted.is_none() && stored.is_none() {
        return Err(RecoverError::EmptyStore {
            dir: config.data_dir.clone(),
        });
    }
    // A cluster whose list never changed stores none: the config file seeded it.
    let current = stored.unwrap_or_else(|| super::members::seed(config));
    let survivors: BTreeSet<NodeId> = survivors.iter().copied().collect();
    let plan = majority_loss::plan(config.id, &cells, &current, &survivors)
        .map_err(RecoverError::Refused)?;
    Ok(Prepared {
        storage,
        config: config.clone(),
        plan,
    })
}

impl Prepared {
    /// What [`Prepared::apply`] would write, and which members it gives up.
    pub fn plan(&self) -> &ForcedRecovery {
        &self.plan
    }

    /// Writes the raised term cell and the new list in one durable transaction, then
    /// appends `Persisted` and `ForcedRecovery` to the node's event log (the log never
    /// claims what the disk does not hold: I3).
    pub fn apply(self) -> Result<ForcedRecovery, RecoverError> {
        let plan = self.plan;
        self.storage
            .save_forced_recovery(&plan.cells, &plan.list, &plan.lost)?;
        drop(self.storage);
        let data_dir = &self.config.data_dir;
        let mut log = EventLog::open(data_dir, self.config.id).map_err(|e| {
            RecoverError::Storage(StorageError::Io {
                dir: data_dir.clone(),
                source: e,
            })
        })?;
        log.append(Record::Persisted(plan.cells));
        let members: Vec<NodeId> = plan.list.members.iter().map(|m| m.id).collect();
        log.append(Record::ForcedRecovery {
            members: members.clone(),
            from_config: plan.from.id,
            to_config: plan.list.id,
            term: plan.cells.term,
        });
        tracing::warn!(
            members = ?members,
            list = %plan.list.id,
            term = plan.cells.term,
            "forced recovery from a lost majority written"
        );
        Ok(plan)
    }
}
