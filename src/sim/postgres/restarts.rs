//! The operator's parameter changes during the faults, drawn with their own RNG so the
//! seeds recorded before keep their course when off (`Spec::restarts`), as the manager
//! obeys them between two looks (src/node/postgres/manager.rs, `obey`):
//!
//! - `bully pg reload`: the include file rewritten and reread; the server runs on.
//!   Refused while the server does not answer, kept for the next start while it does
//!   not run. Nothing changes for safety: it is logged and counted.
//! - `bully pg restart N` of a running server: one not leading (a standby, a primary
//!   out of office) is stopped, and the manager's next look starts it as a standby.
//!   The leading primary restarts in place (`restart_primary_in_place`): stopped for a
//!   few steps while its node sends its last (eligible) report on and its manager runs
//!   no look, then started as its data dir left it, a primary on its timeline, if the
//!   office it began in still holds. If that office ended meanwhile (another fault: a
//!   node stopped whole loses its lease, and its keeper's fence finds no server to
//!   stop) the server stays stopped for the next look, which rewinds it and starts it
//!   as a standby. The manager before that rule started it as a primary all the same:
//!   the sabotage `RestartIgnoresOffice`, two writable primaries at seed 277 (5 members).
//!
//! [`World::check_office_kept`] fails a run whose coordinator lost its office during a
//! restart in place with no other fault meanwhile; with the looks running through the
//! restart (the sabotage `RestartThroughLooks`) the silent server makes the node
//! ineligible and the office moves.

use super::decisions::Office;
use super::log::Event;
use super::server::State;
use super::stalls::leader_or_any;
use super::world::{InPlace, World};
use super::Sabotage;
use crate::protocol::NodeId;
use rand::seq::SliceRandom;
use rand::Rng;

/// The chance a fault step draws an order, in percent.
const ORDER_PERCENT: u32 = 3;
/// The longest restart in place, in steps.
const LONGEST: u64 = 3;

impl World {
    /// Every step: restarts in place that are due start their servers. During fault
    /// steps: maybe an order to a member whose manager takes one now.
    pub(super) fn draw_order(&mut self, faults: bool) {
        self.finish_restarts();
        if !faults || !self.spec.restarts || !self.restarts.rng.gen_ratio(ORDER_PERCENT, 100) {
            return;
        }
        let obeying: Vec<NodeId> = self
            .data_members()
            .filter(|m| self.obeys(m.id))
            .map(|m| m.id)
            .collect();
        if self.restarts.rng.gen_ratio(1, 3) {
            if let Some(&id) = obeying.choose(&mut self.restarts.rng) {
                self.reload(id);
            }
            return;
        }
        let running: Vec<NodeId> = obeying
            .into_iter()
            .filter(|&id| self.member(id).pg.as_ref().is_some_and(|d| d.running()))
            .collect();
        let leader = self.office.map(|h| h.leader);
        if let Some(id) = leader_or_any(leader, &running, &mut self.restarts.rng) {
            self.restart_server(id);
        }
    }

    /// Whether `id`'s manager takes an order now: it runs, and no order is under way.
    fn obeys(&self, id: NodeId) -> bool {
        let m = self.member(id);
        m.alive
            && m.stalled_until <= self.now
            && m.manager_stalled_until <= self.now
            && m.restart.is_none()
    }

    /// `bully pg reload`: nothing changes in the model; the answer depends on the server.
    fn reload(&mut self, id: NodeId) {
        let running = self.member(id).pg.as_ref().is_some_and(|d| d.running());
        let name = match (running, self.server_stalled(id)) {
            (_, true) => "bully pg reload refused (the server does not answer)",
            (false, _) => "bully pg reload kept for the next start (the server is stopped)",
            (true, false) => "bully pg reload",
        };
        self.order(name, id);
    }

    /// `bully pg restart N` of a running server: in place for the leading primary that
    /// answers, a stop otherwise (fast; killed after the timeout when it does not
    /// answer).
    fn restart_server(&mut self, id: NodeId) {
        let stalled = self.server_stalled(id);
        let primary = !stalled && self.member(id).pg.as_ref().is_some_and(|d| d.primary());
        let in_place = primary && matches!(self.office_of(id), Office::Leading { .. });
        self.signal_server(id, "bully pg restart");
        if let Some(d) = self.member_mut(id).pg.as_mut() {
            d.stop(!stalled);
        }
        self.reconcile_process(id);
        if !in_place {
            return self.order("bully pg restart (stopped, started as a standby)", id);
        }
        let restart = InPlace {
            until: self.now + self.restarts.rng.gen_range(1..=LONGEST),
            faults_before: self.faults_logged,
            sound: self.voting(id)
                && self.majority_votes()
                && self.office.is_some_and(|h| h.lease_end > self.now),
            token: self.office.map_or(0, |h| h.token),
        };
        self.member_mut(id).restart = Some(restart);
        self.order("bully pg restart (the leading primary, in place)", id);
    }

    /// The restarts in place that are due and whose node and manager run: within the
    /// office they began in, the server starts as its data dir left it, a primary
    /// (`start_server(None, false)`); out of it, it stays stopped (the sabotage
    /// `RestartIgnoresOffice`: started a primary all the same).
    fn finish_restarts(&mut self) {
        let now = self.now;
        let due: Vec<(NodeId, InPlace)> = self
            .data_members()
            .filter(|m| m.stalled_until <= now && m.manager_stalled_until <= now)
            .filter_map(|m| m.restart.filter(|r| r.until <= now).map(|r| (m.id, r)))
            .collect();
        for (id, restart) in due {
            let kept = self
                .office
                .is_some_and(|h| h.leader == id && h.token == restart.token);
            let starts = kept || self.spec.sabotage == Some(Sabotage::RestartIgnoresOffice);
            let m = self.member_mut(id);
            m.restart = None;
            if let Some(d) = m.pg.as_mut().filter(|d| starts && !d.running()) {
                d.state = State::Primary;
            }
            self.reconcile_process(id);
            let name = match (kept, starts) {
                (true, _) => "bully pg restart: the primary runs again in office",
                (false, true) => "bully pg restart: the primary runs again after its office ended",
                (false, false) => "bully pg restart: the office ended meanwhile, left stopped",
            };
            self.order(name, id);
        }
    }

    /// Whether `id`'s manager runs no look now: a restart in place is under way (the
    /// sabotage `RestartThroughLooks`: the looks run on, and find the server silent).
    pub(super) fn looks_held(&self, id: NodeId) -> bool {
        self.member(id).restart.is_some()
            && self.spec.sabotage != Some(Sabotage::RestartThroughLooks)
    }

    /// The office of `leader` ends (`why`): a failure if a restart in place of its
    /// primary is under way, its node was sound when it began, and no other fault came
    /// since (a failover the restart alone caused).
    pub(super) fn check_office_kept(&self, leader: NodeId, why: &str) -> Result<(), String> {
        match self.member(leader).restart {
            Some(r) if r.sound && r.faults_before == self.faults_logged => Err(format!(
                "failover during a restart in place: coordinator {leader}'s office ended \
                 ({why}) while `bully pg restart {leader}` restarted its primary, with no \
                 other fault meanwhile"
            )),
            _ => Ok(()),
        }
    }

    /// An order drawn: counted with the faults by name, logged as the operator's.
    fn order(&mut self, name: &'static str, id: NodeId) {
        *self.summary.faults.entry(name).or_default() += 1;
        self.event(Event::Operator(format!("{name} ({id})")));
    }
}
