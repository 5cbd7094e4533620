//! `bully leader`: which node leads, from the answers of every endpoint (with
//! `--config`, the node and all its peers), judged so that a deposed coordinator is not
//! named once its lease may have run out.
//!
//! The rule, in order:
//! 1. A node that says it is coordinator counts first: it reads its role against its
//!    own lease (see [`crate::api::Status::as_of`]), so its word is the best there is.
//!    Two of them (classic mode in a partition): the higher epoch, with a warning.
//! 2. If the coordinator the followers name answered and is *not* coordinator, its own
//!    word overrules theirs.
//! 3. Otherwise the followers' view counts only while it is fresh (see [`fresh_ms`]) and,
//!    in quorum mode, only when enough fresh followers saw it to have made the lease
//!    (a majority with the coordinator itself). A stale view is reported with its age as
//!    unknown (exit 1).

use super::endpoints::{self, Answer};
use super::{print_json, QueryArgs};
use crate::api::Status;
use crate::protocol::membership::majority_of;
use crate::protocol::{Epoch, Mode, NodeId, Role, Timing};
use std::process::ExitCode;

/// What the answers say about the coordinator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The coordinator itself answered that it leads, under its lease.
    Itself(Box<Status>),
    /// The coordinator did not answer; fresh followers vouch for it.
    Followers(Seen),
    /// Followers name a coordinator, but their view is too old (or too few hold it) to
    /// be sure its lease has not run out, or the coordinator said it does not lead.
    Stale(Seen),
    /// Nobody names a coordinator.
    Unknown,
}

/// A coordinator as the followers see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub coordinator: NodeId,
    pub epoch: Epoch,
    pub mode: Mode,
    /// The followers that name it, with their heartbeat lag.
    pub by: Vec<(NodeId, Option<u64>)>,
    /// The youngest lag among them (ms since the newest heartbeat any of them got).
    pub age_ms: Option<u64>,
    /// Why the view does not count, when it does not.
    pub why: Option<String>,
}

/// How long after its last heartbeat a follower's view counts: `D - 2.5 heartbeat`.
/// The coordinator's lease lasts `D - heartbeat` after the newest heartbeat a majority
/// acked (src/protocol/lease.rs); a pause can strike before the acks of the last one
/// arrive, losing a heartbeat period, and half a period more covers the heartbeat's
/// flight and the clocks' drift. Always at least 1 ms (the config keeps D > 2 heartbeat).
pub fn fresh_ms(timing: &Timing) -> u64 {
    timing
        .suspect_after_ms
        .saturating_sub(2 * timing.heartbeat_ms + timing.heartbeat_ms / 2)
        .max(1)
}

/// Judges the statuses that came back (see the module docs).
pub fn decide(statuses: &[Status]) -> Verdict {
    let leaders = statuses
        .iter()
        .filter(|s| s.role == Role::Coordinator && s.coordinator() == Some(s.id));
    if let Some(best) = leaders.max_by_key(|s| s.epoch) {
        return Verdict::Itself(Box::new(best.clone()));
    }
    let followers = statuses
        .iter()
        .filter(|s| s.role == Role::Follower && s.coordinator().is_some() && s.epoch.is_some());
    let Some(newest) = followers.clone().max_by_key(|s| s.epoch) else {
        return Verdict::Unknown;
    };
    let (coordinator, epoch) = (newest.coordinator().unwrap_or(0), newest.epoch.unwrap());
    let by: Vec<&Status> = followers.filter(|s| s.epoch == Some(epoch)).collect();
    let fresh = by
        .iter()
        .filter(|s| s.heartbeat_age_ms.is_some_and(|a| a <= fresh_ms(&s.timing)))
        .count();
    let members = newest.peers.len() + 1;
    let needed = match newest.mode {
        // The lease needs a majority with the coordinator's own vote.
        Mode::Quorum => majority_of(members).saturating_sub(1).max(1),
        Mode::Classic => 1,
    };
    let itself = statuses.iter().find(|s| s.id == coordinator);
    let why = match itself {
        Some(s) => Some(format!(
            "node {coordinator} answered that it is a {}",
            s.role
        )),
        None if fresh < needed => Some(format!(
            "the coordinator did not answer and {fresh} of the {needed} followers needed \
             heard it within {} ms",
            fresh_ms(&newest.timing)
        )),
        None => None,
    };
    let seen = Seen {
        coordinator,
        epoch,
        mode: newest.mode,
        by: by.iter().map(|s| (s.id, s.heartbeat_age_ms)).collect(),
        age_ms: by.iter().filter_map(|s| s.heartbeat_age_ms).min(),
        why,
    };
    match seen.why {
        None => Verdict::Followers(seen),
        Some(_) => Verdict::Stale(seen),
    }
}

