//! Whether this node may lead, as a pure policy: its health (see [`HealthState`]), a
//! step-down or stand-aside period ([`super::step_down`], [`crate::node::serve::switchover`]), the
//! step-down's pending handover, a switchover's hold, peers whose config disagrees
//! with ours ([`ConfigConflicts`]), and a `[watchdog]` device that `mode = "required"`
//! asks for but that cannot be armed ([`super::watchdog`]). Like the machine it is fed
//! inputs with explicit millisecond times and answers with what to do; the runtime
//! carries that out (tells the machine, publishes, replies), so every rule here is
//! tested without tokio, channels or a clock.
//!
//! The reply owed to whoever asked for a step-down is the caller's type `R`: a oneshot
//! sender in the runtime, anything in the tests.

use super::config_conflict::ConfigConflicts;
use super::pause_gate::PauseGate;
use super::step_down::{self, Answered, Handover};
use crate::api::{HealthState, Ineligible, Status};
use crate::protocol::{Millis, NodeId, Role, Timing, View};
use crate::transport::ConfigMismatch;

/// The policy's state: why the node may or may not lead, and what it waits for.
#[derive(Debug)]
pub struct Eligibility<R> {
    health: HealthState,
    /// When a step-down or stand-aside ends and the node may lead again.
    stepped_down_until: Option<Millis>,
    /// A step-down waiting for another node to take over.
    handover: Option<Handover<R>>,
    /// Held back (ineligible) for a switchover to another node.
    hold: Option<Hold>,
    /// How long a step-down waits for a successor ([`step_down::handover_wait_ms`]).
    handover_wait_ms: Millis,
    /// How long a hold outlasts its target's leadership while the target is still
    /// connected ([`hold_grace_ms`]).
    hold_grace_ms: Millis,
    /// Peers seen with a config that disagrees with ours.
    config: ConfigConflicts,
    /// Why the required watchdog device cannot be armed, if it cannot.
    watchdog_unavailable: Option<String>,
    /// Whether the maintenance pause keeps this node from leading ([`PauseGate`]).
    pause: PauseGate,
}

/// What a deadline of the policy ([`Eligibility::next_deadline`]) brought.
#[derive(Debug, PartialEq, Eq)]
pub enum Expired<R> {
    /// The step-down (or stand-aside) period is over: the node may lead again.
    SteppedDownPeriodOver,
    /// A starting node's wait for its peers' first hellos is over.
    HelloWaitOver,
    /// No other node took over in time: the step-down is undone, and refused.
    HandoverTimedOut(Answered<R>),
}

impl<R> Eligibility<R> {
    /// A node whose health is `health`, not stepped down; its waits follow `timing`.
    pub fn new(health: HealthState, timing: &Timing) -> Self {
        Eligibility {
            health,
            stepped_down_until: None,
            handover: None,
            hold: None,
            handover_wait_ms: step_down::handover_wait_ms(timing),
            hold_grace_ms: hold_grace_ms(timing),
            config: ConfigConflicts::new(1),
            watchdog_unavailable: None,
            pause: PauseGate::default(),
        }
    }

    /// The same policy for a node starting at `now` with `peers`: the config rule
    /// counts disagreeing peers against them, and the node does not lead before its
    /// first hello with each has settled, or `hello_wait_ms` (D) has passed (see
    /// [`ConfigConflicts`]).
    pub fn with_peers(mut self, peers: &[NodeId], now: Millis, hello_wait_ms: Millis) -> Self {
        self.config = ConfigConflicts::starting(peers, now.saturating_add(hello_wait_ms));
        self
    }

    /// Health passing (or unchecked), not stepped down, no config conflict that
    /// forbids leading, the watchdog device armable when it is required, and no
    /// maintenance pause that reserves the role for another node.
    pub fn eligible(&self) -> bool {
        self.first_reason().is_none()
    }

    /// The maintenance pause keeps this node from leading (`Some(why)`, see
    /// [`crate::api::Pause::holds_back`]), or no longer does (`None`).
    pub fn set_paused(&mut self, reason: Option<String>) {
        let shown = reason.clone();
        if self.pause.set_held_back(reason) {
            match shown {
                Some(why) => tracing::warn!("ineligible: {why}"),
                None => {
                    tracing::info!("the maintenance pause no longer keeps this node from leading")
                }
            }
        }
    }

    /// This node compared its maintenance pause with `peer`'s (see [`PauseGate`]).
    pub fn pause_reconciled(&mut self, peer: NodeId) {
        self.pause.reconciled(peer);
    }

