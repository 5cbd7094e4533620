//! `bully leader`: which node leads, asked of every endpoint at once (with `--config`,
//! the node in that file first, then all its peers unless its answer settles it, see
//! [`OWN_NODE_ALONE`]), each answering read-index style
//! (docs/design.md#asking-who-leads, src/node/serve/forward.rs): a coordinator answers
//! for itself, read against its own lease (Q4); any other member asks the coordinator it
//! follows and returns that answer beside its own.
//!
//! The rule, in order:
//! 1. A coordinator that said it leads, to us or to a member that asked it for us,
//!    counts first: its word is read against its own lease at the moment it answered.
//!    Two of them (classic mode in a partition): the higher epoch, with a warning.
//! 2. Otherwise, in quorum mode nobody is named (exit 1): the followers' view is
//!    reported with its age and why the coordinator did not confirm. A follower's view
//!    alone cannot say whether the coordinator died a moment after its last heartbeat.
//! 3. In classic mode, which has no lease, the followers' view is named (exit 0) while
//!    it is younger than D, the age at which they would suspect the coordinator
//!    themselves, unless the coordinator answered that it does not lead.

use super::endpoints::{self, Answer};
use super::{print_json, QueryArgs};
use crate::api::Status;
use crate::client::Client;
use crate::protocol::{Epoch, Mode, NodeId, Role, Timing};
use std::process::ExitCode;

/// One member's answer to a leader query (src/api/request.rs).
pub use crate::api::LeaderReply as Reply;

/// What the answers say about the coordinator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The coordinator said it leads, under its lease: to us (`through` empty) or to
    /// the members in `through`, which asked it for us.
    Confirmed {
        status: Box<Status>,
        through: Vec<NodeId>,
    },
    /// Classic mode: the coordinator did not confirm, and followers whose view is
    /// younger than D name it.
    Followers(Seen),
    /// Followers name a coordinator that did not confirm it leads (quorum mode), or
    /// whose view is too old (classic mode), or that said it does not lead.
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
    /// How long the youngest follower's promise still keeps any other coordinator out
    /// (quorum mode: D after its last ack).
    pub promise_ms: Option<u64>,
    /// Why the view does not count, when it does not.
    pub why: Option<String>,
}

/// With `--config` of a quorum-mode node, how long the node in that file is asked
/// alone before its peers are asked too: its answer settles the question (its
/// coordinator's word, relayed read-index style) and on loopback comes within a few
/// milliseconds, while asking every member at once costs a handshake each, which on
/// two cores doubled the time (benches/query_latency.rs). An answer that does not
/// settle it, or none by then, and the peers are asked at once. Classic mode waits
/// for every answer anyway (two coordinators in a partition are reported), so all
/// are asked at once.
const OWN_NODE_ALONE: std::time::Duration = std::time::Duration::from_millis(25);

/// Classic mode: how long after its last heartbeat a follower's view is named, the D
/// after which the follower suspects the coordinator itself.
pub fn classic_fresh_ms(timing: &Timing) -> u64 {
    timing.suspect_after_ms
}

/// Judges the replies that came back (see the module docs).
pub fn decide(replies: &[Reply]) -> Verdict {
    let direct = replies
        .iter()
        .map(|r| (&r.own, None))
        .filter(|(s, _)| leads(s));
    let relayed = replies.iter().filter_map(|r| match &r.coordinator {
        Some(Ok(s)) if leads(s) => Some((s, Some(r.own.id))),
        _ => None,
    });
    let confirmed: Vec<(&Status, Option<NodeId>)> = direct.chain(relayed).collect();
    if let Some((best, _)) = confirmed.iter().max_by_key(|(s, _)| s.epoch) {
        let asked_directly = confirmed
            .iter()
            .any(|(s, via)| s.id == best.id && via.is_none());
        let mut through: Vec<NodeId> = confirmed
            .iter()
            .filter(|(s, _)| s.id == best.id && !asked_directly)
            .filter_map(|(_, via)| *via)
            .collect();
        through.sort_unstable();
        through.dedup();
        return Verdict::Confirmed {
            status: Box::new((*best).clone()),
            through,
        };
    }
    followers_view(replies)
}

