//! Real `bully node` processes on 127.0.0.1 whose configs disagree, as an operator
//! leaves them halfway through a change: one node with another D, one node still in
//! `classic` among quorum nodes, two members added on some hosts only. Throughout,
//! never two coordinators at once (every node's status polled); the odd node reports
//! itself ineligible with the reason, both ends log the refusal naming both sides and
//! count it by reason, and the others elect. And the mode as cluster state: a member
//! whose file was edited to another mode refuses to start, until the whole cluster
//! changes with `bully node --change-mode`.

mod common;

use bully::api::Status;
use bully::history::Record;
use bully::protocol::{Fact, Mode, NodeId, Preempt, Role, Timing};
use common::TestCluster;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Generous: the protocol converges in well under a second; CI machines are slow.
const AGREE: Duration = Duration::from_secs(20);
/// How long to keep watching once everything is settled.
const SETTLED_WATCH: Duration = Duration::from_secs(3);

type Views = BTreeMap<NodeId, Option<Status>>;

/// What node 5 in classic mode among quorum nodes reports.
const MODE_REASON: &str = "mode differs from nodes 1,2,3,4";

/// The views of every node but `odd`.
fn without(views: &Views, odd: NodeId) -> Views {
    let mut others = views.clone();
    others.remove(&odd);
    others
}

/// The nodes that say they are coordinator (statuses are read against the lease).
fn coordinators(views: &Views) -> Vec<NodeId> {
    views
        .values()
        .flatten()
        .filter(|s| s.role == Role::Coordinator)
        .map(|s| s.id)
        .collect()
}

