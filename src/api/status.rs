//! What a node tells the world about itself: the payload of `bully status`, the watch
//! stream, `/status` and the hooks.

use super::health::HealthState;
use super::ineligible::{self, Ineligible};
use crate::boot_clock::BootInstant;
use crate::protocol::{lease, Cells, Epoch, Membership, Mode, NodeId, Role, Timing, View};
use serde::{Deserialize, Serialize};

/// Whether a configured peer is reachable right now (our outbound connection is up).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerState {
    pub id: NodeId,
    pub connected: bool,
}

/// A node's full status as published on its watch channel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    pub id: NodeId,
    /// The election algorithm this node runs.
    #[serde(default)]
    pub mode: Mode,
    /// Change it with [`Status::set_office`], which keeps the coordinator derived.
    pub role: Role,
    /// The epoch this node follows or leads; none while electing. Change it with
    /// [`Status::set_office`], which keeps the coordinator derived.
    pub epoch: Option<Epoch>,
    /// Derived from `role` and `epoch` ([`Role::coordinator_in`]), read through
    /// [`Status::coordinator`]; stored only because the wire carries it in this place
    /// (bincode in src/codec.rs reads fields by position, and `--json` and `/status`
    /// show a `coordinator` key).
    coordinator: Option<NodeId>,
    /// The epoch this node's database was made ready for as coordinator (its
    /// `on_elected` succeeded, or `[http] coordinator_ready = "elected"`): a load
    /// balancer's 200 waits for it, see [`Status::ready`].
    pub ready_epoch: Option<Epoch>,
    /// Whether the node may lead: its health check passes and it is not stepped down.
    pub eligible: bool,
    /// The health check's verdict (after rise/fall).
    pub health: HealthState,
    /// Wall-clock milliseconds (Unix) until which a step-down keeps the node ineligible.
    pub stepped_down_until_ms: Option<u64>,
    /// Why peers whose config disagrees with ours keep the node from leading, if they
    /// do (see `config_conflict`).
    #[serde(default)]
    pub config_conflict: Option<String>,
    /// Why the `[watchdog]` device (`mode = "required"`) keeps the node from leading,
    /// if it does: "watchdog unavailable (device: error)".
    #[serde(default)]
    pub watchdog_unavailable: Option<String>,
    /// What this host's config file says of a cluster key (the member list) that the
    /// cluster's stored state says otherwise: the file's value never counts (issue 47),
    /// and this says so until the file or the cluster comes to agree.
    #[serde(default)]
    pub file_differs: Option<String>,
    pub incarnation: u64,
    /// The newest epoch in this node's flushed cells.
    pub accepted: Option<Epoch>,
    /// The highest term in this node's flushed cells.
    pub term: u64,
    pub peers: Vec<PeerState>,
    /// Wall-clock milliseconds (Unix) of the last role or epoch change.
    pub changed_at_ms: u64,
    /// Quorum mode: when the coordinator role ends unless the lease is renewed. Updated
    /// on every renewal without waking watchers; readers go through [`Status::as_of`].
    /// On the clock that counts suspension, like the machine's.
    #[serde(skip)]
    pub lease_until: Option<BootInstant>,
    /// Milliseconds since the last heartbeat (or the declaration, the lease's round 0)
    /// from the coordinator this node follows (none on the coordinator itself or while
    /// none is known): the lag column of `status --cluster`, and how `bully leader`
    /// judges a follower's view. Computed by [`Status::as_of`].
    pub heartbeat_age_ms: Option<u64>,
    /// The last heartbeat's sender and arrival, updated without waking watchers.
    #[serde(skip)]
    pub last_heartbeat: Option<(NodeId, BootInstant)>,
    /// The host's keepers connected to this node (`bully run`), as they last reported.
    #[serde(default)]
    pub keepers: Vec<super::keeper::Connected>,
    /// The node's timing, so a reader can judge how old a follower's view may be before
    /// the coordinator it names could have lost its lease (`bully leader`).
    #[serde(default)]
    pub timing: Timing,
    /// The member list this node lives by (docs/design.md#membership); `None` from a
    /// node that predates runtime membership changes.
    #[serde(default)]
    pub members: Option<Membership>,
    /// On the coordinator: its list is committed (stored by a majority before and after
    /// its last change), so the next change may start.
    #[serde(default)]
    pub members_committed: bool,
    /// The node's estimate est(S) as last measured, and whether it is still fresh
    /// (docs/design.md#elected-by-data-est); `None` without an estimate source or while
    /// the source gives no usable value.
    #[serde(default)]
    pub estimate: Option<Estimate>,
    /// The maintenance pause this node keeps (`bully pause`; generation 0: never set).
    #[serde(default)]
    pub pause: super::pause::Pause,
    /// A forced recovery (`bully recover`) gave this node up: it never leads, votes or
    /// acks again (`Cells::given_up`).
    #[serde(default)]
    pub given_up: bool,
    /// A switchover this coordinator holds for later (`bully step-down --to N --at
    /// TIME`, src/node/serve/scheduled_switchover.rs). Kept by the API, not the
    /// runtime: filled in by `Schedule::status_now` for the API's `status` and HTTP
    /// `/status`, empty in watch updates.
    #[serde(default)]
    pub scheduled_switchover: Option<ScheduledSwitchover>,
    /// The PostgreSQL server this node keeps (`[postgres]`), as last observed; `None`
    /// without that section.
    #[serde(default)]
    pub postgres: Option<super::postgres::PgState>,
    /// Where this node's HTTP endpoint listens (`[http]`), so any member's `/cluster`
    /// can give each member's `api_url`, as Patroni's does; `None` without `[http]`.
    #[serde(default)]
    pub http: Option<HttpEndpoint>,
}

