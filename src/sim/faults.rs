//! What a scenario does to the simulated processes: start and restart them, crash them
//! (at once or at an armed point), lose a store, pause and resume them, flip their
//! health.

use super::{CrashPoint, Sim};
use crate::checker::check_crash;
use crate::history::Record;
use crate::protocol::majority_loss;
use crate::protocol::membership::list_at_start;
use crate::protocol::mode_at_start;
use crate::protocol::{
    seed_members, Cells, Event, Flaw, Machine, MachineConfig, Mode, NodeId, Timing,
};
use rand::Rng;
use std::collections::BTreeSet;

impl Sim {
    /// Starts a node that is down (first start or restart after a crash) from its
    /// stored cells, as `Machine::start` does in the runtime. Ignored if it is up.
    pub fn start(&mut self, id: NodeId) {
        let Some(node) = self.nodes.get_mut(&id) else {
            return;
        };
        if node.machine.is_some() {
            return;
        }
        let file_mode = self.config.mode_of(id);
        let mode = match mode_at_start(node.stored_mode, file_mode, false) {
            _ if self.config.flaw == Some(Flaw::FileModeCounts) => file_mode,
            Ok((mode, store)) => {
                if store {
                    node.stored_mode = Some(mode);
                }
                mode
            }
            // `bully node` exits 2 (the store holds another mode): it stays down.
            Err(_) => return,
        };
        let Some(node) = self.nodes.get_mut(&id) else {
            return;
        };
        node.life += 1;
        node.stalled = false;
        node.timing = self.config.timing_of(id);
        node.mode = mode;
        let eligible = node.eligible;
        let config = self.machine_config(id, eligible).with_mode(mode);
        let Some(node) = self.nodes.get_mut(&id) else {
            return;
        };
        let incarnation = node.disk.incarnation + 1;
        let local = node.local(self.now);
        let (members, seeded) = list_at_start(node.members.clone(), || seed_members(&config));
        if seeded && self.config.flaw != Some(Flaw::FileListCounts) {
            node.members = Some(members.clone());
        }
        let machine = Machine::start_with(config, node.disk, Some(members), local);
        let alone = machine.members().others(id).is_empty();
        node.machine = Some(machine);
        if alone {
            self.alone_starts.insert((id, self.now));
        }
        self.record(id, Record::Started { incarnation });
        self.note_config_split();
        self.drain(id);
        if let Some(value) = self.nodes.get(&id).and_then(|n| n.estimate) {
            self.give_estimate(id, value);
        }
        // The new process dials its peers and they dial it: PeerUp on both ends. A dial
        // that reaches nobody fails when the handshake bound (20 D) runs out, unless the
        // peer came up meanwhile (then its own start reports the link up).
        for peer in self.config.processes() {
            if peer != id && self.is_up(peer) {
                self.notice_after_delay(id, peer, true);
                self.notice_after_delay(peer, id, true);
            } else if peer != id {
                self.notice_after_idle_timeout(id, peer);
            }
        }
    }

    /// The config node `id` starts with: its config file's.
    fn machine_config(&self, id: NodeId, eligible: bool) -> MachineConfig {
        let config = &self.config;
        // A member's config file lists the other members; a spare's lists the cluster
        // it is to join; an edited one what the operator wrote.
        let peers = match config.file_peers.get(&id) {
            Some(peers) => peers.clone(),
            None => config.ids.iter().copied().filter(|&p| p != id).collect(),
        };
        MachineConfig::new(id, peers)
            .with_timing(config.timing_of(id))
            .with_preempt(config.preempt)
            .with_eligible(eligible)
            .with_mode(config.mode)
            .with_witnesses(config.witnesses.contains(&id), config.witnesses.clone())
            .with_release_bound_ms(config.release_bound_ms)
            .with_flaw(config.flaw)
    }