/// A reply that settles the question alone: in quorum mode a coordinator's word, to us
/// or relayed, is read against its own lease, and no other coordinator's lease can
/// overlap it, so the other answers cannot change the verdict. In classic mode every
/// answer is waited for (two coordinators in a partition are reported).
fn settles(reply: &Reply) -> bool {
    let relayed = matches!(&reply.coordinator, Some(Ok(s)) if leads(s) && s.mode == Mode::Quorum);
    relayed || reply.own.mode == Mode::Quorum && leads(&reply.own)
}

/// A node that says it leads: coordinator of its own epoch.
fn leads(s: &Status) -> bool {
    s.role == Role::Coordinator && s.coordinator() == Some(s.id)
}

/// Rules 2 and 3: what the followers say, when no coordinator confirmed.
fn followers_view(replies: &[Reply]) -> Verdict {
    let followers = replies.iter().filter(|r| {
        r.own.role == Role::Follower && r.own.coordinator().is_some() && r.own.epoch.is_some()
    });
    let newest = followers.clone().max_by_key(|r| r.own.epoch);
    let Some((newest, epoch)) = newest.and_then(|r| Some((r, r.own.epoch?))) else {
        return Verdict::Unknown;
    };
    let coordinator = newest.own.coordinator().unwrap_or(epoch.leader);
    let by: Vec<&Reply> = followers.filter(|r| r.own.epoch == Some(epoch)).collect();
    let age_ms = by.iter().filter_map(|r| r.own.heartbeat_age_ms).min();
    let timing = newest.own.timing;
    let mode = newest.own.mode;
    let said_otherwise = by.iter().find_map(|r| match &r.coordinator {
        Some(Ok(s)) if s.id == coordinator => Some(format!(
            "node {coordinator} answered that it is a {}",
            s.role
        )),
        _ => None,
    });
    let unanswered: Vec<String> = by
        .iter()
        .filter_map(|r| match &r.coordinator {
            Some(Err(e)) => Some(e.clone()),
            _ => None,
        })
        .collect();
    let not_confirmed = match unanswered.is_empty() {
        true => format!("coordinator {coordinator} did not confirm that it leads"),
        false => unanswered.join("; "),
    };
    let fresh = age_ms.is_some_and(|a| a <= classic_fresh_ms(&timing));
    let why = match (said_otherwise, mode) {
        (Some(said), _) => Some(said),
        (None, Mode::Quorum) => Some(not_confirmed),
        (None, Mode::Classic) if !fresh => Some(format!(
            "{not_confirmed}, and the followers' view is older than D ({} ms)",
            classic_fresh_ms(&timing)
        )),
        (None, Mode::Classic) => None,
    };
    let promise_ms = match mode {
        Mode::Quorum => age_ms.and_then(|a| timing.suspect_after_ms.checked_sub(a)),
        Mode::Classic => None,
    }
    .filter(|&ms| ms > 0);
    let seen = Seen {
        coordinator,
        epoch,
        mode,
        by: by
            .iter()
            .map(|r| (r.own.id, r.own.heartbeat_age_ms))
            .collect(),
        age_ms,
        promise_ms,
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
    let ask = |client: Client| async move { client.leader().await };
    let enough = endpoints::Enough::When(settles);
    let lead = (targets.own_mode == Some(Mode::Quorum)).then_some(OWN_NODE_ALONE);
    let answers = endpoints::ask_all_with(&targets, args.timeout, enough, lead, ask).await;
    let replies: Vec<Reply> = answers
        .iter()
        .filter_map(|a| a.status.as_ref().ok().cloned())
        .collect();
    if replies.is_empty() {
        for answer in &answers {
            if let Err(e) = &answer.status {
                eprintln!("error: {e}");
            }
        }
        return ExitCode::from(2);
    }
    warn_of_two_coordinators(&answers);
    let verdict = decide(&replies);
    if args.json {
        print_json(&json(&verdict));
    } else {
        println!("{}", text(&verdict));
    }
    match verdict {
        Verdict::Confirmed { .. } | Verdict::Followers(_) => ExitCode::SUCCESS,
        Verdict::Stale(_) | Verdict::Unknown => ExitCode::from(1),
    }
}

/// Two nodes that both say they lead (classic mode in a partition) are worth a warning;
/// followers still catching up are not.
fn warn_of_two_coordinators(answers: &[Answer<Reply>]) {
    let statuses: Vec<Answer> = answers
        .iter()
        .filter_map(|a| {
            let reply = a.status.as_ref().ok()?;
            Some(Answer {
                endpoint: a.endpoint.clone(),
                status: Ok(reply.own.clone()),
            })
        })
        .collect();
    let leading = statuses
        .iter()
        .filter_map(|a| a.status.as_ref().ok())
        .filter(|s| s.role == Role::Coordinator)
        .count();
    if leading > 1 {
        if let Some(text) = endpoints::disagreement(&statuses) {
            eprintln!("warning: {text}");
        }
    }
}

/// The one-line answer.
pub fn text(verdict: &Verdict) -> String {
    match verdict {
        Verdict::Confirmed { status: s, through } => format!(
            "{} (epoch {}, fencing token {}, {} mode, {})",
            s.id,
            s.epoch.map(|e| e.to_string()).unwrap_or_default(),
            s.token().map(|t| t.to_string()).unwrap_or_default(),
            s.mode,
            match through.is_empty() {
                true => "answered by the coordinator".to_string(),
                false => format!("confirmed by the coordinator to {}", nodes_of(through)),
            }
        ),
        Verdict::Followers(seen) => format!(
            "{} (epoch {}, fencing token {}, {} mode, seen by {}; last heartbeat {} ms ago; \
             not confirmed: {})",
            seen.coordinator,
            seen.epoch,
            seen.epoch.token(),
            seen.mode,
            nodes(&seen.by),
            seen.age_ms.unwrap_or(0),
            "the coordinator did not answer (classic mode has no lease)"
        ),
        Verdict::Stale(seen) => format!(
            "no coordinator known for sure: {} named node {} at epoch {} (last heartbeat {}{}), \
             but {}",
            nodes(&seen.by),
            seen.coordinator,
            seen.epoch,
            seen.age_ms
                .map(|a| format!("{a} ms ago"))
                .unwrap_or_else(|| "never".into()),
            seen.promise_ms
                .map(|ms| format!("; no other node can lead for {ms} ms more"))
                .unwrap_or_default(),
            seen.why.as_deref().unwrap_or("")
        ),
        Verdict::Unknown => "no coordinator known".to_string(),
    }
}

fn nodes(by: &[(NodeId, Option<u64>)]) -> String {
    let ids: Vec<NodeId> = by.iter().map(|(id, _)| *id).collect();
    nodes_of(&ids)
}

fn nodes_of(ids: &[NodeId]) -> String {
    let ids: Vec<String> = ids.iter().map(|id| id.to_string()).collect();
    format!(
        "node{} {}",
        if ids.len() > 1 { "s" } else { "" },
        ids.join(", ")
    )
}

/// The `--json` answer: `coordinator`, `epoch` and `token` are set exactly when the exit
/// code is 0; `source` says whose word counted (`through`: the members that asked the
/// coordinator for us); a stale view is under `stale`.
pub fn json(verdict: &Verdict) -> serde_json::Value {
    match verdict {
        Verdict::Confirmed { status: s, through } => serde_json::json!({
            "coordinator": s.coordinator(),
            "epoch": s.epoch,
            "token": s.token(),
            "mode": s.mode,
            "source": "coordinator",
            "through": through,
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
                "promise_ms": seen.promise_ms,
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

    fn leader(mode: Mode) -> Status {
        node(5, Role::Coordinator, Some(E5), None, mode)
    }

    /// Follower `id` of node 5 at lag `age`, with what node 5 told it (if it asked).
    fn follower(id: NodeId, age: u64, mode: Mode, asked: Option<Result<Status, String>>) -> Reply {
        Reply {
            own: node(id, Role::Follower, Some(E5), Some(age), mode),
            coordinator: asked,
        }
    }

    fn unreachable() -> Option<Result<Status, String>> {
        Some(Err("coordinator 5 did not answer node 1: timed out".into()))
    }

    /// The client stops waiting at a coordinator's own word only in quorum mode, and
    /// never at a follower's view or an unanswered relay.
    #[test]
    fn only_a_coordinators_word_in_quorum_mode_settles_the_question() {
        let direct = |mode| Reply {
            own: leader(mode),
            coordinator: None,
        };
        assert!(settles(&direct(Mode::Quorum)));
        assert!(!settles(&direct(Mode::Classic)));
        assert!(settles(&follower(
            1,
            10,
            Mode::Quorum,
            Some(Ok(leader(Mode::Quorum)))
        )));
        assert!(!settles(&follower(
            1,
            10,
            Mode::Classic,
            Some(Ok(leader(Mode::Classic)))
        )));
        assert!(!settles(&follower(1, 10, Mode::Quorum, unreachable())));
        assert!(!settles(&follower(1, 10, Mode::Quorum, None)));
    }

    #[test]
    fn a_follower_relays_the_coordinators_own_word_whatever_its_heartbeat_age() {
        for mode in [Mode::Quorum, Mode::Classic] {
            // 90 ms since the last heartbeat: the old window (D - 2.5 h) threw this away.
            let reply = follower(1, 590, mode, Some(Ok(leader(mode))));
            let Verdict::Confirmed { status, through } = decide(&[reply]) else {
                panic!("{mode}")
            };
            assert_eq!((status.id, through), (5, vec![1]));
        }
    }

    #[test]
    fn the_coordinators_own_answer_wins_and_is_not_called_relayed() {
        let direct = Reply {
            own: leader(Mode::Quorum),
            coordinator: None,
        };
        let relayed = follower(1, 10, Mode::Quorum, Some(Ok(leader(Mode::Quorum))));
        let verdict = decide(&[relayed, direct]);
        let Verdict::Confirmed { status, through } = &verdict else {
            panic!("{verdict:?}")
        };
        assert_eq!((status.id, through.len()), (5, 0));
        assert!(text(&verdict).contains("answered by the coordinator"));
    }

    #[test]
    fn in_quorum_mode_a_fresh_view_is_not_enough_without_the_coordinator() {
        let verdict = decide(&[
            follower(1, 5, Mode::Quorum, unreachable()),
            follower(2, 20, Mode::Quorum, unreachable()),
        ]);
        let Verdict::Stale(seen) = &verdict else {
            panic!("{verdict:?}")
        };
        assert_eq!((seen.age_ms, seen.promise_ms), (Some(5), Some(595)));
        let line = text(&verdict);
        assert!(line.contains("did not answer node 1"), "{line}");
        assert!(
            line.contains("no other node can lead for 595 ms more"),
            "{line}"
        );
        assert_eq!(json(&verdict)["coordinator"], serde_json::Value::Null);
        assert_eq!(json(&verdict)["stale"]["coordinator"], 5);
    }

    #[test]
    fn in_classic_mode_the_view_counts_until_the_followers_would_suspect() {
        let young = follower(1, 599, Mode::Classic, unreachable());
        assert!(matches!(decide(&[young]), Verdict::Followers(_)));
        let old = follower(1, 601, Mode::Classic, unreachable());
        assert!(matches!(decide(&[old]), Verdict::Stale(_)));
    }

    #[test]
    fn a_coordinator_that_says_it_does_not_lead_overrules_its_followers() {
        let deposed = node(5, Role::Candidate, None, None, Mode::Classic);
        let verdict = decide(&[follower(1, 5, Mode::Classic, Some(Ok(deposed)))]);
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
        let candidate = Reply {
            own: node(1, Role::Candidate, None, None, Mode::Quorum),
            coordinator: None,
        };
        assert_eq!(decide(&[candidate]), Verdict::Unknown);
        assert_eq!(json(&Verdict::Unknown)["source"], "none");
    }

    #[test]
    fn json_names_the_coordinator_exactly_when_the_exit_is_zero() {
        let status = Box::new(leader(Mode::Quorum));
        let value = json(&Verdict::Confirmed {
            status,
            through: vec![2],
        });
        assert_eq!(value["coordinator"], 5);
        assert_eq!(value["token"], E5.token());
        assert_eq!(value["source"], "coordinator");
        assert_eq!(value["through"][0], 2);
    }
}
