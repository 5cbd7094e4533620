//! The history record shared by the simulator, the real node's append-only event log
//! (JSON lines in its data dir) and the chaos runner, so that one checker
//! ([`crate::checker`]) judges all three.
//!
//! Who writes what:
//! - the node runtime: [`Record::Started`] when the process starts, [`Record::Persisted`]
//!   after each flushed write of the cells, [`Record::View`] for each published view,
//!   [`Record::HookRan`] after each hook run;
//! - the simulator and the chaos runner: the faults they inject (crash, pause,
//!   partition, ...), and the simulator also every message it carries.
//!
//! A history is a slice of [`Entry`] in time order; per node, entries must stay in the
//! order the node wrote them (merge several logs with [`merge`], a stable sort).

use crate::protocol::{Cells, ConfigId, Fact, Message, Millis, NodeId, View};
use serde::{Deserialize, Serialize};
use std::fmt;

/// One thing that happened to one node. Fault records are written by whoever injected
/// the fault (simulator or chaos runner), never by the node itself.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Record {
    /// The process (re)started and runs as this incarnation (the value its first
    /// persist stores). A Started after earlier records marks a restart, whether or not
    /// a [`Record::Crashed`] was written (a killed process writes nothing).
    Started { incarnation: u64 },
    /// The cells were written and flushed: a crash from here on keeps them.
    Persisted(Cells),
    /// The node published this view (to clients, hooks, the event log).
    View(View),
    /// The machine reported this fact (election started, declared, established,
    /// demoted). Whoever writes the record translates `Demoted::office_ended_at` from
    /// machine time to this history's clock, so the checker can read terms of office
    /// (I6) straight off the history.
    Fact(Fact),
    /// The node handed this message to the transport (simulator only).
    Sent { to: NodeId, msg: Message },
    /// The node received this message (simulator only).
    Received { from: NodeId, msg: Message },
    /// A message to this node was lost: sender or receiver down, cut by a partition, or
    /// in flight when its sender crashed (simulator only).
    Lost { from: NodeId, msg: Message },
    /// The transport reported this peer down (simulator: injected).
    PeerDown { peer: NodeId },
    /// A peer broke a protocol rule; the runtime closed its connection.
    Misbehaved { peer: NodeId, what: String },
    /// The node's health check changed whether it may lead. `why`: the node runtime's
    /// reason when it may not (health check, step-down, peers' configs, watchdog), for
    /// `bully history`; the checker does not read it.
    EligibilitySet {
        eligible: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        why: Option<String>,
    },
    /// A hook ran to its end (node runtime, src/node/commands/hooks.rs), for `bully
    /// history`: which hook, whether it succeeded, how long it took, and on failure a
    /// short reason ("exit 1", "timed out"). The checker ignores it.
    HookRan {
        hook: String,
        ok: bool,
        took_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        failure: Option<String>,
    },
    /// The process was killed: volatile state lost, cells kept.
    Crashed,
    /// The process was stopped (SIGSTOP); its inbox queues and no timer fires.
    Paused,
    /// Simulator: a coordinator was paused in office, and its lease runs out at
    /// `until_ms` (simulated time) unless it resumes first: its office ends then at the
    /// latest (the checker's pause bound assumes a renewal just before the pause, which
    /// a coordinator cut off from its majority did not get). Resumed later than that,
    /// acks queued meanwhile for rounds sent before the pause can renew the lease up to
    /// `renewable_until_ms` at most.
    PausedLease {
        until_ms: Millis,
        #[serde(default)]
        renewable_until_ms: Millis,
    },
    /// The process continued (SIGCONT).
    Resumed,
    /// A partition started: this node can no longer reach these nodes.
    Partitioned { cut_off: Vec<NodeId> },
    /// The network started losing this share of the messages to and from this node
    /// (simulator: a flaky-link fault; ended by [`Record::Healed`]).
    Lossy { percent: u8 },
    /// Every partition or lossy link involving this node healed.
    Healed,
    /// The node's data dir was lost while it was down (a replaced disk, a container
    /// without its volume): its next start is on an empty store (simulator, and tests
    /// that delete a data dir). Per-node checks start afresh: it is a new store.
    StoreLost,
    /// The node kept a new maintenance pause setting (`bully pause` / `bully resume`,
    /// src/api/pause.rs): while paused only `holder` may lead.
    Maintenance {
        paused: bool,
        generation: u64,
        holder: Option<NodeId>,
    },
    /// `bully recover --force` (src/node/drive/forced_recovery.rs) made this stopped
    /// node's store hold a new list of `members` only, written as `to_config` in place of
    /// `from_config`, with the term cell raised to `term`: the rest of the cluster, a
    /// majority, was lost for good. Who may lead changed, so it counts as a fault.
    ForcedRecovery {
        members: Vec<NodeId>,
        from_config: ConfigId,
        to_config: ConfigId,
        term: u64,
    },
    /// A switchover to `to` scheduled for wall-clock `at_ms` was accepted, cancelled,
    /// dropped (the office ended first), done or refused at its time, as `outcome` says
    /// (src/node/serve/scheduled_switchover.rs). Changes nothing by itself.
    ScheduledSwitchover {
        to: NodeId,
        at_ms: Millis,
        outcome: String,
    },
}