    /// An operator runs `bully recover --force --members S` on each survivor in `S`,
    /// all stopped (src/node/drive/forced_recovery.rs): each store gets the plan's
    /// raised term and list of the survivors, and remembers the members it gave up,
    /// whom its transport refuses as given up from then on. Those members may well be
    /// alive (the misuse the given-up rule answers, src/protocol/machine/given_up.rs).
    /// `Err` (nothing written) if a survivor runs or the plan is refused.
    pub fn force_recovery(&mut self, survivors: &[NodeId]) -> Result<(), String> {
        let kept: BTreeSet<NodeId> = survivors.iter().copied().collect();
        let mut plans = Vec::new();
        for &id in &kept {
            if self.is_up(id) {
                return Err(format!("n{id} is running"));
            }
            let node = self.nodes.get(&id).ok_or(format!("no node {id}"))?;
            let current = node
                .members
                .clone()
                .unwrap_or_else(|| seed_members(&self.machine_config(id, true)));
            let plan = majority_loss::plan(id, &node.disk, &current, &kept)
                .map_err(|e| format!("n{id}: {e}"))?;
            plans.push((id, plan));
        }
        let mut lost = BTreeSet::new();
        for (id, plan) in plans {
            let gave_up: BTreeSet<NodeId> = plan.lost.iter().map(|m| m.id).collect();
            lost.extend(gave_up.iter().copied());
            if let Some(node) = self.nodes.get_mut(&id) {
                node.disk = plan.cells;
                node.members = Some(plan.list.clone());
                node.gave_up = gave_up;
            }
            // As the tool appends them to the node's event log.
            self.record(id, Record::Persisted(plan.cells));
            self.record(
                id,
                Record::ForcedRecovery {
                    members: plan.list.members.iter().map(|m| m.id).collect(),
                    from_config: plan.from.id,
                    to_config: plan.list.id,
                    term: plan.cells.term,
                },
            );
        }
        self.forced = Some(super::Forced {
            survivors: kept,
            lost,
            at_ms: self.now,
            contact: Default::default(),
        });
        Ok(())
    }

    /// Kills a node: its machine (volatile state) and inbox are gone, its stored cells
    /// stay. Of the messages it still has in flight, each link loses a random suffix
    /// (what the dead process had not yet got onto the wire).
    pub fn crash(&mut self, id: NodeId) {
        let Some(node) = self.nodes.get_mut(&id) else {
            return;
        };
        if node.machine.take().is_none() {
            return;
        }
        node.paused = false;
        node.paused_at = None;
        node.inbox.clear();
        let (disk, revealed, declared) = (node.disk, node.revealed, node.declared_term);
        self.armed.retain(|&(n, _)| n != id);
        self.record(id, Record::Crashed);
        self.note_config_split();
        for peer in self.config.processes() {
            if peer != id && self.is_up(peer) {
                self.notice_after_idle_timeout(peer, id);
            }
        }
        if let Some(violation) = check_crash(id, self.now, disk, revealed, declared) {
            self.report(violation);
        }
        self.lose_unsent_suffix(id);
    }

    /// A clean stop (SIGTERM): the machine handles `Shutdown` (a coordinator leaves
    /// office and resigns) and runs its actions, then the process is gone.
    pub fn stop(&mut self, id: NodeId) {
        if self.is_up(id) && !self.is_paused(id) {
            self.feed(id, Event::Shutdown);
        }
        self.crash(id);
    }

    /// An operator edits node `id`'s config file: its next start runs with `timing`
    /// (the running life keeps the timing it started with, as a real node does).
    pub fn reconfigure(&mut self, id: NodeId, timing: Timing) {
        self.config.node_timing.insert(id, timing);
    }

    /// An operator edits node `id`'s config file to name `peers` (`None`: the
    /// cluster's again). Counted only by a start that finds no stored list.
    pub fn edit_peers(&mut self, id: NodeId, peers: Option<Vec<NodeId>>) {
        match peers {
            Some(peers) => self.config.file_peers.insert(id, peers),
            None => self.config.file_peers.remove(&id),
        };
    }

    /// The mode node `id`'s store holds, if it holds one.
    pub fn stored_mode(&self, id: NodeId) -> Option<Mode> {
        self.nodes.get(&id).and_then(|n| n.stored_mode)
    }

    /// An operator edits node `id`'s config file to name `mode` (`None`: the
    /// cluster's again). A start whose store holds another mode is refused.
    pub fn edit_mode(&mut self, id: NodeId, mode: Option<Mode>) {
        match mode {
            Some(mode) => self.config.file_mode.insert(id, mode),
            None => self.config.file_mode.remove(&id),
        };
    }

    /// The disk of a node that is down is lost (a replaced disk, a container without
    /// its volume): its next start is on an empty store. Crashes it first if it is up.
    pub fn lose_store(&mut self, id: NodeId) {
        self.crash(id);
        let Some(node) = self.nodes.get_mut(&id) else {
            return;
        };
        node.disk = Cells::default();
        node.past.clear();
        node.members = None;
        node.stored_mode = None;
        node.revealed = None;
        node.declared_term = 0;
        self.record(id, Record::StoreLost);
    }

    /// The store of node `id` (down, or killed first) goes back to an older copy, the
    /// `back`-th state before its current cells (a disk or a restore handing back an
    /// old file). The store check (src/storage/check.rs) refuses it at the next start,
    /// exit 2, and the operator wipes it: it is lost and recovered by the usual rule.
    /// Under `Flaw::TrustsDamagedStore` it is used as current. Returns whether it was
    /// refused; `None` if the node has no older state.
    pub fn roll_back_store(&mut self, id: NodeId, back: usize) -> Option<bool> {
        let older = self.nodes.get(&id)?.past.iter().rev().nth(back).copied()?;
        self.crash(id);
        if self.config.flaw != Some(Flaw::TrustsDamagedStore) {
            self.lose_store(id);
            return Some(true);
        }
        let node = self.nodes.get_mut(&id)?;
        node.disk = older;
        node.past.clear();
        Some(false)
    }

