//! `nofailover` in the simulator's world (src/sim/postgres/tags.rs draws it): the
//! check that such a member is never promoted, the count of promotions past its WAL
//! (one the promotion check did not reach), and the operator's remedy when the
//! cluster waits on it (docs/postgresql.md, "Tags").

use super::log::Event;
use super::world::World;
use crate::protocol::NodeId;

/// Steps after the heal the operator lets a coordinator wait to catch up from a
/// `nofailover` member before removing the tag.
const UNTAG_AFTER: u64 = 20;

impl World {
    /// The operator, as docs/postgresql.md says: a cluster without a primary long after
    /// the faults, while a `nofailover` member holds data, may wait on it for ever (it
    /// alone holds what the newest record vouches for, on a branch no one can stream
    /// from it: a coordinator catching up from it does not stream, or no member may
    /// lead at all); the member's tag is removed from its file and its node restarted.
    pub(super) fn untag_what_the_coordinator_waits_on(&mut self) {
        let Some(healed) = self.healed_at else {
            return;
        };
        let primary = self
            .data_members()
            .any(|m| m.pg.as_ref().is_some_and(|d| d.primary()));
        if self.now < healed + UNTAG_AFTER || primary {
            return;
        }
        let Some(id) = self
            .data_members()
            .find(|m| m.tags.never_leads() && m.pg.is_some())
            .map(|m| m.id)
        else {
            return;
        };
        let m = self.member_mut(id);
        m.tags.nofailover = false;
        m.tags.failover_priority = m.tags.failover_priority.max(1);
        m.fresh_manager();
        self.summary.untagged_nofailover += 1;
        self.event(Event::Operator(format!(
            "nofailover removed from {id}'s file; systemctl restart bully on {id}"
        )));
    }

    /// Fails a promotion of a member tagged `nofailover`, and counts one that passes
    /// over the WAL of such a member ahead of it.
    pub(super) fn check_nofailover_promotion(&mut self, id: NodeId) -> Result<(), String> {
        if self.member(id).tags.never_leads() {
            return Err(format!("node {id}, tagged nofailover, was promoted"));
        }
        let reading = self.reading();
        let own = self.member(id).pg.as_ref().map(|d| d.position(reading));
        let ahead = self.data_members().any(|m| {
            m.tags.never_leads()
                && m.pg
                    .as_ref()
                    .is_some_and(|d| d.running() && Some(d.position(reading)) > own)
        });
        if ahead {
            self.summary.promoted_past_nofailover += 1;
        }
        Ok(())
    }
}
