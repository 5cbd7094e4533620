//! `bully chaos --bench failover`: the number people ask for. Kill -9 the coordinator
//! (the highest node), wait until every survivor follows the next highest, start it
//! again, wait until it leads everywhere; repeat. Links are direct (no relay), so the
//! figures are the protocol's and the machine's, not the relay's.
//!
//! Kills land at a random phase of the heartbeat cycle (a seeded pause before each),
//! since detection time depends on when the last heartbeat arrived.

use super::harness::{first_election_limit, Harness, HarnessSpec};
use super::plan::Step;
use super::progress::Progress;
use super::report::{FailoverCosts, Report, RunParams};
use super::setup::BenchConfig;
use super::stats::Summary;
use crate::protocol::{MessageKind, NodeId, Timing};
use anyhow::Result;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::time::Duration;

/// Runs the failover benchmark; the report's failover and reclaim tables are the
/// result. A round that does not converge in time becomes an anomaly (the run fails).
pub async fn failover(config: &BenchConfig) -> Result<Report> {
    config.validate().map_err(anyhow::Error::msg)?;
    let timing = config.setup.timing;
    let mode = config.setup.mode;
    let limit = Duration::from_millis(10 * timing.convergence_bound_in(mode) + 5_000);
    let mut progress = Progress::new(config.setup.progress);
    let mut h = Harness::start(&HarnessSpec::of(&config.setup, false)).await?;
    let top = config.setup.nodes;
    progress.event(&format!(
        "started {} nodes in {}",
        config.setup.nodes,
        config.setup.dir.display()
    ));
    let first = first_election_limit(&timing, config.setup.nodes, mode);
    if !h.wait_for_leader(top, first).await {
        h.anomalies
            .push(format!("no first agreement on node {top} within {first:?}"));
    }
    let startup_declarations = h.declarations;
    let mut rng = SmallRng::seed_from_u64(config.setup.seed);
    let survivors: Vec<NodeId> = (1..top).collect();
    let mut costs = Costs::default();
    for run in 1..=config.runs {
        if !h.anomalies.is_empty() {
            break;
        }
        let round = Round {
            run,
            top,
            limit,
            timing: &timing,
            survivors: &survivors,
        };
        if !round.run(&mut h, &mut rng, &mut costs).await {
            break;
        }
        progress.status(&format!("bench failover: run {run}/{} done", config.runs));
    }
    let mut report = h.finish(|elapsed_s| RunParams {
        runs: Some(config.runs),
        ..config.setup.params("chaos --bench failover", elapsed_s)
    });
    progress.finish();
    report.failover_costs = costs.summary();
    report.startup_declarations = Some(startup_declarations);
    Ok(report)
}

/// One round of the failover benchmark: kill the top node, wait for the next to lead,
/// restart it, wait for it to lead again.
struct Round<'a> {
    run: u32,
    top: NodeId,
    limit: Duration,
    timing: &'a Timing,
    survivors: &'a [NodeId],
}

impl Round<'_> {
    /// Returns false (with an anomaly recorded) when the cluster did not converge.
    async fn run(&self, h: &mut Harness, rng: &mut SmallRng, costs: &mut Costs) -> bool {
        let (run, top, limit, timing) = (self.run, self.top, self.limit, self.timing);
        // Let the cluster settle, then strike at a random point of the heartbeat cycle.
        let settle = timing.suspect_after_ms + rng.gen_range(0..timing.heartbeat_ms.max(1));
        tokio::time::sleep(Duration::from_millis(settle)).await;
        let before = election_messages_sent(h, self.survivors).await;
        h.poll();
        let declared_before = h.declarations;
        h.execute(Step::Kill(top));
        let converged = h.wait_for_leader(top - 1, limit).await;
        let after = election_messages_sent(h, self.survivors).await;
        costs.add(before, after, h.declarations - declared_before);
        if !converged {
            h.anomalies.push(format!(
                "run {run}: the survivors did not agree on node {} within {limit:?}",
                top - 1
            ));
            return false;
        }
        let settle = 2 * timing.heartbeat_ms + rng.gen_range(0..timing.heartbeat_ms.max(1));
        tokio::time::sleep(Duration::from_millis(settle)).await;
        h.execute(Step::Start(top));
        if !h.wait_for_leader(top, limit).await {
            h.anomalies.push(format!(
                "run {run}: node {top} did not lead everywhere again within {limit:?}"
            ));
            return false;
        }
        true
    }
}

/// Per-kill costs collected by the failover loop; `None` once a node's metrics could
/// not be read (the figure is then not reported rather than wrong).
#[derive(Default)]
struct Costs {
    bully: Vec<u64>,
    votes: Vec<u64>,
    declarations: Vec<u64>,
    unreadable: bool,
}

impl Costs {
    fn add(&mut self, before: Option<[u64; 2]>, after: Option<[u64; 2]>, declared: usize) {
        self.declarations.push(declared as u64);
        match (before, after) {
            (Some(b), Some(a)) if !self.unreadable => {
                self.bully.push(a[0].saturating_sub(b[0]));
                self.votes.push(a[1].saturating_sub(b[1]));
            }
            _ => self.unreadable = true,
        }
    }

    fn summary(&self) -> Option<FailoverCosts> {
        if self.unreadable || self.bully.is_empty() {
            return None;
        }
        Some(FailoverCosts {
            bully_messages: Summary::of(&self.bully),
            vote_messages: Summary::of(&self.votes),
            declarations_per_kill: Summary::of(&self.declarations),
        })
    }
}

/// Election, Answer and Coordinator messages, and quorum mode's PreVote and Vote
/// (classic mode sends none), that the given nodes have sent so far, from their
/// metrics; `None` when a node does not answer (the figure is then not reported).
async fn election_messages_sent(h: &Harness, ids: &[NodeId]) -> Option<[u64; 2]> {
    use MessageKind::*;
    let groups = [[Election, Answer, Coordinator].as_slice(), &[PreVote, Vote]];
    let mut totals = [0; 2];
    for &id in ids {
        let metrics = h.cluster.metrics(id, Duration::from_secs(2)).await.ok()?;
        for (total, kinds) in totals.iter_mut().zip(groups) {
            *total += kinds
                .iter()
                .map(|k| metrics.sent.get(k.name()).copied().unwrap_or(0))
                .sum::<u64>();
        }
    }
    Some(totals)
}
