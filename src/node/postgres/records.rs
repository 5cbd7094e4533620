//! The synchronous records across the voters (src/postgres_rules/durability.rs): a
//! leading coordinator reads them before it promotes or runs `initdb`, and a primary
//! stores a new one on every voter before it relies on it. Each voter answers
//! `Request::PgSync` from its own store (src/node/postgres/sync_store.rs); this node's
//! own store answers for it without a round trip. Connections are kept between calls
//! (src/client_pool.rs), so a promotion does not wait for handshakes.

use super::sync_store::SyncStore;
use crate::api::{Request, Response, Status};
use crate::certs::TlsFiles;
use crate::client_pool::{ClientPool, Within};
use crate::postgres_rules::{SyncRecord, SyncView};
use crate::protocol::membership::majority_of;
use crate::protocol::NodeId;
use crate::transport::PeerAddr;
use std::time::Duration;

/// How long one voter may take to answer.
const ANSWER_WITHIN: Duration = Duration::from_millis(400);

/// A voter that did not answer on its kept connection in time is not asked twice.
const WITHIN: Within = Within {
    kept: ANSWER_WITHIN,
    connect: ANSWER_WITHIN,
    answer: ANSWER_WITHIN,
};

/// What reads and writes the records: this node's store, the way to the others.
#[derive(Clone)]
pub struct Records {
    pub store: SyncStore,
    pub tls: TlsFiles,
    /// The configured peers, used while the node holds no member list.
    pub configured: Vec<(NodeId, PeerAddr)>,
    clients: ClientPool,
}

/// How many voters kept a record, of how many.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kept {
    pub by: usize,
    pub voters: usize,
}

impl Kept {
    /// A majority of the voters kept it.
    pub fn majority(&self) -> bool {
        self.by >= majority_of(self.voters)
    }
}

impl Records {
    pub fn new(store: SyncStore, tls: TlsFiles, configured: Vec<(NodeId, PeerAddr)>) -> Records {
        Records {
            store,
            tls,
            configured,
            clients: ClientPool::default(),
        }
    }

    /// The newest record among the voters that answered, if they are a majority.
    pub async fn read(&self, status: &Status) -> SyncView {
        let own = self.store.current().await;
        let (answers, voters) = self.ask_voters(status, None).await;
        let answered: Vec<Option<SyncRecord>> = std::iter::once(own).chain(answers).collect();
        match answered.len() >= majority_of(voters) {
            true => SyncView::Read(SyncRecord::newest(answered.iter().flatten())),
            false => SyncView::Unread,
        }
    }

    /// Stores `record` here and on every other voter; how many keep it now.
    pub async fn commit(&self, status: &Status, record: &SyncRecord) -> Result<Kept, String> {
        let own = self.store.keep(record.clone()).await?;
        let (answers, voters) = self.ask_voters(status, Some(record.clone())).await;
        let by = std::iter::once(own)
            .chain(answers)
            .filter(|kept| kept.as_ref() == Some(record))
            .count();
        Ok(Kept { by, voters })
    }

    /// Asks every other voter at once (`keep`: to keep that record first); the
    /// records of those that answered, and how many voters there are (this node
    /// included).
    async fn ask_voters(
        &self,
        status: &Status,
        keep: Option<SyncRecord>,
    ) -> (Vec<Option<SyncRecord>>, usize) {
        let others = self.voters(status);
        let voters = others.len() + 1;
        let asked = others.into_iter().map(|(id, addr)| {
            let request = Request::PgSync { keep: keep.clone() };
            async move { self.ask(id, &addr, request).await }
        });
        let answers = futures::future::join_all(asked).await;
        (answers.into_iter().flatten().collect(), voters)
    }

    /// The other voters and where they are: from the node's list, else its config.
    fn voters(&self, status: &Status) -> Vec<(NodeId, String)> {
        match &status.members {
            Some(list) => {
                let voters = list.voters();
                list.members
                    .iter()
                    .filter(|m| m.id != status.id && voters.contains(&m.id))
                    .map(|m| (m.id, m.addr.clone()))
                    .collect()
            }
            None => self
                .configured
                .iter()
                .map(|(id, addr)| (*id, addr.to_string()))
                .collect(),
        }
    }

    /// One voter's answer: `Some(kept)` when it answered (its record, after keeping
    /// the one sent), `None` when it did not.
    async fn ask(&self, id: NodeId, addr: &str, request: Request) -> Option<Option<SyncRecord>> {
        let addr: PeerAddr = addr.parse().ok()?;
        let resolved = addr.resolve_any().await.ok()?;
        let answer = self
            .clients
            .request((id, resolved), &self.tls, request, WITHIN)
            .await
            .ok()?;
        match answer {
            Response::PgSync(kept) => Some(kept),
            other => {
                tracing::debug!(id, "postgres: a voter answered the record with {other:?}");
                None
            }
        }
    }
}
