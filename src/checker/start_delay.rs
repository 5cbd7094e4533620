//! The timing half of I4 recovery: a (re)started node waits its preempt delay before
//! it declares.

use super::invariant::{violation, Invariant, Violation};
use super::uniqueness::declared;
use crate::history::{Entry, Record};
use crate::protocol::{Millis, NodeId, Role};
use std::collections::HashMap;

/// The timing half of I4: a (re)started node holds its first election only after
/// `preempt_delay_ms`, so no declaration may come sooner after a `Started` record —
/// unless the node followed a coordinator in between (a Follower view): from then on
/// it is an ordinary member and elects as soon as that coordinator fails or resigns.
/// (A node with no peers declares at once; do not use this on one-node clusters, and
/// see [`check_start_delay_where`] for lists that shrink to one member.)
pub fn check_start_delay(entries: &[Entry], preempt_delay_ms: Millis) -> Vec<Violation> {
    check_start_delay_where(entries, preempt_delay_ms, |_, _| true)
}

/// [`check_start_delay`] for the starts where `applies(node, started_at_ms)` holds: a
/// node whose member list names no other member when it starts (one removed all the
/// others: src/protocol/membership.rs) has no one to wait for and declares at once, as
/// a one-node cluster does.
pub fn check_start_delay_where(
    entries: &[Entry],
    preempt_delay_ms: Millis,
    applies: impl Fn(NodeId, Millis) -> bool,
) -> Vec<Violation> {
    let mut last_start: HashMap<NodeId, Millis> = HashMap::new();
    let mut out = Vec::new();
    for entry in entries {
        match &entry.record {
            Record::Started { .. } if applies(entry.node, entry.at_ms) => {
                last_start.insert(entry.node, entry.at_ms);
            }
            Record::Started { .. } => {
                last_start.remove(&entry.node);
            }
            Record::View(v) if v.role == Role::Follower => {
                last_start.remove(&entry.node);
            }
            _ => {}
        }
        let (Some(epoch), Some(&start)) = (declared(entry), last_start.get(&entry.node)) else {
            continue;
        };
        if entry.at_ms < start + preempt_delay_ms {
            out.push(violation(
                Invariant::Recovery,
                entry,
                format!(
                    "declared {epoch} {} ms after starting at {start} ms, before the preempt \
                     delay of {preempt_delay_ms} ms",
                    entry.at_ms - start
                ),
            ));
        }
    }
    out
}
