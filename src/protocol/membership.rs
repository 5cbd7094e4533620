//! The member list as replicated state: who is in the cluster, who votes, who may lead,
//! and how one configuration is ordered against another (docs/design.md#membership).
//!
//! A configuration is identified by a [`ConfigId`]: the epoch of the coordinator that
//! wrote it (its *stamp*), then a version. Ordered stamp first, like Raft orders logs by
//! the term of their last entry: a coordinator that changes the list first re-writes
//! the list it has under its own epoch and has a majority store that, so every node that
//! stored it refuses a candidate still holding a list written under an older epoch (the
//! up-to-date rule of `machine/membership.rs`). Without that step, two coordinators in a
//! row could each add a different member to a list of even size and leave two disjoint
//! majorities (Ongaro's single-server change bug).
//!
//! The list carries each member's address as an opaque string: the machine never reads
//! it, but a node that learns of a new member must know where to dial it.

use super::epoch::{Epoch, NodeId};
use super::settings::{ClusterSettings, SettingsBeforePg, SettingsBeforeStandbyCluster};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;

/// Orders configurations: by the epoch of the coordinator that wrote it, then by
/// version. `stamp: None` is a list seeded from a config file, never yet confirmed by a
/// coordinator; every stamped list is newer than every seeded one.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
pub struct ConfigId {
    pub stamp: Option<Epoch>,
    pub version: u64,
}

impl fmt::Display for ConfigId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.stamp {
            Some(epoch) => write!(f, "v{} (written under {epoch})", self.version),
            None => write!(f, "v{} (from the config files)", self.version),
        }
    }
}

/// What a member does once it votes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Seat {
    /// Votes, acks and may lead.
    Voter,
    /// Votes and acks, never leads.
    Witness,
}

/// One member of a configuration.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Member {
    pub id: NodeId,
    pub seat: Seat,
    /// A learner follows heartbeats but neither votes nor counts for a majority nor
    /// leads; it takes its seat once it has caught up with the term and the list.
    pub learner: bool,
    /// Where the member listens (`host:port`), opaque to the protocol.
    pub addr: String,
}

impl Member {
    /// Whether this member's votes and acks count toward majorities.
    pub fn votes(&self) -> bool {
        !self.learner
    }

    /// Whether this member may lead.
    pub fn may_lead(&self) -> bool {
        !self.learner && self.seat == Seat::Voter
    }
}

/// A configuration: its identity, its members (this node included, ascending by ID) and
/// the cluster settings they live by (docs/design.md#cluster-settings).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Membership {
    pub id: ConfigId,
    pub members: Vec<Member>,
    /// `None` only in a list stored before the settings were cluster state: its holder
    /// lives by its config file's until a coordinator writes the next list, which
    /// always carries them.
    pub settings: Option<ClusterSettings>,
}

/// A list as stored before the settings were part of it (decoded only to upgrade a
/// store in place, src/storage/mod.rs).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ListBeforeSettings {
    pub id: ConfigId,
    pub members: Vec<Member>,
}

impl From<ListBeforeSettings> for Membership {
    fn from(old: ListBeforeSettings) -> Membership {
        Membership {
            id: old.id,
            members: old.members,
            settings: None,
        }
    }
}

/// A list as stored before `postgres.standby_cluster` was one of the settings (decoded
/// only to upgrade a store in place, src/storage/mod.rs).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ListBeforeStandbyCluster {
    pub id: ConfigId,
    pub members: Vec<Member>,
    pub settings: Option<SettingsBeforeStandbyCluster>,
}

impl From<ListBeforeStandbyCluster> for Membership {
    fn from(old: ListBeforeStandbyCluster) -> Membership {
        Membership {
            id: old.id,
            members: old.members,
            settings: old.settings.map(ClusterSettings::from),
        }
    }
}

/// A list as stored before PostgreSQL's parameters were part of the settings (decoded
/// only to upgrade a store in place, src/storage/mod.rs).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ListBeforePgSettings {
    pub id: ConfigId,
    pub members: Vec<Member>,
    pub settings: Option<SettingsBeforePg>,
}

