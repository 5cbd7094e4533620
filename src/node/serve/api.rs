//! The client API on the node's QUIC endpoint: one bidirectional stream per request,
//! framed by the codec. Clients authenticate with a certificate from the cluster CA.
//!
//! Requests: `Status` (one answer), `Watch` (a status frame now, after every change and
//! when a coordinator's lease lapses, until the client goes away), `StepDown` and `SwitchOver` (handing over
//! leadership), `ScheduleSwitchOver` and `CancelSwitchOver` (one held for later),
//! `StandAside` (a switchover's preparation), `Metrics` (counters), `SetPause` (the
//! maintenance pause), `Events` (the newest lines of the node's event log, for
//! `bully history`), `Leader` (who leads, confirmed by the coordinator) and `Forwarded`
//! (a request a member that does not lead passed on, src/node/serve/forward.rs).

use super::forward;
use super::scheduled_switchover::{self, Schedule};
use super::switchover::{self, PeerApis};
use crate::api::{Request, Response, Status};
use crate::client_pool::Within;
use crate::node::policy::member_change::CHANGE_TIMEOUT_MS;
use crate::node::shared::mailbox::{ask_runtime, Command};
use crate::node::shared::metrics::Metrics;
use crate::node::shared::tasks::NodeTasks;
use crate::protocol::{Change, NodeId, Role};
use crate::transport::{close, read_frame, write_frame};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// The client API's one home, created once when the node starts: the runtime hands it
/// every API connection the transport accepts, and it serves each as one of the node's
/// tasks, which end when the node stops.
pub struct Api {
    context: ApiContext,
}

/// What a request stream is served from: the published status, the runtime's command
/// queue and the counters. Cheap to clone (one per request stream).
#[derive(Clone)]
struct ApiContext {
    status: watch::Receiver<Status>,
    commands: mpsc::Sender<Command>,
    metrics: Arc<Metrics>,
    /// Where the peers are, for a switchover.
    members: Arc<PeerApis>,
    /// The data dir, whose event log `Events` reads.
    data_dir: Arc<PathBuf>,
    /// The switchover this coordinator holds for later, if any.
    schedule: Schedule,
    /// `bully pg` orders for the PostgreSQL manager (unanswered without `[postgres]`).
    postgres: mpsc::Sender<crate::node::postgres::Order>,
    /// The synchronous record this node keeps for the cluster's PostgreSQL servers.
    pg_sync: crate::node::postgres::SyncStore,
    /// The node's tasks: every connection, request stream and background job the
    /// API starts is one of them.
    tasks: NodeTasks,
}

/// What the API is made of, handed over by the node's start.
pub struct ApiParts {
    pub data_dir: PathBuf,
    pub status: watch::Receiver<Status>,
    pub commands: mpsc::Sender<Command>,
    pub metrics: Arc<Metrics>,
    pub members: PeerApis,
    pub schedule: Schedule,
    /// Where `bully pg` orders go (src/node/postgres/).
    pub postgres: mpsc::Sender<crate::node::postgres::Order>,
    /// The synchronous record (`Request::PgSync`).
    pub pg_sync: crate::node::postgres::SyncStore,
    pub tasks: NodeTasks,
}

impl Api {
    /// The API of a node publishing `parts.status`, taking commands on `parts.commands`.
    pub fn new(parts: ApiParts) -> Api {
        let context = ApiContext {
            status: parts.status,
            commands: parts.commands,
            metrics: parts.metrics,
            members: Arc::new(parts.members),
            data_dir: Arc::new(parts.data_dir),
            schedule: parts.schedule,
            postgres: parts.postgres,
            pg_sync: parts.pg_sync,
            tasks: parts.tasks,
        };
        Api { context }
    }

    /// `peer`'s link came up: compares the maintenance pause with it, in the
    /// background (src/node/serve/pause_sync.rs), until it succeeds, the link goes down
    /// or the node stops.
    pub fn sync_pause(&self, peer: crate::protocol::NodeId) {
        let context = self.context.clone();
        self.context.tasks.spawn(async move {
            let (members, status) = (&context.members, &context.status);
            let sync = super::pause_sync::reconcile(members, status, &context.commands, peer);
            context.tasks.until_stopped(sync).await;
        });
    }

