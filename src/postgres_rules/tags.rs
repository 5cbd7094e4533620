//! A member's tags (`[postgres.tags]` in its file): Patroni's per-node tags, which say
//! what this host's server may be used for. They belong to the host (each file says
//! its own), and each member reports them with its server (`PgState::tags`), so the
//! primary knows the others'.
//!
//! - `failover_priority` (1 to 15, default 1): among servers whose WAL ranks alike in
//!   the election estimate, the higher priority leads (then the higher ID). The WAL
//!   comes first: est(S) is still the first key where the data differs
//!   ([`election_rank`]).
//! - `nosync`: not named in `synchronous_standby_names`, so it never acknowledges,
//!   unless too few others are left for k at its full value
//!   (`Cluster::sync_candidates`).
//! - `noloadbalance`: `/replica` answers 503 (Patroni's: load balancers leave it out).
//!
//! - `clonefrom`: a member without data clones from this one's standby, not the
//!   primary, while it streams from the primary (`Cluster::clone_sources`).
//! - `nofailover` (or `failover_priority = 0`, Patroni's spelling of it): never
//!   eligible, never promoted, and left out of `synchronous_standby_names` while the
//!   others suffice for k; a coordinator behind it only streams from it before it
//!   promotes (src/postgres_rules.rs `catch_up_source`).

use super::Position;
use serde::{Deserialize, Serialize};

/// The highest `failover_priority`: it takes the estimate's lowest 4 bits.
pub const MAX_FAILOVER_PRIORITY: u8 = 15;

/// Bits of [`election_rank`] that hold the branch.
const BRANCH_BITS: u32 = 16;
/// Bits of [`election_rank`] that hold the failover priority (the lowest).
const PRIORITY_BITS: u32 = 4;

/// One member's tags, as its file sets them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tags {
    /// Patroni's "never lead": the node is never eligible and its server never
    /// promoted (a backup or reporting host that votes).
    #[serde(default)]
    pub nofailover: bool,
    /// 1 to 15: among servers whose WAL ends in the same 16 bytes, the higher priority
    /// is elected (then the higher ID); the WAL always decides first. 0 is Patroni's
    /// `nofailover`.
    #[serde(default = "Tags::default_priority")]
    pub failover_priority: u8,
    /// Not named in `synchronous_standby_names`, so it never acknowledges commits;
    /// named all the same where the other members are too few for k at its full value
    /// (the durability rule comes first).
    #[serde(default)]
    pub nosync: bool,
    /// `/replica`, `/read-only`, `/quorum` and `/async` answer 503 on this replica, so
    /// load balancers leave it out (a backup or reporting host).
    #[serde(default)]
    pub noloadbalance: bool,
    /// Patroni's "clone from this member": a member without data copies this one's
    /// standby while it streams from the primary, sparing the primary the copy.
    #[serde(default)]
    pub clonefrom: bool,
}

impl Default for Tags {
    fn default() -> Tags {
        Tags {
            nofailover: false,
            failover_priority: Tags::default_priority(),
            nosync: false,
            noloadbalance: false,
            clonefrom: false,
        }
    }
}

impl Tags {
    /// Patroni's default priority.
    fn default_priority() -> u8 {
        1
    }

    /// Whether these tags say the member never leads: `nofailover`, or Patroni's
    /// `failover_priority = 0`.
    pub fn never_leads(&self) -> bool {
        self.nofailover || self.failover_priority == 0
    }

    /// What is wrong with these tags, if anything: a priority past the estimate's bits,
    /// or `nofailover` beside a priority above the default (they contradict).
    pub fn problem(&self) -> Option<String> {
        if self.nofailover && self.failover_priority > Tags::default_priority() {
            return Some(format!(
                "nofailover = true and failover_priority = {} contradict each other: a \
                 member that never leads has no priority; drop one of them",
                self.failover_priority
            ));
        }
        (self.failover_priority > MAX_FAILOVER_PRIORITY).then(|| {
            format!(
                "failover_priority {} is above {MAX_FAILOVER_PRIORITY}: priorities order \
                 servers whose WAL ranks alike, and 1 to {MAX_FAILOVER_PRIORITY} are kept",
                self.failover_priority
            )
        })
    }

    /// The tag filters of Patroni's `/replica?tag_<name>=<value>`: whether every
    /// `(name, value)` given matches these tags (a tag not named here never matches).
    pub fn matches<'a>(&self, filters: impl IntoIterator<Item = (&'a str, &'a str)>) -> bool {
        filters.into_iter().all(|(name, wanted)| {
            let value = match name {
                "nofailover" => self.never_leads().to_string(),
                "failover_priority" => self.failover_priority.to_string(),
                "nosync" => self.nosync.to_string(),
                "noloadbalance" => self.noloadbalance.to_string(),
                "clonefrom" => self.clonefrom.to_string(),
                _ => return false,
            };
            value.eq_ignore_ascii_case(wanted.trim())
        })
    }
}

