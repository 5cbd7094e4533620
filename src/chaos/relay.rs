//! A UDP relay owned by the chaos runner, one forwarder per directed link, so the
//! runner can cut, drop or delay any link without root: each node's peer address for
//! `to` points at the relay's front socket for `(from, to)`, which forwards datagrams
//! to `to`'s real address and the replies back to `from`. QUIC does not mind: peers are
//! identified by certificate, not by address. Client queries go straight to the nodes.
//!
//! A front keeps one back socket per source address, so replies reach whoever sent:
//! besides a node's peer traffic (from its listen socket, src/transport/endpoint.rs), a
//! node asks a peer's API from a client socket of its own at the same configured
//! address (a follower passing a member change to the coordinator,
//! src/node/serve/switchover.rs). With one back socket, that client's packets made the
//! front answer the client, and the node's peer link went dark for as long.
//!
//! A node added at runtime is reached at one address that every member learns from the
//! member list (docs/design.md#membership), so per-link fronts cannot name it: it gets
//! a *door* ([`Relay::door`]), a front shared by every dialer that tells the senders
//! apart by their source address. The same modes apply to a door's traffic as to a
//! link's.

use crate::protocol::NodeId;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::UdpSocket;
use tokio::task::JoinHandle;

/// What a link does with datagrams.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LinkMode {
    /// Forward everything at once.
    Up,
    /// Drop everything (a partition).
    Cut,
    /// Drop each datagram with this probability (0.0–1.0).
    Lossy(f64),
}

/// The shared switchboard: a mode per direction, `(from, to)` deciding what happens
/// to every datagram travelling from `from` to `to`, whichever of the two dialed the
/// connection it belongs to (so a one-way fault drops one direction of both).
type Modes = Arc<Mutex<BTreeMap<(NodeId, NodeId), LinkMode>>>;

/// The nodes' own (listen) addresses, by which a door knows who sent a datagram.
type Senders = Arc<Mutex<HashMap<SocketAddr, NodeId>>>;

/// The relay for a whole cluster.
pub struct Relay {
    fronts: BTreeMap<(NodeId, NodeId), Arc<UdpSocket>>,
    /// The sockets that talk to the targets, bound with the fronts: binding them only
    /// at [`Relay::start`] could take a port already handed out (free but not yet
    /// bound) to a node, which then cannot start.
    backs: BTreeMap<(NodeId, NodeId), Arc<UdpSocket>>,
    modes: Modes,
    /// One door per node reached at a shared address ([`Relay::door`]).
    doors: BTreeMap<NodeId, SocketAddr>,
    senders: Senders,
    seed: u64,
    tasks: Vec<JoinHandle<()>>,
}

impl Relay {
    /// Binds a front and a back socket on 127.0.0.1 for every ordered pair of
    /// distinct IDs. Nothing is forwarded until [`Relay::start`].
    pub async fn bind(ids: &[NodeId]) -> std::io::Result<Relay> {
        let mut fronts = BTreeMap::new();
        let mut backs = BTreeMap::new();
        let mut modes = BTreeMap::new();
        for &from in ids {
            for &to in ids {
                if from != to {
                    fronts.insert((from, to), Arc::new(UdpSocket::bind("127.0.0.1:0").await?));
                    backs.insert((from, to), Arc::new(UdpSocket::bind("127.0.0.1:0").await?));
                    modes.insert((from, to), LinkMode::Up);
                }
            }
        }
        Ok(Relay {
            fronts,
            backs,
            modes: Arc::new(Mutex::new(modes)),
            doors: BTreeMap::new(),
            senders: Arc::default(),
            seed: 0,
            tasks: Vec::new(),
        })
    }

    /// The address `from` must dial to reach `to` through the relay.
    pub fn front_addr(&self, from: NodeId, to: NodeId) -> SocketAddr {
        self.fronts[&(from, to)]
            .local_addr()
            .expect("a bound UDP socket has an address")
    }