    /// The same requests, for the HTTP endpoint's routes (`/cluster`, Patroni's write
    /// routes): answered exactly as over QUIC, so one path serves both.
    pub fn requests(&self) -> ApiRequests {
        ApiRequests {
            context: self.context.clone(),
        }
    }

    /// Serves every request stream a client opens on `conn` until it closes or the
    /// node stops (then the connection is closed).
    pub fn serve(&self, conn: quinn::Connection) {
        self.context
            .tasks
            .spawn(serve_client(conn, self.context.clone()));
    }
}

/// The client API as another of the node's endpoints uses it (src/node/serve/http_conn.rs):
/// a request answered as a client's over QUIC would be (passed on to the coordinator
/// where only it serves one), and another member asked as the API asks it.
#[derive(Clone)]
pub struct ApiRequests {
    context: ApiContext,
}

impl ApiRequests {
    /// The answer to `request` (never a watch), as the QUIC API gives it.
    pub async fn answer(&self, request: Request) -> Response {
        match respond(request, &self.context, true).await {
            Ok(response) => response,
            Err(e) => Response::Refused(format!("the node could not answer: {e}")),
        }
    }

    /// The answer to `request` if it comes within `within`; past that the request goes
    /// on as one of the node's tasks (it is never cut off half-done) and this is `None`.
    pub async fn answer_within(&self, request: Request, within: Duration) -> Option<Response> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let requests = self.clone();
        self.context.tasks.spawn(async move {
            let _ = tx.send(requests.answer(request).await);
        });
        tokio::time::timeout(within, rx).await.ok()?.ok()
    }

    /// This node's status as of now, as `Request::Status` answers it.
    pub fn status_now(&self) -> Status {
        self.context.schedule.status_now(&self.context.status)
    }

    /// Member `id`'s status, asked over its API within `within` (connecting and
    /// answering each), or why there is none.
    pub async fn member_status(
        &self,
        now: &Status,
        id: NodeId,
        within: Duration,
    ) -> Result<Status, String> {
        let asked = switchover::ask_member(
            &self.context.members,
            now,
            id,
            Request::Status,
            Within::quick(within, within),
        );
        match tokio::time::timeout(within * 2, asked).await {
            Ok(Ok(Response::Status(theirs))) => Ok(theirs),
            Ok(Ok(other)) => Err(format!("node {id} answered {other:?}")),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(format!(
                "node {id} did not answer within {} ms",
                (within * 2).as_millis()
            )),
        }
    }
}

/// How long a `bully pg` order may wait for the manager to take it up; past that it
/// is dropped, never run late (src/node/postgres/order.rs).
pub const POSTGRES_ORDER_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Hands `verb` to the PostgreSQL manager and waits for its answer.
async fn postgres_order(
    context: &ApiContext,
    verb: crate::api::postgres::PgVerb,
) -> Result<String, String> {
    if context.status.borrow().postgres.is_none() {
        return Err("this node keeps no PostgreSQL server (no [postgres] section)".into());
    }
    crate::node::postgres::hand(&context.postgres, verb, POSTGRES_ORDER_WAIT).await
}

/// The answer to a command the runtime accepted or refused.
fn answered(result: Result<String, String>) -> Response {
    match result {
        Ok(text) => Response::Done(text),
        Err(text) => Response::Refused(text),
    }
}

/// Each stream runs in its own task so a long watch does not block a status query.
async fn serve_client(conn: quinn::Connection, context: ApiContext) {
    let remote = conn.remote_address();
    let tasks = context.tasks.clone();
    loop {
        let (send, recv) = match tasks.until_stopped(conn.accept_bi()).await {
            Some(Ok(streams)) => streams,
            Some(Err(e)) => {
                tracing::debug!(%remote, "client connection ended: {e}");
                return;
            }
            None => {
                conn.close(close::SHUTDOWN, b"node shutting down");
                return;
            }
        };
        let context = context.clone();
        let group = tasks.clone();
        tasks.spawn(async move {
            if let Some(Err(e)) = group.until_stopped(serve_stream(send, recv, context)).await {
                tracing::debug!(%remote, "client request failed: {e}");
            }
        });
    }
}

