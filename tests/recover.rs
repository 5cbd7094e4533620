//! Recovery from a lost majority with `bully recover` (docs/design.md#recovery-from-a-lost-majority):
//! three real nodes, two lost for good (killed, data dirs deleted), the survivor
//! recovered offline and started as before: it leads alone at a term above every term
//! the cluster used, its event log records the recovery, and the two come back as new
//! members (`bully member add`) and take their seats. The merged event logs hold I6
//! and I7 throughout. Then the misuse (issue 38): a forced recovery while the old
//! majority still runs, in reach or cut off until a heal; the old side stands down for
//! good once it meets the survivors (`tests/common/forced_recovery.rs`).

mod common;
#[path = "common/forced_recovery.rs"]
mod forced_recovery;

use bully::api::event_log::read_log;
use bully::history::Record;
use bully::protocol::{Cells, Membership, NodeId, Preempt, Timing};
use bully::storage::Storage;
use common::{bully, text, TestCluster};
use forced_recovery::{recover, STEP};

/// What node `id`'s data dir holds: cells, member list and the event log's bytes. The
/// node must be stopped; the store is released again before this returns.
fn stored(t: &TestCluster, id: NodeId) -> (Cells, Option<Membership>, Vec<u8>) {
    let dir = t.cluster.data_dir(id);
    let (storage, _) = Storage::open_waiting(&dir, STEP).expect("the stopped node's store");
    let held = (storage.load().unwrap(), storage.load_members().unwrap());
    let events = std::fs::read(dir.join(bully::api::event_log::EVENT_LOG)).unwrap();
    (held.0, held.1, events)
}

