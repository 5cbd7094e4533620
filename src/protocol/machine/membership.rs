//! The member list at runtime (docs/design.md#membership): who holds which list, how a
//! newer one spreads, who may vote for whom, and how the coordinator changes it one
//! member at a time. The list type and its order are `src/protocol/membership.rs`.
//!
//! - members_spread: every message carries its sender's list identity; a node that holds
//!   a newer list sends it to a peer that showed an older one (again after T' if that
//!   peer still shows the older one), and a node stores a list newer than its own,
//!   before anything that depends on it, and acks the sender.
//! - up_to_date: quorum mode: a node votes for, or accepts the declaration of, only a
//!   candidate whose list is at least as new as its own (Raft's election restriction,
//!   with the list as the log). A candidate that is behind gets the list and asks again.
//! - one_change: only the established coordinator changes the list, one member at a
//!   time, and only once its list is committed under its own epoch: written under its
//!   epoch, and stored by a majority of the voters of the list before the change and of
//!   the list after it. A list written under an older epoch is first confirmed: the
//!   same members, written again under the coordinator's epoch and committed, so every
//!   node still holding an older list (an uncommitted change of an earlier coordinator
//!   included) is refused by a majority from then on.
//! - learner: a new member enters as a learner: it follows and acks but neither votes
//!   nor leads; the coordinator gives it its seat (a change of its own) once it has
//!   acked the coordinator's epoch under the current list. `replace` turns a member back
//!   into a learner (a lost disk: its promises are gone), so it earns its seat again.
//! - hand_over_first: the coordinator never removes or replaces itself.
//! - newer_list: a coordinator that stores a list written under a newer epoch than its
//!   office gives way as for any newer epoch (newer_news, `handover.rs`): every list it
//!   could write would be older than the one it holds.
//! - removed: a node that stores a list without itself, or as a learner, is ineligible;
//!   a coordinator that learns it was removed leaves office.

use super::event::Action;
use super::state::State;
use super::Machine;
use crate::protocol::epoch::{Epoch, Millis, NodeId};
use crate::protocol::membership::{majority_of, Change, ChangeRefused, ConfigId, Membership};
use crate::protocol::message::Body;
use crate::protocol::view::{DemotionReason, Fact};
use std::collections::BTreeSet;

/// The coordinator's change in progress: what must be stored before the next one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Pending {
    /// Voters of the list before the change (a confirmation: the same voters).
    prior: BTreeSet<NodeId>,
    /// The operator's change, waiting for the confirmation of the list under our epoch.
    queued: Option<Change>,
}

/// What the machine keeps about lists besides its own.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub(super) struct MemberState {
    /// The newest list identity each peer's messages showed.
    pub(super) shown: std::collections::BTreeMap<NodeId, ConfigId>,
    /// When we last sent our list to a peer that was behind, and which list.
    pushed: std::collections::BTreeMap<NodeId, (ConfigId, Millis)>,
    /// Coordinator: the change in progress.
    pending: Option<Pending>,
    /// Coordinator: our list is committed under our epoch (the next change may start).
    committed: bool,
    /// Coordinator: peers that acked our epoch in this office (a learner's catch-up).
    following: BTreeSet<NodeId>,
}

impl Machine {
    /// The member list this node holds (stored, or seeded from its config).
    pub fn members(&self) -> &Membership {
        &self.members
    }

    /// Coordinator: whether its list is committed, so `members()` is what a majority
    /// of the cluster holds and the next change may start.
    pub fn members_committed(&self) -> bool {
        self.member_state.committed
    }

    /// The peers this node must stay connected to: the members of its list and, on a
    /// coordinator whose change is not yet committed, the voters of the list before it
    /// (a member being removed must still store the change and say so: it counts toward
    /// the old list's majority).
    pub fn peers_to_keep(&self) -> BTreeSet<NodeId> {
        let mut keep: BTreeSet<NodeId> = self.members.others(self.config.id).into_iter().collect();
        if let Some(pending) = &self.member_state.pending {
            keep.extend(pending.prior.iter().copied());
        }
        keep.remove(&self.config.id);
        keep
    }

    /// Whether messages from `peer` are a member's: of our list, or a voter of the list
    /// before our change in progress.
    pub(super) fn knows(&self, peer: NodeId) -> bool {
        peer != self.config.id && self.peers_to_keep().contains(&peer)
    }

    /// Whether this node's own entry lets it lead (not a witness, learner or removed),
    /// and no forced recovery gave it up (`given_up.rs`).
    pub(super) fn may_lead_here(&self) -> bool {
        !self.is_given_up()
            && self
                .members
                .get(self.config.id)
                .is_some_and(|m| m.may_lead())
    }

    /// Whether `peer`'s votes and acks count (a voter of our list).
    pub(super) fn counts(&self, peer: NodeId) -> bool {
        self.members.get(peer).is_some_and(|m| m.votes())
    }

    /// up_to_date: whether `candidate`'s list, as its last message showed it, is at least
    /// as new as ours.
    pub(super) fn up_to_date(&self, candidate: NodeId) -> bool {
        self.member_state
            .shown
            .get(&candidate)
            .is_some_and(|&id| id >= self.members.id)
    }