async fn serve_stream(
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    context: ApiContext,
) -> anyhow::Result<()> {
    let Some(request) = read_frame::<Request>(&mut recv).await? else {
        return Ok(());
    };
    let response = match request {
        Request::Watch => return watch_status(send, context.status).await,
        Request::Forwarded { request } => respond(*request, &context, false).await?,
        request => respond(request, &context, true).await?,
    };
    write_frame(&mut send, &response).await?;
    let _ = send.finish();
    Ok(())
}

/// The answer to one request other than `Watch`. With `may_forward`, a request only the
/// coordinator serves is passed on to it when this node does not lead
/// (src/node/serve/forward.rs); a request passed on once is served here.
async fn respond(
    request: Request,
    context: &ApiContext,
    may_forward: bool,
) -> anyhow::Result<Response> {
    if may_forward && forward::for_the_coordinator(&request) {
        let now = context.status.borrow().as_of_now();
        if now.role != Role::Coordinator {
            return Ok(forward::to_coordinator(&context.members, &now, request).await);
        }
    }
    Ok(match request {
        Request::Watch => Response::Refused("a watch cannot be passed on".into()),
        Request::Forwarded { .. } => Response::Refused("a request is passed on once".into()),
        Request::Leader => {
            let now = context.schedule.status_now(&context.status);
            forward::leader(&context.members, now).await
        }
        Request::Status => Response::Status(context.schedule.status_now(&context.status)),
        Request::Metrics => {
            let now = context.status.borrow().as_of_now();
            Response::Metrics(context.metrics.snapshot_for(&now))
        }
        Request::StepDown { for_ms } => {
            let ask = |reply| Command::StepDown {
                for_ms,
                to: None,
                reply,
            };
            answered(ask_runtime(&context.commands, ask).await?)
        }
        Request::StandAside { for_ms, target } => {
            let ask = |reply| Command::StandAside {
                for_ms,
                target,
                reply,
            };
            answered(ask_runtime(&context.commands, ask).await?)
        }
        Request::ChangeMembers { change, forwarded } => {
            let now = context.status.borrow().as_of_now();
            answered(change_members(context, &now, change, forwarded).await?)
        }
        Request::SetPause { pause } => {
            let ask = |reply| Command::SetPause { pause, reply };
            answered(ask_runtime(&context.commands, ask).await?)
        }
        Request::Events { since_ms, max } => events(&context.data_dir, since_ms, max).await,
        Request::SwitchOver { to, for_ms } => {
            let now = context.status.borrow().as_of_now();
            let members = &context.members;
            answered(switchover::run(members, &now, &context.commands, to, for_ms).await)
        }
        Request::ScheduleSwitchOver { to, at_ms, for_ms } => {
            let node = scheduled_switchover::Node {
                members: &context.members,
                status: &context.status,
                commands: &context.commands,
                tasks: &context.tasks,
            };
            let plan = crate::api::ScheduledSwitchover { to, at_ms, for_ms };
            answered(context.schedule.add(node, plan).await)
        }
        Request::CancelSwitchOver => answered(context.schedule.cancel(&context.commands)),
        Request::Postgres { verb } => answered(postgres_order(context, verb).await),
        Request::PgSync { keep } => match keep {
            None => Response::PgSync(context.pg_sync.current().await),
            Some(record) => match context.pg_sync.keep(record).await {
                Ok(kept) => Response::PgSync(kept),
                Err(e) => Response::Refused(e),
            },
        },
    })
}

/// A status frame now, after every change and when the lease lapses (read against the
/// lease, Q4), until the client goes away.
async fn watch_status(
    mut send: quinn::SendStream,
    mut status: watch::Receiver<Status>,
) -> anyhow::Result<()> {
    let mut now = status.borrow_and_update().as_of_now();
    loop {
        write_frame(&mut send, &Response::Status(now)).await?;
        let next = tokio::select! {
            next = next_status(&mut status) => next,
            _ = send.stopped() => None,
        };
        match next {
            Some(next) => now = next,
            None => break,
        }
    }
    let _ = send.finish();
    Ok(())
}