/// A node's HTTP endpoint as others reach it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpEndpoint {
    pub listen: std::net::SocketAddr,
    /// Served over TLS (`[http] tls`): its URLs are `https://`.
    pub tls: bool,
}

/// A switchover held for later: to node `to` at wall-clock `at_ms` (ms since the Unix
/// epoch), the members above it standing aside for `for_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduledSwitchover {
    pub to: NodeId,
    pub at_ms: u64,
    pub for_ms: u64,
}

/// A node's estimate as its status shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Estimate {
    pub value: u64,
    /// Measured within its freshness bound; a stale value counts as 0 in elections.
    pub fresh: bool,
}

impl Status {
    /// For unit tests: quorum-mode node `id`, just started as an eligible candidate
    /// with `peers`, none of them connected yet.
    #[cfg(test)]
    pub fn starting_candidate(id: NodeId, peers: &[NodeId]) -> Status {
        let view = View {
            id,
            role: Role::Candidate,
            epoch: None,
            eligible: true,
            incarnation: 1,
        };
        Status::initial(view, Mode::Quorum, Cells::default(), peers, 0)
    }

    /// The status of a node that has just started and published nothing yet.
    pub fn initial(view: View, mode: Mode, cells: Cells, peers: &[NodeId], now_ms: u64) -> Status {
        let mut status = Status {
            id: view.id,
            mode,
            role: view.role,
            epoch: None,
            coordinator: None,
            ready_epoch: None,
            eligible: view.eligible,
            health: HealthState::Unchecked,
            stepped_down_until_ms: None,
            config_conflict: None,
            watchdog_unavailable: None,
            file_differs: None,
            incarnation: cells.incarnation,
            accepted: cells.accepted,
            term: cells.term,
            peers: peers
                .iter()
                .map(|&id| PeerState {
                    id,
                    connected: false,
                })
                .collect(),
            changed_at_ms: now_ms,
            lease_until: None,
            heartbeat_age_ms: None,
            last_heartbeat: None,
            keepers: Vec::new(),
            timing: Timing::default(),
            members: None,
            members_committed: false,
            estimate: None,
            pause: super::pause::Pause::default(),
            given_up: cells.given_up,
            scheduled_switchover: None,
            postgres: None,
            http: None,
        };
        status.apply_view(view, now_ms);
        status
    }

    /// The node now lives by `list`: its peers are the list's other members (those
    /// still listed keep their connection state).
    pub fn apply_members(&mut self, list: &Membership, committed: bool) {
        let others = list.others(self.id);
        let connected = |id: NodeId| self.peers.iter().any(|p| p.id == id && p.connected);
        self.peers = others
            .iter()
            .map(|&id| PeerState {
                id,
                connected: connected(id),
            })
            .collect();
        self.members = Some(list.clone());
        self.members_committed = committed;
        if let Some(settings) = &list.settings {
            self.timing = settings.timing;
        }
    }

    /// The status as a reader must see it at `now` (Q4): a coordinator whose lease has
    /// run out is reported as a candidate that knows no coordinator, even if the node
    /// was paused and has not noticed yet. Every reader (CLI, HTTP, `/metrics`, the
    /// health check's environment) goes through here; the rule itself is
    /// `protocol::lease::role_at`, the machine's too.
    pub fn as_of_now(&self) -> Status {
        self.as_of(BootInstant::now())
    }

    /// [`Status::as_of_now`] at a given instant.
    pub fn as_of(&self, now: BootInstant) -> Status {
        let mut status = self.clone();
        let office_ends = match (status.mode, status.lease_until) {
            (_, Some(until)) => Some(until),
            // In quorum mode the role exists only under a lease.
            (Mode::Quorum, None) => Some(now),
            (Mode::Classic, None) => None,
        };
        status.role = lease::role_at(status.role, office_ends, now);
        if status.role != self.role {
            status.set_office(status.role, None);
        }
        status.heartbeat_age_ms = match status.last_heartbeat {
            Some((from, at)) if status.coordinator() == Some(from) && from != status.id => {
                Some(now.saturating_duration_since(at).as_millis() as u64)
            }
            _ => None,
        };
        status
    }

