//! `bully history`'s words: which event-log records ([`crate::history::Record`]) make a
//! line of the timeline, and what the line says. Left out: message traffic and the
//! simulator's bookkeeping (never in a node's log), `Persisted` (the node already
//! leaves it out of its reply, see [`crate::api::event_log::read_recent`]), and views
//! that repeat what is known: a coordinator's or candidate's view (the Declared,
//! Established, Demoted and ElectionStarted facts say it) and a follower's view of the
//! same epoch it already followed (eligibility changes republish it).

use crate::history::{Entry, Record};
use crate::protocol::{DemotionReason, Epoch, Fact, Millis, NodeId, Role};
use std::collections::BTreeMap;

/// One line of the timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub at_ms: Millis,
    pub node: NodeId,
    /// The record's name in the event log (`declared`, `demoted`, `hook_ran`, ...).
    pub kind: String,
    /// In words, e.g. "demoted from epoch 7@3: lease lapsed".
    pub text: String,
    /// The record's own fields as the event log holds them.
    pub details: serde_json::Value,
}

/// Turns a node's records into events, remembering per node which epoch it follows
/// so a republished view is not said twice.
#[derive(Debug, Default)]
pub struct Words {
    followed: BTreeMap<NodeId, Epoch>,
}

impl Words {
    /// The timeline's events of `entries` (in time order), in the same order.
    pub fn events(entries: &[Entry]) -> Vec<Event> {
        let mut words = Words::default();
        entries.iter().filter_map(|e| words.event(e)).collect()
    }

    /// The event `entry` makes, or `None` when it is left out.
    fn event(&mut self, entry: &Entry) -> Option<Event> {
        let text = self.text(entry)?;
        let (kind, details) = kind_and_details(&entry.record);
        Some(Event {
            at_ms: entry.at_ms,
            node: entry.node,
            kind,
            text,
            details,
        })
    }

    fn text(&mut self, entry: &Entry) -> Option<String> {
        Some(match &entry.record {
            Record::Started { incarnation } => {
                self.followed.remove(&entry.node);
                match incarnation {
                    0 | 1 => format!("started (incarnation {incarnation})"),
                    _ => format!("restarted (incarnation {incarnation})"),
                }
            }
            Record::View(view) => {
                let Some(epoch) = view.epoch.filter(|_| view.role == Role::Follower) else {
                    if view.role == Role::Coordinator {
                        self.followed.remove(&entry.node);
                    }
                    return None;
                };
                if self.followed.insert(entry.node, epoch) == Some(epoch) {
                    return None;
                }
                format!("follows node {} (epoch {epoch})", epoch.leader)
            }
            Record::Fact(fact) => fact_text(fact)?,
            Record::EligibilitySet { eligible: true, .. } => "became eligible to lead".to_string(),
            Record::EligibilitySet {
                eligible: false,
                why,
            } => match why {
                Some(why) => format!("became ineligible to lead: {why}"),
                None => "became ineligible to lead".to_string(),
            },
            Record::HookRan {
                hook,
                ok,
                took_ms,
                failure,
            } => {
                let took = seconds(*took_ms);
                match (ok, failure) {
                    (true, _) => format!("hook {hook} ran ({took})"),
                    (false, why) => {
                        let why = why.as_deref().unwrap_or("reason unknown");
                        format!("hook {hook} failed ({why}, {took})")
                    }
                }
            }
            Record::Misbehaved { peer, what } => {
                format!("closed node {peer}'s connection: {what}")
            }
            Record::PeerDown { peer } => format!("saw node {peer} go down"),
            Record::Crashed => "was killed".to_string(),
            Record::Paused => "was paused".to_string(),
            Record::Resumed => "resumed".to_string(),
            Record::Partitioned { cut_off } => format!("cut off from nodes {cut_off:?}"),
            Record::Lossy { percent } => format!("link loses {percent}% of messages"),
            Record::Healed => "network healed".to_string(),
            Record::StoreLost => "lost its data dir".to_string(),
            Record::Maintenance {
                paused: true,
                generation,
                holder,
            } => match holder {
                Some(holder) => format!(
                    "keeps the maintenance pause (generation {generation}): only node {holder} may lead"
                ),
                None => format!("keeps the maintenance pause (generation {generation}): nobody may lead"),
            },
            Record::Maintenance {
                paused: false,
                generation,
                ..
            } => format!("keeps the resume (generation {generation}): automatic failover is on"),
            Record::ForcedRecovery {
                members,
                to_config,
                term,
                ..
            } => format!(
                "was forced to a new member list {to_config} of nodes {members:?} after losing \
                 a majority (bully recover), term {term}"
            ),
            Record::ScheduledSwitchover { to, at_ms, outcome } => {
                let at = crate::wall_clock::time_of(*at_ms);
                let at = humantime::format_rfc3339_seconds(at);
                format!("switchover to node {to} scheduled for {at}: {outcome}")
            }
            Record::Persisted(_)
            | Record::Sent { .. }
            | Record::Received { .. }
            | Record::Lost { .. }
            | Record::PausedLease { .. } => return None,
        })
    }
}

