//! Message counts for one election after the coordinator crashes, against the theory.
//!
//! For N = 3, 5, 8, 16, 32, 64 (IDs 1..N, default timing): the cluster converges on N,
//! N crashes right after a heartbeat round, and one node's transport reports it down
//! at once while everyone else's suspicion timer is still D away.
//! - worst: node 1 notices. It lets the higher nodes run first (defer, T), then sends
//!   Election to the N-2 live ones above it (not to N, reported down); each answers
//!   and, as a follower that heard N within D, starts no election of its own. When
//!   their suspicion fires, N-1 (no reachable node above it) declares at once and the
//!   rest, deferring, follow it: N-2 Election, N-2 Answer, N-1 Coordinator. The
//!   textbook Bully sends N(N-1)/2 Election and (N-1)(N-2)/2 Answer here.
//! - best: node N-1 notices: N is down, nobody above it is left, so it declares at
//!   once: N-1 Coordinator and nothing else (the textbook: 1 Election first, after
//!   which it waits T for the dead N).
//!
//! Counted: Election/Answer/Coordinator sent from the crash until every live node
//! follows N-1 (messages to the dead node included: they are sent). Heartbeat, Ack and
//! Probe are shown separately. Run with `--nocapture` to see the table.

use bully::protocol::{MessageKind, Millis, Mode, NodeId};
use bully::sim::{Sim, SimConfig};
use std::collections::BTreeMap;

const SIZES: [u64; 6] = [3, 5, 8, 16, 32, 64];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    Worst,
    Best,
}

/// What one election cost.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Cost {
    sent: BTreeMap<MessageKind, u64>,
    converged_after_ms: Millis,
}

impl Cost {
    fn of(&self, kind: MessageKind) -> u64 {
        self.sent.get(&kind).copied().unwrap_or(0)
    }
}

fn all_follow(sim: &Sim, ids: &[NodeId], leader: NodeId) -> bool {
    ids.iter()
        .all(|&id| sim.view(id).and_then(|v| v.coordinator()) == Some(leader))
}

/// Runs one election in a cluster of `n` with link delays drawn from `delay_ms`.
fn election(n: u64, case: Case, delay_ms: (Millis, Millis)) -> Cost {
    let ids: Vec<NodeId> = (1..=n).collect();
    // The classic algorithm, whose message counts the theory gives.
    let mut sim = Sim::new(SimConfig {
        delay_ms,
        ..SimConfig::new(n, ids.clone(), Mode::Classic)
    });
    for &id in &ids {
        sim.start(id);
    }
    assert!(
        sim.run_until_or(10_000, |s| all_follow(s, &ids, n)),
        "N={n}: the cluster did not converge on {n} in 10 s"
    );
    // Crash N right after a heartbeat round was delivered and acked, so everyone
    // else's suspicion timer is a full D away.
    let beat = sim.next_deadline(n).expect("coordinator is up");
    sim.run_until(beat + 2 * delay_ms.1 + 1);
    let before = sim.sent().clone();
    let crash_at = sim.now();
    sim.crash(n);
    let noticer = match case {
        Case::Worst => 1,
        Case::Best => n - 1,
    };
    sim.peer_down(noticer, n);
    let live = &ids[..ids.len() - 1];
    assert!(
        sim.run_until_or(crash_at + 10_000, |s| all_follow(s, live, n - 1)),
        "N={n} {case:?}: no convergence on {} within 10 s",
        n - 1
    );
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
    let sent = sim
        .sent()
        .iter()
        .map(|(&kind, &count)| (kind, count - before.get(&kind).copied().unwrap_or(0)))
        .filter(|&(_, count)| count > 0)
        .collect();
    Cost {
        sent,
        converged_after_ms: sim.now() - crash_at,
    }
}

/// (Election, Answer, Coordinator) by the theory in the module comment.
fn theory(n: u64, case: Case) -> (u64, u64, u64) {
    match case {
        Case::Worst => (n - 2, n - 2, n - 1),
        Case::Best => (0, 0, n - 1),
    }
}

#[test]
fn election_message_counts_match_the_theory() {
    let mut table = String::from(
        "  N | case  | Election | Answer | Coordinator | total | theory E/A/C    | Heartbeat | Ack | Probe | converged\n\
         ---|-------|----------|--------|-------------|-------|-----------------|-----------|-----|-------|----------\n",
    );
    for n in SIZES {
        for case in [Case::Worst, Case::Best] {
            let cost = election(n, case, (5, 5));
            let (e, a, c) = (
                cost.of(MessageKind::Election),
                cost.of(MessageKind::Answer),
                cost.of(MessageKind::Coordinator),
            );
            let (te, ta, tc) = theory(n, case);
            table.push_str(&format!(
                "{n:>3} | {:<5} | {e:>8} | {a:>6} | {c:>11} | {:>5} | {:<15} | {:>9} | {:>3} | {:>5} | {:>5} ms\n",
                format!("{case:?}").to_lowercase(),
                e + a + c,
                format!("{te}/{ta}/{tc}"),
                cost.of(MessageKind::Heartbeat),
                cost.of(MessageKind::Ack),
                cost.of(MessageKind::Probe),
                cost.converged_after_ms,
            ));
            assert_eq!(
                (e, a, c),
                (te, ta, tc),
                "N={n} {case:?}: counts differ from the theory; full counts {:?}",
                cost.sent
            );
            assert_eq!(cost.of(MessageKind::Resign), 0);
            // Random delays (1-20 ms) change the order of arrivals, not the counts.
            let jittered = election(n, case, (1, 20));
            assert_eq!(
                (
                    jittered.of(MessageKind::Election),
                    jittered.of(MessageKind::Answer),
                    jittered.of(MessageKind::Coordinator)
                ),
                (te, ta, tc),
                "N={n} {case:?} with 1-20 ms delays: {:?}",
                jittered.sent
            );
        }
    }
    println!("\nOne election after the coordinator N crashes (IDs 1..N, default timing, 5 ms links):\n{table}");
}
