//! Which transitions a world enables, and applying one: the machines' actions run in
//! order, each checked against the properties as it happens.

use super::properties::broken;
use super::transition::Transition;
use super::{Model, World};
use crate::checker::{check_send, honest_peer_flagged, Violation};
use crate::protocol::{
    Action, Body, Cells, Event, Fact, Machine, Message, Millis, Misbehaviour, Mode, NodeId,
};

impl Model {
    /// The steps enabled in `w`, in a fixed order.
    pub fn enabled(&self, w: &World) -> Vec<Transition> {
        let n = self.n();
        let b = &self.config.bounds;
        let ids = &self.config.ids;
        let mut steps = Vec::new();
        for from in 0..n {
            for to in 0..n {
                let queue = &w.links[from * n + to];
                let waiting = self.up(w, to) && w.nodes[to].paused;
                if !queue.is_empty() && !waiting {
                    steps.push(Transition::Deliver {
                        from: ids[from],
                        to: ids[to],
                    });
                }
            }
        }
        let due: Vec<usize> = (0..n)
            .filter(|&i| self.deadline(w, i).is_some_and(|d| d <= w.now))
            .collect();
        steps.extend(due.iter().map(|&i| Transition::Tick(ids[i])));
        if due.is_empty() {
            let next = (0..n).filter_map(|i| self.deadline(w, i)).min();
            if let Some(t) = next.filter(|&t| t > w.now && t <= self.time_limit) {
                steps.push(Transition::Advance(t));
            }
        }
        for (i, &id) in ids.iter().enumerate() {
            if self.up(w, i) {
                if w.crashes < b.crashes {
                    steps.push(Transition::Crash(id));
                }
                if w.wipes < b.wipes {
                    steps.push(Transition::Wipe(id));
                }
                if w.nodes[i].paused {
                    steps.push(Transition::Resume(id));
                } else if w.pauses < b.pauses {
                    steps.push(Transition::Pause(id));
                }
            } else {
                steps.push(Transition::Restart(id));
            }
            if w.flips < b.health_flips && self.config.witness != Some(id) {
                steps.push(Transition::Health(id, !w.nodes[i].eligible));
            }
            let rolls = self.config.restart_timing.is_some() && !w.nodes[i].restarted;
            if rolls && self.up(w, i) && w.crashes < b.crashes {
                steps.push(Transition::Roll(id));
            }
            if self.up(w, i) && !w.nodes[i].paused && w.nodes[i].awaiting.is_some() {
                steps.push(Transition::Release(id));
            }
            if self.up(w, i) && !w.nodes[i].paused {
                steps.push(Transition::Query(id));
            }
            if usize::from(w.asked) < self.config.changes.len()
                && self.up(w, i)
                && !w.nodes[i].paused
            {
                steps.push(Transition::Ask(id));
            }
        }
        if w.cut != 0 {
            steps.push(Transition::Heal);
        } else if w.partitions < b.partitions {
            for mask in 1u8..(1 << n) {
                let size = mask.count_ones() as usize;
                // Minority sides only; a half of four counts once (the side with member 0).
                if size * 2 < n || (size * 2 == n && mask & 1 == 1) {
                    steps.push(Transition::Cut(mask));
                }
            }
        }
        steps
    }

    /// Applies `step` to a copy of `w`.
    pub fn apply(&self, w: &World, step: Transition) -> Result<World, Violation> {
        let mut w = w.clone();
        let n = self.n();
        // Contact counts from the state the step starts in (a heal or resume done
        // outside `apply`, as the liveness check does, is seen here).
        self.note_contact(&mut w);
        match step {
            Transition::Deliver { from, to } => {
                let (f, t) = (self.index(from), self.index(to));
                let msg = w.links[f * n + t].pop_front();
                if let Some(msg) = msg {
                    if self.up(&w, t) && self.connected(&w, f, t) {
                        self.feed(&mut w, t, Event::Message { from, msg })?;
                    }
                }
            }
            Transition::Tick(id) => self.feed(&mut w, self.index(id), Event::Tick)?,
            Transition::Advance(t) => w.now = t,
            Transition::Crash(id) => {
                self.crash(&mut w, self.index(id));
                w.crashes += 1;
            }
            Transition::Wipe(id) => {
                let i = self.index(id);
                self.crash(&mut w, i);
                // A new, empty store: the per-node checks (I1, I2) start afresh; I7 and
                // I6 still see every coordinator the lost store helped elect.
                w.nodes[i].disk = Cells::default();
                w.nodes[i].list = None;
                w.nodes[i].declared = 0;
                w.wipes += 1;
            }
            Transition::Restart(id) => {
                let i = self.index(id);
                w.nodes[i].restarted = true;
                self.start(&mut w, i)?
            }
            Transition::Roll(id) => {
                let i = self.index(id);
                self.crash(&mut w, i);
                w.crashes += 1;
                w.nodes[i].restarted = true;
                self.start(&mut w, i)?
            }
            Transition::Release(id) => {
                let i = self.index(id);
                if let Some(epoch) = w.nodes[i].awaiting.take() {
                    self.feed(&mut w, i, Event::Released { epoch })?;
                }
            }
            Transition::Pause(id) => {
                w.nodes[self.index(id)].paused = true;
                w.pauses += 1;
            }
            Transition::Resume(id) => w.nodes[self.index(id)].paused = false,
            Transition::Cut(mask) => {
                w.cut = mask;
                w.partitions += 1;
            }
            Transition::Heal => w.cut = 0,
            Transition::Health(id, ok) => {
                let i = self.index(id);
                w.nodes[i].eligible = ok;
                w.flips += 1;
                if self.up(&w, i) && !w.nodes[i].paused {
                    self.feed(&mut w, i, Event::SetEligible(ok))?;
                }
            }
            Transition::Ask(id) => self.ask(&mut w, self.index(id))?,
            Transition::Query(id) => self.check_query(&w, self.index(id))?,
        }
        self.note_contact(&mut w);
        Ok(w)
    }

