//! WAL retention (docs/design.md#keeping-postgresql): each server keeps one physical
//! slot per other data voter as the runtime does (`postgres_rules::slot_changes`, applied
//! after every look of a running server), a slot holds WAL from where its member's
//! standby last streamed, and a drawn fault, "WAL removed under a lagging standby" (a
//! burst of writes and a checkpoint), makes the leader's primary recycle every position
//! its slots do not hold: a slot further behind than `max_slot_wal_keep_size` is lost
//! and holds nothing. A standby whose next position is gone from its upstream cannot
//! stream (src/sim/postgres/replication.rs); its manager reads that, as the runtime
//! does by SQL ([`WalRemoved`]), and the decisions clone it afresh.
//!
//! The fault is drawn from an RNG of its own, so the seeds recorded before it was
//! modelled run as they did until it strikes.

use super::decisions::{slot_changes, Cluster, Office, Server, Slot, SlotChange, WalRemoved};
use super::log::Event;
use super::server::{SlotState, State};
use super::world::World;
use super::Sabotage;
use crate::protocol::NodeId;
use rand::Rng;

/// The chance a fault step removes WAL under the lagging standbys, in percent.
const REMOVAL_PERCENT: u32 = 4;

impl World {
    /// Draws the fault (during fault steps) and moves every slot a standby streams with
    /// to where that standby is.
    pub(super) fn retain(&mut self, faults: bool) {
        let ids: Vec<NodeId> = self.data_members().map(|m| m.id).collect();
        for &id in &ids {
            let Some(d) = self.member(id).pg.as_ref() else {
                continue;
            };
            let State::Standby {
                upstream: Some(up),
                streaming: true,
            } = d.state
            else {
                continue;
            };
            let at = d.wal.len();
            let name = decisions_name(id);
            if let Some(slot) = self
                .member_mut(up)
                .pg
                .as_mut()
                .and_then(|u| u.slots.get_mut(&name))
            {
                *slot = SlotState {
                    restart: Some(at),
                    lost: false,
                };
            }
        }
        if faults && self.spec.wal_removal && self.retention.rng.gen_ratio(REMOVAL_PERCENT, 100) {
            self.remove_wal();
        }
    }

    /// A burst of writes and a checkpoint on the leader's primary: every position no
    /// slot holds is recycled, and a slot further behind than the limit is lost.
    fn remove_wal(&mut self) {
        let Some(leader) = self.office.map(|h| h.leader) else {
            return;
        };
        let max_keep = self.retention.max_keep;
        // Nothing is recycled before it is archived (src/sim/postgres/archive.rs).
        let archived = (self.member(leader).pg.as_ref()).map(|d| self.archived_of(&d.wal));
        let Some(d) = self.member_mut(leader).pg.as_mut().filter(|d| d.primary()) else {
            return;
        };
        let end = d.wal.len();
        let mut floor = archived.map_or(end, |a| a.min(end));
        for slot in d.slots.values_mut() {
            let Some(restart) = slot.restart.filter(|_| !slot.lost) else {
                continue;
            };
            match max_keep {
                Some(keep) if end - restart.min(end) > keep => slot.lost = true,
                _ => floor = floor.min(restart),
            }
        }
        if floor <= d.kept_from {
            return;
        }
        d.kept_from = floor;
        *self
            .summary
            .faults
            .entry("WAL removed under the lagging standbys")
            .or_default() += 1;
        self.event(Event::Fault(format!(
            "WAL removed under the lagging standbys ({leader} keeps from #{floor})"
        )));
    }

    /// What member `id`'s manager reads from its upstream when its standby does not
    /// stream ([`WalRemoved`]): the coordinator's primary no longer holds its next
    /// position; `settled` as src/sim/postgres/archive.rs computes it. The sabotages
    /// that bring back the old manager read nothing.
    pub(super) fn wal_removed_seen(
        &self,
        id: NodeId,
        server: &Server,
        office: Office,
        cluster: &Cluster,
        settled: bool,
    ) -> Option<WalRemoved> {
        if matches!(
            self.spec.sabotage,
            Some(Sabotage::WalRemovedUnseen | Sabotage::NoOpRewindResets)
        ) {
            return None;
        }
        let (
            Office::Following {
                server: Some(up), ..
            },
            Server::Running(r),
        ) = (office, server)
        else {
            return None;
        };
        if !r.in_recovery || r.streaming || !cluster.leader_primary {
            return None;
        }
        if !self.reach(id, up) {
            return None;
        }
        let own = self.member(id).pg.as_ref()?.wal.len();
        let kept_from = self.member(up).pg.as_ref()?.kept_from;
        (own < kept_from).then_some(WalRemoved {
            upstream: up,
            settled,
        })
    }

    /// The runtime's slot keeping after a look (src/node/postgres/manager.rs,
    /// `keep_slots`): `slot_changes` applied to a running server.
    pub(super) fn keep_slots(&mut self, id: NodeId, cluster: &Cluster) {
        let leading = matches!(self.office_of(id), Office::Leading { .. });
        let streaming: Vec<String> = self
            .data_members()
            .filter(|m| {
                m.pg.as_ref().is_some_and(|d| {
                    d.state
                        == State::Standby {
                            upstream: Some(id),
                            streaming: true,
                        }
                })
            })
            .map(|m| decisions_name(m.id))
            .collect();
        let Some(d) = self.member_mut(id).pg.as_mut().filter(|d| d.running()) else {
            return;
        };
        let leading_primary = leading && d.primary();
        let seen: Vec<Slot> = d
            .slots
            .iter()
            .map(|(name, s)| Slot {
                name: name.clone(),
                active: streaming.contains(name),
                reserved: s.restart.is_some(),
                lost: s.lost,
            })
            .collect();
        let end = d.wal.len();
        for change in slot_changes(cluster, leading_primary, &seen) {
            match change {
                SlotChange::Drop { name } => {
                    d.slots.remove(&name);
                }
                SlotChange::Create { name, reserve } => {
                    let restart = reserve.then_some(end);
                    d.slots.insert(
                        name,
                        SlotState {
                            restart,
                            lost: false,
                        },
                    );
                }
            }
        }
    }
}

/// The slot (and application) name of member `id`'s standby.
fn decisions_name(id: NodeId) -> String {
    super::decisions::application_name(id)
}
