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

/// How long the other voters still get once enough have answered a read: a live node
/// on the same network answers within it, so a read still sees every live voter's
/// record (as the simulator's model of it, src/sim/postgres/world.rs `sync_view`),
/// while a dead one (the old primary's node at a failover) costs this, not
/// [`ANSWER_WITHIN`]. A voter slower than this counts as one that did not answer.
const LATE_ANSWERS: Duration = Duration::from_millis(30);

/// What a call does with the voters that have not answered once enough have.
#[derive(Clone, Copy)]
enum Rest {
    /// Waits up to [`LATE_ANSWERS`] longer for their answers (a read: the newest
    /// record may be on any of them).
    Wait,
    /// Leaves them to finish in the background (a commit: a majority made it
    /// committed, and every live voter still gets the record, a moment later, as the
    /// simulator's model has it; a late arrival never replaces a newer record,
    /// src/node/postgres/sync_store.rs).
    Finish,
}

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

    /// The newest record among the voters that answered (this node included), if they
    /// are a majority. Once a majority has, the others get [`LATE_ANSWERS`] more: a
    /// dead member's node (the old primary's, at a failover) held every read up for
    /// [`ANSWER_WITHIN`] (0.4 s of a 0.95 s failover).
    pub async fn read(&self, status: &Status) -> SyncView {
        let own = self.store.current().await;
        let (answers, voters) = self
            .ask_voters(status, None, Rest::Wait, |answers, voters| {
                1 + answers.len() >= majority_of(voters)
            })
            .await;
        let answered: Vec<Option<SyncRecord>> = std::iter::once(own).chain(answers).collect();
        match answered.len() >= majority_of(voters) {
            true => SyncView::Read(SyncRecord::newest(answered.iter().flatten())),
            false => SyncView::Unread,
        }
    }

    /// Stores `record` here and on every other voter; how many keep it now. It answers
    /// as soon as a majority keeps it ([`Rest::Finish`]): a primary narrowing its
    /// acknowledgements no longer waits [`LATE_ANSWERS`] for a dead voter's node.
    pub async fn commit(&self, status: &Status, record: &SyncRecord) -> Result<Kept, String> {
        let own = self.store.keep(record.clone()).await?;
        let keeps = |kept: &Option<SyncRecord>| kept.as_ref() == Some(record);
        let own_keeps = usize::from(keeps(&own));
        let (answers, voters) = self
            .ask_voters(
                status,
                Some(record.clone()),
                Rest::Finish,
                |answers, voters| {
                    own_keeps + answers.iter().filter(|a| keeps(a)).count() >= majority_of(voters)
                },
            )
            .await;
        let by = own_keeps + answers.iter().filter(|a| keeps(a)).count();
        Ok(Kept { by, voters })
    }

    /// Asks every other voter at once (`keep`: to keep that record first) until all
    /// have answered or timed out, or until `enough` says the answers so far (and the
    /// count of voters, this node included) suffice, and then as `rest` says; the
    /// records of those that answered, and how many voters there are.
    async fn ask_voters(
        &self,
        status: &Status,
        keep: Option<SyncRecord>,
        rest: Rest,
        enough: impl Fn(&[Option<SyncRecord>], usize) -> bool,
    ) -> (Vec<Option<SyncRecord>>, usize) {
        use futures::StreamExt;
        let others = self.voters(status);
        let voters = others.len() + 1;
        let mut asked: futures::stream::FuturesUnordered<_> = others
            .into_iter()
            .map(|(id, addr)| {
                let request = Request::PgSync { keep: keep.clone() };
                let records = self.clone();
                async move { records.ask(id, &addr, request).await }
            })
            .collect();
        let mut answers = Vec::new();
        let mut late: Option<tokio::time::Instant> = None;
        loop {
            if late.is_none() && enough(&answers, voters) {
                match rest {
                    Rest::Wait => late = Some(tokio::time::Instant::now() + LATE_ANSWERS),
                    Rest::Finish => {
                        tokio::spawn(async move { while asked.next().await.is_some() {} });
                        break;
                    }
                }
            }
            let next = match late {
                Some(until) => match tokio::time::timeout_at(until, asked.next()).await {
                    Ok(next) => next,
                    Err(_) => break,
                },
                None => asked.next().await,
            };
            match next {
                Some(Some(answer)) => answers.push(answer),
                Some(None) => {}
                None => break,
            }
        }
        (answers, voters)
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
