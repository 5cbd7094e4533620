//! The properties checked on each action of a machine, through the checker's rules
//! (src/checker): I1 and I2 on a write of the cells, I2 and Q6 on a declaration, I7
//! and I6 when a node takes office (and that its own list lets it lead); plus the Q6
//! bookkeeping of who reached a majority.

use super::{Model, World};
use crate::checker::{
    check_accepted_rises, check_alone_in_office, check_answer_in_office, check_declares_anew,
    check_elected_by_data, check_term_rises, InOffice, Invariant, Violation,
};
use crate::protocol::{Cells, Epoch, Member, Mode, Role, SelfReport};

/// A rule's verdict as a step's result: `Err` with the violation, if any.
pub(super) fn broken(violation: Option<Violation>) -> Result<(), Violation> {
    violation.map_or(Ok(()), Err)
}

impl Model {
    /// I1 (the accepted epoch never goes back) and I2 (nor does the term cell) when
    /// node `i` writes `cells`.
    pub(super) fn check_write(&self, w: &World, i: usize, cells: &Cells) -> Result<(), Violation> {
        let (id, disk) = (self.config.ids[i], w.nodes[i].disk);
        broken(check_accepted_rises(
            id,
            w.now,
            disk.accepted,
            cells.accepted,
        ))?;
        broken(check_term_rises(id, w.now, disk.term, cells.term))
    }

    /// Q6 bookkeeping when node `i` starts an election: a new term to ask for starts
    /// its contact afresh, the same term keeps what it had.
    pub(super) fn election_started(&self, w: &mut World, i: usize) {
        let seen = w.nodes[i].machine.as_ref().map_or(0, |m| m.seen_term());
        let reached = self.has_live_majority(w, i);
        let node = &mut w.nodes[i];
        if seen != node.contact_term {
            node.contact = reached;
            node.contact_term = seen;
        } else {
            node.contact |= reached;
        }
    }

    /// I2 (a node declares a term once) and, in quorum mode, Q6 (only after reaching a
    /// live majority) when node `i` declares `epoch`.
    pub(super) fn declared(&self, w: &mut World, i: usize, epoch: Epoch) -> Result<(), Violation> {
        let id = self.config.ids[i];
        broken(check_declares_anew(
            id,
            w.now,
            w.nodes[i].declared,
            epoch.term,
        ))?;
        w.nodes[i].declared = epoch.term;
        if self.config.mode == Mode::Quorum && !w.nodes[i].contact {
            let explanation = format!(
                "raised the term to {} without ever reaching a live majority",
                epoch.term
            );
            return Err(Violation::new(
                Invariant::MajorityReached,
                id,
                w.now,
                explanation,
            ));
        }
        Ok(())
    }

    /// I8 when node `i` declares: if its election started in the prompt schedule, no
    /// live eligible node it asked may rank above it. Who it asked is who its transport
    /// and its leader's silence let it count as reachable (the model reports links only
    /// at a start, so a node that started during a partition holds a healed peer as
    /// down); the model's estimates are fixed.
    pub(super) fn check_rank(&self, w: &World, i: usize) -> Result<(), Violation> {
        let asked = match &w.prompt_elections {
            Some(asked) if !self.config.estimates.is_empty() => asked[i].1,
            _ => 0,
        };
        let Some(declarer) = w.nodes[i].machine.as_ref().filter(|_| asked & 0x80 != 0) else {
            return Ok(());
        };
        let rank = |m: &crate::protocol::Machine| (m.own_est(), m.id());
        let rivals = (0..self.n()).filter(|&j| asked & (1 << j) != 0 && self.up(w, j));
        let rivals = rivals.filter_map(|j| {
            let m = w.nodes[j].machine.as_ref()?;
            (!w.nodes[j].paused && m.view().eligible).then(|| rank(m))
        });
        broken(check_elected_by_data(
            declarer.id(),
            rank(declarer),
            w.now,
            rivals,
        ))
    }

    /// Marks every node that now reaches a live majority (Q6 bookkeeping).
    pub(super) fn note_contact(&self, w: &mut World) {
        for i in 0..self.n() {
            if self.has_live_majority(w, i) {
                w.nodes[i].contact = true;
            }
        }
    }

    /// I7 (one coordinator per term) and I6 (no other node still in office) when node
    /// `i` establishes itself in quorum mode; and that its own list lets it lead (a
    /// removed member, a learner or a witness never does: the machine's contract).
    pub(super) fn established(
        &self,
        w: &mut World,
        i: usize,
        epoch: Epoch,
    ) -> Result<(), Violation> {
        let id = self.config.ids[i];
        let own = w.nodes[i]
            .machine
            .as_ref()
            .and_then(|m| m.members().get(id));
        if !own.is_some_and(Member::may_lead) {
            let explanation = "took office though its own member list does not let it lead";
            return Err(Violation::new(
                Invariant::Protocol,
                id,
                w.now,
                explanation.to_string(),
            ));
        }
        broken(w.holders.check(id, w.now, epoch.term))?;
        let in_office = w.nodes.iter().enumerate().filter_map(|(j, other)| {
            let m = other.machine.as_ref().filter(|_| j != i)?;
            (m.role_at(w.now) == Role::Coordinator).then(|| InOffice {
                node: self.config.ids[j],
                epoch: m.view().epoch,
                lease_until: m.lease_until(),
            })
        });
        broken(check_alone_in_office(id, epoch, w.now, in_office))
    }

    /// Q4 for readers when a client asks node `i` who leads: it answers
    /// by src/protocol/machine/leader_query.rs, reaching the coordinator it follows if
    /// that one is up, not paused and on its side of any cut; a coordinator it names
    /// must read itself in office in that epoch now.
    pub(super) fn check_query(&self, w: &World, i: usize) -> Result<(), Violation> {
        let Some(machine) = w.nodes[i].machine.as_ref() else {
            return Ok(());
        };
        let ask = |leader| {
            let j = self.config.ids.iter().position(|&id| id == leader)?;
            let m = w.nodes[j].machine.as_ref()?;
            let reached = !w.nodes[j].paused && self.connected(w, i, j);
            reached.then(|| SelfReport {
                role: m.role_at(w.now),
                epoch: m.view().epoch,
            })
        };
        let Some(epoch) = machine.leader_answer(w.now, ask) else {
            return Ok(());
        };
        let named = self.config.ids.iter().position(|&id| id == epoch.leader);
        let in_office = named.and_then(|j| {
            let m = w.nodes[j].machine.as_ref()?;
            (m.role_at(w.now) == Role::Coordinator).then(|| InOffice {
                node: epoch.leader,
                epoch: m.view().epoch,
                lease_until: m.lease_until(),
            })
        });
        let asked = self.config.ids[i];
        broken(check_answer_in_office(asked, epoch, w.now, in_office))
    }
}