    /// Classic mode, whose followers ack only news: whether our ack tells `leader`
    /// something about lists: we are a learner it waits for, or its last message
    /// showed another list than ours (it sends us its newer one, or learns ours).
    pub(super) fn list_news_for(&self, leader: NodeId) -> bool {
        let learning = self.members.get(self.config.id).is_some_and(|m| m.learner);
        learning || self.member_state.shown.get(&leader) != Some(&self.members.id)
    }

    /// members_spread: a peer's message showed list `id`; send ours if it is newer.
    pub(super) fn note_list(&mut self, from: NodeId, id: ConfigId, now: Millis) {
        self.member_state.shown.insert(from, id);
        let ours = self.members.id;
        if id >= ours {
            return;
        }
        let again_after = self.config.timing.coordinator_timeout_ms;
        let due = match self.member_state.pushed.get(&from) {
            Some(&(sent, at)) => sent != ours || now >= at + again_after,
            None => true,
        };
        if due {
            self.member_state.pushed.insert(from, (ours, now));
            let list = self.members.clone();
            self.send(from, Body::Members { list });
        }
    }

    /// removed: a node outside our list whose message shows an older list gets ours
    /// (rate-limited like any push), so a member removed while it was down learns it.
    pub(super) fn tell_stranger(&mut self, from: NodeId, id: ConfigId, now: Millis) {
        if id < self.members.id {
            self.note_list(from, id, now);
            self.member_state.shown.remove(&from);
        }
    }

    /// A peer (re)connected: what we sent it before may be lost.
    pub(super) fn forget_push(&mut self, peer: NodeId) {
        self.member_state.pushed.remove(&peer);
    }

    /// members_spread: a list from a peer; stored if newer than ours.
    pub(super) fn on_members(&mut self, from: NodeId, list: Membership, now: Millis) {
        if list.id <= self.members.id {
            return;
        }
        let stamp = list.id.stamp;
        self.adopt(list, now);
        // Tell the sender at once that we hold it (it may be counting us).
        let accepted = self.cells.accepted;
        self.send(from, Body::Ack { accepted, round: 0 });
        // newer_list: a list written under a newer epoch than our office is news of
        // that epoch. Kept in office, we could only write lists older than the one we
        // hold, and a confirmation would reuse an identity we already wrote (classic
        // seed 735049: v1 written twice under 2@3, with different members).
        if let State::Coordinator { epoch, .. } = self.state {
            if stamp > Some(epoch)
                && !self
                    .config
                    .has(super::config::Flaw::KeepsOfficeOverNewerList)
            {
                self.newer_news(now);
            }
        }
    }

    /// Stores `list` as ours, before any later action, and lives by it from now on,
    /// its settings included (a list without them keeps ours).
    fn adopt(&mut self, mut list: Membership, now: Millis) {
        let me = self.config.id;
        let ours = self.members.settings.clone();
        let settings = list
            .settings
            .get_or_insert_with(|| ours.unwrap_or_else(|| super::settings_of(&self.config)));
        if (settings.timing, settings.preempt) != (self.config.timing, self.config.preempt) {
            let settings = settings.clone();
            self.live_by(&settings, now);
        }
        self.members = list.clone();
        self.actions.push_back(Action::PersistMembers(list));
        self.fact(Fact::MembersChanged {
            id: self.members.id,
            voters: self.members.voters().len(),
        });
        if let Some(stamp) = self.members.id.stamp {
            self.observe(stamp.term);
        }
        let voters = self.members.voters();
        if let Some(recovery) = self.recovery.as_mut() {
            let other_voters: BTreeSet<NodeId> =
                voters.iter().copied().filter(|&v| v != me).collect();
            recovery.relist(
                &other_voters,
                majority_of(voters.len()),
                voters.contains(&me),
            );
        }
        let keep = self.peers_to_keep();
        self.reach.retain(|p, _| keep.contains(p));
        self.member_state.shown.retain(|p, _| keep.contains(p));
        let voters = self.members.voters();
        let majority = majority_of(voters.len());
        if let Some(lease) = self.quorum.as_mut().and_then(|q| q.lease.as_mut()) {
            lease.recount(majority, &voters);
        }
        if !self.members.contains(me) {
            self.leaving = Some(DemotionReason::Ineligible);
        }
        self.refresh_eligibility(now);
    }

    /// An operator's change, asked of this node (the runtime forwards it here only when
    /// this node leads). Refused, queued behind the confirmation of our list, or
    /// proposed; the outcome is a fact.
    pub(super) fn on_change(&mut self, change: Change, now: Millis) {
        let State::Coordinator { epoch, .. } = self.state else {
            return self.refuse(ChangeRefused::NotCoordinator);
        };
        if self.member_state.pending.is_some() {
            return self.refuse(ChangeRefused::ChangeInProgress);
        }
        if let Err(reason) = self.members.apply(&change, self.config.id, epoch) {
            return self.refuse(reason);
        }
        if self.members.id.stamp != Some(epoch) {
            // one_change: confirm the list under our epoch first.
            let version = self.members.id.version;
            let confirmed = self.members.restamped(epoch, version);
            self.write_list(confirmed, Some(change), now);
            return;
        }
        if !self.member_state.committed {
            return self.refuse(ChangeRefused::ChangeInProgress);
        }
        self.propose(change, epoch, now);
    }

