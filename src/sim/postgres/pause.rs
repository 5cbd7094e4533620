//! The maintenance pause, drawn with its own RNG so the seeds recorded before it keep
//! their course when it is off (`Spec::pauses`): `bully pause` while a member leads,
//! for a while, sometimes with a server stopped by hand meanwhile (the tester's case,
//! issue 49), then `bully resume` (or the heal). While paused only the holder may lead
//! (docs/design.md#maintenance-pause) and the manager starts, stops, promotes, rewinds
//! and clones nothing: [`World::check_paused_act`] fails the run on any such act.

use super::decisions::Act;
use super::log::Event;
use super::world::World;
use super::Sabotage;
use crate::protocol::NodeId;
use rand::seq::SliceRandom;
use rand::Rng;

/// The chance a fault step pauses a cluster that is not paused, in percent.
const PAUSE_PERCENT: u32 = 3;

impl World {
    /// Whether the cluster is paused now.
    pub(super) fn paused(&self) -> bool {
        self.pause.holder.is_some()
    }

    /// Whether `id` may lead now: anyone unpaused, only the holder while paused.
    pub(super) fn may_lead(&self, id: NodeId) -> bool {
        self.pause.holder.map_or(true, |h| h == id)
    }

    /// During fault steps: resume when due, or pause (refused with no one leading) and
    /// maybe stop a server by hand. After them: resumed (the heal).
    pub(super) fn draw_pause(&mut self, faults: bool) {
        if self.paused() && (!faults || self.now >= self.pause.until) {
            self.pause.holder = None;
            self.event(Event::Fault("bully resume".into()));
            return;
        }
        if !faults || !self.spec.pauses || self.paused() {
            return;
        }
        let Some(h) = self.office else {
            return;
        };
        if !self.pause.rng.gen_ratio(PAUSE_PERCENT, 100) {
            return;
        }
        self.pause.holder = Some(h.leader);
        self.pause.until = self.now + self.pause.rng.gen_range(5..30);
        self.summary.pauses += 1;
        self.event(Event::Fault(format!("bully pause (holder {})", h.leader)));
        if self.pause.rng.gen_bool(0.5) {
            let running: Vec<NodeId> = self
                .data_members()
                .filter(|m| m.pg.as_ref().is_some_and(|d| d.running()))
                .map(|m| m.id)
                .collect();
            if let Some(&id) = running.choose(&mut self.pause.rng) {
                if let Some(d) = self.member_mut(id).pg.as_mut() {
                    d.stop(true);
                }
                self.event(Event::Fault(format!("server stopped by hand ({id})")));
            }
        }
    }

    /// Whether the decisions see the pause (the sabotage `PauseIgnored`: they do not).
    pub(super) fn pause_seen(&self) -> bool {
        self.paused() && self.spec.sabotage != Some(Sabotage::PauseIgnored)
    }

    /// While paused the manager only keeps a running primary's synchronous names and
    /// records: any other act breaks the pause (a server stopped by hand started
    /// again, a primary promoted, a rewind).
    pub(super) fn check_paused_act(&self, id: NodeId, act: &Act) -> Result<(), String> {
        let allowed = matches!(
            act,
            Act::Wait(_) | Act::SetSynchronous { .. } | Act::CommitSync { .. }
        );
        match self.paused() && !allowed {
            true => Err(format!(
                "{id}'s manager acted while the cluster was paused: {act:?}"
            )),
            false => Ok(()),
        }
    }
}
