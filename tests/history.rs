//! `bully history` on real processes: three nodes, node 2's `on_elected` fails (it stays
//! coordinator), node 3 (the first coordinator) is killed so node 2 takes over, then node
//! 1 is killed (node 2's lease lapses alone) and node 3 restarts. The merged timeline,
//! asked of node 3 and its peers, must hold node 3's declaration, node 2's after the
//! kill, node 2's failed hook and demotion, node 3's restart, in time order, and name
//! node 1 as not answering.

mod common;
#[path = "common/primary.rs"]
mod primary;

use bully::config::{ElectedHookFailure, HooksConfig};
use bully::history::Record;
use bully::protocol::{Fact, NodeId, Preempt, Timing};
use common::{bully, text, TestCluster};
use primary::{events, phase, wait_logged};
use serde_json::Value;
use std::time::Duration;

const AGREE: Duration = Duration::from_secs(20);

/// One line of `bully history --json`.
#[derive(Debug)]
struct Line {
    at_ms: u64,
    node: Option<NodeId>,
    kind: String,
    details: Value,
}

/// Runs `bully history` with node `id`'s config and `extra` flags; stdout.
async fn history(t: &TestCluster, id: NodeId, extra: &[&str]) -> String {
    let config = t.cluster.config_path(id).display().to_string();
    let mut args = vec!["history".to_string(), "--config".into(), config];
    args.extend(["--since", "10m", "--timeout", "3s"].map(String::from));
    args.extend(extra.iter().map(|s| s.to_string()));
    let out = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        bully(&args)
    })
    .await
    .expect("run bully history");
    assert!(
        out.status.success(),
        "bully history failed:\n{}",
        text(&out)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn parse(json: &str) -> Vec<Line> {
    json.lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            Line {
                at_ms: v["at_ms"].as_u64().expect("at_ms"),
                node: v["node"].as_u64(),
                kind: v["kind"].as_str().expect("kind").to_string(),
                details: v["details"].clone(),
            }
        })
        .collect()
}

/// The index of the first line after `from` that `is` picks, or a panic naming `what`.
fn find(lines: &[Line], from: usize, what: &str, is: impl Fn(&Line) -> bool) -> usize {
    lines
        .iter()
        .enumerate()
        .skip(from)
        .find(|(_, l)| is(l))
        .map(|(i, _)| i)
        .unwrap_or_else(|| panic!("no {what} after line {from}: {lines:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_merges_a_failover_a_failed_hook_and_names_a_down_node() {
    let mut t = TestCluster::new(3, Timing::default(), Preempt::Always);
    for id in t.cluster.ids() {
        let hooks = HooksConfig {
            on_elected: Some(if id == 2 { "exit 1" } else { "true" }.to_string()),
            on_elected_failure: ElectedHookFailure::Stay,
            ..HooksConfig::default()
        };
        t.cluster.edit_config(id, |c| c.hooks = hooks).unwrap();
    }

    phase("start: node 3 leads");
    t.start_all();
    t.wait_for_leader(&[1, 2, 3], 3, AGREE).await;

    phase("kill node 3: node 2 takes over and its on_elected fails");
    let killed_at = bully::wall_clock::wall_ms();
    t.cluster.kill(3).unwrap();
    t.wait_for_leader(&[1, 2], 2, AGREE).await;
    let failed_hook = |e: &bully::history::Entry| {
        e.at_ms > killed_at && matches!(&e.record, Record::HookRan { ok: false, .. })
    };
    wait_logged(&t, "node 2's failed on_elected", AGREE, || async {
        events(&t, 2).iter().any(failed_hook).then_some(())
    })
    .await;

    phase("kill node 1: node 2's lease lapses; restart node 3, which leads again");
    t.cluster.kill(1).unwrap();
    wait_logged(&t, "node 2's demotion", AGREE, || async {
        let demoted = |e: &bully::history::Entry| {
            e.at_ms > killed_at && matches!(e.record, Record::Fact(Fact::Demoted { .. }))
        };
        events(&t, 2).iter().any(demoted).then_some(())
    })
    .await;
    t.cluster.start(3).unwrap();
    t.wait_for_leader(&[2, 3], 3, AGREE).await;

    phase("bully history --json, asked of node 3 and its peers");
    let json = history(&t, 3, &["--json"]).await;
    eprintln!("{json}");
    let lines = parse(&json);
    let events: Vec<&Line> = lines.iter().filter(|l| l.kind != "no_answer").collect();
    assert!(
        events.windows(2).all(|w| w[0].at_ms <= w[1].at_ms),
        "in time order"
    );
    let first = find(&lines, 0, "declaration of node 3 before the kill", |l| {
        l.kind == "declared" && l.node == Some(3) && l.at_ms < killed_at
    });
    let takeover = find(&lines, first + 1, "node 2's declaration", |l| {
        l.kind == "declared" && l.node == Some(2) && l.at_ms > killed_at
    });
    let hook = find(&lines, takeover + 1, "node 2's failed on_elected", |l| {
        l.kind == "hook_ran"
            && l.node == Some(2)
            && l.details["hook"] == "on_elected"
            && l.details["ok"] == false
            && l.details["failure"] == "exit 1"
    });
    let demoted = find(&lines, hook + 1, "node 2's demotion", |l| {
        l.kind == "demoted" && l.node == Some(2)
    });
    let restart = find(&lines, demoted + 1, "node 3's restart", |l| {
        l.kind == "started" && l.node == Some(3) && l.details["incarnation"].as_u64() > Some(1)
    });
    find(&lines, restart + 1, "node 3's new declaration", |l| {
        l.kind == "declared" && l.node == Some(3)
    });
    assert!(
        lines
            .iter()
            .all(|l| l.node != Some(1) || l.kind == "no_answer"),
        "node 1 is down: nothing of its log, only its silence"
    );
    let silent: Vec<&Line> = lines.iter().filter(|l| l.kind == "no_answer").collect();
    assert_eq!(silent.len(), 1, "{silent:#?}");
    assert_eq!(silent[0].node, Some(1));
    assert_eq!(
        silent[0].details["endpoint"],
        t.cluster.addr(1).to_string(),
        "{silent:#?}"
    );

    phase("the text form says the same in words");
    let words = history(&t, 3, &[]).await;
    eprintln!("{words}");
    let at = |needle: &str| {
        words
            .find(needle)
            .unwrap_or_else(|| panic!("no {needle:?} in:\n{words}"))
    };
    assert!(
        at("node 2   declared itself coordinator") < at("node 2   hook on_elected failed (exit 1")
    );
    assert!(at("node 2   hook on_elected failed (exit 1") < at("node 2   demoted from epoch"));
    assert!(at("node 2   demoted from epoch") < at("node 3   restarted (incarnation"));
    let last = words.lines().last().unwrap_or_default();
    assert!(last.starts_with("no answer from: node 1 ("), "{words}");
}
