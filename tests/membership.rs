//! Real `bully node` processes on 127.0.0.1 growing from three members to five and back
//! to three with `bully member` alone, while a follower is killed and a member is
//! paused, and two adds at once are refused (docs/design.md#membership). The config
//! files are written once, before the first start, and never touched again. The
//! merged event logs are checked for I6 (no two offices overlap) and I7 (one holder per
//! term), and every node that answers is polled for two coordinators at once.
//!
//! The second test does it with every peer link through the chaos relay
//! (src/chaos/relay.rs) and real links cut during two changes.

mod common;

use bully::api::Status;
use bully::chaos::relay::Relay;
use bully::protocol::{Mode, NodeId, Preempt, Role, Timing};
use common::{bully, text, TestCluster};
use std::collections::BTreeMap;
use std::time::Duration;

/// Generous: each step takes well under a second; CI machines are slow.
const STEP: Duration = Duration::from_secs(30);

/// `bully member ARGS` against node `via`, run off the async runtime; its output.
async fn member(t: &TestCluster, via: NodeId, args: &[&str]) -> std::process::Output {
    let endpoint = t.cluster.addr(via).to_string();
    let certs = t.dir.path().join("certs").display().to_string();
    let mut full: Vec<String> = vec!["member".into()];
    full.extend(args.iter().map(|a| a.to_string()));
    full.extend(["--endpoints".into(), endpoint, "--certs".into(), certs]);
    full.extend(["--timeout".into(), "5s".into()]);
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = full.iter().map(String::as_str).collect();
        bully(&args)
    })
    .await
    .expect("the CLI ran")
}

/// Fails the test at once if two of `views` say they are coordinator.
fn one_coordinator(views: &BTreeMap<NodeId, Option<Status>>, t: &TestCluster) {
    let leading: Vec<NodeId> = views
        .values()
        .flatten()
        .filter(|s| s.role == Role::Coordinator)
        .map(|s| s.id)
        .collect();
    assert!(
        leading.len() <= 1,
        "two coordinators at once: {leading:?}\n{}",
        t.log_tail()
    );
}

