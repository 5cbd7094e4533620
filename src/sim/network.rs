//! The simulated network: links with random bounded delay, kept FIFO; the transport's
//! connection notices; partitions, one-way links and message loss, and their healing.

use super::flight::Flight;
use super::Sim;
use crate::history::Record;
use crate::protocol::{Event, Message, Millis, NodeId};
use rand::Rng;
use std::collections::BTreeMap;

impl Sim {
    /// The transport's connection notices, as the runtime gets them: a connection that
    /// stops carrying packets is reported down between the silence timeout (20 D, a link
    /// with traffic) and QUIC's idle timeout (200 D, a quiet link whose peer never pings
    /// it); one that (re)connects is reported up after a handshake (one delay). Each
    /// notice is checked again when it falls due, so a link that recovered in the
    /// meantime is not reported. Notices are hints: nothing safe depends on when, or
    /// whether, one comes.
    fn notice_at(&mut self, at: Millis, node: NodeId, peer: NodeId, up: bool) {
        self.seq += 1;
        self.notices.insert((at, self.seq), (node, peer, up));
    }

    /// Tells `node` that its link to `peer` came up or went down, one message delay later.
    pub(super) fn notice_after_delay(&mut self, node: NodeId, peer: NodeId, up: bool) {
        let (lo, hi) = self.config.delay_ms;
        let at = self.now + self.rng.gen_range(lo..=hi.max(lo));
        self.notice_at(at, node, peer, up);
    }

    /// Tells `node` that `peer` is gone once the transport's idle timeout would have said so.
    pub(super) fn notice_after_idle_timeout(&mut self, node: NodeId, peer: NodeId) {
        let timing = &self.config.timing;
        let (lo, hi) = (
            timing.peer_idle_timeout_ms(),
            timing.quiet_link_timeout_ms(),
        );
        let at = self.now + self.rng.gen_range(lo..=hi.max(lo));
        self.notice_at(at, node, peer, false);
    }

    /// Whether the connection between `a` and `b` carries packets: both up, on one side
    /// of any partition, and neither paused for so long that its connections timed out.
    fn link_alive(&self, a: NodeId, b: NodeId) -> bool {
        self.holds_links(a) && self.holds_links(b) && self.connected(a, b)
    }

    /// Whether `id` runs and was not paused so long that its connections timed out.
    fn holds_links(&self, id: NodeId) -> bool {
        let timeout = self.config.timing.peer_idle_timeout_ms();
        self.nodes.get(&id).is_some_and(|n| {
            n.machine.is_some() && n.paused_at.map_or(true, |at| self.now < at + timeout)
        })
    }

    /// Delivers a link notice that is due, unless the link changed back meanwhile. A
    /// dial that reaches a peer which gave `node` up by a forced recovery is refused
    /// as such (src/transport/accept.rs): `node` hears `Event::GivenUp` instead.
    pub(super) fn fire_notice(&mut self, node: NodeId, peer: NodeId, up: bool) {
        if up && self.gives_up(peer, node) && self.reachable(node, peer) {
            self.refused_as_given_up(node, peer);
            return;
        }
        if !self.is_up(node) || self.link_alive(node, peer) != up {
            return;
        }
        if up {
            // A connection made now also ends any dial failure still pending for it.
            self.notices
                .retain(|_, &mut (n, p, u)| !(n == node && p == peer && !u));
            self.deliver_event(node, Event::PeerUp(peer));
        } else {
            self.record(node, Record::PeerDown { peer });
            self.deliver_event(node, Event::PeerDown(peer));
        }
    }

    /// Whether the link between `a` and `b` carries packets both ways.
    fn connected(&self, a: NodeId, b: NodeId) -> bool {
        self.delivers(a, b) && self.delivers(b, a)
    }

    /// Whether a message from `from` reaches `to`: the network carries it and `to`'s
    /// transport does not refuse `from` as given up.
    fn delivers(&self, from: NodeId, to: NodeId) -> bool {
        self.carries(from, to) && !self.gives_up(to, from)
    }

    /// Whether the network carries packets from `from` to `to`: same side of any
    /// partition, `to` not deaf, and their transports agree at the hello.
    fn carries(&self, from: NodeId, to: NodeId) -> bool {
        self.groups.get(&from) == self.groups.get(&to)
            && !self.deaf.contains(&to)
            && self.hellos_agree(from, to)
    }

    /// Whether `a` and `b` both run and the network carries packets both ways between
    /// them (whatever their transports then make of each other).
    pub(super) fn reachable(&self, a: NodeId, b: NodeId) -> bool {
        self.holds_links(a) && self.holds_links(b) && self.carries(a, b) && self.carries(b, a)
    }

    /// Whether `node`'s transport refuses `peer` as given up: a forced recovery of
    /// `node`'s store gave `peer` up, and `node`'s list has not taken it in again.
    fn gives_up(&self, node: NodeId, peer: NodeId) -> bool {
        self.nodes
            .get(&node)
            .is_some_and(|n| n.gave_up.contains(&peer))
            && !self.members(node).is_some_and(|list| list.contains(peer))
    }

