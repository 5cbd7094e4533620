//! The operator, after the faults end: what the decisions leave to a person reading
//! `bully status --cluster`, done as the manual says (docs/postgresql.md): `bully pg
//! reinit N` for a member whose data dir is gone though it held data, or that holds
//! another cluster's data (as the member knows it, or as the coordinator's records
//! show it); and `bully pg failover --to N --accept-loss` only when no
//! member's data can satisfy the newest synchronous record any more (its holders'
//! data dirs were wiped: those commits are destroyed by the fault, not lost by the
//! decisions), and every member with data shows its position; what it then accepts to
//! lose are the commits acknowledged under that record (a copy of one elsewhere may
//! rank below the server promoted: a standby that streamed the record's primary's
//! timeline without learning its branch, seed 18028); and, with no one leading, restarting the node of a member whose manager
//! gave up (its rewinds failed with `reinit_on_failed_rewind` off: the operator fixed
//! what failed them); and, when the coordinator has long waited to catch up from a
//! `nofailover` member its standby cannot stream from, removing that member's tag
//! (src/sim/postgres/tags.rs).

use super::decisions::foreign;
use super::log::Event;
use super::world::World;
use crate::postgres_rules::Office;
use crate::protocol::NodeId;

impl World {
    /// One round of the operator's work (each step after the heal).
    pub(super) fn operate(&mut self) {
        let ids: Vec<NodeId> = self.data_members().map(|m| m.id).collect();
        // The cluster's identity as `bully status --cluster` shows the coordinator's
        // records, beside each member's system identifier: a member that never learnt
        // it cannot call a stranger's volume foreign itself (seeds 2011 and 1500 of
        // the taken-over start).
        let identity = self
            .office
            .map_or(0, |h| self.sync_view(h.leader).system_id());
        for id in ids {
            let m = self.member(id);
            if !m.alive {
                continue;
            }
            let gone = m.pg.is_none() && m.unmounted.is_none() && m.held;
            // A data dir its own initdb made is replaced by the decisions, as
            // `bully status` says: the operator leaves it to them.
            let made_here = m.pg.as_ref().is_some_and(|d| m.made == Some(d.system_id));
            let stranger =
                m.pg.as_ref()
                    .is_some_and(|d| identity != 0 && d.system_id != identity);
            let other = m.pg.is_some()
                && !made_here
                && (stranger || foreign(&self.cluster_for(id)).is_some());
            if gone || other {
                let m = self.member_mut(id);
                m.pg = None;
                m.held = false;
                self.event(Event::Operator(format!("bully pg reinit {id}")));
            }
        }
        self.untag_what_the_coordinator_waits_on();
        let Some(h) = self.office else {
            for id in self.data_members().map(|m| m.id).collect::<Vec<_>>() {
                if self.member(id).engine.memory().out.is_some() {
                    self.member_mut(id).fresh_manager();
                    self.event(Event::Operator(format!("systemctl restart bully on {id}")));
                }
            }
            return;
        };
        if !matches!(self.office_of(h.leader), Office::Leading { .. }) {
            return;
        }
        let with_data: Vec<NodeId> = self
            .data_members()
            .filter(|m| m.pg.is_some() || m.unmounted.is_some())
            .map(|m| m.id)
            .collect();
        // As `bully status --cluster` shows it: the operator overrides only once every
        // member with data reports its position to the coordinator, so none of them
        // holds commits the promotion would pass over.
        let every_position_seen = self
            .peers_of(h.leader)
            .iter()
            .all(|p| p.wal.is_some() || self.member(p.id).pg.is_none());
        let record = self.sync_view(h.leader).record().cloned();
        let hopeless = every_position_seen
            && record
                .as_ref()
                .is_some_and(|record| !record.covered_by(&with_data));
        if hopeless && self.member(h.leader).engine.memory().accept_loss != Some(h.token) {
            // What the flag accepts: the commits acknowledged under that record, which
            // it no longer vouches for (a copy elsewhere may rank below the promoted).
            let overridden = record.map(|r| r.token);
            for a in self.acked.iter_mut().filter(|a| a.alone_in == overridden) {
                a.accepted = true;
            }
            self.member_mut(h.leader).engine.accept_loss_in(h.token);
            let words = format!("bully pg failover --to {} --accept-loss", h.leader);
            self.event(Event::Operator(words));
        }
    }
}