fn fact_text(fact: &Fact) -> Option<String> {
    Some(match fact {
        Fact::ElectionStarted => "started an election".to_string(),
        Fact::Ranked { .. } => return None,
        Fact::Declared { epoch } => format!("declared itself coordinator, epoch {epoch}"),
        Fact::Established { epoch } => {
            format!("leads: a majority accepted epoch {epoch}")
        }
        Fact::Demoted { epoch, reason, .. } => {
            format!("demoted from epoch {epoch}: {}", demotion(reason))
        }
        Fact::RecoveryStarted {
            needed,
            survivors: false,
        } => format!("started on an empty store: waits for {needed} peers' terms"),
        Fact::RecoveryStarted {
            needed,
            survivors: true,
        } => format!("a forced recovery's survivor: waits for {needed} survivors' terms"),
        Fact::Recovered { term } => format!("recovered its term from its peers: {term}"),
        Fact::MembersChanged { id, voters } => {
            format!("lives by member list {id} ({voters} voters)")
        }
        Fact::ChangeProposed { id, subject } => {
            format!("proposed member list {id}, a change about node {subject}")
        }
        Fact::MembersCommitted { id } => format!("member list {id} committed"),
        Fact::ChangeRefused { reason } => format!("refused a member change: {reason}"),
        Fact::GivenUp { by } => {
            format!("was given up by a forced recovery (node {by} refused it): stood down for good")
        }
    })
}

/// Why a coordinator stopped leading, for someone reading a timeline.
fn demotion(reason: &DemotionReason) -> String {
    match reason {
        DemotionReason::LeaseLost => "lease lapsed (no majority acked in time)".to_string(),
        DemotionReason::Yielded { to } => format!("handed over to node {to}, which asked"),
        DemotionReason::Ineligible => "became ineligible (health check or step-down)".to_string(),
        DemotionReason::NewerEpoch => "saw a newer epoch".to_string(),
        DemotionReason::Stopped => "the node is stopping".to_string(),
    }
}

/// `0.2 s`, `12 ms`.
fn seconds(ms: u64) -> String {
    if ms < 100 {
        format!("{ms} ms")
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

/// The record's name and fields as the event log writes them: `{"fact":{"declared":
/// {...}}}` is kind `declared` with details `{"epoch":...}`; a bare name (`crashed`,
/// `election_started`) has no details.
fn kind_and_details(record: &Record) -> (String, serde_json::Value) {
    let mut value = serde_json::to_value(record).unwrap_or_default();
    loop {
        match value {
            serde_json::Value::String(name) => return (name, serde_json::json!({})),
            serde_json::Value::Object(map) if map.len() == 1 => {
                let Some((name, inner)) = map.into_iter().next() else {
                    return (String::new(), serde_json::Value::Null);
                };
                if name == "fact" {
                    value = inner;
                    continue;
                }
                // A newtype record (a view) keeps its fields as they are.
                return (name, inner);
            }
            other => return (String::new(), other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::View;

    fn follower(id: NodeId, epoch: Epoch, eligible: bool) -> Record {
        Record::View(View {
            id,
            role: Role::Follower,
            epoch: Some(epoch),
            eligible,
            incarnation: 1,
        })
    }

    #[test]
    fn a_failover_in_words_with_repeated_views_left_out() {
        let old = Epoch { term: 6, leader: 3 };
        let new = Epoch { term: 7, leader: 2 };
        let entries = [
            Entry::new(1, 1, follower(1, old, true)),
            Entry::new(2, 1, follower(1, old, false)),
            Entry::new(
                3,
                1,
                Record::EligibilitySet {
                    eligible: false,
                    why: Some("health check failing".into()),
                },
            ),
            Entry::new(4, 2, Record::Fact(Fact::Declared { epoch: new })),
            Entry::new(
                5,
                3,
                Record::Fact(Fact::Demoted {
                    epoch: old,
                    reason: DemotionReason::LeaseLost,
                    office_ended_at: 5,
                }),
            ),
            Entry::new(
                6,
                2,
                Record::HookRan {
                    hook: "on_elected".into(),
                    ok: false,
                    took_ms: 200,
                    failure: Some("exit 1".into()),
                },
            ),
            Entry::new(7, 1, follower(1, new, false)),
            Entry::new(8, 3, Record::Started { incarnation: 5 }),
        ];
        let lines: Vec<(NodeId, String)> = Words::events(&entries)
            .into_iter()
            .map(|e| (e.node, e.text))
            .collect();
        let expected = [
            (1, "follows node 3 (epoch 6@3)"),
            (1, "became ineligible to lead: health check failing"),
            (2, "declared itself coordinator, epoch 7@2"),
            (
                3,
                "demoted from epoch 6@3: lease lapsed (no majority acked in time)",
            ),
            (2, "hook on_elected failed (exit 1, 0.2 s)"),
            (1, "follows node 2 (epoch 7@2)"),
            (3, "restarted (incarnation 5)"),
        ]
        .map(|(n, t)| (n, t.to_string()));
        assert_eq!(lines, expected);
    }

    #[test]
    fn kinds_and_details_come_from_the_log_format() {
        let epoch = Epoch { term: 7, leader: 2 };
        let events = Words::events(&[
            Entry::new(1, 2, Record::Fact(Fact::Declared { epoch })),
            Entry::new(2, 2, Record::Fact(Fact::ElectionStarted)),
            Entry::new(
                3,
                2,
                Record::HookRan {
                    hook: "on_change".into(),
                    ok: true,
                    took_ms: 12,
                    failure: None,
                },
            ),
        ]);
        let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(kinds, ["declared", "election_started", "hook_ran"]);
        assert_eq!(events[0].details["epoch"]["term"], 7);
        assert_eq!(events[1].details, serde_json::json!({}));
        assert_eq!(events[2].details["took_ms"], 12);
        assert_eq!(events[2].text, "hook on_change ran (12 ms)");
    }
}