impl From<ListBeforePgSettings> for Membership {
    fn from(old: ListBeforePgSettings) -> Membership {
        Membership {
            id: old.id,
            members: old.members,
            settings: old.settings.map(ClusterSettings::from),
        }
    }
}

/// One change an operator asks for. Each moves at most one member in or out of the
/// voting set, so any majority of the list before and any majority after intersect.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// A new member, as a learner that takes `seat` once it has caught up.
    Add {
        id: NodeId,
        addr: String,
        seat: Seat,
    },
    /// A member leaves the list.
    Remove { id: NodeId },
    /// A member (one whose disk was lost) loses its vote and becomes a learner again; it
    /// gets its seat back once it has caught up.
    Replace { id: NodeId },
    /// A caught-up learner takes its seat (the coordinator does this on its own).
    Promote { id: NodeId },
    /// `bully config set`: each `(key, value)` set on the cluster settings the
    /// coordinator holds (`ClusterSettings::with_all`), so an edit changes only the keys
    /// it names, whichever member it was asked of. Appended last: variants are encoded
    /// by position.
    Settings { set: Vec<(String, String)> },
}

impl Change {
    /// The member this change is about.
    pub fn subject(&self) -> NodeId {
        match self {
            Change::Add { id, .. }
            | Change::Remove { id }
            | Change::Replace { id }
            | Change::Promote { id } => *id,
            Change::Settings { .. } => 0,
        }
    }

    /// Whether this change is about the settings, not a member.
    pub fn is_settings(&self) -> bool {
        matches!(self, Change::Settings { .. })
    }
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::Add { id, addr, seat } => {
                let what = match seat {
                    Seat::Voter => "member",
                    Seat::Witness => "witness",
                };
                write!(f, "add {what} {id} at {addr}")
            }
            Change::Remove { id } => write!(f, "remove {id}"),
            Change::Replace { id } => write!(f, "replace {id}"),
            Change::Promote { id } => write!(f, "promote learner {id}"),
            Change::Settings { set } => {
                let pairs: Vec<String> = set.iter().map(|(k, v)| format!("{k}={v}")).collect();
                write!(f, "config set {}", pairs.join(" "))
            }
        }
    }
}

/// Why a change cannot be applied to a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeRefused {
    /// Only the coordinator changes the list.
    NotCoordinator,
    /// The previous change is not yet stored by a majority of the lists before and after
    /// it: one change at a time.
    ChangeInProgress,
    /// Add: the ID is already a member.
    AlreadyMember,
    /// Remove, replace, promote: the ID is not a member.
    NotAMember,
    /// The coordinator does not remove or replace itself: it hands over first.
    IsCoordinator,
    /// Promote: the member is not a learner.
    NotALearner,
    /// The change would leave no member that may lead, or no voter at all.
    NoLeaderLeft,
    /// A learner is still catching up; one learner at a time.
    LearnerPending,
    /// Settings: the edit does not apply to the settings the coordinator holds (an
    /// unknown key, or timing the algorithm cannot run on). Appended last.
    BadSettings,
}

impl fmt::Display for ChangeRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ChangeRefused::NotCoordinator => "this node is not the coordinator",
            ChangeRefused::ChangeInProgress => {
                "another membership change is in progress; one change at a time \
                 (wait until `bully member list` shows it committed)"
            }
            ChangeRefused::AlreadyMember => "that ID is already a member",
            ChangeRefused::NotAMember => "that ID is not a member",
            ChangeRefused::IsCoordinator => {
                "that node is the coordinator; it hands over first (`bully step-down`), \
                 then ask again"
            }
            ChangeRefused::NotALearner => "that member is not a learner",
            ChangeRefused::NoLeaderLeft => "the change would leave no member that may lead",
            ChangeRefused::LearnerPending => {
                "a learner is still catching up; one new member at a time"
            }
            ChangeRefused::BadSettings => {
                "the edit does not apply to the cluster's settings (see `bully config show`; \
                 the timing must keep timing.suspect_after_ms at least 3 x \
                 timing.heartbeat_ms)"
            }
        })
    }
}

