//! Members' tags (`[postgres.tags]`, src/postgres_rules/tags.rs), drawn per seed from a
//! stream of their own (`Spec::tags`), so a seed recorded before keeps its course when
//! they are off. In half the seeds every member has the defaults; in the rest each data
//! member's `failover_priority` is drawn from 1 to 3, one data member may be tagged
//! `nosync`, and one `clonefrom`.
//!
//! What the checks hold: every acknowledged commit survives as before (a primary leaves
//! `nosync` members out of its names only while k keeps its full value,
//! `Cluster::sync_candidates`), and a `nosync` member is never named while the others
//! suffice. The priority enters each member's estimate (`election_rank`), so it changes
//! who wins elections between servers alike (tests/postgres_sim.rs counts it). A member
//! without data clones from a `clonefrom` standby that streams from the primary, and
//! the check of each clone's source holds it to the primary's history.

use super::log::Event;
use super::world::{Member, World};
use super::Spec;
use crate::postgres_rules::{SyncRecord, SyncView, Tags};
use crate::protocol::NodeId;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Each data member's tags for `seed`, members 1 to `spec.members` in order.
pub(super) fn draw(seed: u64, spec: &Spec) -> Vec<Tags> {
    let mut tags = vec![Tags::default(); spec.members];
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x7a95_1c0d_3e2f_4b61);
    if !spec.tags || rng.gen_bool(0.5) {
        return tags;
    }
    for t in tags.iter_mut() {
        t.failover_priority = rng.gen_range(1..=3);
    }
    if rng.gen_bool(0.5) {
        let nosync = rng.gen_range(0..spec.members);
        tags[nosync].nosync = true;
    }
    // From a stream of its own, so the tags above keep their draws.
    let mut clonefrom = SmallRng::seed_from_u64(seed ^ 0x3c1f_0e5d_22a7_9b14);
    if clonefrom.gen_bool(0.5) {
        let source = clonefrom.gen_range(0..spec.members);
        tags[source].clonefrom = true;
    }
    tags
}

/// One member tagged `nofailover` in half the seeds of three data members or more
/// (with fewer, the only other one would be the only one to lead), from a stream of its
/// own: from the start (never member 1, the running cluster's first primary), or from
/// its node's next restart (`Member::tags_next`: the operator edited its file), which
/// may come after its standby acknowledged commits under the names that held it.
pub(super) fn draw_nofailover(seed: u64, spec: &Spec, members: &mut [Member]) {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x51d4_8e0b_7c63_a2f9);
    if !spec.tags || !spec.nofailover || spec.members < 3 || rng.gen_bool(0.5) {
        return;
    }
    let from_start = rng.gen_bool(0.5);
    let first = usize::from(from_start);
    let m = &mut members[rng.gen_range(first..spec.members)];
    let tags = Tags {
        nofailover: true,
        failover_priority: 1,
        ..m.tags
    };
    match from_start {
        true => m.tags = tags,
        false => m.tags_next = Some(tags),
    }
}

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

    /// The sabotage `PassesOverByTagAlone`: the record read as if it named no
    /// `nofailover` member among its standbys, so the promotion check passes over one
    /// by its tag (and not being the record's primary) alone.
    pub(super) fn without_nofailover(&self, sync: SyncView) -> SyncView {
        let never: Vec<NodeId> = self
            .data_members()
            .filter(|m| m.tags.never_leads())
            .map(|m| m.id)
            .collect();
        match sync {
            SyncView::Read(Some(record)) => SyncView::Read(Some(SyncRecord {
                standbys: record
                    .standbys
                    .into_iter()
                    .filter(|m| !never.contains(m))
                    .collect(),
                ..record
            })),
            view => view,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::postgres_rules::Synchronous;

    #[test]
    fn off_draws_the_defaults_and_on_draws_each_tag_somewhere() {
        let off = Spec {
            tags: false,
            ..Spec::new(3, Synchronous::Quorum)
        };
        assert!((0..50).all(|s| draw(s, &off).iter().all(|t| *t == Tags::default())));
        let on = Spec::new(3, Synchronous::Quorum);
        let drawn: Vec<Tags> = (0..200).flat_map(|s| draw(s, &on)).collect();
        assert!(drawn.iter().any(|t| t.nosync));
        assert!(drawn.iter().any(|t| t.failover_priority == 3));
        assert!(drawn.iter().any(|t| t.clonefrom));
        assert!(drawn.iter().all(|t| t.problem().is_none()));
    }
}
