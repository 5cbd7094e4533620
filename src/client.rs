//! A client of a node's API, used by `bully leader/status/watch/step-down`, by
//! `bully local` and by the tests: connect with the cluster's client certificate,
//! open one stream per request.

use crate::api::event_log::RecentEvents;
use crate::api::MetricsSnapshot;
use crate::api::Status;
use crate::api::{Request, Response};
use crate::certs::TlsFiles;
use crate::protocol::{Change, NodeId};
use crate::transport::{connect_client, read_frame, write_frame, FrameError, TransportError};
use std::net::SocketAddr;
use std::time::Duration;
use thiserror::Error;

/// Why a request did not get an answer. The CLI maps every case to exit code 2.
#[derive(Debug, Error)]
pub enum ClientError {
    /// No connection: unreachable, refused our certificate, or not a node we trust.
    #[error("cannot reach {addr}: {source}")]
    Unreachable {
        addr: SocketAddr,
        source: TransportError,
    },
    /// The connection failed when a request stream was opened.
    #[error("cannot reach {addr}: {source}")]
    Lost {
        addr: SocketAddr,
        source: quinn::ConnectionError,
    },
    /// A watch stream broke (the node went away mid-frame or the connection failed).
    #[error("cannot reach {addr}: {source}")]
    Disconnected {
        addr: SocketAddr,
        source: FrameError,
    },
    #[error("{addr} did not answer within {0:?}", .timeout)]
    Timeout { addr: SocketAddr, timeout: Duration },
    /// A request or answer could not be written or read: the bytes were wrong, or the
    /// stream failed underneath (the node died or restarted mid-request), after which
    /// nobody can say whether a command took effect.
    #[error("{addr} {}", broken_words(.source))]
    Broken {
        addr: SocketAddr,
        source: FrameError,
    },
    /// The node closed the request's stream without an answer (it was stopping).
    #[error("{addr} closed the request without answering (stopping?); {UNKNOWN_OUTCOME}")]
    NoAnswer { addr: SocketAddr },
    #[error("{addr} answered with something unexpected: unexpected answer {answer:?}")]
    Unexpected {
        addr: SocketAddr,
        answer: Box<Response>,
    },
    #[error("{addr} refused: {0}", .reason)]
    Refused { addr: SocketAddr, reason: String },
}

/// What a client says when a request got no answer: a command it carried may have run.
const UNKNOWN_OUTCOME: &str =
    "a command may or may not have taken effect: see `bully status --cluster`";

/// What [`ClientError::Broken`] says: a lost stream is not a bad answer, and a command
/// sent on it may or may not have been carried out.
fn broken_words(source: &FrameError) -> String {
    match source {
        FrameError::Io(e) => {
            format!("lost the connection before answering ({e}); {UNKNOWN_OUTCOME}")
        }
        FrameError::Codec(_) => format!("answered with something unexpected: {source}"),
    }
}

/// The least a step-down request waits for its answer (the handover itself).
pub const STEP_DOWN_TIMEOUT: Duration = Duration::from_secs(30);

/// A connection to one node's API.
pub struct Client {
    addr: SocketAddr,
    conn: quinn::Connection,
    timeout: Duration,
}

impl Client {
    /// Connects to `addr`, proving who we are with the client certificate in `tls`.
    /// With `expect` set, the server certificate must be that node's.
    pub async fn connect(
        addr: SocketAddr,
        tls: &TlsFiles,
        expect: Option<NodeId>,
        timeout: Duration,
    ) -> Result<Client, ClientError> {
        let conn = tokio::time::timeout(timeout, connect_client(addr, tls, expect))
            .await
            .map_err(|_| ClientError::Timeout { addr, timeout })?
            .map_err(|source| ClientError::Unreachable { addr, source })?;
        Ok(Client {
            addr,
            conn,
            timeout,
        })
    }

    /// The node's current status.
    pub async fn status(&self) -> Result<Status, ClientError> {
        match self.call(Request::Status).await? {
            Response::Status(status) => Ok(status),
            other => Err(self.unexpected(other)),
        }
    }

    /// Who leads, as this node answers [`Request::Leader`]: its own status, and the
    /// status of the coordinator it follows as that coordinator gave it (or why it could
    /// not be asked).
    pub async fn leader(&self) -> Result<crate::api::LeaderReply, ClientError> {
        match self.call(Request::Leader).await? {
            Response::Leader(reply) => Ok(reply),
            other => Err(self.unexpected(other)),
        }
    }

    /// A snapshot of the node's counters (messages by kind, elections, failovers, ...).
    pub async fn metrics(&self) -> Result<MetricsSnapshot, ClientError> {
        match self.call(Request::Metrics).await? {
            Response::Metrics(metrics) => Ok(metrics),
            other => Err(self.unexpected(other)),
        }
    }

    /// The newest lines of the node's event log written at or after `since_ms` (at most
    /// `max`; the reply says when older ones were left out), for `bully history`.
    pub async fn events(&self, since_ms: u64, max: u32) -> Result<RecentEvents, ClientError> {
        match self.call(Request::Events { since_ms, max }).await? {
            Response::Events(recent) => Ok(recent),
            Response::Refused(reason) => Err(ClientError::Refused {
                addr: self.addr,
                reason,
            }),
            other => Err(self.unexpected(other)),
        }
    }

    /// Asks the coordinator to step down for `for_ms`; returns its explanation once
    /// another node leads. Refused when this node does not lead, no peer is connected,
    /// or no other eligible node took over in time (the node then leads again). Waits at
    /// least [`STEP_DOWN_TIMEOUT`], since the answer comes after the handover.
    pub async fn step_down(&self, for_ms: u64) -> Result<String, ClientError> {
        self.command(Request::StepDown { for_ms }).await
    }