    fn refuse(&mut self, reason: ChangeRefused) {
        self.fact(Fact::ChangeRefused { reason });
    }

    /// Writes the list after `change` under `epoch`, or reports why it cannot be.
    fn propose(&mut self, change: Change, epoch: Epoch, now: Millis) {
        match self.members.apply(&change, self.config.id, epoch) {
            Ok(next) => {
                self.fact(Fact::ChangeProposed {
                    id: next.id,
                    subject: change.subject(),
                });
                self.write_list(next, None, now);
            }
            Err(reason) => self.refuse(reason),
        }
    }

    /// The coordinator stores `next`, sends it to every member of the old and the new
    /// list (a removed member learns it), and waits for it to be committed.
    fn write_list(&mut self, next: Membership, queued: Option<Change>, now: Millis) {
        self.renew_before_write(now);
        let prior = self.members.voters();
        let mut told: BTreeSet<NodeId> = self.members.others(self.config.id).into_iter().collect();
        told.extend(next.others(self.config.id));
        self.member_state.pending = Some(Pending { prior, queued });
        self.member_state.committed = false;
        self.adopt(next, now);
        for peer in told {
            let list = self.members.clone();
            self.member_state.pushed.insert(peer, (list.id, now));
            self.send(peer, Body::Members { list });
        }
        self.advance_members(now);
    }

    /// lease_before_list (quorum): a round of the lease goes out before the list is
    /// stored. Storing a list holds up this node (its heartbeats wait for the flush),
    /// and each follower's acks wait behind its own flush of the list; a round sent
    /// before the flushes is acked at once, so the lease starts the change fresh and
    /// lasts a full span across both flushes instead of what was left of the last
    /// round's (the real-process test `tests/postgres_failover.rs`, a fourth member
    /// added, lost the lease about 60 ms after each list was stored). The round
    /// carries the list the followers hold and asks nothing new of them.
    fn renew_before_write(&mut self, now: Millis) {
        if self.quorum.is_none() || self.config.has(super::config::Flaw::NoRenewBeforeList) {
            return;
        }
        if let State::Coordinator { epoch, .. } = self.state {
            self.heartbeat(epoch, now);
        }
    }

    /// Coordinator: records that `peer` acked our epoch (a learner's catch-up).
    pub(super) fn note_follower(&mut self, peer: NodeId) {
        self.member_state.following.insert(peer);
    }

    /// Coordinator: commits the list once stored widely enough, then runs what waited
    /// for it: the operator's change, or a caught-up learner's promotion.
    pub(super) fn advance_members(&mut self, now: Millis) {
        let State::Coordinator { epoch, .. } = self.state else {
            return;
        };
        if self.members.id.stamp != Some(epoch) {
            // learner: a learner added under an earlier coordinator gets its seat from
            // this one, which confirms its list first (one_change).
            let learner = self.members.members.iter().any(|m| m.learner);
            if learner && self.member_state.pending.is_none() {
                let version = self.members.id.version;
                let confirmed = self.members.restamped(epoch, version);
                self.write_list(confirmed, None, now);
            }
            return;
        }
        if let Some(pending) = &self.member_state.pending {
            let voters = self.members.voters();
            let new_majority =
                self.config.has(super::config::Flaw::OldMajorityOnly) || self.stored_by(&voters);
            let unstored = self.config.has(super::config::Flaw::TwoAtOnce);
            if !(unstored || (self.stored_by(&pending.prior) && new_majority)) {
                return;
            }
            let queued = self.member_state.pending.take().and_then(|p| p.queued);
            self.member_state.committed = true;
            self.fact(Fact::MembersCommitted {
                id: self.members.id,
            });
            if let Some(change) = queued {
                return self.propose(change, epoch, now);
            }
        }
        if !self.member_state.committed {
            return;
        }
        let ours = self.members.id;
        let caught_up = self.members.members.iter().find(|m| {
            m.learner
                && self.member_state.following.contains(&m.id)
                && self.member_state.shown.get(&m.id) == Some(&ours)
        });
        if let Some(learner) = caught_up {
            let id = learner.id;
            self.propose(Change::Promote { id }, epoch, now);
        }
    }

    /// Whether a majority of `voters` (ourselves included) showed our list or a newer one.
    fn stored_by(&self, voters: &BTreeSet<NodeId>) -> bool {
        let ours = self.members.id;
        let me = self.config.id;
        let stored = voters
            .iter()
            .filter(|&&v| {
                v == me
                    || self
                        .member_state
                        .shown
                        .get(&v)
                        .is_some_and(|&id| id >= ours)
            })
            .count();
        stored >= majority_of(voters.len())
    }

    /// Leaving office: a change in progress is no longer ours to finish (the next
    /// coordinator confirms its own list before changing it).
    pub(super) fn drop_change(&mut self) {
        self.member_state.pending = None;
        self.member_state.committed = false;
        self.member_state.following.clear();
    }
}