/// Waits until every node in `live` holds a list whose members are exactly `members`
/// (voters all, none a learner) and one of them leads, polling for two coordinators
/// all along. Returns the list's identity as the leader holds it.
async fn wait_for_members(t: &TestCluster, live: &[NodeId], members: &[NodeId]) -> String {
    let started = std::time::Instant::now();
    loop {
        let views = t.views(&[1, 2, 3, 4, 5]).await;
        one_coordinator(&views, t);
        let holds = |id: &NodeId| {
            views[id]
                .as_ref()
                .and_then(|s| s.members.clone())
                .is_some_and(|list| {
                    list.members.iter().map(|m| m.id).collect::<Vec<_>>() == members
                        && list.members.iter().all(|m| !m.learner)
                })
        };
        let leader = views
            .values()
            .flatten()
            .find(|s| s.role == Role::Coordinator && live.contains(&s.id));
        if let Some(leader) = leader.filter(|_| live.iter().all(holds)) {
            let list = leader.members.as_ref().expect("a list");
            return format!("{}", list.id);
        }
        assert!(
            started.elapsed() < STEP,
            "no agreement on members {members:?} among {live:?} within {STEP:?}: {views:#?}\n{}",
            t.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn config_files(t: &TestCluster) -> Vec<String> {
    (1..=5)
        .map(|id| std::fs::read_to_string(t.cluster.config_path(id)).expect("config"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_to_five_to_three_with_member_commands_only() {
    let mut t = TestCluster::new(5, Timing::default(), Preempt::Always);
    // The first three know only each other; 4 and 5 are new hosts whose configs list
    // everyone (their seed lists are harmless: the members refuse them until added).
    for old in [1, 2, 3] {
        t.cluster
            .edit_config(old, |c| c.peers.retain(|p| p.id <= 3))
            .unwrap();
    }
    let files = config_files(&t);
    for id in [1, 2, 3] {
        t.cluster.start(id).unwrap();
    }
    t.wait_for_leader(&[1, 2, 3], 3, STEP).await;
    wait_file_differs(&t, &[(1, false), (2, false), (3, false)]).await;
    for id in [4, 5] {
        t.cluster.start(id).unwrap();
    }

    // Grow: add 4 through node 1, a follower (it passes the change to coordinator 3).
    let addr4 = t.cluster.addr(4).to_string();
    change(&t, 1, &["add", "4", &addr4], "node 4 joined").await;
    wait_for_members(&t, &[1, 2, 3, 4], &[1, 2, 3, 4]).await;
    // Node 4, now a voter above 3, takes over (preempt always).
    t.wait_for_leader(&[1, 2, 3, 4], 4, STEP).await;
    // The change made node 2's file (1–3) and node 4's (1–5) differ from the list.
    wait_file_differs(&t, &[(2, true), (4, true)]).await;

    // Add 5 while node 1 is killed. Node 5 is paused, so it stays a learner until it is
    // resumed: meanwhile a second add is refused.
    let addr5 = t.cluster.addr(5).to_string();
    t.cluster.kill(1).unwrap();
    t.cluster.pause(5).unwrap();
    let first = {
        let endpoint = t.cluster.addr(2).to_string();
        let certs = t.dir.path().join("certs").display().to_string();
        tokio::task::spawn_blocking(move || {
            bully(&[
                "member",
                "add",
                "5",
                &addr5,
                "--endpoints",
                &endpoint,
                "--certs",
                &certs,
                "--timeout",
                "5s",
            ])
        })
    };
    common::wait_until("node 5 listed as a learner", STEP, || async {
        let views = t.views(&[2, 3, 4]).await;
        one_coordinator(&views, &t);
        let learning = |s: &Status| {
            s.role == Role::Coordinator
                && s.members
                    .as_ref()
                    .and_then(|l| l.get(5))
                    .is_some_and(|m| m.learner)
        };
        views.values().flatten().any(learning).then_some(())
    })
    .await;
    let second = member(&t, 3, &["add", "6", "127.0.0.1:9"]).await;
    assert!(
        !second.status.success(),
        "two adds at once: {}",
        text(&second)
    );
    assert!(
        text(&second).contains("one at a time") || text(&second).contains("one new member"),
        "the refusal says why: {}",
        text(&second)
    );
    t.cluster.resume(5).unwrap();
    let first = first.await.expect("the CLI ran");
    assert!(first.status.success(), "{}\n{}", text(&first), t.log_tail());
    t.cluster.start(1).unwrap();
    wait_for_members(&t, &[1, 2, 3, 4, 5], &[1, 2, 3, 4, 5]).await;
    t.wait_for_leader(&[1, 2, 3, 4, 5], 5, STEP).await;
    // Now nodes 4's and 5's files agree with the list; node 2's still does not.
    wait_file_differs(&t, &[(2, true), (4, false), (5, false)]).await;

    // Shrink: remove 1, then 2 while node 3 is paused (SIGSTOP) and comes back.
    change(&t, 3, &["remove", "1"], "node 1 left").await;
    t.cluster.pause(3).unwrap();
    change(&t, 4, &["remove", "2"], "node 2 left").await;
    t.cluster.resume(3).unwrap();
    let list = wait_for_members(&t, &[3, 4, 5], &[3, 4, 5]).await;
    eprintln!("final member list {list}");
    assert_the_end(&t, &files).await;
}

/// Waits until each `(node, differs)` holds: the node's status says (or does not say)
/// that its config file's member list differs from the stored one.
async fn wait_file_differs(t: &TestCluster, expected: &[(NodeId, bool)]) {
    let ids: Vec<NodeId> = expected.iter().map(|&(id, _)| id).collect();
    let what = format!("file_differs as {expected:?}");
    common::wait_until(&what, STEP, || async {
        let views = t.views(&ids).await;
        expected
            .iter()
            .all(|&(id, differs)| {
                views[&id]
                    .as_ref()
                    .is_some_and(|s| s.file_differs.is_some() == differs)
            })
            .then_some(())
    })
    .await;
}

/// What both tests end with, once nodes 1 and 2 were removed: they know they are out
/// and never lead again, the config files are as written before the first start, and
/// the merged event logs hold I6 and I7.
async fn assert_the_end(t: &TestCluster, files: &[String]) {
    for gone in [1, 2] {
        let status = t.cluster.status(gone, Duration::from_secs(2)).await;
        if let Ok(status) = status {
            assert!(
                !status.eligible,
                "removed node {gone} is ineligible: {status:?}"
            );
        }
    }

    assert_eq!(config_files(t), files, "the config files were never edited");
    common::assert_offices_never_overlap(t);
}

/// Asks for `args` through `via` and fails the test unless it is done, saying `done`.
async fn change(t: &TestCluster, via: NodeId, args: &[&str], done: &str) {
    let out = member(t, via, args).await;
    assert!(out.status.success(), "{}\n{}", text(&out), t.log_tail());
    assert!(text(&out).contains(done), "{}", text(&out));
}

/// 3 → 5 → 3 with every peer link through the relay: nodes 1–3 reach an added node at
/// the relay's door to it (the address given to `bully member add`), the added nodes
/// reach the others through per-link fronts. Node 1 is cut off while node 4 is added,
/// node 3 while node 2 is removed: each change commits on the other side, the cut-off
/// member neither leads nor learns the new list until the cut heals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_to_five_to_three_with_links_cut_during_changes() {
    let ids = [1, 2, 3, 4, 5];
    let mut relay = Relay::bind(&ids).await.expect("relay sockets");
    let route = |from, to, _: &_| relay.front_addr(from, to);
    let mut t = TestCluster::routed(5, Timing::default(), Preempt::Always, Mode::Quorum, route);
    let targets = ids.iter().map(|&id| (id, t.cluster.addr(id))).collect();
    relay.start(&targets, 27).await.expect("relay started");
    for old in [1, 2, 3] {
        t.cluster
            .edit_config(old, |c| c.peers.retain(|p| p.id <= 3))
            .unwrap();
    }
    let files = config_files(&t);
    for id in ids {
        t.cluster.start(id).unwrap();
    }
    t.wait_for_leader(&[1, 2, 3], 3, STEP).await;

    relay.partition(&[1], &[2, 3, 4, 5]);
    let door4 = relay.door(4, t.cluster.addr(4)).await.unwrap().to_string();
    change(&t, 2, &["add", "4", &door4], "node 4 joined").await;
    wait_for_members(&t, &[2, 3, 4], &[1, 2, 3, 4]).await;
    let cut_off = t.cluster.status(1, STEP).await.expect("node 1 answers");
    let list = cut_off.members.expect("a list");
    assert!(
        list.get(4).is_none() && cut_off.role != Role::Coordinator,
        "node 1 was cut off: {list:?}"
    );
    relay.heal();
    wait_for_members(&t, &[1, 2, 3, 4], &[1, 2, 3, 4]).await;
    t.wait_for_leader(&[1, 2, 3, 4], 4, STEP).await;

    let door5 = relay.door(5, t.cluster.addr(5)).await.unwrap().to_string();
    change(&t, 3, &["add", "5", &door5], "node 5 joined").await;
    wait_for_members(&t, &ids, &ids).await;
    t.wait_for_leader(&ids, 5, STEP).await;

    relay.partition(&[3], &[1, 2, 4, 5]);
    change(&t, 4, &["remove", "2"], "node 2 left").await;
    wait_for_members(&t, &[1, 4, 5], &[1, 3, 4, 5]).await;
    let cut_off = t.cluster.status(3, STEP).await.expect("node 3 answers");
    assert!(
        cut_off.members.expect("a list").get(2).is_some(),
        "node 3 was cut off"
    );
    relay.heal();
    wait_for_members(&t, &[1, 3, 4, 5], &[1, 3, 4, 5]).await;
    change(&t, 5, &["remove", "1"], "node 1 left").await;
    wait_for_members(&t, &[3, 4, 5], &[3, 4, 5]).await;
    assert_the_end(&t, &files).await;
}