    /// Starts forwarding: datagrams on the front for `(from, to)` go to `targets[to]`.
    pub async fn start(
        &mut self,
        targets: &BTreeMap<NodeId, SocketAddr>,
        seed: u64,
    ) -> std::io::Result<()> {
        self.seed = seed;
        for (&id, &addr) in targets {
            self.know(id, addr);
        }
        let fronts: Vec<_> = self
            .fronts
            .iter()
            .map(|(&k, f)| (k, Arc::clone(f)))
            .collect();
        for ((from, to), front) in fronts {
            let target = targets.get(&to).ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("no target address for node {to}"),
                )
            })?;
            let spare = self.backs.remove(&(from, to));
            let forwarder = self.forwarder(front, Some(from), to, *target, spare);
            self.tasks.push(tokio::spawn(forwarder.run()));
        }
        Ok(())
    }

    /// The forwarder of one front: to `to` at `target`, from `from` (a link's front)
    /// or from whichever node the source address tells (a door).
    fn forwarder(
        &self,
        front: Arc<UdpSocket>,
        from: Option<NodeId>,
        to: NodeId,
        target: SocketAddr,
        spare: Option<Arc<UdpSocket>>,
    ) -> Forwarder {
        Forwarder {
            from,
            to,
            front,
            target,
            spare,
            senders: Arc::clone(&self.senders),
            modes: Arc::clone(&self.modes),
            seed: self.seed ^ (from.unwrap_or(0) << 32) ^ to,
        }
    }

    /// Tells the doors that datagrams from `addr` (node `id`'s listen address) come
    /// from node `id`. [`Relay::start`] does it for the nodes it was started with.
    pub fn know(&self, id: NodeId, addr: SocketAddr) {
        self.senders.lock().expect("relay lock").insert(addr, id);
    }

    /// The door to node `to` (listening at `target`): one address every node may dial
    /// to reach it, the links' modes applying per sender. Opened on first use; `to`
    /// becomes a known sender. Senders the relay does not know (a client) pass freely.
    pub async fn door(&mut self, to: NodeId, target: SocketAddr) -> std::io::Result<SocketAddr> {
        self.know(to, target);
        if let Some(&addr) = self.doors.get(&to) {
            return Ok(addr);
        }
        let front = Arc::new(UdpSocket::bind("127.0.0.1:0").await?);
        let addr = front.local_addr()?;
        let door = self.forwarder(front, None, to, target, None);
        self.tasks.push(tokio::spawn(door.run()));
        self.doors.insert(to, addr);
        Ok(addr)
    }

    /// Sets one directed link's mode (a link to or from a node behind a door included).
    pub fn set(&self, from: NodeId, to: NodeId, mode: LinkMode) {
        self.modes
            .lock()
            .expect("relay lock")
            .insert((from, to), mode);
    }

    /// Cuts every link between the two sides, both directions.
    pub fn partition(&self, side_a: &[NodeId], side_b: &[NodeId]) {
        for &a in side_a {
            for &b in side_b {
                self.set(a, b, LinkMode::Cut);
                self.set(b, a, LinkMode::Cut);
            }
        }
    }

    /// One-way links: drops everything sent to `node` by `others`; what it sends
    /// still goes through.
    pub fn deafen(&self, node: NodeId, others: &[NodeId]) {
        for &other in others {
            self.set(other, node, LinkMode::Cut);
        }
    }

    /// Restores every link.
    pub fn heal(&self) {
        for mode in self.modes.lock().expect("relay lock").values_mut() {
            *mode = LinkMode::Up;
        }
    }

    /// The current mode of a link.
    pub fn mode(&self, from: NodeId, to: NodeId) -> Option<LinkMode> {
        self.modes
            .lock()
            .expect("relay lock")
            .get(&(from, to))
            .copied()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Whether a datagram travelling `direction` (from, to) goes through.
fn passes(modes: &Modes, direction: (NodeId, NodeId), rng: &mut rand::rngs::SmallRng) -> bool {
    let mode = modes
        .lock()
        .expect("relay lock")
        .get(&direction)
        .copied()
        .unwrap_or(LinkMode::Up);
    match mode {
        LinkMode::Up => true,
        LinkMode::Cut => false,
        LinkMode::Lossy(p) => rng.gen::<f64>() >= p,
    }
}

/// One front's forwarder: a datagram from a source goes to the target from that
/// source's own back socket, and what the target answers on it goes back to that source.
struct Forwarder {
    /// The sender of everything on this front (a link's), or `None`: told by the source
    /// address (a door; a source no node has is a client and passes freely).
    from: Option<NodeId>,
    to: NodeId,
    front: Arc<UdpSocket>,
    target: SocketAddr,
    /// A back socket bound with the front, for the first source.
    spare: Option<Arc<UdpSocket>>,
    senders: Senders,
    modes: Modes,
    seed: u64,
}

impl Forwarder {
    async fn run(mut self) {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(self.seed);
        // The return tasks end with this one (a JoinSet aborts its tasks when dropped).
        let mut returns = tokio::task::JoinSet::new();
        let mut backs: HashMap<SocketAddr, Arc<UdpSocket>> = HashMap::new();
        let mut up = vec![0u8; 65_536];
        loop {
            let Ok((len, source)) = self.front.recv_from(&mut up).await else {
                continue;
            };
            let from = self.from.or_else(|| {
                let senders = self.senders.lock().expect("relay lock");
                senders.get(&source).copied()
            });
            let back = match backs.get(&source) {
                Some(back) => Arc::clone(back),
                None => {
                    let Ok(back) = self.open_back(source, from, &mut returns).await else {
                        continue;
                    };
                    backs.insert(source, Arc::clone(&back));
                    back
                }
            };
            if from.map_or(true, |from| passes(&self.modes, (from, self.to), &mut rng)) {
                let _ = back.send(&up[..len]).await;
            }
        }
    }

    /// A back socket for one source, and the task that returns the target's answers.
    async fn open_back(
        &mut self,
        source: SocketAddr,
        from: Option<NodeId>,
        returns: &mut tokio::task::JoinSet<()>,
    ) -> std::io::Result<Arc<UdpSocket>> {
        let back = match self.spare.take() {
            Some(spare) => spare,
            None => Arc::new(UdpSocket::bind("127.0.0.1:0").await?),
        };
        back.connect(self.target).await?;
        let (front, modes, to) = (Arc::clone(&self.front), Arc::clone(&self.modes), self.to);
        let reader = Arc::clone(&back);
        let mut rng = rand::rngs::SmallRng::seed_from_u64(self.seed ^ source.port() as u64);
        returns.spawn(async move {
            let mut down = vec![0u8; 65_536];
            loop {
                let Ok(len) = reader.recv(&mut down).await else {
                    // The target is gone (ICMP refused): wait for it to come back.
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                };
                if from.map_or(true, |from| passes(&modes, (to, from), &mut rng)) {
                    let _ = front.send_to(&down[..len], source).await;
                }
            }
        });
        Ok(back)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn echo_server() -> (SocketAddr, JoinHandle<()>) {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = socket.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let mut buf = [0u8; 1500];
            while let Ok((len, from)) = socket.recv_from(&mut buf).await {
                let _ = socket.send_to(&buf[..len], from).await;
            }
        });
        (addr, task)
    }

    async fn round_trip(relay: &Relay, from: NodeId, to: NodeId) -> bool {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        through(&socket, relay.front_addr(from, to)).await
    }

    /// Whether a ping sent from `socket` to `addr` comes back.
    async fn through(socket: &UdpSocket, addr: SocketAddr) -> bool {
        socket.send_to(b"ping", addr).await.unwrap();
        let mut buf = [0u8; 16];
        matches!(
            tokio::time::timeout(Duration::from_millis(300), socket.recv_from(&mut buf)).await,
            Ok(Ok((4, _)))
        )
    }

    #[tokio::test]
    async fn forwards_both_ways_and_cuts_on_partition() {
        let (echo, _task) = echo_server().await;
        let mut relay = Relay::bind(&[1, 2]).await.unwrap();
        let targets = BTreeMap::from([(1, echo), (2, echo)]);
        relay.start(&targets, 7).await.unwrap();
        assert!(round_trip(&relay, 1, 2).await, "an up link forwards");
        relay.partition(&[1], &[2]);
        assert_eq!(relay.mode(2, 1), Some(LinkMode::Cut));
        assert!(!round_trip(&relay, 1, 2).await, "a cut link drops");
        relay.heal();
        assert!(
            round_trip(&relay, 1, 2).await,
            "a healed link forwards again"
        );
        // Deaf node 1: its requests reach the echo, the replies to it are dropped, on
        // the link it dialed and on the one dialed towards it alike.
        relay.deafen(1, &[2]);
        assert!(!round_trip(&relay, 1, 2).await, "no reply reaches deaf 1");
        assert!(!round_trip(&relay, 2, 1).await, "nothing reaches deaf 1");
        relay.heal();
        assert!(round_trip(&relay, 2, 1).await, "healed");
    }

    #[tokio::test]
    async fn a_door_tells_senders_apart_and_obeys_the_modes() {
        let (echo, _task) = echo_server().await;
        let mut relay = Relay::bind(&[1, 2]).await.unwrap();
        let targets = BTreeMap::from([(1, echo), (2, echo)]);
        relay.start(&targets, 7).await.unwrap();
        let door = relay.door(3, echo).await.unwrap();
        assert_eq!(
            relay.door(3, echo).await.unwrap(),
            door,
            "one door per node"
        );
        let one = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let two = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        relay.know(1, one.local_addr().unwrap());
        relay.know(2, two.local_addr().unwrap());
        assert!(through(&one, door).await && through(&two, door).await);
        relay.partition(&[3], &[1]);
        assert!(!through(&one, door).await, "1 is cut off from 3");
        assert!(through(&two, door).await, "2 is not");
        relay.heal();
        // Deaf node 1: its ping reaches 3, the answer is dropped.
        relay.deafen(1, &[3]);
        assert!(!through(&one, door).await, "no answer reaches deaf 1");
        relay.heal();
        assert!(through(&one, door).await, "healed");
        let stranger = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        relay.partition(&[3], &[1, 2]);
        assert!(through(&stranger, door).await, "a client passes");
    }

    /// A node's client socket next to its peer socket on the same link's front (a
    /// follower asking the coordinator's API): both get their answers.
    #[tokio::test]
    async fn a_front_answers_every_source() {
        let (echo, _task) = echo_server().await;
        let mut relay = Relay::bind(&[1, 2]).await.unwrap();
        let targets = BTreeMap::from([(1, echo), (2, echo)]);
        relay.start(&targets, 7).await.unwrap();
        let peer = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let front = relay.front_addr(1, 2);
        for _ in 0..3 {
            assert!(through(&peer, front).await, "the peer socket");
            assert!(through(&client, front).await, "the client socket");
        }
    }
}
