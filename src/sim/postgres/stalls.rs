//! A server that stops answering for a while while its node and manager run on: a
//! disk or CPU stall of the database host (a checkpoint, a bulk load or a base backup
//! flooding the disk; a busy CPU). Its manager's looks find it running but silent
//! (`Server::Unreachable`); it commits, streams and serves nothing meanwhile, and the
//! promotion check cannot read it. Drawn with its own RNG (`Spec::server_stalls`), so
//! the seeds recorded before keep their course when off.
//!
//! A stall shorter than the verdict's grace (`postgres_rules::UNANSWERED_LOOKS` looks
//! in a row, held by `Memory::verdict` for the manager and the simulator alike) must
//! cost the coordinator no office: on a busy database host one failover at most, and
//! none for a stall shorter than D (issue 49). [`World::check_resigned`] fails a run
//! whose coordinator resigned over such a stall; without the grace (the sabotage
//! `NoUnansweredGrace`) every stall of the primary's server is a failover.

use super::decisions::UNANSWERED_LOOKS;
use super::world::{ServerStall, World};
use crate::protocol::NodeId;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::Rng;

/// The chance a fault step stalls a server, in percent.
const STALL_PERCENT: u32 = 2;
/// The longest stall drawn, in looks: from shorter than the grace to well past it.
const LONGEST: u64 = 4;

/// One of `among` drawn with `rng`, `leader` more often when it is among them: the
/// primary's host is where a stall or a restart costs most (src/sim/postgres/restarts.rs
/// draws its restarts so too).
pub(super) fn leader_or_any(
    leader: Option<NodeId>,
    among: &[NodeId],
    rng: &mut SmallRng,
) -> Option<NodeId> {
    match leader.filter(|l| among.contains(l)) {
        Some(l) if rng.gen_bool(0.6) => Some(l),
        _ => among.choose(rng).copied(),
    }
}

impl World {
    /// During fault steps: maybe a running server stalls, the primary's more often.
    pub(super) fn draw_server_stall(&mut self, faults: bool) {
        if !faults || !self.spec.server_stalls || !self.stalls.rng.gen_ratio(STALL_PERCENT, 100) {
            return;
        }
        let running: Vec<NodeId> = self
            .data_members()
            .filter(|m| m.alive && m.pg.as_ref().is_some_and(|d| d.running()))
            .map(|m| m.id)
            .collect();
        let leader = self.office.map(|h| h.leader);
        let Some(id) = leader_or_any(leader, &running, &mut self.stalls.rng) else {
            return;
        };
        let looks = self.stalls.rng.gen_range(1..=LONGEST);
        let now = self.now;
        // A server stalled already stays so, the longer of the two.
        let stall = match self
            .member(id)
            .server_stall
            .filter(|_| self.server_stalled(id))
        {
            Some(s) => ServerStall {
                until: s.until.max(now + looks),
                ..s
            },
            None => ServerStall {
                until: now + looks,
                eligible_before: self.member(id).engine.memory().sent_verdict == Some(true),
            },
        };
        self.member_mut(id).server_stall = Some(stall);
        let name = match looks < u64::from(UNANSWERED_LOOKS) {
            true => "server stalled (shorter than the grace)",
            false => "server stalled",
        };
        self.fault(name, id);
    }

    /// Whether `id`'s server runs but does not answer now.
    pub(super) fn server_stalled(&self, id: NodeId) -> bool {
        let m = self.member(id);
        m.server_stall.is_some_and(|s| s.until > self.now)
            && m.pg.as_ref().is_some_and(|d| d.running())
    }

    /// The coordinator `leader` resigns as ineligible: a failure if its server's stall
    /// has lasted fewer looks than the verdict holds through, and it was eligible
    /// before (a failover storm on a busy host).
    pub(super) fn check_resigned(&self, leader: NodeId) -> Result<(), String> {
        let m = self.member(leader);
        match m.server_stall {
            Some(s) if self.server_stalled(leader) && s.eligible_before => {
                // Its last look found the server silent (not stopped, say, which is
                // another reason to resign), fewer times in a row than the grace.
                let missed = m.engine.memory().unanswered;
                match (1..UNANSWERED_LOOKS).contains(&missed) {
                    true => Err(format!(
                        "failover storm: coordinator {leader} resigned after its server \
                         missed {missed} look(s), fewer than the {UNANSWERED_LOOKS} its \
                         verdict holds through"
                    )),
                    false => Ok(()),
                }
            }
            _ => Ok(()),
        }
    }
}