/// `bully member add ID ADDR -c node1.toml` (passed on to the coordinator), waiting
/// for the change to commit.
async fn add_member(t: &TestCluster, id: NodeId) {
    let config = t.cluster.config_path(1).display().to_string();
    let (id_text, addr) = (id.to_string(), t.cluster.addr(id).to_string());
    let out = tokio::task::spawn_blocking(move || {
        let args = ["member", "add", &id_text, &addr, "-c", &config];
        bully(&[&args[..], &["--timeout", "5s"]].concat())
    })
    .await
    .expect("the CLI ran");
    assert!(
        out.status.success() && text(&out).contains(&format!("node {id} joined")),
        "{}\n{}",
        text(&out),
        t.log_tail()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_survivor_leads_again_and_the_lost_return_as_new_members() {
    let mut t = TestCluster::new(3, Timing::default(), Preempt::Always);
    t.start_all();
    t.wait_for_leader(&[1, 2, 3], 3, STEP).await;

    // Nodes 2 and 3 are gone for good: killed, their disks lost.
    for id in [2, 3] {
        t.cluster.kill(id).unwrap();
        t.cluster.lose_store(id).unwrap();
    }
    // A running node's store is not touched.
    let running = recover(&t.cluster, 1, &["--members", "1", "--force"]).await;
    assert_eq!(running.status.code(), Some(2), "{}", text(&running));
    assert!(
        text(&running).contains("stop the node first"),
        "{}",
        text(&running)
    );

    t.cluster.stop(1, STEP).unwrap();
    let highest = bully::history::highest_term(&t.cluster.history());
    let before = stored(&t, 1);

    // Without --force: the plan and what can be lost, and nothing changed.
    let dry = recover(&t.cluster, 1, &["--members", "1"]).await;
    assert_eq!(dry.status.code(), Some(1), "{}", text(&dry));
    eprint!("bully recover without --force said:\n{}", text(&dry));
    for said in ["Lost members: 2", "never start a lost member", "--force"] {
        assert!(text(&dry).contains(said), "says {said:?}: {}", text(&dry));
    }
    assert_eq!(stored(&t, 1), before, "a refused recovery changes nothing");
    let wrong = recover(&t.cluster, 1, &["--members", "1,7", "--force"]).await;
    assert_eq!(wrong.status.code(), Some(2), "{}", text(&wrong));
    assert!(text(&wrong).contains("node 7 is not in the member list"));
    let lost = recover(&t.cluster, 2, &["--members", "2", "--force"]).await;
    assert_eq!(lost.status.code(), Some(2), "{}", text(&lost));
    assert!(text(&lost).contains("is missing"), "{}", text(&lost));
    assert!(
        !t.cluster.data_dir(2).exists(),
        "no empty store left behind"
    );

    let forced = recover(&t.cluster, 1, &["--members", "1", "--force"]).await;
    assert!(forced.status.success(), "{}", text(&forced));
    eprint!("bully recover --force said:\n{}", text(&forced));
    let (cells, list, _) = stored(&t, 1);
    let list = list.expect("a stored list");
    assert_eq!(list.members.iter().map(|m| m.id).collect::<Vec<_>>(), [1]);
    assert!(cells.term > highest, "term {} above {highest}", cells.term);
    assert!(list.id > before.1.map(|l| l.id).unwrap_or_default());

    // A plain start: it leads alone, above every term before.
    t.cluster.start(1).unwrap();
    let term = t.wait_for_leader(&[1], 1, STEP).await;
    assert!(term > highest, "leads at term {term}, above {highest}");
    let recorded = read_log(&t.cluster.data_dir(1))
        .unwrap()
        .into_iter()
        .any(|e| {
            matches!(e.record, Record::ForcedRecovery { ref members, term, .. }
            if members == &[1] && term > highest)
        });
    assert!(recorded, "the event log records the recovery");

    // The lost nodes come back as new members, on empty stores, one at a time.
    let addr1 = t.cluster.addr(1);
    t.cluster.add_member(2, &[(1, addr1)]).unwrap();
    t.cluster.start(2).unwrap();
    add_member(&t, 2).await;
    // Preempt always: each member, once seated, takes over as the highest.
    t.wait_for_leader(&[1, 2], 2, STEP).await;
    let addr2 = t.cluster.addr(2);
    t.cluster.add_member(3, &[(1, addr1), (2, addr2)]).unwrap();
    t.cluster.start(3).unwrap();
    add_member(&t, 3).await;
    t.wait_for_leader(&[1, 2, 3], 3, STEP).await;
    common::assert_offices_never_overlap(&t);
}

/// Issue 38: a forced recovery used while the old majority still runs
/// (`tests/common/forced_recovery.rs`). Once node 1 runs again, its transport refuses
/// nodes 2 and 3 as given up: both stand down for good (status, log), node 1 keeps
/// leading, and a restart on the old data dir does not bring them back. Before the
/// rule both sides led for as long as they ran (`tests/recover_sabotage.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_recovery_meeting_the_old_majority_gives_the_old_side_up_for_good() {
    let mut t = TestCluster::new(3, Timing::default(), Preempt::Always);
    let met = forced_recovery::beside_the_old_majority(&mut t, STEP).await;
    assert!(
        met.given_up,
        "nodes 2 and 3 never stood down\n{}",
        t.log_tail()
    );
    // For good: node 3 restarted on its old data dir stays given up and says so.
    t.cluster.kill(3).unwrap();
    t.cluster.start(3).unwrap();
    common::wait_until("node 3 back, still given up", STEP, || async {
        let views = t.views(&[3]).await;
        views.values().all(forced_recovery::given_up).then_some(())
    })
    .await;
    t.wait_for_leader(&[1], 1, STEP).await;
    let config = t.cluster.config_path(3).display().to_string();
    let status = bully(&["status", "--config", &config]);
    assert!(
        text(&status).contains("given up by a forced recovery"),
        "{}",
        text(&status)
    );
    let log = std::fs::read_to_string(t.cluster.log_path(3)).unwrap();
    assert!(log.contains("refused this node"), "the refusal is logged");
    let both = forced_recovery::stop_and_measure(&mut t);
    eprintln!("the survivor and the old side led at once for {both} ms");
    assert!(
        both < 5_000,
        "the old side stood down {both} ms after the survivor led"
    );
}

/// The issue's own case (`tests/common/forced_recovery.rs` `cut_off_then_healed`): {1, 2}
/// recovered while {3, 4, 5} lead cut off; once the cut heals, {3, 4, 5} stand down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_recovery_cut_off_from_the_old_majority_wins_once_healed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (given_up, both) = forced_recovery::cut_off_then_healed(dir.path(), STEP).await;
    eprintln!("after the heal both sides led at once for {both} ms");
    assert!(given_up, "nodes 3, 4 and 5 never stood down");
    assert!(both < 3_000, "both sides led for {both} ms after the heal");
}