/// `bully leader`: exit 0 with the coordinator, 1 when none is known for sure, 2 when
/// nobody answered.
pub async fn run(args: &QueryArgs) -> ExitCode {
    let targets = match endpoints::targets_or_exit(args, true) {
        Ok(targets) => targets,
        Err(code) => return code,
    };
    let answers = endpoints::ask_all(&targets, args.timeout, false).await;
    let statuses: Vec<Status> = answers
        .iter()
        .filter_map(|a| a.status.as_ref().ok().cloned())
        .collect();
    if statuses.is_empty() {
        for answer in &answers {
            if let Err(e) = &answer.status {
                eprintln!("error: {e}");
            }
        }
        return ExitCode::from(2);
    }
    warn_of_two_coordinators(&answers);
    let verdict = decide(&statuses);
    if args.json {
        print_json(&json(&verdict));
    } else {
        println!("{}", text(&verdict));
    }
    match verdict {
        Verdict::Itself(_) | Verdict::Followers(_) => ExitCode::SUCCESS,
        Verdict::Stale(_) | Verdict::Unknown => ExitCode::from(1),
    }
}

/// Two nodes that both say they lead (classic mode in a partition) are worth a warning;
/// followers still catching up are not.
fn warn_of_two_coordinators(answers: &[Answer]) {
    let leading = answers
        .iter()
        .filter_map(|a| a.status.as_ref().ok())
        .filter(|s| s.role == Role::Coordinator)
        .count();
    if leading > 1 {
        if let Some(text) = endpoints::disagreement(answers) {
            eprintln!("warning: {text}");
        }
    }
}

/// The one-line answer.
pub fn text(verdict: &Verdict) -> String {
    match verdict {
        Verdict::Itself(s) => format!(
            "{} (epoch {}, fencing token {}, {} mode, answered by the coordinator)",
            s.id,
            s.epoch.map(|e| e.to_string()).unwrap_or_default(),
            s.token().map(|t| t.to_string()).unwrap_or_default(),
            s.mode
        ),
        Verdict::Followers(seen) => format!(
            "{} (epoch {}, fencing token {}, {} mode, seen by {}; last heartbeat {} ms ago; \
             the coordinator did not answer)",
            seen.coordinator,
            seen.epoch,
            seen.epoch.token(),
            seen.mode,
            nodes(&seen.by),
            seen.age_ms.unwrap_or(0)
        ),
        Verdict::Stale(seen) => format!(
            "no coordinator known for sure: {} named node {} at epoch {} (last heartbeat {}), \
             but {}",
            nodes(&seen.by),
            seen.coordinator,
            seen.epoch,
            seen.age_ms
                .map(|a| format!("{a} ms ago"))
                .unwrap_or_else(|| "never".into()),
            seen.why.as_deref().unwrap_or("")
        ),
        Verdict::Unknown => "no coordinator known".to_string(),
    }
}

fn nodes(by: &[(NodeId, Option<u64>)]) -> String {
    let ids: Vec<String> = by.iter().map(|(id, _)| id.to_string()).collect();
    format!(
        "node{} {}",
        if ids.len() > 1 { "s" } else { "" },
        ids.join(", ")
    )
}