    /// `node` dialed `by`, which refused it as given up: the machine hears it. The
    /// first such meeting of a node whose store holds a term is the judge's mark (it
    /// must stand down from then on). A node that did not act on it (an empty store)
    /// redials, as its transport does, after the longest backoff.
    fn refused_as_given_up(&mut self, node: NodeId, by: NodeId) {
        let now = self.now;
        let disk = self.nodes.get(&node).map(|n| n.disk).unwrap_or_default();
        let holds_a_term = disk.term > 0 || disk.accepted.is_some();
        if let Some(forced) = self.forced.as_mut() {
            if forced.lost.contains(&node) && holds_a_term {
                forced.contact.entry(node).or_insert(now);
            }
        }
        self.deliver_event(node, Event::GivenUp { by });
        if !self.nodes.get(&node).is_some_and(|n| n.disk.given_up) {
            let redial = crate::transport::MAX_BACKOFF.as_millis() as Millis;
            self.notice_at(now + redial, node, by, true);
        }
    }

    /// Whether the transports of `a` and `b` accept each other's hello: the lives that
    /// run now must have the same mode, or each refuses the other's connection and no
    /// message passes either way (src/transport/agreement.rs; D is cluster state and
    /// may differ while a change spreads). A node that is down has no hello to refuse.
    fn hellos_agree(&self, a: NodeId, b: NodeId) -> bool {
        let hello = |id: NodeId| {
            self.nodes
                .get(&id)
                .filter(|n| n.machine.is_some())
                .map(|n| n.mode)
        };
        match (hello(a), hello(b)) {
            (Some(ha), Some(hb)) => ha == hb,
            _ => true,
        }
    }

    /// The transport of `node` reports `peer` down (queued if `node` is paused). If the
    /// link in fact works, its redial succeeds and reports the peer up again one delay
    /// later, as the real transport does.
    pub fn peer_down(&mut self, node: NodeId, peer: NodeId) {
        if self.is_up(node) {
            self.record(node, Record::PeerDown { peer });
            self.deliver_event(node, Event::PeerDown(peer));
            if self.link_alive(node, peer) {
                self.notice_after_delay(node, peer, true);
            }
        }
    }

    /// Records `msg` and puts it in flight on the `from` → `to` link, FIFO with random delay.
    pub(super) fn send(&mut self, from: NodeId, to: NodeId, msg: Message) {
        *self.sent.entry(msg.body.kind()).or_default() += 1;
        self.record(
            from,
            Record::Sent {
                to,
                msg: msg.clone(),
            },
        );
        let Some(to_life) = self.nodes.get(&to).map(|n| n.life) else {
            return;
        };
        let (lo, hi) = self.config.delay_ms;
        let delay = self.rng.gen_range(lo..=hi.max(lo));
        let busy = self.link_busy.entry((from, to)).or_default();
        let at = (self.now + delay).max(*busy);
        *busy = at;
        self.seq += 1;
        let cut = !self.delivers(from, to)
            || (self.loss_percent > 0 && self.rng.gen_range(0..100) < self.loss_percent);
        self.flights.push(Flight {
            at,
            seq: self.seq,
            from,
            to,
            msg,
            to_life,
            cut,
        });
    }

    /// A flight arrives: delivered, or lost (cut, not delivered that way, the receiver
    /// paused past the idle timeout, crashed or restarted since it was sent).
    pub(super) fn land(&mut self, f: Flight) {
        let node = &self.nodes[&f.to];
        let timeout = self.config.timing.peer_idle_timeout_ms();
        let lost = f.cut
            || !self.delivers(f.from, f.to)
            || node.paused_at.is_some_and(|at| self.now >= at + timeout)
            || node.machine.is_none()
            || node.life != f.to_life;
        if lost {
            self.record(
                f.to,
                Record::Lost {
                    from: f.from,
                    msg: f.msg,
                },
            );
            return;
        }
        self.deliver_event(
            f.to,
            Event::Message {
                from: f.from,
                msg: f.msg,
            },
        );
    }

    /// A crash of `id`: loses a random tail of each of its links' messages still in flight.
    pub(super) fn lose_unsent_suffix(&mut self, id: NodeId) {
        let mut flights = std::mem::take(&mut self.flights).into_sorted_vec();
        flights.reverse(); // earliest first
        let mut per_link: BTreeMap<NodeId, usize> = BTreeMap::new();
        for f in flights.iter().filter(|f| f.from == id) {
            *per_link.entry(f.to).or_default() += 1;
        }
        // Keep a random prefix of each link's in-flight messages.
        let mut keep: BTreeMap<NodeId, usize> = BTreeMap::new();
        for (&to, &count) in &per_link {
            keep.insert(to, self.rng.gen_range(0..=count));
        }
        let mut lost = Vec::new();
        for f in flights {
            match keep.get_mut(&f.to) {
                Some(k) if f.from == id => {
                    if *k > 0 {
                        *k -= 1;
                        self.flights.push(f);
                    } else {
                        lost.push(f);
                    }
                }
                _ => self.flights.push(f),
            }
        }
        for f in lost {
            self.record(
                f.to,
                Record::Lost {
                    from: f.from,
                    msg: f.msg,
                },
            );
        }
    }