/// Polls every node until `settled` holds, then for [`SETTLED_WATCH`] more while
/// `keeps` must hold throughout (a lease renewal late on a busy machine may unsettle
/// the leader for a moment; what must never happen is in `keeps`), failing the moment
/// two nodes are coordinator at once. Returns the last views.
async fn watch_one_coordinator(
    t: &TestCluster,
    ids: &[NodeId],
    what: &str,
    settled: impl Fn(&Views) -> bool,
    keeps: impl Fn(&Views) -> bool,
) -> Views {
    let started = Instant::now();
    let mut settled_at: Option<Instant> = None;
    loop {
        let views = t.views(ids).await;
        let leading = coordinators(&views);
        assert!(
            leading.len() <= 1,
            "two coordinators at once: {leading:?}; views {views:#?}\n{}",
            t.log_tail()
        );
        if settled_at.is_none() && settled(&views) {
            settled_at = Some(Instant::now());
        }
        if settled_at.is_some() {
            assert!(keeps(&views), "{what} held, then broke: {views:#?}");
        }
        if settled_at.is_some_and(|at| at.elapsed() >= SETTLED_WATCH) {
            return views;
        }
        assert!(
            started.elapsed() < AGREE,
            "no {what} within {AGREE:?}; last views {views:#?}\n{}",
            t.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Whether node `odd` reports itself ineligible for the config reason `words`.
fn ineligible_for(views: &Views, odd: NodeId, words: &str) -> bool {
    views[&odd].as_ref().is_some_and(|s| {
        !s.eligible
            && s.role != Role::Coordinator
            && s.config_conflict
                .as_deref()
                .is_some_and(|c| c.contains(words))
            && s.line().contains(words)
    })
}

/// The lines of node `id`'s log that report a refusal over config.
fn refusal_lines(t: &TestCluster, id: NodeId) -> Vec<String> {
    let log = std::fs::read_to_string(t.cluster.log_path(id)).unwrap_or_default();
    log.lines()
        .filter(|l| l.contains("config disagrees with a peer's"))
        .map(str::to_string)
        .collect()
}

/// Asserts node `id` counted refusals under `reason` and logged one line naming every
/// one of `words`. The line is the node's own comparison ("ours (node 3) ..., theirs
/// (node 1) ...") or, when the peer refused first, the peer's words quoted ("refused by
/// node 1: ours (node 1) ..."); both name each side by node ID.
async fn assert_refusal_seen(t: &TestCluster, id: NodeId, reason: &str, words: &[&str]) {
    let metrics = t
        .cluster
        .metrics(id, Duration::from_secs(5))
        .await
        .expect("metrics");
    let counted = match reason {
        "timing" => metrics.transport.config_refusals.timing,
        "mode" => metrics.transport.config_refusals.mode,
        _ => unreachable!(),
    };
    assert!(counted >= 1, "node {id}: no {reason} refusal counted");
    let lines = refusal_lines(t, id);
    assert!(
        lines.iter().any(|l| words.iter().all(|w| l.contains(w))),
        "node {id} logged no refusal naming {words:?}: {lines:#?}"
    );
}

/// Node 3 of 3 starts with D = 1500 ms in its file, nodes 1 and 2 with 300 ms. D is
/// cluster state that may differ while a change spreads (docs/design.md#cluster-settings),
/// so nobody refuses anybody: the three elect node 3, which then asks each follower
/// for promises of its own D, and one `bully config set` makes every member live by one
/// D.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_another_d_is_not_refused_and_one_set_gives_one_d() {
    let mut t = TestCluster::new(3, Timing::default(), Preempt::Always);
    t.cluster
        .edit_config(3, |c| c.timing.suspect_after_ms = 1500)
        .unwrap();
    t.start_all();
    t.wait_for_leader(&[1, 2, 3], 3, AGREE).await;
    for id in [1, 3] {
        let metrics = t.cluster.metrics(id, Duration::from_secs(2)).await.unwrap();
        assert_eq!(metrics.transport.config_refusals.timing, 0, "node {id}");
    }
    let config = t.cluster.config_path(1).display().to_string();
    let out = tokio::task::spawn_blocking(move || {
        common::bully(&[
            "config",
            "set",
            "timing.suspect_after_ms=600",
            "--config",
            &config,
        ])
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{}", common::text(&out));
    let deadline = Instant::now() + AGREE;
    loop {
        let views = t.views(&[1, 2, 3]).await;
        let ds: Vec<Option<u64>> = views
            .values()
            .map(|v| v.as_ref().map(|s| s.timing.suspect_after_ms))
            .collect();
        if ds.iter().all(|d| *d == Some(600)) {
            break;
        }
        assert!(Instant::now() < deadline, "not one D: {ds:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Node 5 of 5 is left in `classic` while nodes 1–4 already run quorum mode, and is
/// (re)started among them: cut off by the refusals it would lead alone. It stands down
/// (4 of 5 disagree) before its first election; nodes 1–4 keep node 4.
///
/// Started while none of its peers runs, a classic node leads alone, as classic mode
/// does, until its first hello exchange; hence the order here (see the report).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_classic_node_among_quorum_nodes_never_leads() {
    let mut t = TestCluster::new(5, Timing::default(), Preempt::Always);
    t.cluster
        .edit_config(5, |c| c.mode = Mode::Classic)
        .unwrap();
    let quorum: Vec<NodeId> = (1..=4).collect();
    for &id in &quorum {
        t.cluster.start(id).unwrap();
    }
    t.wait_for_leader(&quorum, 4, AGREE).await;
    t.cluster.start(5).unwrap();
    let ids = t.cluster.ids();
    let views = watch_one_coordinator(
        &t,
        &ids,
        "node 4 leading, node 5 standing down",
        |v| common::agreed(&without(v, 5), 4).is_some() && ineligible_for(v, 5, MODE_REASON),
        |v| ineligible_for(v, 5, MODE_REASON),
    )
    .await;
    eprintln!("{}", views[&5].as_ref().unwrap().line());
    let sides = ["(node 5) mode=classic", "(node 4) mode=quorum"];
    assert_refusal_seen(&t, 5, "mode", &sides).await;
    assert_refusal_seen(&t, 4, "mode", &sides).await;
    assert_never_declared(&t, 5);
}

/// Node `id`'s event log shows no declaration: it never led, not even briefly between
/// two polls.
fn assert_never_declared(t: &TestCluster, id: NodeId) {
    let declared: Vec<_> = t
        .cluster
        .history()
        .into_iter()
        .filter(|e| e.node == id && matches!(e.record, Record::Fact(Fact::Declared { .. })))
        .collect();
    assert!(
        declared.is_empty(),
        "node {id} declared: {declared:?}\n{}",
        t.cluster.log_tail(40)
    );
}

/// Two members added at once on some hosts only: nodes 3, 4 and 5 run the new list
/// [1..5] while nodes 1 and 2 still run [1, 2, 3]. Each side counts a majority of its
/// own list ({1, 2} of 3, {3, 4, 5} of 5); a refusal alone would let both elect. The
/// list rule makes every node that saw a list two apart stand down, so at most one side
/// leads: never two coordinators, never two holders of one term.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_members_added_at_once_never_give_two_coordinators() {
    let mut t = TestCluster::new(5, Timing::default(), Preempt::Always);
    for old in [1, 2] {
        t.cluster
            .edit_config(old, |c| c.peers.retain(|p| p.id <= 3))
            .unwrap();
    }
    t.start_all();
    let ids = t.cluster.ids();
    let views = watch_one_coordinator(
        &t,
        &ids,
        "the old side standing down",
        |v| {
            [1, 2]
                .iter()
                .all(|&id| v[&id].as_ref().is_some_and(|s| !s.eligible))
        },
        |v| coordinators(v).iter().all(|&id| id >= 3),
    )
    .await;
    for (id, status) in &views {
        eprintln!(
            "node {id}: {}",
            status.as_ref().map_or("down".into(), |s| s.line())
        );
    }
    common::assert_offices_never_overlap(&t);
    for old in [1, 2] {
        assert_never_declared(&t, old);
    }
}

/// Issue 47's mode edit: two members restarted with `mode = "classic"` under a partition
/// led beside the quorum side's coordinator. The mode is stored at a store's first
/// start (src/node/drive/start.rs): a member whose file names another mode refuses to
/// start (exit 2, saying how to change the cluster), the others keep leading, and the
/// whole cluster changes only when every node is stopped and started again with its
/// new file and `--change-mode`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mode_edited_in_one_file_is_refused_until_the_whole_cluster_changes() {
    let mut t = TestCluster::new(3, Timing::default(), Preempt::Always);
    t.start_all();
    t.wait_for_leader(&[1, 2, 3], 3, AGREE).await;
    t.cluster.stop(1, Duration::from_secs(10)).unwrap();
    t.cluster
        .edit_config(1, |c| c.mode = Mode::Classic)
        .unwrap();

    let config = t.cluster.config_path(1);
    let Some((code, said)) = common::refused_start(&config, AGREE).await else {
        panic!("node 1 ran with mode = classic beside quorum nodes");
    };
    assert_eq!(code, Some(2), "{said}");
    assert!(
        said.contains("runs the cluster in quorum mode") && said.contains("--change-mode"),
        "{said}"
    );
    t.wait_for_leader(&[2, 3], 3, AGREE).await;

    // The whole cluster changes: every node stopped, every file set, each started once
    // with --change-mode; they elect in classic mode.
    for id in [2, 3] {
        t.cluster.stop(id, Duration::from_secs(10)).unwrap();
        t.cluster
            .edit_config(id, |c| c.mode = Mode::Classic)
            .unwrap();
    }
    for id in [1, 2, 3] {
        t.cluster.start_with(id, &["--change-mode"]).unwrap();
    }
    t.wait_for_leader(&[1, 2, 3], 3, AGREE).await;
    let views = t.views(&[1, 2, 3]).await;
    for (id, view) in &views {
        let mode = view.as_ref().map(|s| s.mode);
        assert_eq!(mode, Some(Mode::Classic), "node {id}: {view:?}");
    }
    // Stored: a plain restart in classic mode is no longer refused.
    t.cluster.stop(2, Duration::from_secs(10)).unwrap();
    t.cluster.start(2).unwrap();
    t.wait_for_leader(&[1, 2, 3], 3, AGREE).await;
}

/// Issue 47's member-list edit: members restarted with files naming only each other
/// counted a majority of their own list. A node stores its file's list at its first
/// start (src/node/drive/start.rs), so a file edited later is not counted: node 1
/// restarted with `[[peers]]` naming node 2 alone still lives by all three, says so in
/// its log and its status (`bully status`, `status --cluster`), and follows node 3.
/// With the file put back, its status says nothing of it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_list_edited_in_one_file_is_not_counted() {
    let mut t = TestCluster::new(3, Timing::default(), Preempt::Always);
    t.start_all();
    t.wait_for_leader(&[1, 2, 3], 3, AGREE).await;
    t.cluster.stop(1, Duration::from_secs(10)).unwrap();
    let original = std::fs::read_to_string(t.cluster.config_path(1)).unwrap();
    t.cluster
        .edit_config(1, |c| c.peers.retain(|p| p.id == 2))
        .unwrap();
    t.cluster.start(1).unwrap();
    t.wait_for_leader(&[1, 2, 3], 3, AGREE).await;
    let views = t.views(&[1]).await;
    let listed: Vec<NodeId> = views[&1]
        .as_ref()
        .and_then(|s| s.members.as_ref())
        .map(|l| l.members.iter().map(|m| m.id).collect())
        .unwrap_or_default();
    assert_eq!(listed, [1, 2, 3], "node 1 lives by the stored list");
    let log = std::fs::read_to_string(t.cluster.log_path(1)).unwrap();
    assert!(
        log.contains("the stored list rules"),
        "the start says the file differs\n{}",
        t.log_tail()
    );
    let all = t.views(&[1, 2, 3]).await;
    let differs = |id: NodeId| all[&id].as_ref().and_then(|s| s.file_differs.clone());
    let said = differs(1).unwrap_or_default();
    assert!(
        said.contains("[1, 2]") && said.contains("[1, 2, 3]"),
        "node 1's status names both lists: {said:?}"
    );
    assert_eq!((differs(2), differs(3)), (None, None), "their files agree");
    let config = t.cluster.config_path(1);
    let config = config.to_str().unwrap();
    let status = common::bully(&["status", "--config", config]);
    let shown = common::text(&status);
    assert!(
        status.status.success() && shown.contains("config file differs: ") && shown.contains(&said),
        "bully status shows it: {shown}"
    );
    let cluster = common::bully(&["status", "--cluster", "--config", config]);
    let shown = common::text(&cluster);
    assert!(
        shown.contains(&format!("warning: node 1: {said}")),
        "status --cluster warns of it: {shown}"
    );
    // The file put back: nothing to say.
    t.cluster.stop(1, Duration::from_secs(10)).unwrap();
    std::fs::write(t.cluster.config_path(1), &original).unwrap();
    t.cluster.start(1).unwrap();
    t.wait_for_leader(&[1, 2, 3], 3, AGREE).await;
    let again = t.views(&[1]).await;
    let differs = again[&1].as_ref().map(|s| s.file_differs.clone());
    assert_eq!(differs, Some(None), "node 1's file agrees again");
}