/// Waits for the next status to show a watcher: after a change, or at the moment the
/// coordinator's lease lapses (its role as read against the lease changes then, with
/// nothing published: a runtime that has not noticed yet, or that a late ack will
/// renew, must still not be shown leading). `None` when the node shuts down.
/// Cancellation-safe: `changed` and a sleep lose nothing.
async fn next_status(status: &mut watch::Receiver<Status>) -> Option<Status> {
    let lapses_at = {
        let current = status.borrow();
        let leads = current.role == crate::protocol::Role::Coordinator;
        let at = current.lease_until.filter(|_| leads);
        // A lease already lapsed was shown as lapsed: no need to wake for it again.
        at.filter(|at| *at > crate::boot_clock::BootInstant::now())
    };
    let lapse = async {
        match lapses_at {
            Some(at) => crate::boot_clock::sleep_until(at).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        changed = status.changed() => changed.ok()?,
        _ = lapse => {}
    }
    Some(status.borrow_and_update().as_of_now())
}
/// The newest event-log lines since `since_ms` (at most `max`, under the frame cap),
/// read off the runtime's thread; a log that cannot be read is a refusal that says why.
async fn events(data_dir: &Arc<PathBuf>, since_ms: u64, max: u32) -> Response {
    let dir = Arc::clone(data_dir);
    let read = tokio::task::spawn_blocking(move || {
        crate::api::event_log::read_recent(&dir, since_ms, max as usize)
    });
    match read.await {
        Ok(Ok(recent)) => Response::Events(recent),
        Ok(Err(e)) => Response::Refused(format!("cannot read the event log: {e}")),
        Err(e) => Response::Refused(format!("reading the event log failed: {e}")),
    }
}

/// A membership change: the coordinator carries it out; another node passes it to the
/// coordinator it follows (once: a passed request that meets a non-coordinator is
/// refused, so two nodes with different views never bounce it).
async fn change_members(
    context: &ApiContext,
    now: &Status,
    change: Change,
    forwarded: bool,
) -> anyhow::Result<Result<String, String>> {
    if now.role == Role::Coordinator {
        let ask = |reply| Command::ChangeMembers { change, reply };
        return Ok(ask_runtime(&context.commands, ask).await?);
    }
    let Some(coordinator) = now.coordinator().filter(|_| !forwarded) else {
        return Ok(Err(format!(
            "node {} does not lead and knows no coordinator to pass the change to; try \
             again once one is elected (`bully status --cluster`)",
            now.id
        )));
    };
    let request = Request::ChangeMembers {
        change,
        forwarded: true,
    };
    let within = Duration::from_millis(CHANGE_TIMEOUT_MS) + Duration::from_secs(5);
    let within = Within::fresh(switchover::ASK_TIMEOUT, within);
    let answer = switchover::ask_member(&context.members, now, coordinator, request, within).await;
    Ok(match answer {
        Ok(Response::Done(text)) => Ok(text),
        Ok(Response::Refused(text)) => Err(text),
        Ok(other) => Err(format!("coordinator {coordinator} answered {other:?}")),
        Err(e) => Err(format!("coordinator {coordinator} is unreachable: {e}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::boot_clock::BootInstant;
    use crate::protocol::{Epoch, Mode, Role};
    use std::time::Duration;

    fn leading(lease_until: BootInstant) -> Status {
        let epoch = Some(Epoch { term: 5, leader: 2 });
        let mut status = Status::for_test(2, Role::Coordinator, epoch, Mode::Quorum, &[1, 3]);
        status.lease_until = Some(lease_until);
        status
    }

    #[tokio::test]
    async fn a_watch_wakes_when_the_lease_lapses_with_nothing_published() {
        let lease_until = BootInstant::now() + Duration::from_millis(300);
        let (_publisher, mut status) = watch::channel(leading(lease_until));
        assert_eq!(
            status.borrow_and_update().as_of_now().role,
            Role::Coordinator
        );
        let next = tokio::time::timeout(Duration::from_secs(10), next_status(&mut status))
            .await
            .expect("the watch woke at the lapse")
            .expect("the node is still there");
        assert!(BootInstant::now() >= lease_until, "not before the lapse");
        assert_eq!(next.role, Role::Candidate, "{next:?}");
        assert_eq!(next.coordinator(), None, "{next:?}");

        // Shown lapsed once: the next frame waits for a change, not for the old lapse.
        let again = tokio::time::timeout(Duration::from_millis(300), next_status(&mut status));
        assert!(again.await.is_err(), "no second frame for the same lapse");
    }
}