    /// Whether clients should be sent here as to the coordinator (`/coordinator` 200):
    /// the node leads, under its lease (read through [`Status::as_of_now`]), and its
    /// database was made ready for the very epoch it leads, so a load balancer never
    /// routes writes to a database `on_elected` has not promoted (yet, or at all).
    pub fn ready(&self) -> bool {
        self.role == Role::Coordinator && self.epoch.is_some() && self.ready_epoch == self.epoch
    }

    /// Folds a new view in; returns whether the coordinator or epoch changed.
    pub fn apply_view(&mut self, view: View, now_ms: u64) -> bool {
        let before = (self.role, self.epoch);
        self.set_office(view.role, view.epoch);
        self.eligible = view.eligible;
        self.incarnation = view.incarnation;
        let changed = before != (self.role, self.epoch);
        if changed {
            self.changed_at_ms = now_ms;
        }
        changed
    }

    /// The coordinator this node follows or is, if any: `epoch`'s leader unless the
    /// node is a candidate ([`Role::coordinator_in`]).
    pub fn coordinator(&self) -> Option<NodeId> {
        self.role.coordinator_in(self.epoch)
    }

    /// The node's role and epoch, and with them the coordinator they name: the one
    /// way to change them, so the stored coordinator never disagrees with them.
    pub fn set_office(&mut self, role: Role, epoch: Option<Epoch>) {
        self.role = role;
        self.epoch = epoch;
        self.coordinator = role.coordinator_in(epoch);
    }

    /// The fencing token of the epoch followed or led, unique per leadership and ordered
    /// like the epoch, the same form in both modes (see [`Epoch::token`]).
    pub fn token(&self) -> Option<u64> {
        self.coordinator().and(self.epoch).map(|e| e.token())
    }

    /// Records the durable cells after a flush.
    pub fn apply_cells(&mut self, cells: Cells) {
        self.accepted = cells.accepted;
        self.term = cells.term;
        self.incarnation = cells.incarnation;
        self.given_up = cells.given_up;
    }

    /// Marks a peer reachable or not; returns whether anything changed.
    pub fn set_peer(&mut self, id: NodeId, connected: bool) -> bool {
        match self.peers.iter_mut().find(|p| p.id == id) {
            Some(p) if p.connected != connected => {
                p.connected = connected;
                true
            }
            _ => false,
        }
    }

    /// One human line: `node 3  coordinator  epoch 7@3  coordinator 3`.
    pub fn line(&self) -> String {
        let epoch = self
            .epoch
            .map(|e| e.to_string())
            .unwrap_or_else(|| "-".into());
        let coordinator = self
            .coordinator()
            .map(|c| c.to_string())
            .unwrap_or_else(|| "none".into());
        format!(
            "node {:<3} {:<11} epoch {:<8} coordinator {}{}",
            self.id,
            self.role,
            epoch,
            coordinator,
            self.eligibility_note()
        )
    }

    /// Empty when eligible, else `  (ineligible: health check failing)` or similar
    /// (worded in src/api/ineligible.rs).
    pub fn eligibility_note(&self) -> String {
        ineligible::note(&self.ineligible_reasons())
    }

    /// Every reason this status shows for the node not to lead, in the order the
    /// eligibility policy checks them; none when it is eligible.
    pub fn ineligible_reasons(&self) -> Vec<Ineligible> {
        if self.eligible {
            return Vec::new();
        }
        let mut reasons: Vec<Ineligible> = self
            .health
            .ineligible_reason()
            .map(Ineligible::Health)
            .into_iter()
            .collect();
        if self.given_up {
            reasons.push(Ineligible::GivenUp);
        }
        if self.stepped_down_until_ms.is_some() {
            reasons.push(Ineligible::SteppedDown);
        }
        reasons.extend(self.config_conflict.clone().map(Ineligible::ConfigConflict));
        reasons.extend(
            self.watchdog_unavailable
                .clone()
                .map(Ineligible::WatchdogUnavailable),
        );
        if self.pause.holds_back(self.id).is_some() {
            reasons.push(Ineligible::Paused);
        }
        if reasons.is_empty() {
            reasons.push(Ineligible::Starting);
        }
        reasons
    }
}

#[cfg(test)]
impl Status {
    /// A node's status for unit tests: eligible, `role` in `epoch`, in `mode`, its
    /// `peers` not connected, nothing stored.
    pub(crate) fn for_test(
        id: NodeId,
        role: Role,
        epoch: Option<Epoch>,
        mode: Mode,
        peers: &[NodeId],
    ) -> Status {
        let view = View {
            id,
            role,
            epoch,
            eligible: true,
            incarnation: 1,
        };
        Status::initial(view, mode, Cells::default(), peers, 0)
    }
}