    /// Crashes `id` right after it next runs an action matching `point` (see
    /// [`CrashPoint`]). Stays armed until it fires, the node crashes otherwise, or
    /// [`Sim::disarm`].
    pub fn arm_crash(&mut self, id: NodeId, point: CrashPoint) {
        self.armed.push((id, point));
    }

    /// Removes every armed crash.
    pub fn disarm(&mut self) {
        self.armed.clear();
    }

    /// Stops a running node (SIGSTOP): messages and notices queue, timers wait.
    pub fn pause(&mut self, id: NodeId) {
        if self.is_up(id) && !self.is_paused(id) {
            let now = self.now;
            if let Some(n) = self.nodes.get_mut(&id) {
                n.paused = true;
                n.paused_at = Some(now);
            }
            self.record(id, Record::Paused);
            // A machine sabotaged to ignore its lease keeps office past it: no bound.
            let honours_lease = self.config.flaw != Some(Flaw::IgnoreLease);
            let lease = self.nodes.get(&id).and_then(|n| {
                // The lease as it stands ends the office of a process that never runs
                // again; rounds sent before the pause renew it once their queued acks
                // are handled after a late resume, as far as those rounds reach.
                let machine = n.machine.as_ref()?;
                let (until, renewable) = (machine.lease_until()?, machine.lease_until_at_most()?);
                honours_lease.then(|| (n.real(until), n.real(renewable)))
            });
            if let Some((until_ms, renewable_until_ms)) = lease {
                self.record(
                    id,
                    Record::PausedLease {
                        until_ms,
                        renewable_until_ms,
                    },
                );
            }
            for peer in self.config.processes() {
                if peer != id && self.is_up(peer) {
                    self.notice_after_idle_timeout(peer, id);
                    self.notice_after_idle_timeout(id, peer);
                }
            }
        }
    }

    /// Continues a paused node (SIGCONT). It handles its queue and its overdue timer;
    /// which comes first is drawn at random, as it is a race in the real runtime.
    pub fn resume(&mut self, id: NodeId) {
        if !self.is_paused(id) {
            return;
        }
        let timeout = self.config.timing.peer_idle_timeout_ms();
        let now = self.now;
        let (mut inbox, timed_out) = match self.nodes.get_mut(&id) {
            Some(n) => {
                n.paused = false;
                let timed_out = n.paused_at.take().is_some_and(|at| now >= at + timeout);
                (std::mem::take(&mut n.inbox), timed_out)
            }
            None => return,
        };
        self.record(id, Record::Resumed);
        if timed_out {
            // Its connections timed out while it slept: what they carried is gone, and
            // both ends reconnect.
            inbox.retain(|e| !matches!(e, Event::Message { .. }));
            for peer in self.config.processes() {
                if peer != id && self.is_up(peer) {
                    self.notice_after_delay(id, peer, true);
                    self.notice_after_delay(peer, id, true);
                }
            }
        }
        let tick_first = self.rng.gen_bool(0.5);
        if tick_first {
            self.tick_if_due(id);
        }
        for event in inbox {
            if !self.is_up(id) {
                return; // an armed crash fired
            }
            self.feed(id, event);
        }
    }

    /// The estimate source of `node` reports `value` from now on (fresh for ever: the
    /// simulator's estimates change only when a scenario sets them). Remembered across
    /// restarts; a cluster where no node has one runs as before estimates existed.
    pub fn set_estimate(&mut self, node: NodeId, value: Option<u64>) {
        let Some(n) = self.nodes.get_mut(&node) else {
            return;
        };
        n.estimate = Some(value);
        if self.is_up(node) {
            self.give_estimate(node, value);
        }
    }

    fn give_estimate(&mut self, node: NodeId, value: Option<u64>) {
        let fresh_until = crate::protocol::Millis::MAX;
        self.deliver_event(node, Event::SetEstimate { value, fresh_until });
    }

    /// The health check of `node` passes or fails. Remembered across restarts.
    pub fn set_eligible(&mut self, node: NodeId, eligible: bool) {
        if self.config.witnesses.contains(&node) {
            return; // a witness never leads, whatever its health
        }
        let Some(n) = self.nodes.get_mut(&node) else {
            return;
        };
        if n.eligible == eligible {
            return;
        }
        n.eligible = eligible;
        self.record(
            node,
            Record::EligibilitySet {
                eligible,
                why: None,
            },
        );
        if self.is_up(node) {
            self.deliver_event(node, Event::SetEligible(eligible));
        }
    }
}
