//! The order of hooks across a change of coordinator, on real processes: when the
//! old coordinator leaves office on its own (SIGTERM, `bully step-down`, a handover to
//! a restarted higher node), its `on_demoted` must end before the successor's
//! `on_elected` starts. Included with `#[path = "common/hook_order.rs"] mod hook_order;`
//! next to `mod common;` and `mod primary;` by `tests/hook_order.rs` (the order holds)
//! and `tests/hook_order_sabotage.rs` (the old order is caught).
#![allow(dead_code)]

use super::common::TestCluster;
use super::primary::{lines, phase, quoted, wait_logged};
use bully::config::HooksConfig;
use bully::protocol::{NodeId, Preempt, Timing};
use std::path::PathBuf;
use std::time::Duration;

const AGREE: Duration = Duration::from_secs(30);

/// D, the default 300 ms: `on_demoted` (1 s) takes more than three times D, and the
/// successor must still wait for it. Before the machine's release
/// (src/protocol/machine/release.rs) the predecessor stopped heartbeating while its
/// hook ran, the followers' promises ran out after D, and the successor's `on_elected`
/// started about 750 ms before the predecessor's `on_demoted` ended (issue 38); this
/// test ran at D = 3000 ms then.
const SUSPECT_AFTER_MS: u64 = 300;
/// How long `on_demoted` takes.
const DEMOTED_SLEEP: &str = "1";

/// One change of coordinator: the predecessor's `on_demoted` end and the successor's
/// `on_elected` start, in wall-clock nanoseconds on this host.
#[derive(Debug, Clone)]
pub struct Change {
    pub how: &'static str,
    pub demoted_end_ns: u128,
    pub elected_start_ns: u128,
}

impl Change {
    /// Whether the predecessor had stopped being primary before the successor began.
    pub fn in_order(&self) -> bool {
        self.demoted_end_ns < self.elected_start_ns
    }

    /// The successor's start minus the predecessor's end, in ms (negative: overlap).
    pub fn gap_ms(&self) -> f64 {
        (self.elected_start_ns as f64 - self.demoted_end_ns as f64) / 1e6
    }
}

fn stamps(t: &TestCluster, hook: &str, id: NodeId) -> PathBuf {
    t.dir.path().join(format!("{hook}-{id}.stamps"))
}

/// Hooks that append `<token> <ns>`: `on_elected` first thing (the token it leads),
/// `on_demoted` last thing after a 1 s sleep (the token it led).
fn stamping_hooks(t: &TestCluster, id: NodeId) -> HooksConfig {
    let elected = quoted(&stamps(t, "elected", id));
    let demoted = quoted(&stamps(t, "demoted", id));
    HooksConfig {
        on_elected: Some(format!("echo \"$BULLY_TOKEN $(date +%s%N)\" >> {elected}")),
        on_demoted: Some(format!(
            "sleep {DEMOTED_SLEEP}; echo \"$BULLY_PREVIOUS_EPOCH $(date +%s%N)\" >> {demoted}"
        )),
        timeout_ms: 5_000,
        ..HooksConfig::default()
    }
}

/// The stamp node `id`'s `hook` recorded for the epoch `term`@`id` (its fencing token),
/// once it has.
pub async fn stamp(t: &TestCluster, hook: &str, id: NodeId, term: u64) -> u128 {
    let token = bully::protocol::Epoch { term, leader: id }.token();
    let file = stamps(t, hook, id);
    let what = format!("node {id}'s {hook} stamp for token {token}");
    wait_logged(t, &what, AGREE, || async {
        lines(&file).iter().find_map(|line| {
            let (tok, ns) = line.split_once(' ')?;
            (tok.parse() == Ok(token)).then(|| ns.parse().ok())?
        })
    })
    .await
}

/// Three quorum-mode nodes (default timing) with stamping hooks, started, node 3 leading and
/// its `on_elected` done; returns the cluster and node 3's term.
pub async fn stamping_cluster() -> (TestCluster, u64) {
    let timing = Timing {
        suspect_after_ms: SUSPECT_AFTER_MS,
        ..Timing::default()
    };
    let mut t = TestCluster::new(3, timing, Preempt::Always);
    for id in t.cluster.ids() {
        let hooks = stamping_hooks(&t, id);
        t.cluster.edit_config(id, |c| c.hooks = hooks).unwrap();
    }
    phase("start: node 3 leads");
    t.start_all();
    let first = t.wait_for_leader(&[1, 2, 3], 3, AGREE).await;
    stamp(&t, "elected", 3, first).await;
    (t, first)
}

/// Runs the three voluntary changes on a [`stamping_cluster`] and returns what each
/// measured (asserting only that every change happened).
pub async fn voluntary_changes() -> Vec<Change> {
    let (mut t, first) = stamping_cluster().await;
    let mut changes = Vec::new();

    phase("clean stop (SIGTERM) of node 3: node 2 takes over");
    t.cluster.stop(3, Duration::from_secs(15)).unwrap();
    let second = t.wait_for_leader(&[1, 2], 2, AGREE).await;
    changes.push(Change {
        how: "clean stop (SIGTERM)",
        demoted_end_ns: stamp(&t, "demoted", 3, first).await,
        elected_start_ns: stamp(&t, "elected", 2, second).await,
    });

    phase("node 3 restarts and, after its restart hold-off (D), takes over: handover");
    // The preempt delay outlasts node 3's restart hold-off, so its takeover waits for
    // node 2's Resign, not for its own hold-off.
    t.cluster
        .edit_config(3, |c| c.timing.preempt_delay_ms = SUSPECT_AFTER_MS + 1_000)
        .unwrap();
    t.cluster.start(3).unwrap();
    let third = t.wait_for_leader(&[1, 2, 3], 3, AGREE).await;
    changes.push(Change {
        how: "handover to a restarted higher node",
        demoted_end_ns: stamp(&t, "demoted", 2, second).await,
        elected_start_ns: stamp(&t, "elected", 3, third).await,
    });

    phase("bully step-down on node 3: node 2 takes over");
    let output = std::process::Command::new(super::common::binary())
        .arg("step-down")
        .arg("--config")
        .arg(t.cluster.config_path(3))
        .args(["--for", "60s"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "step-down failed: {}{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
        t.log_tail()
    );
    let fourth = t.wait_for_leader(&[1, 2, 3], 2, AGREE).await;
    changes.push(Change {
        how: "bully step-down",
        demoted_end_ns: stamp(&t, "demoted", 3, third).await,
        elected_start_ns: stamp(&t, "elected", 2, fourth).await,
    });
    for c in &changes {
        eprintln!(
            "{}: successor's on_elected started {:.1} ms after the predecessor's on_demoted ended",
            c.how,
            c.gap_ms()
        );
    }
    changes
}
