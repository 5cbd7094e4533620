//! Everything the world learns from the runtime, in one place and one order: the
//! status watch (API, HTTP, health checks' environment), the counters, the led-epoch
//! watch the hook runner kills a stale `on_elected` by, and the hooks themselves.
//!
//! For one view the order is: status (with readiness), metrics, led epoch, hooks. The
//! led-epoch watch changes before any hook is queued, so a running `on_elected` for an
//! epoch that is over is killed first.

use crate::api::keeper::Grant;
use crate::api::{HealthState, Status};
use crate::boot_clock::BootInstant;
use crate::node::commands::hooks::{DemotedHook, Hooks};
use crate::node::policy::readiness::{AfterElectedHook, Readiness};
use crate::node::policy::transitions::Tracker;
use crate::node::shared::mailbox::ElectedHookDone;
use crate::node::shared::metrics::Metrics;
use crate::protocol::{Cells, Epoch, Fact, Membership, NodeId, Role, View};
use crate::wall_clock::wall_ms;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// The publishing side of a node.
pub struct Publisher {
    status: watch::Sender<Status>,
    metrics: Arc<Metrics>,
    /// What each new view means compared with the ones before it.
    transitions: Tracker,
    /// The epoch the node leads (`None` when it does not).
    led: watch::Sender<Option<Epoch>>,
    /// What the host's keepers are granted (`src/node/serve/keepers.rs`).
    grants: watch::Sender<Grant>,
    hooks: Hooks,
    readiness: Readiness,
}

/// The watches a [`Publisher`] writes.
pub struct Watches {
    pub status: watch::Sender<Status>,
    pub led: watch::Sender<Option<Epoch>>,
    pub grants: watch::Sender<Grant>,
}

impl Publisher {
    /// Publishes through `watches`, counts in `metrics` and fires `hooks`.
    pub fn new(
        watches: Watches,
        metrics: Arc<Metrics>,
        hooks: Hooks,
        readiness: Readiness,
    ) -> Publisher {
        Publisher {
            status: watches.status,
            metrics,
            transitions: Tracker::default(),
            led: watches.led,
            grants: watches.grants,
            hooks,
            readiness,
        }
    }