/// The `--json` answer: `coordinator`, `epoch` and `token` are set exactly when the exit
/// code is 0; `source` says whose word counted; a stale view is under `stale`.
pub fn json(verdict: &Verdict) -> serde_json::Value {
    match verdict {
        Verdict::Itself(s) => serde_json::json!({
            "coordinator": s.coordinator(),
            "epoch": s.epoch,
            "token": s.token(),
            "mode": s.mode,
            "source": "coordinator",
            "node": s.id,
            "role": s.role,
        }),
        Verdict::Followers(seen) => serde_json::json!({
            "coordinator": seen.coordinator,
            "epoch": seen.epoch,
            "token": seen.epoch.token(),
            "mode": seen.mode,
            "source": "followers",
            "followers": seen.by.iter().map(|(id, _)| id).collect::<Vec<_>>(),
            "heartbeat_age_ms": seen.age_ms,
        }),
        Verdict::Stale(seen) => serde_json::json!({
            "coordinator": null,
            "epoch": null,
            "token": null,
            "mode": seen.mode,
            "source": "none",
            "stale": {
                "coordinator": seen.coordinator,
                "epoch": seen.epoch,
                "followers": seen.by.iter().map(|(id, _)| id).collect::<Vec<_>>(),
                "heartbeat_age_ms": seen.age_ms,
                "why": seen.why,
            },
        }),
        Verdict::Unknown => serde_json::json!({
            "coordinator": null,
            "epoch": null,
            "token": null,
            "source": "none",
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMING: Timing = Timing {
        heartbeat_ms: 100,
        suspect_after_ms: 600,
        answer_timeout_ms: 100,
        coordinator_timeout_ms: 300,
        preempt_delay_ms: 0,
    };

    /// Node `id` of five, in `role` under `epoch`, with a heartbeat lag of `age`.
    fn node(id: NodeId, role: Role, epoch: Option<Epoch>, age: Option<u64>, mode: Mode) -> Status {
        let peers: Vec<NodeId> = (1..=5).filter(|&p| p != id).collect();
        let mut status = Status::for_test(id, role, epoch, mode, &peers);
        status.heartbeat_age_ms = age;
        status.timing = TIMING;
        status
    }

    const E5: Epoch = Epoch { term: 4, leader: 5 };

    fn follower(id: NodeId, age: u64) -> Status {
        node(id, Role::Follower, Some(E5), Some(age), Mode::Quorum)
    }

    #[test]
    fn fresh_is_d_minus_two_and_a_half_heartbeats_and_never_zero() {
        assert_eq!(fresh_ms(&TIMING), 350);
        let tight = Timing {
            heartbeat_ms: 100,
            suspect_after_ms: 201,
            ..TIMING
        };
        assert_eq!(fresh_ms(&tight), 1);
    }

    #[test]
    fn the_coordinators_own_answer_wins_over_older_followers() {
        let newer = Epoch { term: 6, leader: 4 };
        let leader = node(4, Role::Coordinator, Some(newer), None, Mode::Quorum);
        let verdict = decide(&[follower(1, 10), leader.clone(), follower(2, 10)]);
        assert_eq!(verdict, Verdict::Itself(Box::new(leader)));
    }

    #[test]
    fn fresh_followers_of_a_silent_coordinator_count_in_quorum_mode_only_as_a_majority() {
        // Five members: two fresh followers plus the coordinator make a majority.
        match decide(&[follower(1, 50), follower(2, 120)]) {
            Verdict::Followers(seen) => {
                assert_eq!(
                    (seen.coordinator, seen.epoch, seen.age_ms),
                    (5, E5, Some(50))
                )
            }
            other => panic!("{other:?}"),
        }
        // One fresh follower is not enough to have made the lease.
        assert!(matches!(decide(&[follower(1, 50)]), Verdict::Stale(_)));
        // In classic mode one fresh follower is.
        let classic = node(1, Role::Follower, Some(E5), Some(50), Mode::Classic);
        assert!(matches!(decide(&[classic]), Verdict::Followers(_)));
    }

    #[test]
    fn a_stale_view_is_unknown_with_its_age() {
        let verdict = decide(&[follower(1, 351), follower(2, 400), follower(3, 20)]);
        let Verdict::Stale(seen) = &verdict else {
            panic!("{verdict:?}")
        };
        assert_eq!(seen.age_ms, Some(20));
        assert!(
            text(&verdict).contains("last heartbeat 20 ms ago"),
            "{}",
            text(&verdict)
        );
        assert_eq!(json(&verdict)["coordinator"], serde_json::Value::Null);
        assert_eq!(json(&verdict)["stale"]["coordinator"], 5);
    }

    #[test]
    fn a_coordinator_that_says_it_does_not_lead_overrules_its_followers() {
        let deposed = node(5, Role::Candidate, None, None, Mode::Quorum);
        let verdict = decide(&[follower(1, 5), follower(2, 5), follower(3, 5), deposed]);
        let Verdict::Stale(seen) = &verdict else {
            panic!("{verdict:?}")
        };
        assert!(
            seen.why.as_deref().unwrap().contains("candidate"),
            "{seen:?}"
        );
    }

    #[test]
    fn nobody_naming_a_coordinator_is_unknown() {
        let candidate = node(1, Role::Candidate, None, None, Mode::Quorum);
        assert_eq!(decide(&[candidate]), Verdict::Unknown);
        assert_eq!(json(&Verdict::Unknown)["source"], "none");
    }

    #[test]
    fn json_names_the_coordinator_exactly_when_the_exit_is_zero() {
        let leader = node(5, Role::Coordinator, Some(E5), None, Mode::Quorum);
        let value = json(&Verdict::Itself(Box::new(leader)));
        assert_eq!(value["coordinator"], 5);
        assert_eq!(value["token"], E5.token());
        assert_eq!(value["source"], "coordinator");
    }
}
