//! The event loop: deliveries, notices and timers in time order, each machine driven
//! as the runtime drives it (its actions run in order).

use super::{CrashPoint, Sim};
use crate::checker::{honest_peer_flagged, stranger_refused, Invariant};
use crate::history::Record;
use crate::protocol::{Action, Event, Fact, Machine, Millis, NodeId};

/// Upper bound on handled events per run, so a message storm fails instead of hanging.
const MAX_STEPS: u64 = 5_000_000;

impl Sim {
    /// Runs deliveries and timers in time order up to and including `until`, then sets
    /// the clock to `until`. At equal times, deliveries go first (in send order), then
    /// timers (by node ID).
    pub fn run_until(&mut self, until: Millis) {
        self.run_while(until, |_| true);
    }

    /// Like [`Sim::run_until`], but stops early (returning true) as soon as `done`
    /// holds after a step; the clock then stays at that step's time.
    pub fn run_until_or(&mut self, until: Millis, mut done: impl FnMut(&Sim) -> bool) -> bool {
        let mut finished = false;
        self.run_while(until, |sim| {
            finished = done(sim);
            !finished
        });
        finished
    }

    fn run_while(&mut self, until: Millis, mut go_on: impl FnMut(&Sim) -> bool) {
        loop {
            if self.steps >= MAX_STEPS {
                if self.steps == MAX_STEPS {
                    self.steps += 1; // report once
                    self.violate(
                        Invariant::Protocol,
                        0,
                        format!("more than {MAX_STEPS} events: a message storm"),
                    );
                }
                break;
            }
            let next_flight = self.flights.peek().map(|f| f.at);
            let next_timer = self
                .nodes
                .iter()
                .filter(|(_, n)| !n.paused && !n.stalled)
                .filter_map(|(&id, n)| {
                    n.machine
                        .as_ref()
                        .map(|m| (n.real(m.next_deadline()).max(self.now), id))
                })
                .min();
            if let Some((&(at, seq), _)) = self.releases.iter().next() {
                let first = next_flight.map_or(true, |f| at < f)
                    && next_timer.map_or(true, |(t, _)| at < t)
                    && self.notices.keys().next().map_or(true, |&(n, _)| at <= n);
                if first {
                    if at > until {
                        break;
                    }
                    self.ask_who_leads_until(at);
                    self.now = self.now.max(at);
                    self.steps += 1;
                    if let Some(release) = self.releases.remove(&(at, seq)) {
                        self.fire_release(release);
                    }
                    if !go_on(self) {
                        return;
                    }
                    continue;
                }
            }
            if let Some((&(at, seq), _)) = self.notices.iter().next() {
                let first = next_flight.map_or(true, |f| at < f)
                    && next_timer.map_or(true, |(t, _)| at < t);
                if first {
                    if at > until {
                        break;
                    }
                    self.ask_who_leads_until(at);
                    self.now = self.now.max(at);
                    self.steps += 1;
                    if let Some((node, peer, up)) = self.notices.remove(&(at, seq)) {
                        self.fire_notice(node, peer, up);
                    }
                    if !go_on(self) {
                        return;
                    }
                    continue;
                }
            }
            let take_flight = match (next_flight, next_timer) {
                (Some(f), Some((t, _))) => f <= t,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            let at = if take_flight {
                next_flight.unwrap_or(until)
            } else {
                next_timer.map_or(until, |(t, _)| t)
            };
            if at > until {
                break;
            }
            self.ask_who_leads_until(at);
            self.now = self.now.max(at);
            self.steps += 1;
            if take_flight {
                if let Some(flight) = self.flights.pop() {
                    self.land(flight);
                }
            } else if let Some((_, id)) = next_timer {
                self.tick_if_due(id);
            }
            if !go_on(self) {
                return;
            }
        }
        self.ask_who_leads_until(until);
        self.now = self.now.max(until);
    }

    /// Hands an event to a running node now, or queues it if the node is paused.
    pub(super) fn deliver_event(&mut self, id: NodeId, event: Event) {
        let Some(node) = self.nodes.get_mut(&id) else {
            return;
        };
        if node.paused {
            node.inbox.push_back(event);
        } else {
            self.feed(id, event);
        }
    }

    /// Fires node `id`'s timer if its deadline has come.
    pub(super) fn tick_if_due(&mut self, id: NodeId) {
        let due = self.next_deadline(id).is_some_and(|d| d <= self.now);
        if !due {
            return;
        }
        self.feed(id, Event::Tick);
        if let Some(next) = self.next_deadline(id) {
            if next <= self.now {
                if let Some(n) = self.nodes.get_mut(&id) {
                    n.stalled = true;
                }
                self.violate(
                    Invariant::Protocol,
                    id,
                    format!(
                        "after a tick at {} ms the next deadline is {next} ms",
                        self.now
                    ),
                );
            }
        }
    }

    /// Hands `event` to node `id`'s machine and runs the actions it polls.
    pub(super) fn feed(&mut self, id: NodeId, event: Event) {
        if let Event::Message { from, msg } = &event {
            let (from, msg) = (*from, msg.clone());
            self.record(id, Record::Received { from, msg });
        }
        let Some(node) = self.nodes.get_mut(&id) else {
            return;
        };
        let now = node.local(self.now);
        let Some(machine) = node.machine.as_mut() else {
            return;
        };
        machine.handle(event, now);
        self.drain(id);
    }

    /// Runs a node's pending actions in order, as the runtime does.
    pub(super) fn drain(&mut self, id: NodeId) {
        loop {
            let action = self
                .nodes
                .get_mut(&id)
                .and_then(|n| n.machine.as_mut())
                .and_then(Machine::poll_action);
            let Some(action) = action else {
                return;
            };
            let point = match action {
                Action::Persist(cells) => {
                    if let Some(node) = self.nodes.get_mut(&id) {
                        if node.past.len() == super::node::PAST_CELLS {
                            node.past.pop_front();
                        }
                        node.past.push_back(node.disk);
                        node.disk = cells;
                    }
                    self.record(id, Record::Persisted(cells));
                    CrashPoint::AfterPersist
                }
                Action::PersistMembers(list) => {
                    if let Some(violation) = self.lists.observe(id, self.now, &list) {
                        self.report(violation);
                    }
                    if let Some(node) = self.nodes.get_mut(&id) {
                        node.members = Some(list);
                    }
                    CrashPoint::AfterPersist
                }
                Action::Fact(fact) => {
                    let fact = self.fact_in_real_time(id, fact);
                    self.record(id, Record::Fact(fact));
                    continue;
                }
                Action::Send { to, msg } => {
                    self.check_reveal(id, &msg);
                    let kind = msg.body.kind();
                    self.send(id, to, msg);
                    CrashPoint::AfterSend(kind)
                }
                Action::ViewChanged(view) => {
                    if let Some(node) = self.nodes.get_mut(&id) {
                        node.revealed = node.revealed.max(view.epoch);
                    }
                    self.record(id, Record::View(view));
                    continue;
                }
                Action::AwaitRelease { epoch } => {
                    self.await_release(id, epoch);
                    continue;
                }
                Action::Misbehaved { peer, what } => {
                    let listed = self.members(id).is_some_and(|list| list.contains(peer));
                    let expected = stranger_refused(what, listed);
                    let what = what.to_string();
                    self.record(
                        id,
                        Record::Misbehaved {
                            peer,
                            what: what.clone(),
                        },
                    );
                    if !expected {
                        self.report(honest_peer_flagged(id, self.now, peer, what));
                    }
                    continue;
                }
            };
            if let Some(i) = self.armed.iter().position(|&a| a == (id, point)) {
                self.armed.remove(i);
                self.crash(id);
                return;
            }
        }
    }

    /// The machine of node `id` asks for the release of `epoch`: its `on_demoted` (and
    /// keepers) take the node's drawn time, then the release comes (in the same life
    /// only); a hook that hangs never releases, and the machine's bound ends the wait.
    fn await_release(&mut self, id: NodeId, epoch: crate::protocol::Epoch) {
        let took = self.config.hook_ms.get(&id).copied().unwrap_or(0);
        let Some(life) = self.nodes.get(&id).map(|n| n.life) else {
            return;
        };
        if took == Millis::MAX {
            return;
        }
        self.seq += 1;
        self.releases
            .insert((self.now + took, self.seq), (id, life, epoch));
    }

    /// A release falls due: handed to the node if it is still the life that asked.
    fn fire_release(&mut self, (id, life, epoch): (NodeId, u64, crate::protocol::Epoch)) {
        let same_life = self.nodes.get(&id).is_some_and(|n| n.life == life);
        if same_life && self.is_up(id) {
            self.deliver_event(id, Event::Released { epoch });
        }
    }

    /// Notes what a fact tells the simulator's own checks, and puts a demotion's
    /// office end (the node's clock) on the simulator's real clock.
    fn fact_in_real_time(&mut self, id: NodeId, fact: Fact) -> Fact {
        let Some(node) = self.nodes.get_mut(&id) else {
            return fact;
        };
        match fact {
            Fact::Declared { epoch } => {
                node.declared_term = node.declared_term.max(epoch.term);
                fact
            }
            Fact::Demoted {
                epoch,
                reason,
                office_ended_at,
            } => Fact::Demoted {
                epoch,
                reason,
                office_ended_at: node.real(office_ended_at).min(self.now),
            },
            _ => fact,
        }
    }
}
