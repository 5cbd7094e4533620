//! QUIC with mutual TLS between nodes, and the API clients' way in.
//!
//! # Layout
//! - `endpoint`: [`Transport`], the handle: start, send, reload, change the peer set
//!   as the member list changes ([`Transport::set_peers`]), shut down.
//! - `shared`: the state the handle and every task hold, and the one shutdown signal
//!   (a [`crate::shutdown::Shutdown`]); it imports no task, so no task imports another.
//! - `accept`: the accept loop, sorting each connection by certificate and ALPN.
//! - `outbound`: one connection per peer, dialed by us, redialed with capped backoff;
//!   it carries our stream to the peer and the peer's stream back.
//! - `path`: the streams our messages to a peer can take (ours on our connection, or
//!   the one back on the peer's connection to us); one carries them at a time, so the
//!   peer reads the FIFO channel the algorithm assumes. `link`: the per-peer state the
//!   dialer, the paths, `send` and the inbound side share.
//! - `inbound`: reading a peer's stream, dropping peers that send bad frames, noticing
//!   a peer that restarted; `inbound_table`: those connections by peer.
//! - `silence`: cuts a connection whose sends go unanswered for 20 D (QUIC's own idle
//!   timeout is long, so quiet links need no frequent keep-alive).
//! - `rtt_refresh`: probes a quiet link whose RTT estimate is far above what it has
//!   shown, so a message lost on it is resent after milliseconds (called by `silence`).
//! - [`tls`]: rustls (ring only) and quinn configs; who a connection's certificate is.
//! - [`frame`]: one length-prefixed frame on a stream ([`read_frame`], [`write_frame`]).
//! - [`hello`]: the first frame each side of a peer connection sends.
//! - `agreement`: whether a peer's hello agrees with ours (members, mode, D), and
//!   refusals over config; `verdicts`: what is remembered of each peer's verdict;
//!   `mismatch`: what a disagreement is ([`ConfigMismatch`], [`MismatchKind`]).
//! - `member_checks`: the checks on node IDs and peer lists ([`check_peers`]).
//! - `backoff`: the dialers' delays between attempts.
//! - `given_up`: members a forced recovery gave up: dialing each to tell it, and
//!   reporting a refusal as given up ([`TransportEvent::GivenUp`]).
//! - `api_dial`: [`connect_client`], an API client's connection to a node.
//! - `socket`: the UDP socket, wrapped so shutdown knows when it is closed.
//! - `runtime`: quinn's tokio runtime, with connection timers that do not wake the
//!   thread for a deadline they moved away from.
//! - [`close`], `config`, `event`, `error`, `stats`, `peer_addr`: close codes,
//!   [`TransportConfig`], [`TransportEvent`] (and the queue the tasks send it on),
//!   [`TransportError`], [`TransportStats`], [`PeerAddr`].
//!
//! # Timeouts
//! A connection on which what we sent goes unanswered for 20 D is cut (`silence`);
//! QUIC's own idle timeout is 200 D and only the dialer pings, at half of it, so a
//! quiet link between two followers costs two packets a minute at default timing.
//!
//! # Who is who
//! A peer is identified by its certificate (SAN `node-<id>.bully`), never by its
//! address: QUIC connections migrate. The sender of every message is the
//! authenticated peer. We dial peer X with the server name `node-X.bully`, so a
//! process holding another node's certificate fails TLS name verification.
//!
//! Two ALPN protocols share the port: [`ALPN_PEER`] for node-to-node streams (node
//! certificate of a current peer required: one in our member list as of now) and
//! [`ALPN_API`] for API clients (any certificate from the cluster CA, so `bully leader`
//! can use a node's own files).
//!
//! # Peer stream protocol
//! The dialer opens one unidirectional stream, writes a [`hello::Hello`] frame carrying
//! a random per-process nonce, then one frame per message. The accepting node answers
//! with its own hello on a stream of its own, which then carries the accepting node's
//! messages whenever that stream is its path to the dialer. A node does not dial a peer
//! whose connection to it is up, so a pair usually shares one connection (two when
//! the dials cross); a node writes its messages on the first path that came up and
//! moves to the other only when that one dies. A reply therefore goes back
//! on the connection the request came on even while our own dial is still under way.
//! A path comes up only after both hellos (so the peer has accepted our certificate);
//! the first one, or the first to a restarted process, is `PeerUp`, and losing the
//! last is `PeerDown`. A node that is dialed by a process other than the one its own
//! outbound connection reached knows that connection is stale (the peer restarted)
//! and redials at once.

mod accept;
mod agreement;
mod api_dial;
mod backoff;
pub mod close;
mod config;
mod endpoint;
mod error;
mod event;
pub mod frame;
mod given_up;
pub mod hello;
mod inbound;
mod inbound_table;
mod link;
mod member_checks;
mod mismatch;
mod outbound;
mod path;
mod peer_addr;
mod rtt_refresh;
mod runtime;
mod shared;
mod silence;
mod socket;
mod stats;
pub mod tls;
mod verdicts;

pub use api_dial::connect_client;
pub use backoff::MAX_BACKOFF;
pub use config::TransportConfig;
pub use endpoint::Transport;
pub use error::{ConnectError, PeerIdentityError, TransportError};
pub use event::TransportEvent;
pub use frame::{read_frame, write_frame, FrameError};
pub use member_checks::{check_node_id, check_peers, NodeIdError, PeerListError, PeerProblem};
pub use mismatch::{ConfigMismatch, MismatchKind};
pub use peer_addr::{PeerAddr, PeerAddrError, ResolveError};
pub use stats::{ConfigRefusals, TransportStats};
pub use tls::{peer_identity, ALPN_API, ALPN_PEER};