    /// Asks the coordinator to hand over to node `to` (switchover): members above `to`
    /// stand aside and the coordinator steps down, each for `for_ms`. Refused, with the
    /// reason, if `to` cannot take over. Waits like [`Client::step_down`].
    pub async fn switch_over(&self, to: NodeId, for_ms: u64) -> Result<String, ClientError> {
        self.command(Request::SwitchOver { to, for_ms }).await
    }

    /// Asks the coordinator to hold a switchover to node `to` until wall-clock `at_ms`
    /// (ms since the Unix epoch); the answer comes at once, accepted or refused.
    pub async fn schedule_switch_over(
        &self,
        to: NodeId,
        at_ms: u64,
        for_ms: u64,
    ) -> Result<String, ClientError> {
        self.command(Request::ScheduleSwitchOver { to, at_ms, for_ms })
            .await
    }

    /// Drops the coordinator's scheduled switchover.
    pub async fn cancel_switch_over(&self) -> Result<String, ClientError> {
        self.command(Request::CancelSwitchOver).await
    }

    /// `bully pg VERB`: asks the node to act on the PostgreSQL server it keeps.
    pub async fn postgres(
        &self,
        verb: crate::api::postgres::PgVerb,
    ) -> Result<String, ClientError> {
        self.command(Request::Postgres { verb }).await
    }

    /// Asks for a change of the member list (docs/design.md#membership): any member
    /// takes it and passes it to the coordinator; the answer comes once the list it asks
    /// for is committed (an add: once the new member has caught up and votes), or says
    /// why it was refused or did not complete.
    pub async fn change_members(&self, change: Change) -> Result<String, ClientError> {
        self.command(Request::ChangeMembers {
            change,
            forwarded: false,
        })
        .await
    }

    /// A request the node accepts (`Done`) or refuses with a reason; it may answer only
    /// after a handover, so it waits at least [`STEP_DOWN_TIMEOUT`].
    async fn command(&self, request: Request) -> Result<String, ClientError> {
        let timeout = self.timeout.max(STEP_DOWN_TIMEOUT);
        match self.call_within(request, timeout).await? {
            Response::Done(text) => Ok(text),
            Response::Refused(reason) => Err(ClientError::Refused {
                addr: self.addr,
                reason,
            }),
            other => Err(self.unexpected(other)),
        }
    }

    /// Sends any request and returns the answer as it came (nodes use it to talk to
    /// their peers' APIs during a switchover).
    pub async fn request(&self, request: Request) -> Result<Response, ClientError> {
        self.call(request).await
    }

    /// [`Client::request`] for a request whose answer may take up to `timeout` (a
    /// membership change passed on to the coordinator).
    pub async fn request_within(
        &self,
        request: Request,
        timeout: Duration,
    ) -> Result<Response, ClientError> {
        self.call_within(request, timeout).await
    }

    /// Opens a watch: the returned stream yields the status now and after each change.
    pub async fn watch(&self) -> Result<Watch, ClientError> {
        let (mut send, recv) = self.open().await?;
        write_frame(&mut send, &Request::Watch)
            .await
            .map_err(|e| self.broken(e))?;
        Ok(Watch {
            addr: self.addr,
            _send: send,
            recv,
        })
    }

    async fn call(&self, request: Request) -> Result<Response, ClientError> {
        self.call_within(request, self.timeout).await
    }

    async fn call_within(
        &self,
        request: Request,
        timeout: Duration,
    ) -> Result<Response, ClientError> {
        let exchange = async {
            let (mut send, mut recv) = self.open().await?;
            write_frame(&mut send, &request)
                .await
                .map_err(|e| self.broken(e))?;
            let _ = send.finish();
            read_frame::<Response>(&mut recv)
                .await
                .map_err(|e| self.broken(e))?
                .ok_or(ClientError::NoAnswer { addr: self.addr })
        };
        tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| ClientError::Timeout {
                addr: self.addr,
                timeout,
            })?
    }

    async fn open(&self) -> Result<(quinn::SendStream, quinn::RecvStream), ClientError> {
        self.conn
            .open_bi()
            .await
            .map_err(|source| ClientError::Lost {
                addr: self.addr,
                source,
            })
    }

    fn broken(&self, source: FrameError) -> ClientError {
        ClientError::Broken {
            addr: self.addr,
            source,
        }
    }

    fn unexpected(&self, answer: Response) -> ClientError {
        unexpected(self.addr, answer)
    }
}

fn unexpected(addr: SocketAddr, answer: Response) -> ClientError {
    ClientError::Unexpected {
        addr,
        answer: Box::new(answer),
    }
}

/// A stream of status updates from one node.
pub struct Watch {
    addr: SocketAddr,
    _send: quinn::SendStream,
    recv: quinn::RecvStream,
}

impl Watch {
    /// The next status; `Ok(None)` when the node ends the stream (it shut down).
    /// Cancellation-safe only between frames: do not race it in `select!` if a
    /// partial frame must not be lost; drop the whole watch instead.
    pub async fn next(&mut self) -> Result<Option<Status>, ClientError> {
        match read_frame::<Response>(&mut self.recv).await {
            Ok(Some(Response::Status(status))) => Ok(Some(status)),
            Ok(Some(other)) => Err(unexpected(self.addr, other)),
            Ok(None) => Ok(None),
            Err(source) => Err(ClientError::Disconnected {
                addr: self.addr,
                source,
            }),
        }
    }
}