    /// Why the node may not lead (`None` when it may): the first reason
    /// [`Eligibility::eligible`] finds, in a few words for the event log (worded in
    /// src/api/ineligible.rs, as the status line words it).
    pub fn why_not(&self) -> Option<String> {
        self.first_reason().map(|why| why.to_string())
    }

    /// The first reason the node may not lead, checked in the order the status lists
    /// them (`Status::ineligible_reasons`).
    fn first_reason(&self) -> Option<Ineligible> {
        if let Some(why) = self.health.ineligible_reason() {
            return Some(Ineligible::Health(why));
        }
        if self.stepped_down_until.is_some() {
            return Some(Ineligible::SteppedDown);
        }
        if let Some(why) = self.config.reason() {
            return Some(Ineligible::ConfigConflict(why));
        }
        self.watchdog_unavailable
            .clone()
            .map(Ineligible::WatchdogUnavailable)
            .or_else(|| self.pause.reason())
    }

    /// Why the required watchdog device keeps this node from leading, if it does.
    pub fn watchdog_unavailable(&self) -> Option<String> {
        self.watchdog_unavailable.clone()
    }

    /// The required watchdog device could not be opened and armed (`Some(why)`, see
    /// [`super::watchdog::unavailable_reason`]), or can be again (`None`).
    pub fn set_watchdog_unavailable(&mut self, reason: Option<String>) {
        if let Some(why) = &reason {
            tracing::warn!("ineligible: {why}");
        }
        self.watchdog_unavailable = reason;
    }

    /// Why peers' configs keep this node from leading, if they do.
    pub fn config_conflict(&self) -> Option<String> {
        self.config.reason()
    }

    /// The transport saw `peer`'s config disagree with ours (`Some`), or agree again.
    /// Logs when that changes whether the configs allow this node to lead.
    pub fn on_peer_config(&mut self, peer: NodeId, mismatch: Option<&ConfigMismatch>) {
        let before = self.config.reason();
        self.config.on_peer(peer, mismatch.map(|m| m.kind));
        let after = self.config.reason();
        match (&before, &after) {
            (None, Some(why)) => tracing::warn!(peer, "ineligible: {why}"),
            (Some(_), None) => {
                tracing::info!(peer, "peers' configs no longer keep this node from leading")
            }
            _ => {}
        }
    }

    /// The health check's verdict as the policy knows it.
    pub fn health(&self) -> HealthState {
        self.health
    }

    /// When the current step-down or stand-aside ends, on the runtime's clock: its
    /// period's end, or earlier when a switchover's hold is being released.
    pub fn stepped_down_until(&self) -> Option<Millis> {
        let release = self.hold.and_then(|hold| hold.release_at);
        earliest(self.stepped_down_until, release)
    }

    /// When to call [`Eligibility::on_deadline`] next, if ever.
    pub fn next_deadline(&self) -> Option<Millis> {
        let handover = self.handover.as_ref().map(Handover::deadline);
        let policy = earliest(self.stepped_down_until(), handover);
        earliest(policy, self.config.gate_deadline())
    }

    /// A new health verdict (or a reload that removed the check).
    pub fn set_health(&mut self, health: HealthState) {
        self.health = health;
    }

    /// Becomes ineligible at `now` for `for_ms` and waits for another node (`to`, if
    /// given) to take over; `Err` with the reply and the refusal if it cannot start.
    pub fn step_down(
        &mut self,
        status: &Status,
        now: Millis,
        for_ms: u64,
        to: Option<NodeId>,
        reply: R,
    ) -> Result<(), Answered<R>> {
        let in_progress = self.handover.is_some();
        if let Some(reason) = step_down::refusal(status, for_ms, in_progress) {
            return Err(Answered {
                reply,
                answer: Err(reason),
            });
        }
        self.stepped_down_until = Some(now.saturating_add(for_ms));
        let wait = self.handover_wait_ms;
        self.handover = Some(Handover::new(reply, now, for_ms, wait, to));
        self.hold = to.map(|target| Hold::new(target, status));
        Ok(())
    }

    /// Stands aside at `now` for `for_ms` so that `target` can win a switchover: the
    /// answer for the coordinator that asked.
    pub fn stand_aside(
        &mut self,
        status: &Status,
        now: Millis,
        for_ms: u64,
        target: NodeId,
    ) -> Result<String, String> {
        if let Some(reason) = stand_aside_refusal(status, for_ms) {
            return Err(reason);
        }
        tracing::info!(for_ms, target, "standing aside for a switchover");
        self.hold = Some(Hold::new(target, status));
        self.stepped_down_until = Some(now.saturating_add(for_ms));
        Ok(format!("node {} stands aside for node {target}", status.id))
    }

