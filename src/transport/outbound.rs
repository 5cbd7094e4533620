//! The outbound side: one task per peer dials it (unless the peer's own connection to
//! us is up: one connection per pair), opens the unidirectional stream that carries our
//! messages to it in order (one of the link's paths, see [`super::path`]), reads what
//! the peer sends back on its own stream of this connection, and redials with capped
//! backoff. While no path is up, messages to the peer are dropped: the
//! protocol tolerates loss, and heartbeats queued during an outage would only arrive
//! stale. The task ends with its link, when the peer leaves the member list (see
//! `Transport::set_peers`).

use super::agreement;
use super::backoff::{next_delay, MAX_BACKOFF};
use super::close;
use super::frame::FrameError;
use super::given_up;
use super::hello::{self, Hello, HELLO_TIMEOUT};
use super::inbound;
use super::link::Link;
use super::path::{self, PathEnd};
use super::peer_addr::PeerAddr;
use super::shared::Shared;
use super::tls::INITIAL_RTT;
use crate::certs::node_dns_name;
use crate::shutdown::Shutdown;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::{debug, info, warn};

/// A connection that lasted this long resets the backoff; one that dies sooner (a peer
/// that accepts then drops us) keeps backing off instead of spinning.
const STABLE_AFTER: Duration = Duration::from_secs(1);
/// An attempt younger than this is not abandoned when the peer reaches us: its first
/// retransmission is still to come.
const ABANDON_AFTER: Duration = Duration::from_millis(3 * INITIAL_RTT.as_millis() as u64);

/// A connection with both hellos exchanged.
struct Up {
    conn: quinn::Connection,
    /// Carries our messages, in order.
    stream: quinn::SendStream,
    /// The peer's stream on this connection: its hello, then its messages.
    back: quinn::RecvStream,
    /// The nonce in the peer's hello: which process of the peer we reached.
    nonce: u64,
    /// Where we dialed it (the link's address when the dial began).
    addr: PeerAddr,
}

enum Dialed {
    Up(Up),
    /// `quiet`: the peer is merely down (timed out), not refusing us.
    Failed {
        reason: String,
        quiet: bool,
    },
    Woken,
    /// The peer refused us as given up by a forced recovery, in these words.
    GivenUp(String),
    Shutdown,
}

impl Dialed {
    /// A failure that is worth a warning (not a peer that is merely down).
    fn refused(reason: impl ToString) -> Dialed {
        Dialed::Failed {
            reason: reason.to_string(),
            quiet: false,
        }
    }
}

enum Served {
    /// `kicked`: we closed it ourselves because the peer restarted; redial at once.
    Lost {
        reason: String,
        kicked: bool,
    },
    Shutdown,
}

