//! The outbound side: one task per peer dials it, opens the single unidirectional
//! stream that carries every message to it in order, and redials with capped backoff.
//! While no connection is up, messages to the peer are dropped: the protocol tolerates
//! loss, and heartbeats queued during an outage would only arrive stale.

use super::endpoint::{Shared, Shutdown};
use super::frame::{write_frame, FrameError};
use super::hello::{self, HELLO_TIMEOUT};
use super::tls::INITIAL_RTT;
use super::PeerAddr;
use super::{close, TransportEvent};
use crate::certs::node_dns_name;
use crate::protocol::{Message, NodeId};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, Notify};
use tracing::{debug, info, warn};

/// First retry delay after a failed dial; doubles up to [`MAX_BACKOFF`].
pub const MIN_BACKOFF: Duration = Duration::from_millis(20);
/// Retry delay cap: a peer that comes back is reached within about this long even if
/// it does not dial us first.
pub const MAX_BACKOFF: Duration = Duration::from_millis(500);
/// A connection that lasted this long resets the backoff; one that dies sooner (a peer
/// that accepts then drops us) keeps backing off instead of spinning.
const STABLE_AFTER: Duration = Duration::from_secs(1);
/// Messages queued per peer while its stream is busy; beyond this, `send` drops.
const QUEUE_LEN: usize = 256;
/// An attempt younger than this is not abandoned when the peer reaches us: its first
/// retransmission is still to come.
const ABANDON_AFTER: Duration = Duration::from_millis(3 * INITIAL_RTT.as_millis() as u64);

/// Our outbound state for one peer, shared by the dialer task, `send`, and the
/// inbound side (which can tell us the peer is back or has restarted).
pub(super) struct Link {
    pub peer: NodeId,
    /// As configured; a host name is resolved at each dial.
    pub addr: PeerAddr,
    queue: mpsc::Sender<Message>,
    current: Mutex<Option<Current>>,
    /// "The peer just reached us": skip the rest of the backoff and dial now.
    wake: Notify,
}

/// The outbound connection in use and which process of the peer it reached.
struct Current {
    conn: quinn::Connection,
    /// The nonce in the peer's hello on this connection.
    nonce: u64,
}

impl Link {
    pub fn new(peer: NodeId, addr: PeerAddr) -> (Arc<Link>, mpsc::Receiver<Message>) {
        let (queue, rx) = mpsc::channel(QUEUE_LEN);
        let link = Link {
            peer,
            addr,
            queue,
            current: Mutex::new(None),
            wake: Notify::new(),
        };
        (Arc::new(link), rx)
    }

    fn current(&self) -> MutexGuard<'_, Option<Current>> {
        // A panic while holding this lock cannot leave the Option half-written.
        self.current.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a message if the peer is connected and its queue has room; never blocks.
    pub fn try_send(&self, msg: Message) -> bool {
        self.is_connected() && self.queue.try_send(msg).is_ok()
    }

    pub fn is_connected(&self) -> bool {
        self.current().is_some()
    }

    /// The peer just connected to us, so it is up: dial now instead of waiting.
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// The peer just dialed us from the process with `live_nonce`. If our outbound
    /// connection reached a different process, that one is gone (the peer restarted):
    /// close it so the dialer reconnects at once rather than after the idle timeout.
    /// Returns whether it did.
    pub fn kick_if_stale(&self, live_nonce: u64) -> bool {
        let current = self.current();
        match current.as_ref() {
            Some(c) if c.nonce != live_nonce => {
                c.conn.close(close::SUPERSEDED, b"you restarted; redialing");
                true
            }
            _ => false,
        }
    }
}

enum Dialed {
    /// Connected and both hellos exchanged: `stream` carries our messages.
    Up {
        conn: quinn::Connection,
        stream: quinn::SendStream,
        nonce: u64,
    },
    /// `quiet`: the peer is merely down (timed out), not refusing us.
    Failed {
        reason: String,
        quiet: bool,
    },
    Woken,
    Shutdown,
}

enum Served {
    /// `kicked`: we closed it ourselves because the peer restarted; redial at once.
    Lost {
        reason: String,
        kicked: bool,
    },
    Shutdown,
}