impl Record {
    /// Whether this record is a disturbance that restarts the I5 convergence clock
    /// (and ends a fault-free window for the soft part of I2). A (re)start counts:
    /// the newcomer may take over.
    pub fn is_fault(&self) -> bool {
        matches!(
            self,
            Record::Started { .. }
                | Record::Crashed
                | Record::Paused
                | Record::Resumed
                | Record::Partitioned { .. }
                | Record::Lossy { .. }
                | Record::Healed
                | Record::PeerDown { .. }
                | Record::EligibilitySet { .. }
                | Record::StoreLost
                | Record::ForcedRecovery { .. }
                // A node on an empty store votes and leads only from here: as if it
                // started now (src/protocol/recovery.rs).
                | Record::Fact(Fact::Recovered { .. })
                // Who may lead changed (src/protocol/membership.rs).
                | Record::Fact(Fact::MembersChanged { .. })
        )
    }
}

/// A record with the time it happened and the node it happened to.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Entry {
    /// Virtual ms in the simulator; wall-clock ms since the Unix epoch for real nodes.
    pub at_ms: Millis,
    pub node: NodeId,
    pub record: Record,
}

impl Entry {
    /// `record`, which happened to `node` at `at_ms`.
    pub fn new(at_ms: Millis, node: NodeId, record: Record) -> Entry {
        Entry {
            at_ms,
            node,
            record,
        }
    }