    /// The operator asks node `i` for the next change. A node that takes it writes a
    /// list at once (the confirmation of its list, or the change itself); a refusal
    /// changes nothing, so the same change is asked again later.
    fn ask(&self, w: &mut World, i: usize) -> Result<(), Violation> {
        let Some(change) = self.config.changes.get(usize::from(w.asked)) else {
            return Ok(());
        };
        let before = w.nodes[i].machine.as_ref().map(|m| m.members().id);
        self.feed(w, i, Event::ChangeMembers(change.clone()))?;
        if w.nodes[i].machine.as_ref().map(|m| m.members().id) != before {
            w.asked += 1;
        }
        Ok(())
    }

    /// Starts (or restarts) node `i`'s machine on its stored cells and member list at
    /// the world's time.
    pub(super) fn start(&self, w: &mut World, i: usize) -> Result<(), Violation> {
        let id = self.config.ids[i];
        let node = &w.nodes[i];
        let config = self
            .config
            .machine_config(id, node.eligible, node.restarted);
        let (disk, list) = (w.nodes[i].disk, w.nodes[i].list.clone());
        let machine = Machine::start_with(config, disk, list, w.now);
        let listed = machine.members().others(id);
        w.nodes[i].machine = Some(machine);
        w.nodes[i].paused = false;
        w.nodes[i].contact = false;
        self.run_actions(w, i)?;
        if let Some(&est) = self.config.estimates.get(i) {
            let fresh_until = Millis::MAX;
            self.feed(
                w,
                i,
                Event::SetEstimate {
                    value: Some(est),
                    fresh_until,
                },
            )?;
        }
        // Its transport dials every peer of its list at once: the reachable ones are
        // reported up, the others down (a failed dial), in one step; the machine's
        // later messages may still be lost or delayed like any other.
        for p in 0..self.n() {
            if p != i && listed.contains(&self.config.ids[p]) {
                let peer = self.config.ids[p];
                let event = if self.up(w, p) && self.connected(w, i, p) {
                    Event::PeerUp(peer)
                } else {
                    Event::PeerDown(peer)
                };
                self.feed(w, i, event)?;
            }
        }
        Ok(())
    }

    /// Kills node `i`: its machine and the connections to it are gone, its store stays.
    fn crash(&self, w: &mut World, i: usize) {
        let n = self.n();
        w.nodes[i].machine = None;
        w.nodes[i].paused = false;
        w.nodes[i].awaiting = None;
        for j in 0..n {
            w.links[j * n + i].clear(); // the connections to it died with it
        }
    }

    /// Hands `event` to node `i`'s machine and runs the actions it polls, checking them.
    pub(super) fn feed(&self, w: &mut World, i: usize, event: Event) -> Result<(), Violation> {
        let now = w.now;
        if let Some(m) = w.nodes[i].machine.as_mut() {
            m.handle(event, now);
        }
        self.run_actions(w, i)
    }

    /// Runs node `i`'s actions in order, checking each against the properties.
    fn run_actions(&self, w: &mut World, i: usize) -> Result<(), Violation> {
        let id = self.config.ids[i];
        let quorum = self.config.mode == Mode::Quorum;
        loop {
            let Some(action) = w.nodes[i].machine.as_mut().and_then(Machine::poll_action) else {
                return Ok(());
            };
            match action {
                Action::Persist(cells) => {
                    self.check_write(w, i, &cells)?;
                    w.nodes[i].disk = cells;
                }
                Action::PersistMembers(list) => w.nodes[i].list = Some(list),
                Action::AwaitRelease { epoch } => w.nodes[i].awaiting = Some(epoch),
                Action::Send { to, msg } => self.send(w, i, to, msg)?,
                Action::Fact(Fact::ElectionStarted) => {
                    self.election_started(w, i);
                    if let Some(asked) = w.prompt_elections.as_mut() {
                        asked[i] = (0, 0x80 | asked[i].0);
                    }
                }
                Action::Fact(Fact::Declared { epoch }) => {
                    self.declared(w, i, epoch)?;
                    self.check_rank(w, i)?;
                }
                Action::Fact(Fact::Established { epoch }) if quorum => {
                    self.established(w, i, epoch)?
                }
                Action::Misbehaved { peer, what } if !self.outsider(w, i, peer, what) => {
                    return Err(honest_peer_flagged(id, w.now, peer, what));
                }
                _ => {}
            }
        }
    }

    /// Whether node `i` refused `peer` only because its list does not hold it (the
    /// joining process before it is added, a member after it was removed): what the
    /// machine does with any sender not in its list, honest or not.
    fn outsider(&self, w: &World, i: usize, peer: NodeId, what: Misbehaviour) -> bool {
        let listed = w.nodes[i]
            .machine
            .as_ref()
            .is_some_and(|m| m.members().contains(peer));
        what == Misbehaviour::UnknownPeer && !listed
    }

    /// I3 for a send (it reveals only what node `i` stored), then queues it on its link.
    fn send(&self, w: &mut World, i: usize, to: NodeId, msg: Message) -> Result<(), Violation> {
        let id = self.config.ids[i];
        broken(check_send(id, w.now, &msg.body, w.nodes[i].disk.accepted))?;
        let t = self.index(to);
        if let (Some(asked), Body::Election { .. }) = (w.prompt_elections.as_mut(), &msg.body) {
            asked[i].0 |= 1 << t;
        }
        w.links[i * self.n() + t].push_back(msg);
        Ok(())
    }
}