    /// Splits the cluster: messages between different groups are lost (sent across the
    /// cut, or arriving while it is in effect). Nodes in no group form one more group.
    pub fn partition(&mut self, groups: &[Vec<NodeId>]) {
        self.heal();
        for (i, group) in groups.iter().enumerate() {
            for &id in group {
                self.groups.insert(id, i + 1);
            }
        }
        for id in self.config.processes() {
            self.groups.entry(id).or_insert(0);
        }
        for id in self.config.processes() {
            let cut_off: Vec<NodeId> = self
                .config
                .processes()
                .into_iter()
                .filter(|&p| self.groups[&p] != self.groups[&id])
                .collect();
            if !cut_off.is_empty() {
                for &peer in &cut_off {
                    if self.is_up(id) {
                        self.notice_after_idle_timeout(id, peer);
                    }
                }
                self.record(id, Record::Partitioned { cut_off });
            }
        }
    }

    /// One-way links: `id` hears no one (every message to it is lost) while what it
    /// sends still arrives, until [`Sim::heal`] — a firewall rule that drops one
    /// direction. Its connections time out at both ends, as a partition's do.
    pub fn deafen(&mut self, id: NodeId) {
        self.heal();
        self.deaf.insert(id);
        let others: Vec<NodeId> = self
            .config
            .processes()
            .into_iter()
            .filter(|&p| p != id)
            .collect();
        for &peer in &others {
            for (node, other) in [(id, peer), (peer, id)] {
                if self.is_up(node) {
                    self.notice_after_idle_timeout(node, other);
                }
            }
        }
        self.record(id, Record::Partitioned { cut_off: others });
    }

    /// Makes the network lose `percent` of all messages at random (decided when each
    /// is sent) until [`Sim::heal`]. The only fault that loses single messages.
    pub fn set_loss(&mut self, percent: u8) {
        let percent = percent.min(100);
        if percent == 0 {
            return;
        }
        self.loss_percent = percent;
        for id in self.config.processes() {
            self.record(id, Record::Lossy { percent });
        }
    }

    /// Records where running nodes now refuse each other's hello (another D), and where
    /// such a split ended: a node that starts on a D some running peer does not share is
    /// cut off from it as by a partition (`Record::Partitioned`), and healed
    /// (`Record::Healed`) once every running node agrees with it again. Called after
    /// every start, crash and heal.
    pub(super) fn note_config_split(&mut self) {
        let running: Vec<NodeId> = self
            .config
            .processes()
            .into_iter()
            .filter(|&id| self.is_up(id))
            .collect();
        for &id in &running {
            let refused: Vec<NodeId> = running
                .iter()
                .copied()
                .filter(|&p| p != id && !self.hellos_agree(id, p))
                .collect();
            let was = self.split_by_config.contains(&id);
            if !refused.is_empty() && !was {
                self.split_by_config.insert(id);
                self.record(id, Record::Partitioned { cut_off: refused });
            } else if refused.is_empty() && was {
                self.split_by_config.remove(&id);
                self.record(id, Record::Healed);
            }
        }
        self.split_by_config.retain(|id| running.contains(id));
    }

    /// Ends any partition and any message loss.
    pub fn heal(&mut self) {
        if !self.is_disturbed() {
            return;
        }
        let lossy = self.loss_percent > 0;
        let ids = self.config.processes();
        for &id in &ids {
            if lossy || ids.iter().any(|p| !self.connected(id, *p)) {
                self.record(id, Record::Healed);
            }
        }
        let cut: Vec<(NodeId, NodeId)> = ids_pairs(&ids)
            .filter(|&(a, b)| !self.connected(a, b))
            .collect();
        self.groups.clear();
        self.deaf.clear();
        self.loss_percent = 0;
        // The Healed just recorded does not end a split by config: record it again.
        self.split_by_config.clear();
        self.note_config_split();
        for (a, b) in cut {
            if self.is_up(a) && self.is_up(b) {
                self.notice_after_delay(a, b, true);
                self.notice_after_delay(b, a, true);
            }
        }
    }
}

/// Every unordered pair of distinct IDs.
fn ids_pairs(ids: &[NodeId]) -> impl Iterator<Item = (NodeId, NodeId)> + '_ {
    ids.iter()
        .enumerate()
        .flat_map(move |(i, &a)| ids[i + 1..].iter().map(move |&b| (a, b)))
}
