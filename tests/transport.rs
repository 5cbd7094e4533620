//! The QUIC transport on 127.0.0.1: ordered delivery, who gets in and who is kept out,
//! bad bytes, and reconnecting to a restarted peer. Every wait is bounded.
//!
//! Figures (latency, reconnect time) are printed; run with `--nocapture` to see them,
//! and `--ignored measure` for the longer measurement.

mod common;

use bully::certs::{self, TlsFiles};
use bully::codec::{self, MAX_FRAME, WIRE_VERSION};
use bully::protocol::{Body, ConfigId, Epoch, Message, Mode, NodeId, Timing};
use bully::transport::hello::{Hello, Settings};
use bully::transport::{
    close, connect_client, peer_identity, ConfigMismatch, MismatchKind, Transport, TransportConfig,
    TransportError, TransportEvent, ALPN_API, ALPN_PEER,
};
use common::{raw_client, raw_connect};
use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::Receiver;

/// How long a test waits for something that should happen: generous, since the test
/// binary runs its tests side by side on a busy 2-core machine, and every wait ends as
/// soon as its condition holds.
const WAIT: Duration = Duration::from_secs(20);

fn init_logs() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

fn msg(term: u64) -> Message {
    Message {
        promise_ms: 0,
        term,
        config: Default::default(),
        est: None,
        body: Body::Heartbeat {
            epoch: Epoch { term, leader: 1 },
            round: 0,
        },
    }
}

fn socket() -> UdpSocket {
    UdpSocket::bind("127.0.0.1:0").expect("bind 127.0.0.1:0")
}

struct Node {
    t: Transport,
    rx: Receiver<TransportEvent>,
}

impl Node {
    fn addr(&self) -> SocketAddr {
        self.t.local_addr()
    }

    /// Waits for the first event matching `pred`, discarding the others; panics naming
    /// `what` if none comes within `within`.
    async fn expect(
        &mut self,
        what: &str,
        within: Duration,
        mut pred: impl FnMut(&TransportEvent) -> bool,
    ) -> TransportEvent {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            match tokio::time::timeout_at(deadline, self.rx.recv()).await {
                Ok(Some(ev)) if pred(&ev) => return ev,
                Ok(Some(_)) => continue,
                Ok(None) => panic!(
                    "node {}: event channel closed waiting for {what}",
                    self.t.id()
                ),
                Err(_) => panic!("node {}: no {what} within {within:?}", self.t.id()),
            }
        }
    }

    async fn expect_message(&mut self, from: NodeId, m: Message) {
        self.expect(
            &format!("message {m:?} from {from}"),
            WAIT,
            |ev| matches!(ev, TransportEvent::Message { from: f, msg } if *f == from && *msg == m),
        )
        .await;
    }
}

fn config(
    dir: &Path,
    id: NodeId,
    peers: Vec<(NodeId, SocketAddr)>,
    timing: Timing,
) -> TransportConfig {
    TransportConfig {
        id,
        listen: "127.0.0.1:0".parse().unwrap(),
        tls: TlsFiles::for_node(dir, id),
        peers: peers.into_iter().map(|(id, a)| (id, a.into())).collect(),
        timing,
        mode: Mode::Quorum,
    }
}

/// A hello as a node with `members` (seeded from its config file, as at start),
/// quorum mode and default timing sends it.
fn hello_of(nonce: u64, members: Vec<NodeId>) -> Hello {
    Hello {
        nonce,
        members,
        config: Default::default(),
        settings: Settings::new(Mode::Quorum, &Timing::default()),
    }
}

/// Starts node `id` on `sock` with `peers` and default timing.
async fn start_node(
    dir: &Path,
    id: NodeId,
    peers: Vec<(NodeId, SocketAddr)>,
    sock: UdpSocket,
) -> Node {
    start_node_timed(dir, id, peers, Timing::default(), sock).await
}

/// Starts node `id` on `sock` with `peers` and the given timing.
async fn start_node_timed(
    dir: &Path,
    id: NodeId,
    peers: Vec<(NodeId, SocketAddr)>,
    timing: Timing,
    sock: UdpSocket,
) -> Node {
    let (t, rx) = Transport::start_on(config(dir, id, peers, timing), sock)
        .await
        .unwrap_or_else(|e| panic!("node {id} starts: {e}"));
    Node { t, rx }
}

/// Starts `ids` on pre-bound loopback sockets, each with every other as a peer, plus
/// any `extra` peers (ID and address) in every node's list.
async fn cluster(
    dir: &Path,
    ids: &[NodeId],
    extra: &[(NodeId, SocketAddr)],
    timing: Timing,
) -> Vec<Node> {
    let sockets: Vec<UdpSocket> = ids.iter().map(|_| socket()).collect();
    let addrs: Vec<(NodeId, SocketAddr)> = ids
        .iter()
        .zip(&sockets)
        .map(|(id, s)| (*id, s.local_addr().unwrap()))
        .collect();
    let mut nodes = Vec::new();
    for (id, sock) in ids.iter().zip(sockets) {
        let mut peers: Vec<_> = addrs.iter().copied().filter(|(p, _)| p != id).collect();
        peers.extend_from_slice(extra);
        nodes.push(start_node_timed(dir, *id, peers, timing, sock).await);
    }
    nodes
}