    /// The status as last published (not read against the lease).
    pub fn status(&self) -> watch::Ref<'_, Status> {
        self.status.borrow()
    }

    /// The counters, for what the runtime counts itself (messages).
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The hook commands, for a reload to replace.
    pub fn hooks_mut(&mut self) -> &mut Hooks {
        &mut self.hooks
    }

    /// Publishes a view whose epoch is already durable, and the lease with it. Returns
    /// the `on_demoted` it queued, if any, for the runtime to wait for before a Resign.
    pub fn view(&mut self, view: View, lease: Option<BootInstant>) -> Option<DemotedHook> {
        let now = wall_ms();
        let ready_at_once = self.readiness.at_once();
        self.status.send_modify(|s| {
            s.lease_until = lease;
            if ready_at_once && view.role == Role::Coordinator {
                s.ready_epoch = view.epoch;
            }
            if s.apply_view(view, now) {
                tracing::info!(
                    role = %view.role,
                    epoch = ?view.epoch,
                    coordinator = ?view.coordinator(),
                    "view changed"
                );
            }
        });
        let transition = self.transitions.on_view(view, Instant::now());
        let m = &self.metrics;
        m.set_epoch_term(view.coordinator().and(view.epoch).map_or(0, |e| e.term));
        m.set_eligible(view.eligible);
        if transition.coordinator_changed {
            m.coordinator_changed();
        }
        if let Some(took) = transition.failover {
            m.observe_failover(took);
        }
        let led = (view.role == Role::Coordinator)
            .then_some(view.epoch)
            .flatten();
        self.led
            .send_if_modified(|l| std::mem::replace(l, led) != led);
        self.hooks.fire(&transition, &self.status.borrow())
    }

    /// Hands the lease end to readers (Q4). Watchers are woken only when a coordinator's
    /// lapsed lease comes back (a late ack renewed it before the machine noticed the
    /// lapse): readers see it lead again. Otherwise the lease changes with every acked
    /// heartbeat and wakes nobody; a watcher wakes at the lapse by itself (`node/serve/api.rs`).
    pub fn lease(&self, until: Option<BootInstant>) {
        let now = BootInstant::now();
        self.status.send_if_modified(|s| {
            let was_lapsed = s.lease_until.is_some_and(|at| at <= now);
            s.lease_until = until;
            let leads_again = until.is_some_and(|at| at > now);
            s.role == Role::Coordinator && was_lapsed && leads_again
        });
    }

    /// Hands the keepers a new grant, numbered after the last; they are woken only
    /// when it differs (a renewal moves its deadlines, so each acked round wakes them).
    pub fn grant(&self, grant: Grant) {
        self.grants.send_if_modified(|g| {
            let next = Grant {
                seq: g.seq,
                ..grant
            };
            if *g == next {
                return false;
            }
            *g = Grant {
                seq: g.seq + 1,
                ..next
            };
            true
        });
    }

    /// A heartbeat from `from` arrived: readers compute the lag from it; no watcher
    /// needs waking.
    pub fn heartbeat(&self, from: NodeId) {
        self.status.send_if_modified(|s| {
            s.last_heartbeat = Some((from, BootInstant::now()));
            false
        });
    }

    /// A peer's connection went up or down.
    pub fn peer(&self, peer: NodeId, connected: bool) {
        self.status
            .send_if_modified(|s| s.set_peer(peer, connected));
        self.metrics
            .set_peers_up(self.connected_peers().len() as u64);
    }

    /// The peers whose link is up now, as published.
    pub fn connected_peers(&self) -> Vec<NodeId> {
        let status = self.status.borrow();
        status
            .peers
            .iter()
            .filter(|p| p.connected)
            .map(|p| p.id)
            .collect()
    }

    /// The node lives by `list` from now on (`committed`: on the coordinator, the next
    /// change may start).
    pub fn members(&self, list: &Membership, committed: bool) {
        self.status.send_if_modified(|s| {
            let changed = s.members.as_ref() != Some(list) || s.members_committed != committed;
            if changed {
                s.apply_members(list, committed);
            }
            changed
        });
    }

    /// What the host's config file says otherwise than the cluster's stored state, if
    /// anything (src/node/drive/members.rs, `file_disagrees`).
    pub fn file_differs(&self, text: Option<String>) {
        self.status.send_if_modified(|s| {
            let changed = s.file_differs != text;
            if changed {
                s.file_differs = text;
            }
            changed
        });
    }

    /// The cells were flushed (in `took`).
    pub fn persisted(&self, cells: Cells, took: Duration) {
        self.metrics.observe_persist(took);
        self.status.send_modify(|s| s.apply_cells(cells));
    }

    /// Why the node may or may not lead: its health and, when stepped down, until when
    /// (wall-clock ms).
    pub fn eligibility(&self, health: HealthState, stepped_down_until_ms: Option<u64>) {
        self.status.send_if_modified(|s| {
            let changed = s.health != health
                || s.stepped_down_until_ms.is_some() != stepped_down_until_ms.is_some();
            s.health = health;
            s.stepped_down_until_ms = stepped_down_until_ms;
            changed
        });
    }

    /// The maintenance pause the node keeps now (src/api/pause.rs).
    pub fn pause(&self, pause: &crate::api::Pause) {
        self.status.send_if_modified(|s| {
            let changed = s.pause != *pause;
            s.pause = pause.clone();
            changed
        });
    }

    /// Why peers' configs keep the node from leading, if they do.
    pub fn config_conflict(&self, reason: Option<String>) {
        self.ineligibility_note(|s| &mut s.config_conflict, reason);
    }

    /// Why the required watchdog device keeps the node from leading, if it does.
    pub fn watchdog_unavailable(&self, reason: Option<String>) {
        self.ineligibility_note(|s| &mut s.watchdog_unavailable, reason);
    }

    /// Sets one of the status's reasons not to lead; wakes watchers if it changed.
    fn ineligibility_note(
        &self,
        note: impl FnOnce(&mut Status) -> &mut Option<String>,
        reason: Option<String>,
    ) {
        self.status.send_if_modified(|s| {
            let slot = note(s);
            let changed = *slot != reason;
            *slot = reason;
            changed
        });
    }

    /// The machine's estimate after it changed (`Machine::estimate`), for the status.
    pub fn estimate(&self, estimate: Option<(u64, bool)>) {
        let estimate = estimate.map(|(value, fresh)| crate::api::Estimate { value, fresh });
        self.status.send_if_modified(|s| {
            let changed = s.estimate != estimate;
            s.estimate = estimate;
            changed
        });
    }

    /// The managed PostgreSQL server as last observed (src/node/postgres/).
    pub fn postgres(&self, state: Option<crate::api::postgres::PgState>) {
        self.status.send_if_modified(|s| {
            let changed = s.postgres != state;
            s.postgres = state;
            changed
        });
    }

    /// A health verdict the check did not report itself (a reload removed the check).
    pub fn health(&self, health: HealthState) {
        self.metrics.set_health(health);
    }

    /// Counts and logs what the machine reports about itself.
    pub fn fact(&self, fact: &Fact) {
        match fact {
            Fact::ElectionStarted => self.metrics.election_started(),
            Fact::Ranked { est } => tracing::info!(est, "election by (estimate, id)"),
            Fact::Declared { epoch } => {
                self.metrics.declared();
                tracing::info!(%epoch, "declared");
            }
            Fact::Established { epoch } => tracing::info!(%epoch, "established as coordinator"),
            Fact::Demoted { epoch, reason, .. } => {
                tracing::info!(%epoch, %reason, "no longer coordinator")
            }
            Fact::RecoveryStarted {
                needed,
                survivors: false,
            } => tracing::warn!(
                needed,
                "the store is empty: a first start, or this node lost its data dir; it votes \
                 and leads nothing until {needed} other members have reported their terms"
            ),
            Fact::RecoveryStarted {
                needed,
                survivors: true,
            } => tracing::warn!(
                needed,
                "a forced recovery's survivor: it votes and leads nothing until the {needed} \
                 other survivors have reported their terms (start each of them)"
            ),
            Fact::Recovered { term } => {
                tracing::info!(term, "store recovered: peers reported terms up to {term}")
            }
            Fact::MembersChanged { id, voters } => {
                tracing::info!(list = %id, voters, "stored a new member list")
            }
            Fact::ChangeProposed { id, subject } => {
                tracing::info!(list = %id, subject, "membership change proposed")
            }
            Fact::MembersCommitted { id } => {
                tracing::info!(list = %id, "member list committed by a majority")
            }
            Fact::ChangeRefused { reason } => {
                tracing::warn!(%reason, "membership change refused")
            }
            Fact::GivenUp { by } => tracing::error!(
                by,
                "node {by} refused this node: a forced recovery (bully recover) gave it up. \
                 It stood down for good: it never leads, votes or acks again. Wipe its data \
                 dir and add it back as a new member (bully member add)"
            ),
        }
    }

    /// An `on_elected` finished: marks its epoch ready if the node still leads it;
    /// returns for how long to resign when it failed and the node must.
    ///
    /// "Still leads" is the published view, not read against the lease: a lease that
    /// lapsed a moment ago and that a late ack renewed before the machine noticed (so
    /// the node never left office, and no new `on_elected` will come) must not leave
    /// the epoch not ready for good. Readers still see it not ready while the lease is
    /// lapsed: [`Status::ready`] is read through [`Status::as_of_now`].
    pub fn elected_hook_done(&self, done: ElectedHookDone) -> Option<u64> {
        let published = self.status.borrow().clone();
        match self.readiness.after_elected_hook(done, &published) {
            AfterElectedHook::Stale => None,
            AfterElectedHook::Ready(epoch) => {
                self.status.send_modify(|s| s.ready_epoch = epoch);
                None
            }
            AfterElectedHook::Stay => {
                tracing::warn!("on_elected failed; staying coordinator, not ready for clients");
                None
            }
            AfterElectedHook::Resign { for_ms } => {
                tracing::warn!(for_ms, "on_elected failed; resigning");
                Some(for_ms)
            }
        }
    }

    /// Where the node's HTTP endpoint now listens (a reload may move it), so the
    /// members' `/cluster` give its `api_url`.
    pub fn set_http(&mut self, http: Option<crate::api::HttpEndpoint>) {
        self.status.send_if_modified(|s| {
            let changed = s.http != http;
            s.http = http;
            changed
        });
    }

    /// New readiness settings (a reload): they apply to the next view and the next
    /// finished `on_elected`, except that a coordinator not ready yet is ready at once
    /// when it no longer has to wait (`coordinator_ready = "elected"`, or no
    /// `on_elected`). A coordinator already ready stays ready for its epoch.
    pub fn set_readiness(&mut self, readiness: Readiness) {
        self.readiness = readiness;
        if !readiness.at_once() {
            return;
        }
        // The published view, as in `elected_hook_done`: a momentary lapse must not
        // leave the node not ready once it is read as leading again.
        let published = self.status.borrow().clone();
        if published.role == Role::Coordinator && !published.ready() {
            self.status.send_modify(|s| s.ready_epoch = published.epoch);
        }
    }

    /// Waits for the hooks queued so far (a stopping node's `on_demoted`); the hook
    /// runner then ends.
    pub async fn finish_hooks(&self) {
        self.hooks.finish().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::HooksConfig;
    use crate::node::commands::hooks::HookReports;
    use crate::node::shared::tasks::NodeTasks;
    use tokio::sync::mpsc;

    /// A quorum-mode publisher of node 2 that waits for `on_elected` before it is ready.
    fn publisher(dir: &std::path::Path) -> (Publisher, watch::Receiver<Status>) {
        let initial = Status::starting_candidate(2, &[1, 3]);
        let (status, readers) = watch::channel(initial);
        let (led, led_rx) = watch::channel(None);
        let metrics = Arc::new(Metrics::new(2));
        let (elected, _) = mpsc::unbounded_channel();
        let reports = HookReports {
            metrics: metrics.clone(),
            elected,
            led: led_rx,
            log: None,
        };
        let tasks = NodeTasks::new();
        let hooks = Hooks::start(
            HooksConfig::default(),
            dir.into(),
            dir.into(),
            reports,
            &tasks,
        );
        let readiness = Readiness::waiting_for_on_elected(5_000);
        let (grants, _) = watch::channel(Grant::none(2));
        let watches = Watches {
            status,
            led,
            grants,
        };
        (Publisher::new(watches, metrics, hooks, readiness), readers)
    }

    #[tokio::test]
    async fn an_on_elected_ending_in_a_lapse_is_ready_once_the_lease_is_back() {
        let dir = tempfile::tempdir().unwrap();
        let (mut p, mut readers) = publisher(dir.path());
        let epoch = Some(Epoch { term: 4, leader: 2 });
        let leads = View {
            id: 2,
            role: Role::Coordinator,
            epoch,
            eligible: true,
            incarnation: 1,
        };
        let now = BootInstant::now();
        p.view(leads, Some(now + Duration::from_secs(60)));
        assert!(!readers.borrow_and_update().as_of_now().ready());

        // The lease lapses; the machine has not noticed yet, and on_elected ends now.
        p.lease(Some(now - Duration::from_millis(1)));
        assert_eq!(readers.borrow().as_of_now().role, Role::Candidate);
        let done = ElectedHookDone {
            epoch,
            succeeded: true,
        };
        assert_eq!(p.elected_hook_done(done), None, "no resign on success");
        assert!(
            !readers.borrow().as_of_now().ready(),
            "not ready while the lease is lapsed"
        );

        // A late ack renews the lease for the same epoch: readers are woken, and ready.
        p.lease(Some(BootInstant::now() + Duration::from_secs(60)));
        assert!(
            readers.has_changed().unwrap(),
            "the lease's return wakes watchers"
        );
        let back = readers.borrow_and_update().as_of_now();
        assert!(back.ready(), "ready again once it leads again: {back:?}");
        p.lease(Some(BootInstant::now() + Duration::from_secs(61)));
        assert!(
            !readers.has_changed().unwrap(),
            "a lease that only moves on wakes nobody"
        );
    }

    #[tokio::test]
    async fn grants_are_numbered_and_a_repeat_wakes_nobody() {
        let dir = tempfile::tempdir().unwrap();
        let (p, _readers) = publisher(dir.path());
        let mut keepers = p.grants.subscribe();
        let leads = Grant {
            epoch: Some(Epoch { term: 4, leader: 2 }),
            ..Grant::none(2)
        };
        p.grant(leads);
        assert!(keepers.has_changed().unwrap());
        assert_eq!(keepers.borrow_and_update().seq, 1);
        p.grant(leads);
        assert!(!keepers.has_changed().unwrap(), "the same grant again");
        p.grant(Grant::none(2));
        assert_eq!(
            keepers.borrow_and_update().seq,
            2,
            "the withdrawal is grant 2"
        );
    }
}