/// The dialer task for one peer. Runs until shutdown.
pub(super) async fn run(shared: Arc<Shared>, link: Arc<Link>, mut queue: mpsc::Receiver<Message>) {
    let mut shutdown = shared.shutdown_signal();
    let mut delay: Option<Duration> = None;
    let mut last_failure: Option<String> = None;
    // Whether the runtime was told the peer is down (after a lost connection or a first
    // failed dial): an election need not wait for a peer we cannot reach.
    let mut reported_down = false;
    loop {
        if let Some(d) = delay {
            tokio::select! {
                _ = tokio::time::sleep(d) => {}
                _ = link.wake.notified() => {}
                _ = shutdown.wait() => return,
            }
        }
        // Fetched per dial: a reload may have replaced the certificates.
        let config = shared.dial_config();
        match dial(&shared, &link, &config, &mut shutdown).await {
            Dialed::Shutdown => return,
            Dialed::Woken => delay = None,
            Dialed::Failed { reason, quiet } => {
                report_failure(&shared, &link, reason, quiet, &mut last_failure);
                if !reported_down {
                    reported_down = true;
                    if !shared
                        .emit(TransportEvent::PeerDown(link.peer), &mut shutdown)
                        .await
                    {
                        return;
                    }
                }
                delay = Some(next_delay(delay));
            }
            Dialed::Up {
                conn,
                stream,
                nonce,
            } => {
                last_failure = None;
                reported_down = true; // serve() reports the loss of this connection
                let up_at = Instant::now();
                let up = Current { conn, nonce };
                match serve(&shared, &link, up, stream, &mut queue, &mut shutdown).await {
                    Served::Shutdown => return,
                    Served::Lost { reason, kicked } => {
                        info!(peer = link.peer, %reason, "outbound connection lost");
                        delay = if kicked || up_at.elapsed() >= STABLE_AFTER {
                            None
                        } else {
                            Some(next_delay(delay))
                        };
                    }
                }
            }
        }
    }
}

fn next_delay(delay: Option<Duration>) -> Duration {
    delay.map_or(MIN_BACKOFF, |d| (d * 2).min(MAX_BACKOFF))
}

/// One connection attempt: the QUIC handshake, then the hello exchange. If the peer
/// reaches us during the handshake and this attempt is old (its packets went out while
/// the peer was down), a fresh attempt beats waiting for this one's retransmission.
async fn dial(
    shared: &Shared,
    link: &Link,
    config: &quinn::ClientConfig,
    shutdown: &mut Shutdown,
) -> Dialed {
    let started = Instant::now();
    let server_name = node_dns_name(link.peer);
    // Resolved afresh each time, so a peer whose name now points elsewhere is followed.
    let resolved = tokio::select! {
        r = link.addr.resolve(shared.local_addr) => r,
        _ = shutdown.wait() => return Dialed::Shutdown,
    };
    let target = match resolved {
        Ok(target) => target,
        Err(reason) => {
            return Dialed::Failed {
                reason,
                quiet: false,
            }
        }
    };
    let connecting = match shared
        .endpoint
        .connect_with(config.clone(), target, &server_name)
    {
        Ok(c) => c,
        Err(e) => {
            // A local problem (unusable address, endpoint closed); retry with backoff.
            return Dialed::Failed {
                reason: e.to_string(),
                quiet: false,
            };
        }
    };
    tokio::pin!(connecting);
    let conn = loop {
        tokio::select! {
            r = &mut connecting => match r {
                Ok(conn) => break conn,
                Err(e) => return Dialed::Failed {
                    quiet: matches!(e, quinn::ConnectionError::TimedOut),
                    reason: e.to_string(),
                },
            },
            _ = link.wake.notified() => {
                if started.elapsed() >= ABANDON_AFTER {
                    return Dialed::Woken;
                }
            }
            _ = shutdown.wait() => return Dialed::Shutdown,
        }
    };
    let exchange = async {
        let stream = hello::send(&conn, &shared.hello()).await?;
        let (_, theirs) = hello::recv(&conn).await?;
        Ok::<_, FrameError>((stream, theirs))
    };
    let outcome = tokio::select! {
        r = tokio::time::timeout(HELLO_TIMEOUT, exchange) => r,
        _ = shutdown.wait() => return Dialed::Shutdown,
    };
    let reason = match outcome {
        Ok(Ok((stream, theirs))) => {
            match hello::membership_mismatch(&shared.members, &theirs.members) {
                None => {
                    return Dialed::Up {
                        conn,
                        stream,
                        nonce: theirs.nonce,
                    }
                }
                Some(reason) => {
                    shared.stats.add_refused();
                    conn.close(close::MEMBERSHIP, reason.as_bytes());
                    reason
                }
            }
        }
        Ok(Err(FrameError::Codec(e))) => {
            shared.stats.add_bad_frame();
            let reason = format!("bad hello: {e}");
            conn.close(close::BAD_FRAME, reason.as_bytes());
            reason
        }
        // Typically the peer closing the connection because it refused our certificate.
        Ok(Err(FrameError::Io(e))) => e.to_string(),
        Err(_) => {
            let reason = format!("no hello within {HELLO_TIMEOUT:?}");
            conn.close(close::PROTOCOL, reason.as_bytes());
            reason
        }
    };
    Dialed::Failed {
        reason,
        quiet: false,
    }
}

