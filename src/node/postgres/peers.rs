//! The other members' statuses, as the manager needs them: where each one's server
//! listens, whether it is a primary or has no data, polled over the client API (with
//! the node's own certificate) by a task of its own, so a member that does not answer
//! never slows the manager's looks. An answer older than [`FRESH_FOR`] no longer counts.

use crate::api::postgres::PgState;
use crate::api::Status;
use crate::certs::TlsFiles;
use crate::client::Client;
use crate::node::shared::tasks::NodeTasks;
use crate::postgres_rules::Tags;
use crate::protocol::NodeId;
use crate::transport::PeerAddr;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long one member's answer counts.
pub const FRESH_FOR: Duration = Duration::from_secs(2);

/// How long one member may take to answer.
const ANSWER_WITHIN: Duration = Duration::from_millis(400);

/// One member's last answer (its server, if it keeps one) and when it came.
type Answer = (Option<PgState>, Instant);

/// The last answer of each member, shared by the poller and the manager.
#[derive(Clone, Default)]
pub struct PeerServers {
    seen: Arc<Mutex<BTreeMap<NodeId, Answer>>>,
}

impl PeerServers {
    /// Member `id`'s server as it last reported it, if that is fresh; the outer
    /// `None`: no fresh answer; the inner: it answered but keeps no server.
    pub fn get(&self, id: NodeId) -> Option<Option<PgState>> {
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let (state, at) = seen.get(&id)?;
        (at.elapsed() < FRESH_FOR).then(|| state.clone())
    }

    /// Whether member `id` ever answered since the node started.
    pub fn ever_heard(&self, id: NodeId) -> bool {
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.contains_key(&id)
    }

    /// Member `id`'s tags as it last reported them, fresh or not (a member's tags are
    /// its file's and change only with a restart).
    pub fn last_tags(&self, id: NodeId) -> Option<Tags> {
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.get(&id)?.0.as_ref().map(|state| state.tags)
    }

    fn set(&self, id: NodeId, state: Option<PgState>) {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.insert(id, (state, Instant::now()));
    }
}

/// The members to poll: from the node's list when it has one, else its configured peers.
pub fn members_of(status: &Status, configured: &[(NodeId, PeerAddr)]) -> Vec<(NodeId, String)> {
    match &status.members {
        Some(list) => list
            .members
            .iter()
            .filter(|m| m.id != status.id)
            .map(|m| (m.id, m.addr.clone()))
            .collect(),
        None => configured
            .iter()
            .map(|(id, addr)| (*id, addr.to_string()))
            .collect(),
    }
}

/// Polls every member's status every `interval` until `tasks` stops.
pub async fn poll(
    servers: PeerServers,
    status: tokio::sync::watch::Receiver<Status>,
    configured: Vec<(NodeId, PeerAddr)>,
    tls: TlsFiles,
    interval: Duration,
    tasks: NodeTasks,
) {
    let mut clients: BTreeMap<NodeId, Client> = BTreeMap::new();
    loop {
        let members = members_of(&status.borrow(), &configured);
        clients.retain(|id, _| members.iter().any(|(m, _)| m == id));
        let asked = members.into_iter().map(|(id, addr)| {
            let client = clients.remove(&id);
            let tls = tls.clone();
            async move { (id, ask(id, &addr, client, &tls).await) }
        });
        let answers = futures::future::join_all(asked);
        let Some(answers) = tasks.until_stopped(answers).await else {
            return;
        };
        for (id, answer) in answers {
            if let Some((client, state)) = answer {
                servers.set(id, state);
                clients.insert(id, client);
            }
        }
        if tasks
            .until_stopped(tokio::time::sleep(interval))
            .await
            .is_none()
        {
            return;
        }
    }
}

/// One member's server, through `client` (or a new connection).
async fn ask(
    id: NodeId,
    addr: &str,
    client: Option<Client>,
    tls: &TlsFiles,
) -> Option<(Client, Option<PgState>)> {
    let client = match client {
        Some(client) => client,
        None => {
            let addr: PeerAddr = addr.parse().ok()?;
            let resolved = addr.resolve_any().await.ok()?;
            Client::connect(resolved, tls, Some(id), ANSWER_WITHIN)
                .await
                .ok()?
        }
    };
    let status = tokio::time::timeout(ANSWER_WITHIN, client.status())
        .await
        .ok()?
        .ok()?;
    Some((client, status.postgres))
}
