//! Liveness: from any state, once every fault ends, a fair schedule (oldest link
//! first, then due timers, then the clock) reaches one coordinator that every live
//! node follows within the step bound. Also how the settled start is reached.

use super::fingerprint::FingerprintSet;
use super::transition::Transition;
use super::{fingerprint, Model, World};
use crate::checker::{Invariant, Violation};
use crate::protocol::membership::majority_of;
use crate::protocol::recovery::reports_needed;
use crate::protocol::{Epoch, Machine, Mode, Role};
use std::collections::VecDeque;

impl Model {
    /// Runs the fair schedule until one coordinator leads all and every link is empty.
    pub(super) fn settle(&self, mut w: World) -> Result<World, Violation> {
        let live: Vec<usize> = (0..self.n()).collect();
        for _ in 0..self.config.bounds.liveness_steps {
            if self.settled(&w, &live) && w.links.iter().all(VecDeque::is_empty) {
                return Ok(w);
            }
            let Some(step) = self.fair_transition(&w) else {
                break;
            };
            w = self.apply(&w, step)?;
        }
        let explanation = "the fault-free start-up did not settle".to_string();
        Err(Violation::new(
            Invariant::Convergence,
            0,
            w.now,
            explanation,
        ))
    }

    /// The fair schedule's next step: the oldest link first, then due timers, then time.
    pub(super) fn fair_transition(&self, w: &World) -> Option<Transition> {
        let n = self.n();
        (0..n * n)
            .find(|&k| !w.links[k].is_empty())
            .map(|k| Transition::Deliver {
                from: self.config.ids[k / n],
                to: self.config.ids[k % n],
            })
            .or_else(|| {
                (0..n)
                    .find(|&i| self.deadline(w, i).is_some_and(|d| d <= w.now))
                    .map(|i| Transition::Tick(self.config.ids[i]))
            })
            .or_else(|| {
                (0..n)
                    .filter_map(|i| self.deadline(w, i))
                    .min()
                    .map(Transition::Advance)
            })
    }

    /// Liveness from `w`: end every fault, then run a fair schedule (deliver the oldest
    /// link first, then fire due timers, then advance the clock) until one coordinator
    /// leads every live node, within the step bound.
    pub fn converges(&self, w: &World) -> Result<(), (Violation, Vec<Transition>)> {
        self.converges_cached(w, &mut FingerprintSet::default())
    }

    /// [`Model::converges`], skipping (and remembering) the fault-free states already
    /// known to converge: many states end their faults in the same place.
    pub(super) fn converges_cached(
        &self,
        w: &World,
        known: &mut FingerprintSet,
    ) -> Result<(), (Violation, Vec<Transition>)> {
        let mut w = w.clone();
        let mut taken: Vec<Transition> = Vec::new();
        if w.cut != 0 {
            w.cut = 0;
            taken.push(Transition::Heal);
        }
        for (i, node) in w.nodes.iter_mut().enumerate() {
            if node.paused {
                node.paused = false;
                taken.push(Transition::Resume(self.config.ids[i]));
            }
        }
        // A rolling restart onto a new D completes (the operator restarts the rest)
        // before a leader is owed, as before the hello stopped refusing another D.
        if self.config.restart_timing.is_some() {
            for i in 0..self.n() {
                if self.up(&w, i) && !w.nodes[i].restarted {
                    let id = self.config.ids[i];
                    for step in [Transition::Crash(id), Transition::Restart(id)] {
                        taken.push(step);
                        w = self.apply(&w, step).map_err(|v| (v, taken.clone()))?;
                    }
                }
            }
        }
        if !self.promised(&w) {
            return Ok(()); // nothing is promised
        }
        w.prompt_elections = Some(vec![(0, 0); self.n()]);
        let live: Vec<usize> = (0..self.n()).filter(|&i| self.up(&w, i)).collect();
        let mut visited: Vec<u64> = Vec::new();
        for _ in 0..self.config.bounds.liveness_steps {
            let fp = fingerprint(&w);
            if known.contains(&fp) || self.settled(&w, &live) {
                known.extend(visited);
                return Ok(());
            }
            visited.push(fp);
            let Some(step) = self.fair_transition(&w) else {
                break;
            };
            taken.push(step);
            w = self.apply(&w, step).map_err(|v| (v, taken.clone()))?;
        }
        // A change the schedule completed may have moved the cluster onto a list whose
        // majority is down (the operator removed a live member while another was
        // down): then nothing is promised from here on either.
        if self.settled(&w, &live) || !self.promised(&w) {
            known.extend(visited);
            return Ok(());
        }
        let roles: Vec<String> = live
            .iter()
            .filter_map(|&i| w.nodes[i].machine.as_ref())
            .map(|m| format!("n{} {} {:?}", m.id(), m.role_at(w.now), m.view().epoch))
            .collect();
        Err((
            Violation::new(
                Invariant::Convergence,
                0,
                w.now,
                format!(
                    "no single coordinator {} steps after every fault ended: {}",
                    self.config.bounds.liveness_steps,
                    roles.join(", ")
                ),
            ),
            taken,
        ))
    }

    /// Whether liveness is promised once every fault has ended in `w`: by the newest
    /// list a live node holds ([`Model::cluster_list`]), some live member may lead
    /// (healthy, a voter that is no witness nor learner), and a majority of its voters
    /// is up in quorum mode (anyone in classic mode). A node on an empty store votes
    /// and leads only once `M - q + 1` other members reported their terms
    /// (src/protocol/recovery.rs): with fewer of the list's members up, nothing is
    /// promised either.
    fn promised(&self, w: &World) -> bool {
        let Some(list) = self.cluster_list(w) else {
            return false;
        };
        let live: Vec<usize> = (0..self.n())
            .filter(|&i| self.up(w, i) && list.contains(self.config.ids[i]))
            .collect();
        let can_lead = live.iter().any(|&i| {
            let member = list.get(self.config.ids[i]);
            w.nodes[i].eligible && member.is_some_and(|m| m.may_lead())
        });
        // Faults have ended (no cut, no pause): seen from any live node alike.
        let enough = match (self.config.mode, live.first()) {
            (Mode::Quorum, Some(&i)) => self.majority_live(w, list, i),
            (Mode::Classic, Some(_)) => true,
            (_, None) => false,
        };
        let needed = reports_needed(list.members.len(), majority_of(list.voters().len()));
        let recovering = live.iter().any(|&i| {
            w.nodes[i]
                .machine
                .as_ref()
                .is_some_and(|m| m.recovery_progress().is_some())
        });
        can_lead && enough && (!recovering || live.len() > needed)
    }

    /// One coordinator, and every live member of its list follows its epoch (no
    /// candidate among them) and holds that same list; nodes outside it (the joining
    /// process before it is added, a removed member) are not waited for.
    fn settled(&self, w: &World, live: &[usize]) -> bool {
        let machines: Vec<&Machine> = live
            .iter()
            .filter_map(|&i| w.nodes[i].machine.as_ref())
            .collect();
        let leaders: Vec<&&Machine> = machines
            .iter()
            .filter(|m| m.role_at(w.now) == Role::Coordinator)
            .collect();
        let [leader] = leaders[..] else { return false };
        let epoch: Option<Epoch> = leader.view().epoch;
        let list = leader.members();
        machines.iter().filter(|m| list.contains(m.id())).all(|m| {
            m.view().epoch == epoch && m.view().role != Role::Candidate && m.members().id == list.id
        })
    }
}