/// A peer that is down just times out: that is normal and logged quietly. Anything else
/// (TLS refusal, wrong certificate) is a configuration problem: logged and reported once
/// per distinct reason so a misconfigured peer does not flood the log every backoff.
fn report_failure(
    shared: &Shared,
    link: &Link,
    reason: String,
    quiet: bool,
    last: &mut Option<String>,
) {
    if quiet || last.as_deref() == Some(reason.as_str()) {
        debug!(peer = link.peer, addr = %link.addr, %reason, "dial failed");
    } else {
        warn!(peer = link.peer, addr = %link.addr, %reason, "dial refused");
        shared.emit_nowait(TransportEvent::Rejected {
            peer: Some(link.peer),
            remote: link.addr.to_string(),
            reason: format!("dialing node-{}: {reason}", link.peer),
        });
    }
    *last = Some(reason);
}

/// Runs one established connection: every queued message in order on `stream`,
/// until the connection is lost or we shut down.
async fn serve(
    shared: &Shared,
    link: &Link,
    up: Current,
    mut stream: quinn::SendStream,
    queue: &mut mpsc::Receiver<Message>,
    shutdown: &mut Shutdown,
) -> Served {
    let conn = up.conn.clone();
    // Whatever was queued before belongs to a previous connection: stale by now.
    let mut stale = 0;
    while queue.try_recv().is_ok() {
        stale += 1;
    }
    shared.stats.add_dropped(stale);
    *link.current() = Some(up);
    shared.stats.add_connect();
    info!(peer = link.peer, addr = %link.addr, "outbound connection up");
    if !shared
        .emit(TransportEvent::PeerUp(link.peer), shutdown)
        .await
    {
        return Served::Shutdown;
    }
    let outcome = loop {
        tokio::select! {
            biased;
            _ = shutdown.wait() => {
                link.current().take();
                return Served::Shutdown;
            }
            // Only `Link::kick_if_stale` closes an outbound connection locally
            // (shutdown returned above), so LocallyClosed means "kicked".
            e = conn.closed() => break lost_because(e),
            msg = queue.recv() => {
                // The Link holds the sender, so the queue never closes while we run.
                let Some(msg) = msg else { return Served::Shutdown };
                // Written in the branch body, not raced: write_all is not cancel-safe.
                if let Err(e) = write_frame(&mut stream, &msg).await {
                    // E.g. the peer stopped our stream: without it the connection is
                    // useless, so drop it and redial.
                    conn.close(close::PROTOCOL, b"message stream failed");
                    break lost(e.to_string());
                }
                shared.stats.add_sent();
            }
        }
    };
    link.current().take();
    if !shared
        .emit(TransportEvent::PeerDown(link.peer), shutdown)
        .await
    {
        return Served::Shutdown;
    }
    outcome
}

fn lost_because(e: quinn::ConnectionError) -> Served {
    Served::Lost {
        kicked: matches!(e, quinn::ConnectionError::LocallyClosed),
        reason: e.to_string(),
    }
}

fn lost(reason: String) -> Served {
    Served::Lost {
        reason,
        kicked: false,
    }
}