    /// One JSON object without a trailing newline: the event-log line format.
    pub fn to_json_line(&self) -> String {
        // Serializing plain data with derived impls to a String cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// History entries read from JSON lines, and how many lines were not entries.
#[derive(Debug, Default, PartialEq)]
pub struct JsonLines {
    pub entries: Vec<Entry>,
    /// Lines that did not parse. A record torn by a kill -9 mid-write is the only
    /// expected case; callers report the count rather than fail, since the rest of
    /// the log is still sound.
    pub unparsed: usize,
}

/// The one reader of event logs (a node's `events.jsonl`, the chaos runner's log):
/// every complete line in `bytes` that parses, blank lines skipped. Used by the
/// cluster's history, the chaos collector and the tests, so all of them treat a
/// torn line the same way.
pub fn parse_json_lines(bytes: &[u8]) -> JsonLines {
    let mut parsed = JsonLines::default();
    for line in bytes.split(|&b| b == b'\n') {
        match parse_json_line(line) {
            None => {}
            Some(Ok(entry)) => parsed.entries.push(entry),
            Some(Err(_)) => parsed.unparsed += 1,
        }
    }
    parsed
}

/// One event-log line: `None` when blank, else the entry or why it is not one. The
/// step every reader of event logs takes per line ([`parse_json_lines`], and
/// `api::event_log::read_recent`, which reads a log backwards).
pub fn parse_json_line(line: &[u8]) -> Option<Result<Entry, serde_json::Error>> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    Some(serde_json::from_slice(line))
}

/// Merges the logs of several nodes into one history ordered by time, keeping each
/// log's own order among equal timestamps (a stable sort).
pub fn merge(logs: impl IntoIterator<Item = Vec<Entry>>) -> Vec<Entry> {
    let mut all: Vec<Entry> = logs.into_iter().flatten().collect();
    all.sort_by_key(|e| e.at_ms);
    all
}

/// The highest term any node persisted or declared: how far a run drove the term up.
pub fn highest_term(entries: &[Entry]) -> u64 {
    entries
        .iter()
        .filter_map(|e| match &e.record {
            Record::Persisted(cells) => Some(cells.term),
            Record::Fact(Fact::Declared { epoch }) => Some(epoch.term),
            _ => None,
        })
        .max()
        .unwrap_or(0)
}

/// The time of the last fault record, if any (the start of the I5 clock).
pub fn last_fault_ms(entries: &[Entry]) -> Option<Millis> {
    entries
        .iter()
        .filter(|e| e.record.is_fault())
        .map(|e| e.at_ms)
        .max()
}

/// Renders the last `count` entries, one per line, for failure messages.
pub fn tail(entries: &[Entry], count: usize) -> String {
    let start = entries.len().saturating_sub(count);
    let mut out = String::new();
    for entry in &entries[start..] {
        out.push_str(&entry.to_string());
        out.push('\n');
    }
    out
}

fn fmt_epoch(epoch: Option<crate::protocol::Epoch>) -> String {
    epoch.map_or_else(|| "-".to_string(), |e| e.to_string())
}

fn fmt_msg(msg: &Message) -> String {
    use crate::protocol::Body;
    let body = match &msg.body {
        Body::Election { accepted } => format!("Election(accepted {})", fmt_epoch(*accepted)),
        Body::Answer => "Answer".to_string(),
        Body::Coordinator { epoch } => format!("Coordinator({epoch})"),
        Body::Heartbeat { epoch, round } => format!("Heartbeat({epoch} #{round})"),
        Body::Ack { accepted, round } => {
            format!("Ack(accepted {} #{round})", fmt_epoch(*accepted))
        }
        Body::Probe => "Probe".to_string(),
        Body::Resign { epoch } => format!("Resign({epoch})"),
        Body::PreVote { term, heard } => match heard {
            Some(h) => format!("PreVote({term}, heard {}#{})", h.epoch, h.round),
            None => format!("PreVote({term})"),
        },
        Body::Vote { term } => format!("Vote({term})"),
        Body::TermQuery => "TermQuery".to_string(),
        Body::TermReport => "TermReport".to_string(),
        Body::TermUnknown => "TermUnknown".to_string(),
        Body::Members { list } => format!("Members({}, {} members)", list.id, list.members.len()),
    };
    format!("{body} term {}", msg.term)
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:>8} ms  n{:<3} ", self.at_ms, self.node)?;
        match &self.record {
            Record::Started { incarnation } => write!(f, "STARTED incarnation {incarnation}"),
            Record::Persisted(c) => write!(
                f,
                "persisted term {} accepted {} incarnation {}",
                c.term,
                fmt_epoch(c.accepted),
                c.incarnation
            ),
            Record::View(v) => write!(
                f,
                "view {} {}{}",
                v.role,
                fmt_epoch(v.epoch),
                if v.eligible { "" } else { " (ineligible)" }
            ),
            Record::Fact(fact) => match fact {
                Fact::ElectionStarted => write!(f, "ELECTION STARTED"),
                Fact::Ranked { est } => write!(f, "RANKED est={est}"),
                Fact::Declared { epoch } => write!(f, "DECLARED {epoch}"),
                Fact::MembersChanged { id, voters } => {
                    write!(f, "MEMBERS {id} ({voters} voters)")
                }
                Fact::ChangeProposed { id, subject } => {
                    write!(f, "MEMBER CHANGE about node {subject} proposed as {id}")
                }
                Fact::MembersCommitted { id } => write!(f, "MEMBERS COMMITTED {id}"),
                Fact::ChangeRefused { reason } => write!(f, "MEMBER CHANGE REFUSED: {reason}"),
                Fact::Established { epoch } => write!(f, "ESTABLISHED {epoch}"),
                Fact::Demoted {
                    epoch,
                    reason,
                    office_ended_at,
                } => write!(
                    f,
                    "DEMOTED {epoch} ({reason}; office ended at {office_ended_at} ms)"
                ),
                Fact::RecoveryStarted {
                    needed,
                    survivors: false,
                } => write!(f, "EMPTY STORE: waits for {needed} peers' terms"),
                Fact::RecoveryStarted {
                    needed,
                    survivors: true,
                } => write!(f, "SURVIVOR: waits for {needed} survivors' terms"),
                Fact::Recovered { term } => write!(f, "RECOVERED term {term}"),
                Fact::GivenUp { by } => write!(f, "GIVEN UP (refused by n{by})"),
            },
            Record::Sent { to, msg } => write!(f, "-> n{to} {}", fmt_msg(msg)),
            Record::Received { from, msg } => write!(f, "<- n{from} {}", fmt_msg(msg)),
            Record::Lost { from, msg } => write!(f, "LOST from n{from} {}", fmt_msg(msg)),
            Record::PeerDown { peer } => write!(f, "PEER DOWN n{peer}"),
            Record::Misbehaved { peer, what } => write!(f, "MISBEHAVED n{peer} {what}"),
            Record::EligibilitySet { eligible, why } => match why {
                Some(why) => write!(f, "ELIGIBLE {eligible} ({why})"),
                None => write!(f, "ELIGIBLE {eligible}"),
            },
            Record::HookRan {
                hook,
                ok,
                took_ms,
                failure,
            } => match (ok, failure) {
                (true, _) => write!(f, "HOOK {hook} ok, {took_ms} ms"),
                (false, why) => write!(
                    f,
                    "HOOK {hook} FAILED ({}), {took_ms} ms",
                    why.as_deref().unwrap_or("?")
                ),
            },
            Record::Crashed => write!(f, "CRASHED"),
            Record::Paused => write!(f, "PAUSED"),
            Record::PausedLease {
                until_ms,
                renewable_until_ms,
            } => write!(
                f,
                "paused in office, lease until {until_ms} ms (renewable by queued acks to {renewable_until_ms} ms)"
            ),
            Record::Resumed => write!(f, "RESUMED"),
            Record::Partitioned { cut_off } => write!(f, "PARTITIONED from {cut_off:?}"),
            Record::Lossy { percent } => write!(f, "LOSSY {percent}%"),
            Record::Healed => write!(f, "HEALED"),
            Record::StoreLost => write!(f, "STORE LOST"),
            Record::Maintenance {
                paused,
                generation,
                holder,
            } => match (paused, holder) {
                (true, Some(holder)) => {
                    write!(f, "PAUSED FAILOVER g{generation}, only n{holder} may lead")
                }
                (true, None) => write!(f, "PAUSED FAILOVER g{generation}, nobody may lead"),
                (false, _) => write!(f, "RESUMED FAILOVER g{generation}"),
            },
            Record::ForcedRecovery {
                members,
                from_config,
                to_config,
                term,
            } => write!(
                f,
                "FORCED RECOVERY to members {members:?}: list {to_config} replaces \
                 {from_config}, term {term}"
            ),
            Record::ScheduledSwitchover { to, at_ms, outcome } => {
                write!(f, "SWITCHOVER to n{to} at {at_ms} ms: {outcome}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Body, Epoch, Role};

    #[test]
    fn json_lines_round_trip() {
        let epoch = Epoch { term: 3, leader: 2 };
        let entries = vec![
            Entry {
                at_ms: 1,
                node: 2,
                record: Record::Started { incarnation: 4 },
            },
            Entry {
                at_ms: 2,
                node: 2,
                record: Record::Persisted(Cells {
                    term: 3,
                    accepted: Some(epoch),
                    incarnation: 4,
                    promise_ms: 0,
                    recovered: false,
                    given_up: false,
                    awaits_survivors: false,
                }),
            },
            Entry {
                at_ms: 3,
                node: 2,
                record: Record::View(View {
                    id: 2,
                    role: Role::Coordinator,
                    epoch: Some(epoch),
                    eligible: true,
                    incarnation: 4,
                }),
            },
            Entry {
                at_ms: 4,
                node: 1,
                record: Record::Received {
                    from: 2,
                    msg: Message {
                        promise_ms: 0,
                        term: 3,
                        config: Default::default(),
                        est: None,
                        body: Body::Coordinator { epoch },
                    },
                },
            },
            Entry {
                at_ms: 5,
                node: 1,
                record: Record::Partitioned { cut_off: vec![2] },
            },
        ];
        let text: String = entries.iter().map(|e| e.to_json_line() + "\n").collect();
        let parsed = parse_json_lines(text.as_bytes());
        assert_eq!(parsed.entries, entries);
        assert_eq!(parsed.unparsed, 0);
    }

    #[test]
    fn a_torn_line_is_counted_and_the_rest_kept() {
        let whole = Entry {
            at_ms: 7,
            node: 2,
            record: Record::Started { incarnation: 3 },
        }
        .to_json_line();
        let torn = &whole[..whole.len() / 2];
        let text = format!("{whole}\n\n{torn}\n{whole}\n");
        let parsed = parse_json_lines(text.as_bytes());
        assert_eq!(parsed.entries.len(), 2);
        assert_eq!(parsed.unparsed, 1);
    }

    #[test]
    fn merge_keeps_per_log_order_for_equal_times() {
        let e = |at_ms, node, incarnation| Entry {
            at_ms,
            node,
            record: Record::Started { incarnation },
        };
        let merged = merge(vec![vec![e(5, 1, 1), e(5, 1, 2)], vec![e(1, 2, 1)]]);
        assert_eq!(merged, vec![e(1, 2, 1), e(5, 1, 1), e(5, 1, 2)]);
    }
}