    /// The earliest deadline has come: ends the step-down period, or (when the
    /// handover's deadline is earlier) undoes the step-down and refuses it. `status`
    /// names the peers in the refusal.
    pub fn on_deadline(&mut self, status: &Status) -> Option<Expired<R>> {
        let handover_at = self.handover.as_ref().map(Handover::deadline);
        let others = earliest(self.stepped_down_until(), handover_at);
        if let Some(gate) = self.config.gate_deadline() {
            if others.map_or(true, |at| gate <= at) {
                self.config.open_gate();
                tracing::info!("hello wait over; peers that did not answer count as agreeing");
                return Some(Expired::HelloWaitOver);
            }
        }
        let period_first = match (self.stepped_down_until(), handover_at) {
            (Some(until), Some(handover)) => until <= handover,
            (until, _) => until.is_some(),
        };
        if period_first {
            self.stepped_down_until = None;
            self.hold = None;
            tracing::info!("step-down period over");
            return Some(Expired::SteppedDownPeriodOver);
        }
        let handover = self.handover.take()?;
        tracing::warn!("step-down refused: no other eligible node took over");
        self.stepped_down_until = None;
        self.hold = None;
        let refused = handover.refuse(status, self.handover_wait_ms);
        Some(Expired::HandoverTimedOut(refused))
    }

    /// A view was published at `now`: answers a handover another node completed, and
    /// starts releasing a hold whose target has led and stopped leading (see
    /// [`Hold::on_view`]).
    pub fn on_view(&mut self, view: View, now: Millis) -> Option<Answered<R>> {
        let answered = match self.handover.take() {
            Some(handover) => match handover.complete_if_taken_over(view, now) {
                Ok(answered) => Some(answered),
                Err(waiting) => {
                    self.handover = Some(waiting);
                    None
                }
            },
            None => None,
        };
        if let Some(hold) = &mut self.hold {
            hold.on_view(view, now, self.hold_grace_ms);
        }
        self.pause.set_leading(view.role == Role::Coordinator);
        answered
    }

    /// A peer's connection came up or went down at `now`: its first hello has settled,
    /// a hold whose target is gone is released at once, and a peer come up is one to
    /// compare the maintenance pause with before this node may stand for election.
    pub fn on_peer(&mut self, peer: NodeId, connected: bool, now: Millis) {
        self.config.settled(peer);
        self.pause.on_link(peer, connected);
        if let Some(hold) = self.hold.as_mut().filter(|hold| hold.target == peer) {
            hold.on_link(connected, now);
        }
    }
}

/// How long a node held back for a switchover stays held after its target stopped
/// leading while still connected: the target may have resigned only to retry (in
/// quorum mode a declaration whose votes come back after the lease span is retried),
/// and releasing the hold at that moment hands leadership back to the highest node,
/// undoing the switchover. An answer timeout, a coordinator timeout and a suspicion
/// timeout cover one retried election; a target that is truly gone loses its
/// connection and releases the hold sooner.
fn hold_grace_ms(timing: &Timing) -> Millis {
    timing.answer_timeout_ms + timing.coordinator_timeout_ms + timing.suspect_after_ms
}

/// The earlier of two optional times.
fn earliest(a: Option<Millis>, b: Option<Millis>) -> Option<Millis> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A node held back for a switchover to `target`: it stays ineligible until its period
/// ends, or earlier once `target`, having led, stopped leading (at once when its
/// connection is down, else after the grace unless it leads again).
#[derive(Debug, Clone, Copy)]
struct Hold {
    target: NodeId,
    target_led: bool,
    /// Whether our connection to the target is up, as last reported.
    target_connected: bool,
    /// When the hold ends early because the target stopped leading.
    release_at: Option<Millis>,
}

impl Hold {
    fn new(target: NodeId, status: &Status) -> Hold {
        let target_connected = status.peers.iter().any(|p| p.id == target && p.connected);
        Hold {
            target,
            target_led: false,
            target_connected,
            release_at: None,
        }
    }