/// A [`Position`] and a failover priority packed in a u64 as the estimate est(S)
/// elections compare (docs/design.md#elected-by-data-est): the branch in the top 16 bits
/// (terms past 65,535 compare as equal), the WAL position in 16-byte steps in the next
/// 44 (up to 256 TiB), the priority in the lowest 4. So the data decides first, and the
/// priority only between servers whose WAL ends in the same 16 bytes. Coarse only for
/// elections: the promotion check compares positions exactly, and a coordinator behind
/// by a few bytes resigns to the fresher server's node.
pub fn election_rank(position: Position, priority: u8) -> u64 {
    let branch = position.branch.min((1 << BRANCH_BITS) - 1);
    let step_bits = 64 - BRANCH_BITS - PRIORITY_BITS;
    let steps = (position.lsn >> 4).min((1 << step_bits) - 1);
    let priority = u64::from(priority.min(MAX_FAILOVER_PRIORITY));
    branch << (64 - BRANCH_BITS) | steps << PRIORITY_BITS | priority
}

/// Whether two estimates ([`election_rank`]) hold WAL that ranks alike: they differ in
/// the failover priority at most, so the priority (then the ID) decides between them.
pub fn ranks_alike(a: u64, b: u64) -> bool {
    a >> PRIORITY_BITS == b >> PRIORITY_BITS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(branch: u64, lsn: u64) -> Position {
        Position { branch, lsn }
    }

    #[test]
    fn the_data_ranks_first_and_the_priority_breaks_ties() {
        assert!(election_rank(pos(3, 10), 0) > election_rank(pos(2, 1 << 40), 15));
        assert!(election_rank(pos(2, 32), 1) > election_rank(pos(2, 16), 15));
        assert!(election_rank(pos(2, 32), 3) > election_rank(pos(2, 32), 2));
        assert!(ranks_alike(
            election_rank(pos(2, 32), 1),
            election_rank(pos(2, 40), 3)
        ));
        assert!(!ranks_alike(
            election_rank(pos(2, 32), 1),
            election_rank(pos(2, 48), 1)
        ));
        assert!(
            election_rank(pos(2, 33), 1) < election_rank(pos(2, 32), 2),
            "one step"
        );
        assert_eq!(
            election_rank(pos(1, u64::MAX), 1),
            election_rank(pos(1, u64::MAX - 16), 1),
            "past 256 TiB positions compare as equal"
        );
        assert_eq!(
            election_rank(pos(u64::MAX, 0), 1),
            election_rank(pos(1 << 16, 0), 1)
        );
        assert_eq!(
            election_rank(pos(1, 0), 200),
            election_rank(pos(1, 0), 15),
            "priorities saturate (the config refuses them)"
        );
    }

    #[test]
    fn tags_read_as_patroni_writes_them() {
        let tags: Tags = toml::from_str("nosync = true\nfailover_priority = 3").unwrap();
        assert!(tags.nosync && !tags.noloadbalance);
        assert_eq!(tags.failover_priority, 3);
        assert_eq!(tags.problem(), None);
        assert_eq!(Tags::default().failover_priority, 1);
        assert_eq!(Tags::default().problem(), None);
        assert!(toml::from_str::<Tags>("nosnyc = true").is_err(), "a typo");
        let clonefrom: Tags = toml::from_str("clonefrom = true").unwrap();
        assert!(clonefrom.clonefrom && clonefrom.problem().is_none());
        for never in ["nofailover = true", "failover_priority = 0"] {
            let tags: Tags = toml::from_str(never).unwrap();
            assert!(tags.never_leads() && tags.problem().is_none(), "{never}");
            assert!(tags.matches([("nofailover", "true")]), "{never}");
        }
        let both: Tags = toml::from_str("nofailover = true\nfailover_priority = 3").unwrap();
        assert!(both.problem().unwrap().contains("contradict"));
        assert!(!Tags::default().never_leads());
        let high = Tags {
            failover_priority: 16,
            ..Tags::default()
        };
        assert!(high.problem().unwrap().contains("above 15"));
    }

    #[test]
    fn tag_filters_match_every_named_tag() {
        let tags = Tags {
            nosync: true,
            failover_priority: 3,
            ..Tags::default()
        };
        assert!(tags.matches([]));
        assert!(tags.matches([("nosync", "true"), ("failover_priority", "3")]));
        assert!(tags.matches([("nosync", "True")]));
        assert!(!tags.matches([("nosync", "false")]));
        assert!(!tags.matches([("clonefrom", "true")]));
        assert!(
            !tags.matches([("zone", "a")]),
            "an unknown tag never matches"
        );
    }
}