/// The member list a node starts with: the one its store holds, else its config
/// file's (`file`), which must then be stored at once (the `bool`), so that from a
/// node's first start on an edited `[[peers]]` never counts (issue 47: two members
/// restarted under a cut with files naming only each other counted a majority of two).
/// The node's start (src/node/drive/start.rs) and the simulator's (src/sim/faults.rs)
/// both take their list here.
pub fn list_at_start(
    stored: Option<Membership>,
    file: impl FnOnce() -> Membership,
) -> (Membership, bool) {
    match stored {
        Some(stored) => (stored, false),
        None => (file(), true),
    }
}

impl Membership {
    /// A list seeded from a config file: this node and its peers, never confirmed.
    pub fn seeded(members: Vec<Member>) -> Membership {
        let mut members = members;
        members.sort();
        members.dedup_by_key(|m| m.id);
        Membership {
            id: ConfigId::default(),
            members,
            settings: None,
        }
    }

    /// This list carrying `settings`.
    pub fn with_settings(mut self, settings: ClusterSettings) -> Membership {
        self.settings = Some(settings);
        self
    }

    /// The member `id`, if it is one.
    pub fn get(&self, id: NodeId) -> Option<&Member> {
        self.members.iter().find(|m| m.id == id)
    }

    /// Whether `id` is in the list at all (learners included).
    pub fn contains(&self, id: NodeId) -> bool {
        self.get(id).is_some()
    }

    /// Every member but `me`, ascending.
    pub fn others(&self, me: NodeId) -> Vec<NodeId> {
        self.members
            .iter()
            .map(|m| m.id)
            .filter(|&id| id != me)
            .collect()
    }

    /// The members whose votes count.
    pub fn voters(&self) -> BTreeSet<NodeId> {
        self.members
            .iter()
            .filter(|m| m.votes())
            .map(|m| m.id)
            .collect()
    }

    /// Members of this list that may never lead (witnesses and learners).
    pub fn never_lead(&self) -> Vec<NodeId> {
        self.members
            .iter()
            .filter(|m| !m.may_lead())
            .map(|m| m.id)
            .collect()
    }

    /// Whether `agreed` holds a majority of this list's voters.
    pub fn has_majority(&self, agreed: &BTreeSet<NodeId>) -> bool {
        let voters = self.voters();
        let count = voters.intersection(agreed).count();
        count >= majority_of(voters.len())
    }

    /// This list under another stamp and version, its members unchanged.
    pub fn restamped(&self, stamp: Epoch, version: u64) -> Membership {
        Membership {
            id: ConfigId {
                stamp: Some(stamp),
                version,
            },
            members: self.members.clone(),
            settings: self.settings.clone(),
        }
    }

    /// The list after `change`, written by `coordinator` in `stamp`, or why not.
    pub fn apply(
        &self,
        change: &Change,
        coordinator: NodeId,
        stamp: Epoch,
    ) -> Result<Membership, ChangeRefused> {
        let id = change.subject();
        let existing = self.get(id);
        let mut members = self.members.clone();
        let mut settings = self.settings.clone();
        match change {
            Change::Settings { set } => {
                let base = settings.ok_or(ChangeRefused::BadSettings)?;
                settings = Some(base.with_all(set).map_err(|_| ChangeRefused::BadSettings)?);
            }
            Change::Add { addr, seat, .. } => {
                if existing.is_some() {
                    return Err(ChangeRefused::AlreadyMember);
                }
                if self.members.iter().any(|m| m.learner) {
                    return Err(ChangeRefused::LearnerPending);
                }
                members.push(Member {
                    id,
                    seat: *seat,
                    learner: true,
                    addr: addr.clone(),
                });
            }
            Change::Remove { .. } | Change::Replace { .. } => {
                if existing.is_none() {
                    return Err(ChangeRefused::NotAMember);
                }
                if id == coordinator {
                    return Err(ChangeRefused::IsCoordinator);
                }
                if matches!(change, Change::Remove { .. }) {
                    members.retain(|m| m.id != id);
                } else {
                    if self.members.iter().any(|m| m.learner && m.id != id) {
                        return Err(ChangeRefused::LearnerPending);
                    }
                    for m in members.iter_mut().filter(|m| m.id == id) {
                        m.learner = true;
                    }
                }
            }
            Change::Promote { .. } => match existing {
                None => return Err(ChangeRefused::NotAMember),
                Some(m) if !m.learner => return Err(ChangeRefused::NotALearner),
                Some(_) => {
                    for m in members.iter_mut().filter(|m| m.id == id) {
                        m.learner = false;
                    }
                }
            },
        }
        members.sort();
        if !members.iter().any(Member::may_lead) {
            return Err(ChangeRefused::NoLeaderLeft);
        }
        Ok(Membership {
            id: ConfigId {
                stamp: Some(stamp),
                version: self.id.version + 1,
            },
            members,
            settings,
        })
    }
}

