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

use super::Spec;
use crate::postgres_rules::Tags;
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

/// Where a seed tags a member `nofailover`: the member's index and whether from the
/// start or from its node's next restart (`Member::tags_next`: the operator edited its
/// file), in half the seeds of three data members or more (with fewer, the only other
/// one would be the only one to lead), from a stream of its own. Never member 1 from
/// the start: the running cluster's first primary. A tag from a restart may come after
/// the member's standby acknowledged commits under the names that held it.
pub(super) fn draw_nofailover(seed: u64, spec: &Spec) -> Option<(usize, bool)> {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x51d4_8e0b_7c63_a2f9);
    if !spec.tags || !spec.nofailover || spec.members < 3 || rng.gen_bool(0.5) {
        return None;
    }
    let from_start = rng.gen_bool(0.5);
    let first = usize::from(from_start);
    Some((rng.gen_range(first..spec.members), from_start))
}

/// `tags` with `nofailover` set (a priority of its own would contradict it).
pub(super) fn never_leading(tags: Tags) -> Tags {
    Tags {
        nofailover: true,
        failover_priority: 1,
        ..tags
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