    /// The target leading again cancels a pending release; the target having led and
    /// no longer leading schedules one.
    fn on_view(&mut self, view: View, now: Millis, grace_ms: Millis) {
        if view.coordinator() == Some(self.target) {
            if self.release_at.take().is_some() {
                tracing::info!("the switchover target leads again; still held back");
            }
            self.target_led = true;
        } else if self.target_led && self.release_at.is_none() {
            let wait = if self.target_connected { grace_ms } else { 0 };
            tracing::info!(
                wait_ms = wait,
                "the switchover target stopped leading; held back until it leads again \
                 or the wait ends"
            );
            self.release_at = Some(now.saturating_add(wait));
        }
    }

    /// The target's connection changed; once it is down, a pending release is due now.
    fn on_link(&mut self, connected: bool, now: Millis) {
        self.target_connected = connected;
        if !connected {
            self.release_at = self.release_at.map(|at| at.min(now));
        }
    }
}

/// Why a node cannot stand aside now, if it cannot.
fn stand_aside_refusal(status: &Status, for_ms: u64) -> Option<String> {
    if for_ms == 0 {
        return Some("a stand-aside needs a duration above 0".into());
    }
    (status.role == Role::Coordinator).then(|| {
        format!(
            "node {} is the coordinator; ask it to step down instead",
            status.id
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Cells, Epoch, Mode};

    /// The handover wait and hold grace of the default timing: 1600 and 700 ms.
    const WAIT: Millis = 1_600;
    const GRACE: Millis = 700;

    #[test]
    fn waits_follow_the_default_timing() {
        let p: Eligibility<()> = Eligibility::new(HealthState::Unchecked, &Timing::default());
        assert_eq!((p.handover_wait_ms, p.hold_grace_ms), (WAIT, GRACE));
    }

    fn view(id: NodeId, role: Role, leader: Option<NodeId>, term: u64) -> View {
        View {
            id,
            role,
            epoch: leader.map(|leader| Epoch { term, leader }),
            eligible: true,
            incarnation: 1,
        }
    }

    /// Node 3 of 1..=3, leading term 5 with its peers connected.
    fn leading() -> Status {
        let mut status = Status::initial(
            view(3, Role::Coordinator, Some(3), 5),
            Mode::Quorum,
            Cells::default(),
            &[1, 2],
            0,
        );
        status.set_peer(1, true);
        status.set_peer(2, true);
        status
    }

    fn policy() -> Eligibility<&'static str> {
        Eligibility::new(HealthState::Unchecked, &Timing::default())
    }

    fn mismatch(kind: crate::transport::MismatchKind) -> ConfigMismatch {
        ConfigMismatch {
            kind,
            reason: "differs".into(),
        }
    }

    #[test]
    fn a_member_list_two_apart_forbids_leading_until_that_peer_agrees() {
        use crate::transport::MismatchKind::Members;
        let mut p = policy().with_peers(&[1, 2, 3, 4], 0, 300);
        for peer in [1, 2, 4] {
            p.on_peer(peer, true, 10);
            p.pause_reconciled(peer);
        }
        p.on_peer_config(3, Some(&mismatch(Members)));
        assert!(!p.eligible());
        let why = p.config_conflict().unwrap();
        assert!(why.contains("member list differs"), "{why}");
        p.on_peer_config(4, None);
        assert!(!p.eligible(), "another peer agreeing changes nothing");
        p.on_peer_config(3, None);
        assert!(p.eligible() && p.config_conflict().is_none());
    }

    #[test]
    fn settings_conflicts_forbid_leading_only_beyond_n_minus_q() {
        use crate::transport::MismatchKind::{Mode, Timing};
        let mut p = policy().with_peers(&[1, 2], 0, 300);
        p.on_peer_config(1, Some(&mismatch(Timing)));
        assert!(!p.eligible(), "node 2's first hello has not settled");
        p.on_peer(2, false, 5);
        assert!(
            p.eligible(),
            "1 of 3 disagreeing leaves a majority that agrees"
        );
        p.on_peer_config(2, Some(&mismatch(Mode)));
        assert!(!p.eligible());
        p.set_health(HealthState::from_verdict(true));
        assert!(!p.eligible(), "health does not lift a config conflict");
        p.on_peer_config(2, None);
        assert!(p.eligible());
    }

    #[test]
    fn a_starting_node_leads_once_every_peer_settled_or_after_the_hello_wait() {
        let mut p = policy().with_peers(&[1, 2], 1_000, 300);
        assert!(!p.eligible());
        assert_eq!(p.next_deadline(), Some(1_300));
        p.on_peer(1, true, 1_010);
        assert!(!p.eligible());
        p.on_peer(2, false, 1_020);
        assert!(!p.eligible(), "node 1's pause not compared yet");
        p.pause_reconciled(1);
        assert!(p.eligible(), "both settled: up, and unreachable");
        assert_eq!(p.next_deadline(), None);
        let mut p = policy().with_peers(&[1, 2], 1_000, 300);
        p.on_peer(1, true, 1_010);
        p.pause_reconciled(1);
        assert_eq!(p.on_deadline(&leading()), Some(Expired::HelloWaitOver));
        assert!(p.eligible(), "node 2 never answered: the wait ends");
    }

    #[test]
    fn the_pause_holds_back_a_follower_but_not_its_holder() {
        let mut p = policy();
        p.set_paused(Some("cluster paused".into()));
        assert!(!p.eligible());
        p.set_paused(None);
        assert!(p.eligible());
        p.on_peer(2, true, 10);
        assert!(!p.eligible(), "a peer come up is compared with first");
        p.pause_reconciled(2);
        assert!(p.eligible());
    }

    #[test]
    fn a_required_watchdog_that_cannot_be_armed_forbids_leading() {
        let mut p = policy();
        p.set_watchdog_unavailable(Some("watchdog unavailable (/dev/x: gone)".into()));
        assert!(!p.eligible());
        assert_eq!(
            p.watchdog_unavailable().as_deref(),
            Some("watchdog unavailable (/dev/x: gone)")
        );
        p.set_health(HealthState::from_verdict(true));
        assert!(!p.eligible(), "health does not lift it");
        p.set_watchdog_unavailable(None);
        assert!(p.eligible() && p.watchdog_unavailable().is_none());
    }

    #[test]
    fn health_gates_eligibility_until_the_first_pass() {
        let mut p: Eligibility<()> =
            Eligibility::new(HealthState::at_start(true), &Timing::default());
        assert!(!p.eligible(), "a configured check holds the node back");
        p.set_health(HealthState::from_verdict(true));
        assert!(p.eligible());
        p.set_health(HealthState::from_verdict(false));
        assert!(!p.eligible());
        p.set_health(HealthState::Unchecked);
        assert!(p.eligible(), "a removed check no longer gates");
        assert_eq!(p.next_deadline(), None);
    }

    #[test]
    fn a_step_down_answers_once_another_node_leads_and_ends_after_its_period() {
        let mut p = policy();
        p.step_down(&leading(), 100, 5_000, None, "client").unwrap();
        assert!(!p.eligible());
        assert_eq!(p.next_deadline(), Some(100 + WAIT), "the handover's wait");
        assert_eq!(p.on_view(view(3, Role::Candidate, None, 0), 150), None);
        let answered = p.on_view(view(3, Role::Follower, Some(2), 6), 340).unwrap();
        assert_eq!(answered.reply, "client");
        let text = answered.answer.unwrap();
        assert!(
            text.contains("node 2 took over at epoch 6@2 after 240 ms"),
            "{text}"
        );
        assert_eq!(p.next_deadline(), Some(5_100), "the period alone is left");
        assert!(!p.eligible());
        let over = p.on_deadline(&leading());
        assert_eq!(over, Some(Expired::SteppedDownPeriodOver));
        assert!(p.eligible() && p.next_deadline().is_none());
    }

    #[test]
    fn a_step_down_nobody_takes_over_is_undone_and_refused() {
        let mut p = policy();
        p.step_down(&leading(), 0, 60_000, None, "client").unwrap();
        assert_eq!(p.next_deadline(), Some(WAIT));
        let Some(Expired::HandoverTimedOut(refused)) = p.on_deadline(&leading()) else {
            panic!("the handover's deadline comes first");
        };
        let reason = refused.answer.unwrap_err();
        assert!(
            reason.contains("within 1600 ms (peers up: 1,2)"),
            "{reason}"
        );
        assert!(p.eligible(), "eligible again at once");
        assert_eq!(p.next_deadline(), None);
    }

    #[test]
    fn refused_up_front_when_it_cannot_start() {
        let mut p = policy();
        let refused = p.step_down(&leading(), 0, 0, None, "zero").unwrap_err();
        assert!(refused.answer.unwrap_err().contains("above 0"));
        let mut follower = leading();
        follower.apply_view(view(3, Role::Follower, Some(4), 6), 0);
        let refused = p.step_down(&follower, 0, 10, None, "follower").unwrap_err();
        assert_eq!(refused.reply, "follower");
        assert!(refused.answer.unwrap_err().contains("coordinator: 4"));
        p.step_down(&leading(), 0, 10, None, "first").unwrap();
        let again = p.step_down(&leading(), 1, 10, None, "second").unwrap_err();
        assert!(again.answer.unwrap_err().contains("already stepping down"));
        assert!(
            p.stand_aside(&leading(), 0, 10, 2).is_err(),
            "a coordinator"
        );
    }

    #[test]
    fn a_switchover_taken_by_another_node_is_refused() {
        let mut p = policy();
        p.step_down(&leading(), 0, 5_000, Some(1), "client")
            .unwrap();
        let answered = p.on_view(view(3, Role::Follower, Some(2), 6), 80).unwrap();
        let reason = answered.answer.unwrap_err();
        assert!(
            reason.contains("instead of node 1 (after 80 ms)"),
            "{reason}"
        );
    }

    /// Node 3 following node 4, standing aside at 10 for 30 s so that node 2 can lead.
    fn standing_aside_for_2() -> (Eligibility<&'static str>, Status) {
        let mut p = policy();
        let mut follower = leading();
        follower.apply_view(view(3, Role::Follower, Some(4), 6), 0);
        let done = p.stand_aside(&follower, 10, 30_000, 2).unwrap();
        assert_eq!(done, "node 3 stands aside for node 2");
        assert!(!p.eligible());
        assert_eq!(p.next_deadline(), Some(30_010));
        (p, follower)
    }

    #[test]
    fn a_stand_aside_ends_at_once_when_its_target_led_and_is_gone() {
        let (mut p, follower) = standing_aside_for_2();
        p.on_view(view(3, Role::Candidate, None, 0), 20);
        assert_eq!(
            p.next_deadline(),
            Some(30_010),
            "the target has not led yet"
        );
        p.on_view(view(3, Role::Follower, Some(2), 7), 30);
        assert_eq!(p.next_deadline(), Some(30_010), "the target leads");
        p.on_peer(2, false, 850);
        assert_eq!(p.next_deadline(), Some(30_010), "it still led last we saw");
        p.on_view(view(3, Role::Candidate, None, 0), 900);
        assert_eq!(p.next_deadline(), Some(900), "its leadership ended");
        assert_eq!(
            p.on_deadline(&follower),
            Some(Expired::SteppedDownPeriodOver)
        );
        assert!(p.eligible());
    }

    /// The switchover_quorum flake: node 2's first declaration got its votes back after
    /// the lease span, so it resigned and declared again. Releasing the hold at its
    /// resignation let node 4 (the highest) take leadership back.
    #[test]
    fn a_stand_aside_outlasts_a_connected_target_that_resigns_to_retry() {
        let (mut p, follower) = standing_aside_for_2();
        p.on_view(view(3, Role::Follower, Some(2), 7), 30);
        p.on_view(view(3, Role::Candidate, None, 0), 240);
        assert_eq!(
            p.next_deadline(),
            Some(240 + GRACE),
            "the grace, not at once"
        );
        assert!(!p.eligible());
        p.on_view(view(3, Role::Follower, Some(2), 8), 400);
        assert_eq!(
            p.next_deadline(),
            Some(30_010),
            "leading again: the hold stays"
        );
        assert_eq!(p.stepped_down_until(), Some(30_010));
        p.on_view(view(3, Role::Candidate, None, 0), 5_000);
        assert_eq!(p.next_deadline(), Some(5_000 + GRACE), "stopped again");
        p.on_peer(2, false, 5_100);
        assert_eq!(p.next_deadline(), Some(5_100), "gone: released at once");
        assert_eq!(
            p.on_deadline(&follower),
            Some(Expired::SteppedDownPeriodOver)
        );
        assert!(p.eligible() && p.next_deadline().is_none());
    }

    #[test]
    fn a_stand_aside_ends_after_the_grace_when_its_target_does_not_lead_again() {
        let (mut p, follower) = standing_aside_for_2();
        p.on_view(view(3, Role::Follower, Some(2), 7), 30);
        p.on_view(view(3, Role::Candidate, None, 0), 240);
        p.on_view(view(3, Role::Follower, Some(4), 9), 500);
        assert_eq!(
            p.next_deadline(),
            Some(240 + GRACE),
            "another leader: no change"
        );
        assert_eq!(
            p.on_deadline(&follower),
            Some(Expired::SteppedDownPeriodOver)
        );
        assert!(p.eligible());
    }
}