/// Members needed for a majority of `voters` voters: `floor(voters / 2) + 1`.
pub fn majority_of(voters: usize) -> usize {
    voters / 2 + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn voter(id: NodeId) -> Member {
        Member {
            id,
            seat: Seat::Voter,
            learner: false,
            addr: format!("127.0.0.1:{}", 7000 + id),
        }
    }

    fn three() -> Membership {
        Membership::seeded(vec![voter(3), voter(1), voter(2)])
    }

    const E: Epoch = Epoch { term: 4, leader: 3 };

    /// `three()` after coordinator 3 added node 4, a learner.
    fn with_learner_four() -> Membership {
        let add = Change::Add {
            id: 4,
            addr: "h:1".into(),
            seat: Seat::Voter,
        };
        three().apply(&add, 3, E).unwrap()
    }

    #[test]
    fn a_stamped_list_outranks_every_seeded_one_and_stamp_outranks_version() {
        let seeded = ConfigId {
            stamp: None,
            version: 9,
        };
        let old = ConfigId {
            stamp: Some(Epoch { term: 3, leader: 9 }),
            version: 5,
        };
        let newer = ConfigId {
            stamp: Some(E),
            version: 1,
        };
        assert!(seeded < old && old < newer);
    }

    #[test]
    fn add_enters_as_learner_and_promote_gives_the_seat() {
        let added = with_learner_four();
        assert_eq!(added.id.version, 1);
        assert_eq!(added.voters().len(), 3, "a learner does not vote");
        assert!(added.never_lead().contains(&4));
        let promoted = added.apply(&Change::Promote { id: 4 }, 3, E).unwrap();
        assert_eq!(promoted.voters().len(), 4);
        assert!(promoted.get(4).unwrap().may_lead());
    }

    #[test]
    fn refusals_name_the_reason() {
        let list = three();
        let add = |id| Change::Add {
            id,
            addr: "h:1".into(),
            seat: Seat::Witness,
        };
        assert_eq!(list.apply(&add(2), 3, E), Err(ChangeRefused::AlreadyMember));
        assert_eq!(
            list.apply(&Change::Remove { id: 3 }, 3, E),
            Err(ChangeRefused::IsCoordinator)
        );
        assert_eq!(
            list.apply(&Change::Remove { id: 8 }, 3, E),
            Err(ChangeRefused::NotAMember)
        );
        let with_learner = list.apply(&add(4), 3, E).unwrap();
        assert_eq!(
            with_learner.apply(&add(5), 3, E),
            Err(ChangeRefused::LearnerPending),
            "two new members at once are refused"
        );
        assert_eq!(
            list.apply(&Change::Promote { id: 1 }, 3, E),
            Err(ChangeRefused::NotALearner)
        );
    }

    #[test]
    fn majorities_count_only_voters() {
        let list = with_learner_four();
        assert!(
            !list.has_majority(&[1, 4].into()),
            "the learner's ack is no vote"
        );
        assert!(list.has_majority(&[1, 3].into()));
    }
}
