//! The durability rule (docs/design.md#the-durability-rule), pure: which servers may
//! be promoted without losing an acknowledged commit, kept as cluster state.
//!
//! A primary acknowledges a commit once it is on `k` of the standbys it names. The
//! promotion check reaches a majority, which meets every such set only while `k` is
//! [`synchronous_count`](super::synchronous_count); a primary that acknowledges with
//! fewer (its standbys do not stream) keeps commits the majority may not hold. So
//! before it lowers `k` it has a majority of the voters store a [`SyncRecord`] saying
//! so (`alone`: Patroni's `/sync`, in bully's own members), and a coordinator promotes
//! only a server that holds what the newest record it read from a majority allows
//! ([`SyncRecord::covered_by`]): after an `alone` record, the record's primary's WAL.
//! A record that lets the majority rule count again (`alone` false) is stored only once
//! `k` named standbys have flushed past the primary's WAL at the moment its names went
//! back to full, so the commits it acknowledged alone are on `k + 1` servers too, as
//! any later one (Patroni waits for a new synchronous standby to catch up the same
//! way).
//!
//! The record also carries the cluster's identity, the PostgreSQL system identifier
//! set at `initdb`: no second `initdb` for a cluster whose record names one, and no
//! server of another system is promoted, rewound onto, or cloned from.

use crate::protocol::NodeId;
use serde::{Deserialize, Serialize};
use std::fmt;

/// How the primary of one office acknowledges commits: any `k` of `standbys`, and with
/// `alone` possibly on its own server only. Ordered by `(token, seq)`: the office's
/// fencing token, then the record's number within the office.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SyncRecord {
    /// The fencing token of the office whose primary wrote it.
    pub token: u64,
    /// Counts the records one office writes, from 1.
    pub seq: u64,
    /// The member whose server was the primary.
    pub primary: NodeId,
    /// How many of `standbys` each acknowledged commit is on.
    pub k: usize,
    /// The standbys that may acknowledge (named under their own names), sorted.
    pub standbys: Vec<NodeId>,
    /// PostgreSQL's system identifier of the cluster (0: not known yet).
    pub system_id: u64,
    /// The primary may acknowledge commits no majority of servers holds: only a server
    /// holding its WAL may be promoted.
    pub alone: bool,
}

impl SyncRecord {
    /// Whether this record replaces `other`: a later office, or a later record of the
    /// same office.
    pub fn supersedes(&self, other: &SyncRecord) -> bool {
        (self.token, self.seq) > (other.token, other.seq)
    }

    /// Whether every commit acknowledged under this record is on one of `holders`
    /// (servers the candidate holds at least the WAL of, itself included) beyond what
    /// the majority rule already gives: after an `alone` record, only if the primary is
    /// among them.
    pub fn covered_by(&self, holders: &[NodeId]) -> bool {
        !self.alone || holders.contains(&self.primary)
    }

    /// The newest of `records` (`None` when there is none).
    pub fn newest<'a>(records: impl IntoIterator<Item = &'a SyncRecord>) -> Option<SyncRecord> {
        records
            .into_iter()
            .fold(None::<&SyncRecord>, |best, r| match best {
                Some(b) if !r.supersedes(b) => Some(b),
                _ => Some(r),
            })
            .cloned()
    }
}

impl fmt::Display for SyncRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let standbys: Vec<String> = self.standbys.iter().map(|s| s.to_string()).collect();
        write!(
            f,
            "office {} record {}: primary {}, any {} of [{}]{}",
            self.token,
            self.seq,
            self.primary,
            self.k,
            standbys.join(", "),
            match self.alone {
                true => ", acknowledging without a majority",
                false => "",
            }
        )?;
        if self.system_id != 0 {
            write!(f, ", system {}", self.system_id)?;
        }
        Ok(())
    }
}

/// What a coordinator about to promote (or to run `initdb`) read of the records.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum SyncView {
    /// Fewer than a majority of the voters answered: nothing is known for sure.
    #[default]
    Unread,
    /// The newest record among a majority of the voters (`None`: none of them keeps
    /// one, a cluster that never committed one).
    Read(Option<SyncRecord>),
}

impl SyncView {
    /// The newest record read, if a majority answered and one keeps one.
    pub fn record(&self) -> Option<&SyncRecord> {
        match self {
            SyncView::Read(record) => record.as_ref(),
            SyncView::Unread => None,
        }
    }

    /// The cluster's system identifier as the records say (0: none says).
    pub fn system_id(&self) -> u64 {
        self.record().map_or(0, |r| r.system_id)
    }
}

/// Why a coordinator may not promote its server under the newest record, if it may not:
/// `holders` are itself and the servers it reached and is not behind.
pub fn uncovered(view: &SyncView, holders: &[NodeId]) -> Option<String> {
    match view {
        SyncView::Unread => Some(
            "fewer than a majority of the members answered with their synchronous record".into(),
        ),
        SyncView::Read(None) => None,
        SyncView::Read(Some(record)) if record.covered_by(holders) => None,
        SyncView::Read(Some(record)) => Some(format!(
            "the last committed synchronous set ({record}) says node {}'s server may hold \
             acknowledged commits no other holds, and it was not reached; the cluster waits \
             rather than lose them (`bully pg failover --to N --accept-loss` promotes \
             anyway)",
            record.primary
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(token: u64, seq: u64, k: usize, standbys: &[NodeId]) -> SyncRecord {
        SyncRecord {
            token,
            seq,
            primary: 1,
            k,
            standbys: standbys.to_vec(),
            system_id: 7,
            alone: false,
        }
    }

    #[test]
    fn a_record_alone_on_its_primary_is_covered_only_by_the_primary() {
        let alone = SyncRecord {
            alone: true,
            ..record(3, 1, 0, &[])
        };
        assert!(!alone.covered_by(&[2, 3]));
        assert!(alone.covered_by(&[1]));
        assert!(
            record(3, 1, 1, &[2, 3]).covered_by(&[3]),
            "the majority rule rules"
        );
    }

    #[test]
    fn a_later_office_supersedes_and_the_newest_is_picked() {
        let a = record(3, 9, 1, &[2]);
        let b = record(4, 1, 0, &[]);
        assert!(b.supersedes(&a) && !a.supersedes(&b) && !a.supersedes(&a));
        assert_eq!(SyncRecord::newest([&a, &b, &a]), Some(b.clone()));
        assert_eq!(SyncRecord::newest([]), None);
    }

    #[test]
    fn an_unread_view_or_an_uncovered_record_says_why() {
        assert!(uncovered(&SyncView::Unread, &[1]).is_some());
        assert!(uncovered(&SyncView::Read(None), &[2]).is_none());
        let alone = SyncRecord {
            alone: true,
            ..record(3, 1, 0, &[])
        };
        let why = uncovered(&SyncView::Read(Some(alone)), &[2]).unwrap();
        assert!(
            why.contains("node 1") && why.contains("accept-loss"),
            "{why}"
        );
    }
}