/// The dialer task for one peer. Runs until shutdown or until the peer leaves the
/// member list.
pub(super) async fn run(shared: Arc<Shared>, link: Arc<Link>) {
    let shutdown = shared.shutdown();
    // Also trips when the peer leaves the member list: every wait of a dial ends on it.
    // A connection that is up is closed by `Link::retire` instead, so its paths end
    // as after any loss and the runtime hears the peer is down.
    let stop = link.stop_signal();
    let mut delay: Option<Duration> = None;
    let mut last_failure: Option<String> = None;
    // Whether the runtime was told the peer is down (after a lost connection or a first
    // failed dial): an election need not wait for a peer we cannot reach.
    let mut reported_down = false;
    loop {
        if link.is_retired() {
            return;
        }
        if let Some(d) = delay {
            tokio::select! {
                _ = tokio::time::sleep(d) => {}
                _ = link.woken() => {}
                _ = stop.tripped() => return,
            }
        }
        if !stand_back(&shared, &link, &stop).await {
            return;
        }
        match dial(&shared, &link, &stop).await {
            Dialed::Shutdown => return,
            Dialed::Woken => delay = None,
            Dialed::GivenUp(reason) => {
                let peer = link.peer;
                if !given_up::report(&shared, peer, reason, &mut last_failure, &stop).await {
                    return;
                }
                delay = Some(MAX_BACKOFF);
            }
            Dialed::Failed { reason, quiet } => {
                report_failure(&shared, &link, reason, quiet, &mut last_failure);
                if !reported_down {
                    reported_down = true;
                    if !link.report_unreached(&shared.events, &stop).await {
                        return;
                    }
                }
                delay = Some(next_delay(delay));
            }
            Dialed::Up(up) => {
                last_failure = None;
                reported_down = true; // serve() reports the loss of this connection
                let up_at = Instant::now();
                match serve(&shared, &link, up, &shutdown).await {
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

/// One connection per pair of nodes: while the peer's own connection to us is live it
/// carries both directions (see [`super::path`]), and a second one would only double
/// the handshakes (at start-up, 32 nodes on 2 cores starved on them) and the
/// keep-alives (most of an idle 32-node cluster's packets). Waits until it ends; two
/// dials that cross still make two connections, and both carry. Returns false once
/// `shutdown` (the link's stop signal) trips.
async fn stand_back(shared: &Shared, link: &Link, shutdown: &Shutdown) -> bool {
    while shared.inbound.has(link.peer) {
        tokio::select! {
            _ = link.woken() => {}
            _ = shutdown.tripped() => return false,
        }
    }
    true
}

/// One connection attempt at the link's address of the moment: the QUIC handshake,
/// then the hello exchange.
async fn dial(shared: &Shared, link: &Link, shutdown: &Shutdown) -> Dialed {
    let addr = link.addr();
    match handshake(shared, link, &addr, shutdown).await {
        Ok(conn) => exchange_hellos(shared, link, addr, conn, shutdown).await,
        Err(outcome) => outcome,
    }
}

/// Resolves the peer's address `addr` and completes the QUIC handshake with the dial
/// config of the moment (a reload may have replaced the certificates). If the peer
/// reaches us during the handshake and this attempt is old (its packets went out while
/// the peer was down), a fresh attempt beats waiting for this one's retransmission; so
/// does one at the peer's new address when the member list moves it.
async fn handshake(
    shared: &Shared,
    link: &Link,
    addr: &PeerAddr,
    shutdown: &Shutdown,
) -> Result<quinn::Connection, Dialed> {
    let started = Instant::now();
    // Resolved afresh each time, so a peer whose name now points elsewhere is followed.
    let resolved = tokio::select! {
        r = addr.resolve(shared.local_addr) => r,
        _ = shutdown.tripped() => return Err(Dialed::Shutdown),
    };
    let target = resolved.map_err(Dialed::refused)?;
    let endpoint = shared.endpoint().ok_or(Dialed::Shutdown)?;
    // An error is a local problem (unusable address, endpoint closed); retry with backoff.
    let mut connecting = endpoint
        .connect_with(shared.dial_config(), target, &node_dns_name(link.peer))
        .map_err(Dialed::refused)?;
    drop(endpoint);
    // QUIC's own handshake timeout is its idle timeout, which is long (quiet links).
    let give_up = tokio::time::sleep(shared.silence);
    tokio::pin!(give_up);
    loop {
        tokio::select! {
            r = &mut connecting => return r.map_err(|e| match close::given_up_reason(&e) {
                Some(reason) => Dialed::GivenUp(reason),
                None => Dialed::Failed {
                    quiet: matches!(e, quinn::ConnectionError::TimedOut),
                    reason: e.to_string(),
                },
            }),
            _ = &mut give_up => return Err(Dialed::Failed {
                quiet: true,
                reason: format!("no handshake within {:?}", shared.silence),
            }),
            _ = link.woken() => {
                // The peer's connection to us carries both directions now; or this
                // attempt went out while the peer was down and a fresh one is faster.
                if shared.inbound.has(link.peer)
                    || started.elapsed() >= ABANDON_AFTER
                    || link.addr() != *addr
                {
                    retire_abandoned(shared, connecting);
                    return Err(Dialed::Woken);
                }
            }
            _ = shutdown.tripped() => return Err(Dialed::Shutdown),
        }
    }
}

/// Lets an abandoned handshake finish in a task of its own, then closes it as
/// superseded (the peer, still waiting for our hello, only logs it). Dropping the
/// attempt instead could make its CONNECTION_CLOSE the first packet the peer receives
/// of it, when the attempt's first flight had not gone out yet; quinn keeps such a
/// connection without a close timer until its idle timeout (a minute by default),
/// and with it the peer's UDP socket after the peer shuts its transport down
/// (`shutdown_leaves_no_task_and_no_socket_behind` in tests/transport.rs caught it).
fn retire_abandoned(shared: &Shared, connecting: quinn::Connecting) {
    let silence = shared.silence;
    shared.spawn(async move {
        if let Ok(Ok(conn)) = tokio::time::timeout(silence, connecting).await {
            conn.close(close::SUPERSEDED, b"superseded by your connection to us");
        }
    });
}

/// Sends our hello on the stream that will carry our messages and waits for the
/// peer's; a peer whose config disagrees with ours is refused (see [`agreement`]).
async fn exchange_hellos(
    shared: &Shared,
    link: &Link,
    addr: PeerAddr,
    conn: quinn::Connection,
    shutdown: &Shutdown,
) -> Dialed {
    let peer = link.peer;
    let exchange = async {
        let stream = hello::send(&conn, &shared.hello()).await?;
        let (back, theirs) = hello::recv(&conn).await?;
        Ok::<(quinn::SendStream, quinn::RecvStream, Hello), FrameError>((stream, back, theirs))
    };
    let outcome = tokio::select! {
        r = tokio::time::timeout(HELLO_TIMEOUT, exchange) => r,
        _ = shutdown.tripped() => {
            if link.is_retired() {
                conn.close(close::REMOVED, close::REMOVED_REASON);
            }
            return Dialed::Shutdown;
        }
    };
    let reason = match outcome {
        Ok(Ok((stream, back, theirs))) => {
            match agreement::compare(shared.id, &shared.hello(), peer, &theirs) {
                None if agreement::agreed(shared, peer, shutdown).await => {
                    return Dialed::Up(Up {
                        conn,
                        stream,
                        back,
                        nonce: theirs.nonce,
                        addr,
                    })
                }
                None => return Dialed::Shutdown,
                Some(mismatch) => {
                    let reason = mismatch.reason.clone();
                    if !agreement::refuse(shared, &conn, peer, mismatch, shutdown).await {
                        return Dialed::Shutdown;
                    }
                    return config_refusal(reason);
                }
            }
        }
        Ok(Err(FrameError::Codec(e))) => {
            shared.stats.add_bad_frame();
            let reason = format!("bad hello: {e}");
            conn.close(close::BAD_FRAME, reason.as_bytes());
            reason
        }
        // Typically the peer closing the connection because it refused our certificate,
        // or our config (then the close says why).
        Ok(Err(FrameError::Io(e))) => {
            let closed = conn.close_reason();
            if let Some(reason) = closed.as_ref().and_then(close::given_up_reason) {
                return Dialed::GivenUp(reason);
            }
            match agreement::refused_by_peer(peer, &conn) {
                Some(mismatch) => {
                    let reason = mismatch.reason.clone();
                    if !agreement::disagreed(shared, peer, mismatch, shutdown).await {
                        return Dialed::Shutdown;
                    }
                    return config_refusal(reason);
                }
                None => e.to_string(),
            }
        }
        Err(_) => {
            let reason = format!("no hello within {HELLO_TIMEOUT:?}");
            conn.close(close::PROTOCOL, reason.as_bytes());
            reason
        }
    };
    Dialed::refused(reason)
}

/// A dial refused over config: already logged (once per peer) by [`agreement`], so the
/// dialer only retries, quietly.
fn config_refusal(reason: String) -> Dialed {
    Dialed::Failed {
        reason,
        quiet: true,
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
        debug!(peer = link.peer, addr = %link.addr(), %reason, "dial failed");
    } else {
        warn!(peer = link.peer, addr = %link.addr(), %reason, "dial refused");
        shared.events.reject(
            Some(link.peer),
            link.addr().to_string(),
            format!("dialing node-{}: {reason}", link.peer),
        );
    }
    *last = Some(reason);
}

/// Runs one established connection: reads the peer's stream back in a task of its
/// own, and carries our messages as one of the link's paths until the connection is
/// lost or we shut down. A connection that came up just as the peer left the member
/// list or moved is closed at once (see [`Link::connected`]).
async fn serve(shared: &Arc<Shared>, link: &Link, up: Up, shutdown: &Shutdown) -> Served {
    let Up {
        conn,
        stream,
        back,
        nonce,
        addr,
    } = up;
    if !link.connected(conn.clone(), nonce, &addr) {
        if link.is_retired() {
            return Served::Shutdown;
        }
        return Served::Lost {
            reason: "the peer moved while we dialed it".into(),
            kicked: link.take_kicked(),
        };
    }
    shared.stats.add_connect();
    info!(peer = link.peer, %addr, "outbound connection up");
    shared.spawn(inbound::read_stream(
        shared.clone(),
        link.peer,
        conn.clone(),
        back,
    ));
    let end = path::carry(shared, link, &conn, nonce, stream, shutdown).await;
    link.disconnected();
    match end {
        PathEnd::Shutdown => Served::Shutdown,
        PathEnd::Lost(reason) => Served::Lost {
            reason,
            kicked: link.take_kicked(),
        },
    }
}