/// Waits until every node's outbound connections to `peers` are up.
async fn wait_connected(nodes: &[Node], peers: &[NodeId]) {
    for _ in 0..1000 {
        let done = nodes.iter().all(|n| {
            let up = n.t.connected_peers();
            peers.iter().all(|p| *p == n.t.id() || up.contains(p))
        });
        if done {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let state: Vec<_> = nodes
        .iter()
        .map(|n| (n.t.id(), n.t.connected_peers()))
        .collect();
    panic!("peers not connected within 5 s: {state:?}");
}

async fn shutdown(nodes: &[Node]) {
    for n in nodes {
        n.t.shutdown().await;
    }
}

/// Nodes `ids` with certificates in a fresh directory, all connected to each other.
async fn connected_cluster(ids: &[NodeId]) -> (tempfile::TempDir, Vec<Node>) {
    init_logs();
    let dir = certs_dir(ids);
    let nodes = cluster(dir.path(), ids, &[], Timing::default()).await;
    wait_connected(&nodes, ids).await;
    (dir, nodes)
}

fn certs_dir(ids: &[NodeId]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    certs::init(dir.path(), ids).unwrap();
    dir
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// One-way loopback latency: `n` messages one at a time, each timed from `send`
/// to its arrival at the other transport. Returns the sorted samples.
async fn one_way_latencies(from: &Node, to: &mut Node, n: u64) -> Vec<Duration> {
    let mut samples = Vec::new();
    for i in 0..n {
        let m = msg(1_000_000 + i);
        let start = Instant::now();
        from.t.send(to.t.id(), m.clone());
        to.expect_message(from.t.id(), m).await;
        samples.push(start.elapsed());
    }
    samples.sort();
    samples
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_exchange_messages_in_order() {
    let (_dir, mut nodes) = connected_cluster(&[1, 2, 3]).await;

    // Phase 1: 200 messages each from 1 and 3 to 2 in a burst (within the per-peer queue
    // of 256), interleaved; each sender's arrive in order.
    for term in 0..200 {
        nodes[0].t.send(2, msg(term));
        nodes[2].t.send(2, msg(10_000 + term));
    }
    let (mut next_from_1, mut next_from_3) = (0, 10_000);
    while next_from_1 < 200 || next_from_3 < 10_200 {
        match nodes[1]
            .expect("message", WAIT, |e| {
                matches!(e, TransportEvent::Message { .. })
            })
            .await
        {
            TransportEvent::Message { from: 1, msg } => {
                assert_eq!(msg.term, next_from_1, "FIFO from node 1");
                next_from_1 += 1;
            }
            TransportEvent::Message { from: 3, msg } => {
                assert_eq!(msg.term, next_from_3, "FIFO from node 3");
                next_from_3 += 1;
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    // Phase 2: the other directions work too.
    nodes[1].t.send(1, msg(7));
    nodes[0].expect_message(2, msg(7)).await;
    nodes[1].t.send(3, msg(8));
    nodes[2].expect_message(2, msg(8)).await;

    // Phase 3: latency on loopback.
    let (a, rest) = nodes.split_at_mut(1);
    let samples = one_way_latencies(&a[0], &mut rest[0], 200).await;
    eprintln!(
        "one-way latency over 200 messages: p50 {:?}, p99 {:?}, max {:?}",
        percentile(&samples, 0.5),
        percentile(&samples, 0.99),
        samples[samples.len() - 1]
    );
    let stats = nodes[1].t.stats();
    assert_eq!(stats.bad_frames, 0);
    assert_eq!(stats.messages_dropped, 0, "{stats:?}");
    shutdown(&nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_client_with_client_certificate_is_accepted() {
    init_logs();
    let dir = certs_dir(&[1, 2]);
    let mut nodes = cluster(dir.path(), &[1], &[], Timing::default()).await;
    let addr = nodes[0].addr();
    let client_files = TlsFiles::for_client(dir.path());

    for expect in [Some(1), None] {
        let conn = connect_client(addr, &client_files, expect)
            .await
            .expect("client connects");
        assert_eq!(peer_identity(&conn).unwrap(), certs::Identity::Node(1));
        let ev = nodes[0]
            .expect("Client event", WAIT, |e| {
                matches!(e, TransportEvent::Client(_))
            })
            .await;
        let TransportEvent::Client(server_side) = ev else {
            unreachable!()
        };
        assert_eq!(
            peer_identity(&server_side).unwrap(),
            certs::Identity::Client
        );
        // A request stream works end to end.
        let (mut send, _recv) = conn.open_bi().await.unwrap();
        bully::transport::write_frame(&mut send, &msg(5))
            .await
            .unwrap();
        let (_s, mut recv) = server_side.accept_bi().await.unwrap();
        let got: Option<Message> = bully::transport::read_frame(&mut recv).await.unwrap();
        assert_eq!(got, Some(msg(5)));
    }

    // Expecting the wrong node: our TLS client refuses node-1's certificate.
    let err = connect_client(addr, &client_files, Some(2))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("cannot connect"), "{err}");
    shutdown(&nodes).await;
}

/// Asserts a connection attempt ended refused: either the handshake failed or the
/// server closed the connection right after it. Returns the reason.
async fn assert_refused(result: Result<quinn::Connection, String>) -> String {
    match result {
        Err(e) => e,
        Ok(conn) => {
            let reason = tokio::time::timeout(WAIT, conn.closed())
                .await
                .expect("a refused connection is closed promptly");
            reason.to_string()
        }
    }
}

/// Waits for a `Rejected` event, failing if a `Client` event or a message shows up first.
async fn expect_rejected(node: &mut Node, what: &str) -> (Option<NodeId>, String) {
    let ev = node
        .expect(what, WAIT, |e| {
            assert!(
                !matches!(
                    e,
                    TransportEvent::Client(_) | TransportEvent::Message { .. }
                ),
                "{what}: got {e:?} instead of a refusal"
            );
            matches!(e, TransportEvent::Rejected { .. })
        })
        .await;
    let TransportEvent::Rejected { peer, reason, .. } = ev else {
        unreachable!()
    };
    (peer, reason)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_without_a_cluster_certificate_are_refused() {
    init_logs();
    let dir = certs_dir(&[1]);
    let other = certs_dir(&[1]);
    let mut nodes = cluster(dir.path(), &[1], &[], Timing::default()).await;
    let addr = nodes[0].addr();
    let ca = dir.path().join(certs::CA_CERT_FILE);

    // Phase 1: no client certificate at all.
    let reason =
        assert_refused(raw_connect(raw_client(&ca, None, ALPN_API), addr, "node-1.bully").await)
            .await;
    let (peer, why) =
        expect_rejected(&mut nodes[0], "refusal of a client without a certificate").await;
    eprintln!("no certificate: client sees {reason:?}; node logs {why:?}");
    assert_eq!(peer, None);

    // Phase 2: a client certificate from another CA (the client trusts our CA).
    let foreign = TlsFiles {
        ca: ca.clone(),
        ..TlsFiles::for_client(other.path())
    };
    let result = connect_client(addr, &foreign, Some(1))
        .await
        .map_err(|e| e.to_string());
    let reason = assert_refused(result).await;
    let (peer, why) = expect_rejected(&mut nodes[0], "refusal of a foreign-CA client").await;
    eprintln!("foreign CA: client sees {reason:?}; node logs {why:?}");
    assert_eq!(peer, None);

    // Phase 3: a client trusting only the other CA refuses our node itself.
    let err = connect_client(addr, &TlsFiles::for_client(other.path()), None)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("cannot connect"), "{err}");

    // Phase 4: a client certificate on the peer protocol.
    let client_cert = (dir.path().join("client.pem"), dir.path().join("client.key"));
    let config = raw_client(&ca, Some((&client_cert.0, &client_cert.1)), ALPN_PEER);
    let reason = assert_refused(raw_connect(config, addr, "node-1.bully").await).await;
    assert!(
        reason.contains("client certificate may not speak the peer protocol"),
        "{reason}"
    );

    assert!(
        nodes[0].t.stats().connections_refused >= 3,
        "{:?}",
        nodes[0].t.stats()
    );
    shutdown(&nodes).await;
}

/// Waits for a `Rejected` event about `peer`, failing if `node` reports it up first.
async fn expect_refusal_of(node: &mut Node, peer: NodeId) -> TransportEvent {
    node.expect(&format!("refusal of node {peer}"), WAIT, |e| {
        assert!(
            !matches!(e, TransportEvent::PeerUp(p) if *p == peer),
            "node {peer} refused, yet reported up"
        );
        matches!(e, TransportEvent::Rejected { peer: Some(p), .. } if *p == peer)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_certificate_cannot_speak_for_another_id() {
    init_logs();
    let dir = certs_dir(&[1, 2, 3]);

    // Phase 1: a process configured as 3 holding node-2's certificate does not start.
    let wrong = TransportConfig {
        tls: TlsFiles::for_node(dir.path(), 2),
        ..config(dir.path(), 3, vec![], Timing::default())
    };
    let err = Transport::start(wrong).await.expect_err("start must fail");
    let expected = format!(
        "certificate {} is for node-2 but this node is configured as id 3",
        dir.path().join("node-2.pem").display()
    );
    assert_eq!(err.to_string(), expected);
    assert!(matches!(err, TransportError::IdentityMismatch { .. }));

    // Phase 2: node 1 expects node 3 at an address where a genuine node-2 process
    // listens. TLS name verification refuses it: node 1 never counts it as node 3.
    let impostor_sock = socket();
    let impostor_addr = impostor_sock.local_addr().unwrap();
    let node1_sock = socket();
    let node1_addr = node1_sock.local_addr().unwrap();
    let mut node1 = start_node(dir.path(), 1, vec![(3, impostor_addr)], node1_sock).await;
    let mut impostor = start_node(dir.path(), 2, vec![(1, node1_addr)], impostor_sock).await;
    let ev = expect_refusal_of(&mut node1, 3).await;
    eprintln!("impostor: {ev:?}");
    let dropped = node1.t.stats().messages_dropped;
    node1.t.send(3, msg(1));
    assert_eq!(node1.t.stats().messages_dropped, dropped + 1);
    assert!(!node1.t.connected_peers().contains(&3));

    // Phase 3: node 2 is not node 1's peer either: its connection is refused as
    // unknown, and node 2 learns it from the missing hello: it never reports node 1 up.
    node1
        .expect("refusal of unconfigured node-2", WAIT, |e| {
            matches!(e, TransportEvent::Rejected { peer: Some(2), .. })
        })
        .await;
    let ev = expect_refusal_of(&mut impostor, 1).await;
    let TransportEvent::Rejected { reason, .. } = ev else {
        unreachable!()
    };
    assert!(reason.contains("not a configured peer"), "{reason}");
    assert!(impostor.t.connected_peers().is_empty());
    impostor.t.shutdown().await;
    node1.t.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_datagrams_do_no_harm() {
    let (_dir, mut nodes) = connected_cluster(&[1, 2]).await;
    let target = nodes[0].addr();

    // Phase 1: 2000 datagrams of random bytes, some shaped like QUIC long headers.
    let junk = socket();
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for i in 0..2000 {
        let len = 1 + (next() % 1400) as usize;
        let mut bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if i % 2 == 0 {
            bytes[0] = 0xC0 | (bytes[0] & 0x0F); // long header, "Initial"
            if len >= 5 {
                bytes[1..5].copy_from_slice(&1u32.to_be_bytes()); // QUIC v1
            }
        }
        junk.send_to(&bytes, target).unwrap();
    }

    // Phase 2: both directions still work and nobody went down.
    for term in 0..50 {
        nodes[1].t.send(1, msg(term));
        nodes[0].t.send(2, msg(term));
    }
    for term in 0..50 {
        nodes[0].expect_message(2, msg(term)).await;
    }
    let (a, b) = nodes.split_at_mut(1);
    for term in 0..50 {
        b[0].expect("message after garbage", WAIT, |e| {
            assert!(
                !matches!(e, TransportEvent::PeerDown(_)),
                "peer went down: {e:?}"
            );
            matches!(e, TransportEvent::Message { from: 1, msg } if msg.term == term)
        })
        .await;
    }
    assert_eq!(a[0].t.connected_peers(), vec![2]);
    assert_eq!(a[0].t.stats().bad_frames, 0);
    shutdown(&nodes).await;
}

/// Bytes a misbehaving peer writes after its hello and one good message.
fn bad_payloads() -> Vec<(&'static str, Vec<u8>, bool)> {
    let good = codec::encode_frame(&msg(1)).unwrap();
    let mut oversized = vec![WIRE_VERSION];
    oversized.extend_from_slice(&(MAX_FRAME as u32 + 1).to_be_bytes());
    let mut undecodable = vec![WIRE_VERSION, 0, 0, 0, 8];
    undecodable.extend_from_slice(&[0xFF; 8]);
    let mut wrong_version = good.clone();
    wrong_version[0] = WIRE_VERSION + 1;
    // (name, bytes, finish the stream after writing them)
    vec![
        ("truncated", good[..good.len() - 2].to_vec(), true),
        ("oversized", oversized, false),
        ("undecodable", undecodable, false),
        ("wrong version", wrong_version, false),
    ]
}

/// Nodes 1 and 3 up; node 2 is played by raw quinn in the test (the nodes dial a
/// silent socket for it, kept open by the returned socket).
async fn nodes_1_and_3_without_2() -> (tempfile::TempDir, UdpSocket, Vec<Node>) {
    init_logs();
    let dir = certs_dir(&[1, 2, 3]);
    let silent = socket();
    let nodes = cluster(
        dir.path(),
        &[1, 3],
        &[(2, silent.local_addr().unwrap())],
        Timing::default(),
    )
    .await;
    wait_connected(&nodes, &[1, 3]).await;
    (dir, silent, nodes)
}

/// A peer connection to node 1 at `addr` with node 2's certificate.
async fn connect_to_1_as_node_2(dir: &Path, addr: SocketAddr) -> quinn::Connection {
    let ca = dir.join(certs::CA_CERT_FILE);
    let (cert, key) = (dir.join("node-2.pem"), dir.join("node-2.key"));
    raw_connect(
        raw_client(&ca, Some((&cert, &key)), ALPN_PEER),
        addr,
        "node-1.bully",
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_sending_bad_frames_is_dropped_and_the_node_keeps_working() {
    let (dir, _silent, mut nodes) = nodes_1_and_3_without_2().await;

    for (i, (name, bytes, finish)) in bad_payloads().into_iter().enumerate() {
        // Phase: an authenticated node-2 speaks correctly, then sends a bad frame.
        let conn = connect_to_1_as_node_2(dir.path(), nodes[0].addr()).await;
        let mut send = conn.open_uni().await.unwrap();
        send.write_all(&codec::encode_frame(&hello_of(42, vec![1, 2, 3])).unwrap())
            .await
            .unwrap();
        send.write_all(&codec::encode_frame(&msg(100 + i as u64)).unwrap())
            .await
            .unwrap();
        nodes[0].expect_message(2, msg(100 + i as u64)).await;
        send.write_all(&bytes).await.unwrap();
        if finish {
            send.finish().unwrap();
        }
        let (peer, reason) = expect_rejected(&mut nodes[0], name).await;
        assert_eq!(peer, Some(2), "{name}");
        assert!(reason.contains("bad frame"), "{name}: {reason}");
        eprintln!("{name}: node 1 says {reason:?}");
        let closed = tokio::time::timeout(WAIT, conn.closed())
            .await
            .expect("connection closed");
        match closed {
            quinn::ConnectionError::ApplicationClosed(c) => {
                assert_eq!(c.error_code, close::BAD_FRAME, "{name}")
            }
            other => panic!("{name}: closed with {other:?}"),
        }
        assert_eq!(nodes[0].t.stats().bad_frames, i as u64 + 1);

        // ...and node 1 still talks with node 3 both ways.
        nodes[0].t.send(3, msg(200 + i as u64));
        nodes[1].expect_message(1, msg(200 + i as u64)).await;
        nodes[1].t.send(1, msg(300 + i as u64));
        nodes[0].expect_message(3, msg(300 + i as u64)).await;
    }
    assert_eq!(nodes[0].t.connected_peers(), vec![3]);
    shutdown(&nodes).await;
}

/// Waits for both `PeerUp(from)` and the message `m` from `from`, in either order: the
/// path that reports a peer up and the reader that hands on its first message are
/// separate tasks (`src/transport/inbound.rs`).
async fn expect_up_and_message(node: &mut Node, from: NodeId, m: Message) {
    let (mut up, mut got) = (false, false);
    while !(up && got) {
        let what = format!("PeerUp({from}) and message {m:?}");
        node.expect(&what, WAIT, |ev| match ev {
            TransportEvent::PeerUp(p) if *p == from => {
                up = true;
                true
            }
            TransportEvent::Message { from: f, msg } if *f == from && *msg == m => {
                got = true;
                true
            }
            _ => false,
        })
        .await;
    }
}

/// A peer that ends its message stream but keeps the connection (only a dying process
/// or a broken implementation does): node 1 closes it, so its own messages, which
/// that connection carried back, move on at once instead of going out unwatched until
/// QUIC's long idle timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_ends_its_stream_loses_the_connection() {
    let (dir, _silent, mut nodes) = nodes_1_and_3_without_2().await;
    let conn = connect_to_1_as_node_2(dir.path(), nodes[0].addr()).await;
    let mut send = conn.open_uni().await.unwrap();
    let hello = hello_of(9, vec![1, 2, 3]);
    send.write_all(&codec::encode_frame(&hello).unwrap())
        .await
        .unwrap();
    send.write_all(&codec::encode_frame(&msg(6)).unwrap())
        .await
        .unwrap();
    expect_up_and_message(&mut nodes[0], 2, msg(6)).await;
    send.finish().unwrap();
    match tokio::time::timeout(WAIT, conn.closed()).await {
        Ok(quinn::ConnectionError::ApplicationClosed(c)) => {
            assert_eq!(c.error_code, close::PROTOCOL)
        }
        other => panic!("expected a close by node 1, got {other:?}"),
    }
    nodes[0]
        .expect("PeerDown(2)", WAIT, |e| {
            matches!(e, TransportEvent::PeerDown(2))
        })
        .await;
    shutdown(&nodes).await;
}

/// Waits for node's `PeerConfig` event about `peer`, failing if the peer is reported up
/// while it disagrees.
async fn expect_peer_config(
    node: &mut Node,
    peer: NodeId,
    disagrees: bool,
) -> Option<ConfigMismatch> {
    let what = format!("node {peer}'s config reported (disagreeing: {disagrees})");
    let ev = node
        .expect(&what, WAIT, |e| {
            assert!(
                !(disagrees && matches!(e, TransportEvent::PeerUp(p) if *p == peer)),
                "node {peer} disagrees, yet reported up"
            );
            matches!(e, TransportEvent::PeerConfig { peer: p, mismatch }
                if *p == peer && mismatch.is_some() == disagrees)
        })
        .await;
    let TransportEvent::PeerConfig { mismatch, .. } = ev else {
        unreachable!()
    };
    mismatch
}

/// Asserts `conn` is closed by the other end with `code`.
async fn expect_closed_with(conn: &quinn::Connection, code: quinn::VarInt) {
    match tokio::time::timeout(WAIT, conn.closed()).await.unwrap() {
        quinn::ConnectionError::ApplicationClosed(c) => assert_eq!(c.error_code, code),
        other => panic!("closed with {other:?}"),
    }
}

/// Node 1 refuses a hello whose list is two apart (reporting the conflict once, with
/// both lists), and reports the end of the conflict when the same peer comes back with
/// a list one apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_whose_member_list_differs_by_two_is_refused() {
    let (dir, _silent, mut nodes) = nodes_1_and_3_without_2().await;
    for (members, accepted) in [(vec![1, 2, 3, 4, 5], false), (vec![1, 2, 3, 4], true)] {
        let conn = connect_to_1_as_node_2(dir.path(), nodes[0].addr()).await;
        let mut send = conn.open_uni().await.unwrap();
        let hello = hello_of(7, members);
        send.write_all(&codec::encode_frame(&hello).unwrap())
            .await
            .unwrap();
        if accepted {
            assert_eq!(expect_peer_config(&mut nodes[0], 2, false).await, None);
            send.write_all(&codec::encode_frame(&msg(5)).unwrap())
                .await
                .unwrap();
            nodes[0].expect_message(2, msg(5)).await;
            continue;
        }
        let mismatch = expect_peer_config(&mut nodes[0], 2, true).await.unwrap();
        assert_eq!(mismatch.kind, MismatchKind::Members);
        assert!(
            mismatch.reason.contains("ours [1,2,3] theirs [1,2,3,4,5]"),
            "{}",
            mismatch.reason
        );
        expect_closed_with(&conn, close::MEMBERSHIP).await;
    }
    let stats = nodes[0].t.stats();
    // A busy machine may let the refused peer dial once more before it hears why.
    assert!(stats.connections_refused >= 1, "{stats:?}");
    assert_eq!(stats.config_refusals.members, 1);
    shutdown(&nodes).await;
}

/// Two real transports whose mode differs: each end refuses the other, reports the
/// conflict to its runtime naming both sides field by field, counts it by reason, and
/// never reports the other up. Two whose D differs connect: D is cluster state that
/// differs while a change spreads (docs/design.md#cluster-settings).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peers_whose_mode_differs_are_refused_at_both_ends_and_another_d_is_not() {
    init_logs();
    let dir = certs_dir(&[1, 2]);
    {
        let (s1, s2) = (socket(), socket());
        let (a1, a2) = (s1.local_addr().unwrap(), s2.local_addr().unwrap());
        let node1 = start_node(dir.path(), 1, vec![(2, a2)], s1).await;
        let cfg2 = config(dir.path(), 2, vec![(1, a1)], timing_of(100, 1500));
        let (t, rx) = Transport::start_on(cfg2, s2).await.unwrap();
        let node2 = Node { t, rx };
        common::wait_until("peers on another D connect", WAIT, || {
            let up = [&node1, &node2]
                .iter()
                .all(|n| !n.t.connected_peers().is_empty());
            async move { up.then_some(()) }
        })
        .await;
        shutdown(&[node1, node2]).await;
    }
    let cases = [(Mode::Classic, Timing::default(), MismatchKind::Mode)];
    for (mode2, timing2, kind) in cases {
        let (s1, s2) = (socket(), socket());
        let (a1, a2) = (s1.local_addr().unwrap(), s2.local_addr().unwrap());
        let mut node1 = start_node(dir.path(), 1, vec![(2, a2)], s1).await;
        let cfg2 = TransportConfig {
            mode: mode2,
            ..config(dir.path(), 2, vec![(1, a1)], timing2)
        };
        let (t, rx) = Transport::start_on(cfg2, s2).await.unwrap();
        let mut node2 = Node { t, rx };
        let seen1 = expect_peer_config(&mut node1, 2, true).await.unwrap();
        let seen2 = expect_peer_config(&mut node2, 1, true).await.unwrap();
        eprintln!("node 1: {}\nnode 2: {}", seen1.reason, seen2.reason);
        for (seen, label) in [(&seen1, "node 1"), (&seen2, "node 2")] {
            assert_eq!(seen.kind, kind, "{label}: {}", seen.reason);
        }
        // Whichever end compared the hellos itself names ours and theirs; an end that
        // learned it from the close quotes the other's words, which name both too.
        for seen in [&seen1, &seen2] {
            let both = format!(
                "mode={} suspect_after_ms={}",
                mode2, timing2.suspect_after_ms
            );
            assert!(seen.reason.contains(&both), "{}", seen.reason);
            assert!(
                seen.reason.contains("mode=quorum suspect_after_ms=300"),
                "{}",
                seen.reason
            );
        }
        // Both keep refusing across redials, and count it under the right reason.
        common::wait_until("refusals counted at both ends", WAIT, || {
            let counted = [&node1, &node2]
                .iter()
                .all(|n| n.t.stats().config_refusals.get(kind) >= 2);
            async move { counted.then_some(()) }
        })
        .await;
        for n in [&node1, &node2] {
            assert!(
                n.t.connected_peers().is_empty(),
                "refused peers never connect"
            );
            let other = MismatchKind::ALL.into_iter().filter(|k| *k != kind);
            for k in other {
                assert_eq!(n.t.stats().config_refusals.get(k), 0, "{k:?}");
            }
        }
        shutdown(&[node1, node2]).await;
    }
}

/// A peer that closes our connection over config before we read its hello still
/// tells us why: node 1 learns the reason from the close code and words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_refused_end_learns_the_reason_from_the_close() {
    let (dir, _silent, mut nodes) = nodes_1_and_3_without_2().await;
    let conn = connect_to_1_as_node_2(dir.path(), nodes[0].addr()).await;
    // Node 1's hello arrives; node 2 refuses it without sending its own.
    let mut recv = tokio::time::timeout(WAIT, conn.accept_uni())
        .await
        .unwrap()
        .unwrap();
    let theirs: Hello = bully::transport::read_frame(&mut recv)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        theirs.settings,
        Settings::new(Mode::Quorum, &Timing::default())
    );
    conn.close(
        close::TIMING,
        b"timing.suspect_after_ms differs: ours 9 theirs 300",
    );
    let mismatch = expect_peer_config(&mut nodes[0], 2, true).await.unwrap();
    assert_eq!(mismatch.kind, MismatchKind::Timing);
    assert_eq!(
        mismatch.reason,
        "refused by node 2: timing.suspect_after_ms differs: ours 9 theirs 300"
    );
    assert_eq!(nodes[0].t.stats().config_refusals.timing, 1);
    shutdown(&nodes).await;
}

/// A misbehaving peer's messages may come on either connection of the pair, so
/// `disconnect` closes both: each side's dialer loses its connection and dials again,
/// and messages flow again both ways.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disconnect_drops_every_connection_and_the_peer_comes_back() {
    let (_dir, mut nodes) = connected_cluster(&[1, 2]).await;
    let before = pair_connects(&nodes);
    nodes[0].t.disconnect(2, "test says so");
    common::wait_until("the pair to reconnect", WAIT, || {
        let now = pair_connects(&nodes);
        async move { (now > before).then_some(()) }
    })
    .await;
    // The side that did not dial may still send on the closed connection until it hears
    // the close, and the transport is best effort: send until one copy arrives.
    let (one, two) = nodes.split_at_mut(1);
    deliver(&two[0], &mut one[0], msg(9)).await;
    deliver(&one[0], &mut two[0], msg(10)).await;
    shutdown(&nodes).await;
}

/// Sends `m` from `from` to `to` every 200 ms until `to` receives a copy (bounded by
/// [`WAIT`]): for a link that may be changing connections, where one send can be lost.
async fn deliver(from: &Node, to: &mut Node, m: Message) {
    let deadline = tokio::time::Instant::now() + WAIT;
    let (sender, receiver) = (from.t.id(), to.t.id());
    loop {
        from.t.send(receiver, m.clone());
        let resend = (tokio::time::Instant::now() + Duration::from_millis(200)).min(deadline);
        while let Ok(event) = tokio::time::timeout_at(resend, to.rx.recv()).await {
            match event {
                Some(TransportEvent::Message { from: f, msg }) if f == sender && msg == m => return,
                Some(_) => continue,
                None => panic!("node {receiver}: event channel closed waiting for {m:?}"),
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "node {receiver}: no {m:?} from {sender} within {WAIT:?}, sent every 200 ms"
        );
    }
}

/// Outbound connections the nodes made, together.
fn pair_connects(nodes: &[Node]) -> u64 {
    nodes.iter().map(|n| n.t.stats().peer_connects).sum()
}

#[tokio::test]
async fn a_pair_of_nodes_shares_one_connection() {
    init_logs();
    let dir = certs_dir(&[1, 2]);
    // Node 2's address, free until node 2 starts: node 1's dials go nowhere meanwhile.
    let addr2 = socket().local_addr().unwrap();
    let free = socket();
    let addr1 = free.local_addr().unwrap();
    let mut nodes = vec![start_node(dir.path(), 1, vec![(2, addr2)], free).await];
    tokio::time::sleep(Duration::from_millis(100)).await; // node 1 is up before node 2
    let two = UdpSocket::bind(addr2).expect("rebind node 2's port");
    nodes.push(start_node(dir.path(), 2, vec![(1, addr1)], two).await);
    wait_connected(&nodes, &[1, 2]).await;
    nodes[0].t.send(2, msg(1));
    nodes[1].expect_message(1, msg(1)).await;
    nodes[1].t.send(1, msg(2));
    nodes[0].expect_message(2, msg(2)).await;
    // The side that was reached does not dial a second connection, not even after its
    // own backoff (at most 500 ms) comes round: watch for twice that.
    let watch = Instant::now();
    while watch.elapsed() < Duration::from_millis(1000) {
        assert_eq!(pair_connects(&nodes), 1, "one connection per pair");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    shutdown(&nodes).await;
}

/// A node on its own tokio runtime, so the test can crash it: dropping the runtime
/// stops every task at once and no close frame goes out, as with kill -9.
struct Crashable {
    rt: Option<tokio::runtime::Runtime>,
    node: Option<Node>,
}

impl Crashable {
    async fn start(cfg: TransportConfig) -> Crashable {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let addr = cfg.listen;
        // The old process's port may take a moment to be released.
        for _ in 0..200 {
            match rt.spawn(Transport::start(cfg.clone())).await.unwrap() {
                Ok((t, rx)) => {
                    return Crashable {
                        rt: Some(rt),
                        node: Some(Node { t, rx }),
                    }
                }
                Err(TransportError::Bind { .. }) => {
                    tokio::time::sleep(Duration::from_millis(10)).await
                }
                Err(e) => panic!("start: {e}"),
            }
        }
        panic!("could not bind {addr} within 2 s");
    }

    fn runtime(&self) -> &tokio::runtime::Runtime {
        self.rt.as_ref().unwrap()
    }

    fn node(&mut self) -> &mut Node {
        self.node.as_mut().unwrap()
    }

    /// Stops the node as `kill -9` would: nothing more leaves its socket. The runtime
    /// is stopped, and its worker has dropped every task, before the handle goes:
    /// dropping the handle first lets tasks that are still polled see their event
    /// channel closed and end, and their dropped streams send the peer a FIN.
    fn crash(&mut self) {
        if let Some(rt) = self.rt.take() {
            tokio::task::block_in_place(|| rt.shutdown_timeout(WAIT));
        }
        self.node.take();
    }
}

impl Drop for Crashable {
    fn drop(&mut self) {
        self.crash();
    }
}

/// Crashes node 2 and restarts it on the same port after `downtime`; returns how long
/// after the restart node 1 had a working connection to the new process again.
async fn crash_and_restart(
    node1: &mut Node,
    node2: &mut Crashable,
    cfg2: &TransportConfig,
    downtime: Duration,
    term: u64,
) -> Duration {
    node2.crash();
    if !downtime.is_zero() {
        tokio::time::sleep(downtime).await;
    }
    *node2 = Crashable::start(cfg2.clone()).await;
    let restarted = Instant::now();
    node1
        .expect("PeerUp(2) after restart", WAIT, |e| {
            matches!(e, TransportEvent::PeerUp(2))
        })
        .await;
    let reconnect = restarted.elapsed();
    node1.t.send(2, msg(term));
    node2.node().expect_message(1, msg(term)).await;
    reconnect
}

/// Default timing but for the heartbeat period and D (which set the silence timeout,
/// 20 D, and the watch's look, every 20 D / 8).
fn timing_of(heartbeat_ms: u64, suspect_after_ms: u64) -> Timing {
    Timing {
        heartbeat_ms,
        suspect_after_ms,
        ..Timing::default()
    }
}

async fn restart_pair(timing: Timing) -> (tempfile::TempDir, Node, Crashable, TransportConfig) {
    let dir = certs_dir(&[1, 2]);
    let s1 = socket();
    let s2 = socket();
    let (a1, a2) = (s1.local_addr().unwrap(), s2.local_addr().unwrap());
    drop(s2); // node 2 binds its address itself, so it can rebind it after a crash
    let cfg2 = TransportConfig {
        listen: a2,
        ..config(dir.path(), 2, vec![(1, a1)], timing)
    };
    let node2 = Crashable::start(cfg2.clone()).await;
    let mut node1 = start_node_timed(dir.path(), 1, vec![(2, a2)], timing, s1).await;
    node1
        .expect("PeerUp(2)", WAIT, |e| {
            matches!(e, TransportEvent::PeerUp(2))
        })
        .await;
    (dir, node1, node2, cfg2)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_peer_is_redialed_before_the_idle_timeout() {
    init_logs();
    // Long timeouts (D = 5 s, so silence 100 s): without restart detection node 1 would
    // keep its stale connection to the dead process that long.
    let timing = timing_of(1000, 5000);
    let (_dir, mut node1, mut node2, cfg2) = restart_pair(timing).await;
    let mut figures = Vec::new();
    for round in 0..3 {
        let took = crash_and_restart(&mut node1, &mut node2, &cfg2, Duration::ZERO, round).await;
        assert!(
            took < Duration::from_millis(2500),
            "round {round}: reconnect took {took:?}"
        );
        figures.push(took);
    }
    eprintln!("reconnect after an immediate restart (D = 5 s): {figures:?}");
    node1.t.shutdown().await;
}

/// Sends to `peer` every heartbeat period, as a coordinator would, until the silence
/// watch cuts the connection and `PeerDown` comes (within the silence timeout, 20 D,
/// plus a margin); returns how long that took.
async fn notice_silence(node: &mut Node, peer: NodeId, timing: Timing) -> Duration {
    let started = Instant::now();
    let silence = Duration::from_millis(timing.peer_idle_timeout_ms());
    let deadline = tokio::time::Instant::now() + silence * 2 + WAIT;
    let mut beat = tokio::time::interval(Duration::from_millis(timing.heartbeat_ms));
    loop {
        tokio::select! {
            _ = beat.tick() => node.t.send(peer, msg(1)),
            ev = tokio::time::timeout_at(deadline, node.rx.recv()) => match ev {
                Ok(Some(TransportEvent::PeerDown(p))) if p == peer => break,
                Ok(Some(_)) => {}
                Ok(None) => panic!("event channel closed"),
                Err(_) => panic!("no PeerDown({peer}) within {:?}", silence * 2 + WAIT),
            },
        }
    }
    let took = started.elapsed();
    assert!(
        took >= silence,
        "cut after {took:?}, before the silence timeout"
    );
    assert!(
        node.t.stats().connections_silenced >= 1,
        "the silence watch cut it"
    );
    took
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_link_outlives_the_silence_timeout_and_a_silent_one_is_cut() {
    init_logs();
    // Silence timeout 1 s; QUIC's idle timeout (quiet links) 10 s.
    let timing = timing_of(10, 50);
    let (_dir, mut node1, mut node2, _cfg2) = restart_pair(timing).await;
    let silence = Duration::from_millis(timing.peer_idle_timeout_ms());
    // Nothing sent for 2.5 timeouts (1.25 watched on each side in turn): the link stays
    // up on both sides.
    for node in [&mut node1, node2.node()] {
        let quiet = tokio::time::timeout(silence * 5 / 4, async {
            loop {
                match node.rx.recv().await {
                    Some(TransportEvent::PeerDown(p)) => return p,
                    Some(_) => {}
                    None => return 0,
                }
            }
        })
        .await;
        assert!(quiet.is_err(), "a quiet link went down: {quiet:?}");
        assert_eq!(node.t.stats().connections_silenced, 0);
    }
    node1.t.send(2, msg(7));
    node2.node().expect_message(1, msg(7)).await;
    // Node 2 dies (no close frame): node 1's messages go unanswered and it is cut.
    node2.crash();
    let took = notice_silence(&mut node1, 2, timing).await;
    eprintln!("silence {silence:?}: cut after {took:?}");
    node1.t.shutdown().await;
}

/// A node's RTT estimates for its connections to `peer`, the largest first.
fn rtts_to(node: &Node, peer: NodeId) -> Vec<Duration> {
    let mut rtts: Vec<Duration> = node
        .t
        .link_rtts()
        .into_iter()
        .filter(|(p, _)| *p == peer)
        .map(|(_, rtt)| rtt)
        .collect();
    rtts.sort_unstable_by(|a, b| b.cmp(a));
    rtts
}

/// A link whose RTT estimate a stall inflated gets it back down although nothing more
/// is sent on it: otherwise its resend timeout stays several times the stall, and a
/// later lost packet waits that long. The stall: node 2 sends, then its only worker
/// thread blocks before it can read node 1's ACK (and before it could resend), so its
/// one RTT sample is the stall.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_links_inflated_rtt_estimate_comes_back_down() {
    init_logs();
    // Silence timeout 2 s (above the stall), so the watch (and the RTT refresh) looks
    // every 250 ms.
    let timing = timing_of(20, 100);
    let (_dir, mut node1, mut node2, _cfg2) = restart_pair(timing).await;
    node2
        .node()
        .expect("PeerUp(1)", WAIT, |e| {
            matches!(e, TransportEvent::PeerUp(1))
        })
        .await;
    node2.node().t.send(1, msg(1));
    node1.expect_message(2, msg(1)).await;
    let probes_before = node2.node().t.stats().rtt_probes;
    let stall = Duration::from_millis(800);
    let mut worst = Duration::ZERO;
    // On a busy machine the worker may read the ACK before it takes the stall, and then
    // the estimate never rises: try the stall again (a few times at most) until it does.
    for attempt in 2..7 {
        // Both land in the worker's queue from outside, in this order: the path task
        // writes the message and quinn's driver (woken by it, so run next) sends it
        // before the worker takes the stall; it reads the socket, and so the ACK, only
        // after.
        node2.node().t.send(1, msg(attempt));
        let stalled = node2
            .runtime()
            .spawn(async move { std::thread::sleep(stall) });
        node1.expect_message(2, msg(attempt)).await;
        stalled.await.expect("the stall task ends");
        let look = Instant::now() + Duration::from_secs(1);
        while worst < Duration::from_millis(50) && Instant::now() < look {
            worst = worst.max(
                rtts_to(node2.node(), 1)
                    .first()
                    .copied()
                    .unwrap_or_default(),
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        if worst >= Duration::from_millis(50) {
            break;
        }
        eprintln!("stall {attempt} left the estimate at {worst:?}; stalling again");
    }
    assert!(
        worst >= Duration::from_millis(50),
        "five stalls of {stall:?} never raised the estimate to node 1 (worst seen {worst:?})"
    );
    // The estimate falls by an eighth of the gap per sample, one sample per refresh
    // (every 250 ms): from a stall of 150 ms or more that takes some 20 samples, about
    // 5 s, which [`WAIT`] covers with room on a busy machine.
    let deadline = Instant::now() + WAIT;
    loop {
        let rtts = rtts_to(node2.node(), 1);
        if rtts.iter().all(|rtt| *rtt <= Duration::from_millis(10)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "estimates to node 1 still {rtts:?} after {WAIT:?} (worst seen {worst:?})"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let probes = node2.node().t.stats().rtt_probes - probes_before;
    eprintln!(
        "estimate after a {stall:?} stall: worst seen {worst:?}, back to {:?} after {probes} probes",
        rtts_to(node2.node(), 1)
    );
    assert!(probes > 0, "brought down by probes, not by traffic");
    node1.t.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_back_after_an_outage_is_reached_promptly() {
    init_logs();
    let (_dir, mut node1, mut node2, cfg2) = restart_pair(Timing::default()).await;
    node2.crash();
    let noticed = notice_silence(&mut node1, 2, Timing::default()).await;
    eprintln!("crash noticed after {noticed:?}");
    // Down for 1.2 s: node 1's redial backoff has reached its cap by then.
    let took = crash_and_restart(
        &mut node1,
        &mut node2,
        &cfg2,
        Duration::from_millis(1200),
        1,
    )
    .await;
    eprintln!("reconnect after a 1.2 s outage: {took:?}");
    assert!(
        took < Duration::from_millis(2000),
        "reconnect took {took:?}"
    );
    node1.t.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement; run with --ignored --nocapture"]
async fn measure_latency_and_reconnect() {
    let (_dir, mut nodes) = connected_cluster(&[1, 2]).await;
    let (a, b) = nodes.split_at_mut(1);
    let samples = one_way_latencies(&a[0], &mut b[0], 2000).await;
    eprintln!(
        "one-way latency, 2000 messages: p50 {:?} p90 {:?} p99 {:?} max {:?}",
        percentile(&samples, 0.5),
        percentile(&samples, 0.9),
        percentile(&samples, 0.99),
        samples[samples.len() - 1]
    );
    shutdown(&nodes).await;

    for (label, downtime) in [
        ("immediate restart", Duration::ZERO),
        ("after 1 s down", Duration::from_secs(1)),
    ] {
        let (_dir, mut node1, mut node2, cfg2) = restart_pair(Timing::default()).await;
        let mut figures = Vec::new();
        for round in 0..20 {
            figures.push(crash_and_restart(&mut node1, &mut node2, &cfg2, downtime, round).await);
        }
        figures.sort();
        eprintln!(
            "reconnect, {label}, default timing, 20 runs: median {:?} max {:?}",
            percentile(&figures, 0.5),
            figures[figures.len() - 1]
        );
        node1.t.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_closes_connections_and_frees_the_port() {
    let (_dir, mut nodes) = connected_cluster(&[1, 2]).await;
    let node2 = nodes.pop().unwrap();
    let addr2 = node2.addr();
    let shutting = Instant::now();
    node2.t.shutdown().await;
    let took = shutting.elapsed();
    eprintln!("shutdown took {took:?}");
    // The port can be bound again (by a restarted node), though the handle lives: at
    // once as a rule, but quinn's driver closes the socket on another worker thread,
    // which a busy machine may run a little later.
    wait_port_free(addr2).await;
    // Node 1 hears the close at once instead of waiting for the idle timeout.
    nodes[0]
        .expect("PeerDown(2)", WAIT, |e| {
            matches!(e, TransportEvent::PeerDown(2))
        })
        .await;
    drop(node2);
    shutdown(&nodes).await;
}

/// Waits (bounded by [`WAIT`]) until `addr` can be bound again, i.e. the transport that
/// had it closed its socket.
async fn wait_port_free(addr: SocketAddr) {
    let deadline = Instant::now() + WAIT;
    while let Err(e) = UdpSocket::bind(addr) {
        assert!(
            Instant::now() < deadline,
            "{addr} still bound {WAIT:?} after shutdown: {e}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Tasks alive on the calling test's own runtime (ours and quinn's).
fn alive_tasks() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_leaves_no_task_and_no_socket_behind() {
    init_logs();
    let baseline = alive_tasks();
    let (dir, mut nodes) = connected_cluster(&[1, 2]).await;
    // An API client as well; the test lets go of both ends of it before shutdown.
    let client = connect_client(nodes[0].addr(), &TlsFiles::for_client(dir.path()), Some(1))
        .await
        .expect("client connects");
    let accepted = nodes[0]
        .expect("Client event", WAIT, |e| {
            matches!(e, TransportEvent::Client(_))
        })
        .await;
    drop((accepted, client));
    let running = alive_tasks();
    assert!(
        running > baseline,
        "{running} tasks running, {baseline} before"
    );
    let addrs: Vec<SocketAddr> = nodes.iter().map(Node::addr).collect();
    shutdown(&nodes).await;
    // The handles and their event queues are still alive, yet every port is freed (the
    // endpoint's socket closes as its driver task ends, on another worker thread)...
    for addr in &addrs {
        wait_port_free(*addr).await;
    }
    let deadline = Instant::now() + WAIT;
    // ...and every task is gone (quinn's end as their connections finish draining).
    while alive_tasks() != baseline {
        assert!(
            Instant::now() < deadline,
            "{} tasks alive {WAIT:?} after shutdown ({running} running, {baseline} before)",
            alive_tasks()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    drop(nodes);
}

// Membership changes at runtime (`Transport::set_peers`, `Transport::set_config_id`).

/// Waits until `node` can send to `peer` (a connection either side dialed is up).
async fn wait_sendable(node: &Node, peer: NodeId) {
    wait_connected(std::slice::from_ref(node), &[peer]).await;
}

/// Node 1 starts with peers {2}; node 3, started with peers {1}, is refused until node
/// 1's member list takes it in, then messages flow both ways. Dropping node 2 from the
/// list closes its connection (both ends hear the peer is down), drops what node 1
/// sends it, and refuses its certificate from then on, while node 3 stays connected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peers_join_and_leave_the_member_list_at_runtime() {
    init_logs();
    let dir = certs_dir(&[1, 2, 3]);
    let (s1, s2, s3) = (socket(), socket(), socket());
    let [a1, a2, a3] = [&s1, &s2, &s3].map(|s| s.local_addr().unwrap());
    let mut n1 = start_node(dir.path(), 1, vec![(2, a2)], s1).await;
    let mut n2 = start_node(dir.path(), 2, vec![(1, a1)], s2).await;
    let mut n3 = start_node(dir.path(), 3, vec![(1, a1)], s3).await;
    wait_sendable(&n1, 2).await;
    wait_sendable(&n2, 1).await;
    // Node 3 is not in node 1's list yet: its dials are refused.
    let ev = expect_refusal_of(&mut n1, 3).await;
    assert!(
        format!("{ev:?}").contains("not a configured peer"),
        "{ev:?}"
    );

    n1.t.set_peers(vec![(2, a2.into()), (3, a3.into())]);
    wait_sendable(&n1, 3).await;
    wait_sendable(&n3, 1).await;
    n1.t.send(3, msg(1));
    n3.expect_message(1, msg(1)).await;
    n3.t.send(1, msg(2));
    n1.expect_message(3, msg(2)).await;
    n1.t.send(2, msg(3));
    n2.expect_message(1, msg(3)).await;
    assert_eq!(n1.t.connected_peers(), vec![2, 3]);

    n1.t.set_peers(vec![(3, a3.into())]);
    n1.expect("PeerDown(2) at node 1", WAIT, |e| {
        matches!(e, TransportEvent::PeerDown(2))
    })
    .await;
    n2.expect("PeerDown(1) at node 2", WAIT, |e| {
        matches!(e, TransportEvent::PeerDown(1))
    })
    .await;
    assert_eq!(n1.t.connected_peers(), vec![3]);
    let dropped = n1.t.stats().messages_dropped;
    n1.t.send(2, msg(4));
    assert_eq!(n1.t.stats().messages_dropped, dropped + 1);
    // Node 2 still lists node 1 and redials it: refused each time.
    let ev = expect_refusal_of(&mut n1, 2).await;
    assert!(
        format!("{ev:?}").contains("not in its member list"),
        "{ev:?}"
    );
    assert_eq!(n2.t.connected_peers(), Vec::<NodeId>::new());
    let conn = connect_to_1_as_node_2(dir.path(), a1).await;
    expect_closed_with(&conn, close::UNKNOWN_PEER).await;
    // Node 3 never noticed.
    n1.t.send(3, msg(5));
    n3.expect_message(1, msg(5)).await;
    n3.t.send(1, msg(6));
    n1.expect_message(3, msg(6)).await;
    shutdown(&[n1, n2, n3]).await;
}

/// A peer's connection to us, when we drop the peer from the member list, is closed
/// with the code that says so, and the runtime hears the peer is down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_peer_is_told_why_its_connection_closed() {
    let (dir, _silent, mut nodes) = nodes_1_and_3_without_2().await;
    let conn = connect_to_1_as_node_2(dir.path(), nodes[0].addr()).await;
    let mut send = conn.open_uni().await.unwrap();
    send.write_all(&codec::encode_frame(&hello_of(11, vec![1, 2, 3])).unwrap())
        .await
        .unwrap();
    send.write_all(&codec::encode_frame(&msg(7)).unwrap())
        .await
        .unwrap();
    expect_up_and_message(&mut nodes[0], 2, msg(7)).await;

    nodes[0].t.set_peers(vec![(3, nodes[1].addr().into())]);
    match tokio::time::timeout(WAIT, conn.closed()).await {
        Ok(quinn::ConnectionError::ApplicationClosed(c)) => {
            assert_eq!(c.error_code, close::REMOVED);
            let reason = String::from_utf8_lossy(&c.reason);
            assert!(reason.contains("removed from the member list"), "{reason}");
        }
        other => panic!("expected a close by node 1, got {other:?}"),
    }
    nodes[0]
        .expect("PeerDown(2)", WAIT, |e| {
            matches!(e, TransportEvent::PeerDown(2))
        })
        .await;
    let again = connect_to_1_as_node_2(dir.path(), nodes[0].addr()).await;
    expect_closed_with(&again, close::UNKNOWN_PEER).await;
    nodes[0].t.send(3, msg(8));
    nodes[1].expect_message(1, msg(8)).await;
    shutdown(&nodes).await;
}

/// The member list moves a peer: node 1 leaves its dial to the old address (here a
/// silent socket) and reaches the peer at the new one; moved back, its connection to
/// the peer closes (the old address is silent, so nothing comes up), and moved again it
/// reconnects. Node 2 lists node 1 at a silent address, so every connection is node 1's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_moves_is_redialed_at_its_new_address() {
    init_logs();
    let dir = certs_dir(&[1, 2]);
    let (silent, s1, s2) = (socket(), socket(), socket());
    let nowhere = silent.local_addr().unwrap();
    let a2 = s2.local_addr().unwrap();
    let mut n1 = start_node(dir.path(), 1, vec![(2, nowhere)], s1).await;
    let mut n2 = start_node(dir.path(), 2, vec![(1, nowhere)], s2).await;

    n1.t.set_peers(vec![(2, a2.into())]);
    n1.expect("PeerUp(2)", WAIT, |e| {
        matches!(e, TransportEvent::PeerUp(2))
    })
    .await;
    n1.t.send(2, msg(1));
    n2.expect_message(1, msg(1)).await;

    n1.t.set_peers(vec![(2, nowhere.into())]);
    n1.expect("PeerDown(2)", WAIT, |e| {
        matches!(e, TransportEvent::PeerDown(2))
    })
    .await;
    assert_eq!(n1.t.connected_peers(), Vec::<NodeId>::new());

    n1.t.set_peers(vec![(2, a2.into())]);
    n1.expect("PeerUp(2) again", WAIT, |e| {
        matches!(e, TransportEvent::PeerUp(2))
    })
    .await;
    n1.t.send(2, msg(2));
    n2.expect_message(1, msg(2)).await;
    assert!(n1.t.stats().peer_connects >= 2, "{:?}", n1.t.stats());
    shutdown(&[n1, n2]).await;
}

/// Lists two apart are refused only while both are the seeded ones: a peer whose hello
/// carries a stamped list (one a coordinator wrote), or a node whose own list is
/// stamped, connects whatever the difference, so the newer list can reach the older.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_two_apart_connect_once_either_is_stamped() {
    let (dir, _silent, mut nodes) = nodes_1_and_3_without_2().await;
    let stamped = ConfigId {
        stamp: Some(Epoch { term: 3, leader: 3 }),
        version: 2,
    };
    // Theirs stamped, ours seeded; then ours stamped, theirs seeded.
    for (round, theirs) in [(0u64, stamped), (1, ConfigId::default())] {
        if round == 1 {
            nodes[0].t.set_config_id(stamped);
        }
        let conn = connect_to_1_as_node_2(dir.path(), nodes[0].addr()).await;
        let mut send = conn.open_uni().await.unwrap();
        let hello = Hello {
            config: theirs,
            ..hello_of(20 + round, vec![1, 2, 3, 4, 5])
        };
        send.write_all(&codec::encode_frame(&hello).unwrap())
            .await
            .unwrap();
        send.write_all(&codec::encode_frame(&msg(30 + round)).unwrap())
            .await
            .unwrap();
        nodes[0].expect_message(2, msg(30 + round)).await;
        conn.close(0u32.into(), b"done");
    }
    let stats = nodes[0].t.stats();
    assert_eq!(stats.config_refusals.members, 0, "{stats:?}");
    shutdown(&nodes).await;
}
