//! The decisions under the durability rule and the cluster's identity
//! (src/postgres_rules/durability.rs): what waits rather than loses.

use super::*;

const ME: NodeId = 2;
const TOKEN: u64 = 7;
const LEADING: Office = Office::Leading { token: TOKEN };
const FULL: &str = "ANY 1 (bully_1, bully_3)";

fn cluster() -> Cluster {
    Cluster {
        streaming: 2,
        knows_branch: vec![1, 3],
        system_id: 42,
        server_system_id: 42,
        held_data: true,
        flushed: vec![(1, 10), (3, 10)],
        ..Cluster::of(ME, &[1, 2, 3])
    }
}

fn rules() -> Rules {
    Rules::for_test()
}

fn running(in_recovery: bool, names: &str) -> Server {
    Server::Running(Running {
        in_recovery,
        timeline: 2,
        wal: Position { branch: 1, lsn: 10 },
        upstream: None,
        streaming: false,
        synchronous_standby_names: names.into(),
    })
}

fn record(token: u64, seq: u64, primary: NodeId, alone: bool) -> SyncRecord {
    SyncRecord {
        token,
        seq,
        primary,
        k: usize::from(!alone),
        standbys: vec![1, 3],
        system_id: 42,
        alone,
    }
}

/// The memory of a primary that saw `names` set when its WAL ended at `lsn`, with the
/// office's record `committed`.
fn memory(names: &str, lsn: u64, committed: Option<SyncRecord>) -> Memory {
    Memory {
        sync_written: committed.as_ref().map_or((0, 0), |c| (c.token, c.seq)),
        committed,
        names_from: Some((names.into(), lsn)),
        ..Memory::default()
    }
}

/// `decide` with nothing remembered, under [`rules`].
fn decide_fresh(office: Office, server: &Server, peers: &[PeerWal], cluster: &Cluster) -> Decision {
    decide(office, server, peers, cluster, &Memory::default(), &rules())
}

fn reached(ids: &[NodeId]) -> Vec<PeerWal> {
    ids.iter()
        .map(|&id| PeerWal {
            id,
            wal: Some(Position { branch: 1, lsn: 10 }),
        })
        .collect()
}

/// Following node 3, whose server is known.
const FOLLOWING_3: Office = Office::Following {
    leader: 3,
    server: Some(3),
};

/// A standby's server, stopped cleanly.
const STANDBY_STOPPED: Server = Server::Stopped {
    was_primary: false,
    clean: true,
};
#[test]
fn a_primary_whose_standbys_stop_streaming_acknowledges_alone_only_after_a_majority_keeps_it() {
    let mut c = cluster();
    c.streaming = 0;
    let full = memory(FULL, 10, Some(record(TOKEN, 1, ME, false)));
    let d = decide(LEADING, &running(false, FULL), &[], &c, &full, &rules());
    let Act::CommitSync { record } = d.act else {
        panic!("first the record: {d:?}");
    };
    assert_eq!(
        (record.token, record.seq, record.alone, record.k),
        (TOKEN, 2, true, 0)
    );
    assert_eq!(record.system_id, 42);
    let kept = memory(FULL, 10, Some(record.clone()));
    let d = decide(LEADING, &running(false, FULL), &[], &c, &kept, &rules());
    assert_eq!(d.act, Act::SetSynchronous { names: "".into() });
    // A record that did not reach a majority leaves the names as they were, and the
    // next try takes the next number.
    let tried = Memory {
        sync_written: (TOKEN, 2),
        ..full.clone()
    };
    let d = decide(LEADING, &running(false, FULL), &[], &c, &tried, &rules());
    assert!(matches!(d.act, Act::CommitSync { record } if record.seq == 3 && record.alone));
    // strict never lowers k; off keeps no record.
    let mut strict = rules();
    strict.synchronous = Synchronous::Strict;
    let d = decide(LEADING, &running(false, FULL), &[], &c, &full, &strict);
    assert!(matches!(d.act, Act::Wait(_)), "{d:?}");
    let mut off = rules();
    off.synchronous = Synchronous::Off;
    let d = decide(
        LEADING,
        &running(false, FULL),
        &[],
        &c,
        &Memory::default(),
        &off,
    );
    assert_eq!(d.act, Act::SetSynchronous { names: "".into() });
}

#[test]
fn the_full_set_is_recorded_only_once_k_standbys_caught_up() {
    let mut c = cluster();
    let alone = memory(FULL, 50, Some(record(TOKEN, 2, ME, true)));
    // The names go back to full at once: waiting for more is always safe.
    let d = decide(LEADING, &running(false, ""), &[], &c, &alone, &rules());
    assert_eq!(d.act, Act::SetSynchronous { names: FULL.into() });
    // Standbys still below where the WAL ended when the full names appeared: wait.
    let d = decide(LEADING, &running(false, FULL), &[], &c, &alone, &rules());
    assert!(
        matches!(&d.act, Act::Wait(w) if w.contains("catch up")),
        "{d:?}"
    );
    c.flushed = vec![(1, 49), (3, 50)];
    let d = decide(LEADING, &running(false, FULL), &[], &c, &alone, &rules());
    assert!(
        matches!(&d.act, Act::CommitSync { record } if !record.alone && record.seq == 3),
        "{d:?}"
    );
    // A standby not named under its own name does not count.
    c.knows_branch = vec![1];
    c.flushed = vec![(1, 49), (3, 50)];
    let names = "ANY 1 (bully_1, bully_unconfirmed_3)";
    let unconfirmed = memory(names, 50, Some(record(TOKEN, 2, ME, true)));
    let d = decide(
        LEADING,
        &running(false, names),
        &[],
        &c,
        &unconfirmed,
        &rules(),
    );
    assert!(matches!(d.act, Act::Wait(_)), "{d:?}");
}

#[test]
fn a_coordinator_promotes_over_an_alone_record_only_holding_its_primary_s_wal() {
    let mut c = cluster();
    c.sync = SyncView::Read(Some(record(5, 3, 1, true)));
    let d = decide_fresh(LEADING, &running(true, ""), &reached(&[3]), &c);
    assert!(
        matches!(&d.act, Act::Wait(w) if w.contains("waits to promote") && w.contains("node 1")),
        "{d:?}"
    );
    assert!(d.eligible, "it keeps the office and waits");
    // Reaching the old primary's server (and holding its WAL) covers it.
    let d = decide_fresh(LEADING, &running(true, ""), &reached(&[1]), &c);
    assert_eq!(d.act, Act::Promote);
    // A full record: the majority rule alone.
    c.sync = SyncView::Read(Some(record(5, 4, 1, false)));
    let d = decide_fresh(LEADING, &running(true, ""), &reached(&[3]), &c);
    assert_eq!(d.act, Act::Promote);
    // Fewer than a majority answered with their records: wait.
    c.sync = SyncView::Unread;
    let d = decide_fresh(LEADING, &running(true, ""), &reached(&[1]), &c);
    assert!(matches!(d.act, Act::Wait(_)) && d.eligible, "{d:?}");
}

#[test]
fn the_operator_may_accept_the_loss_for_one_office() {
    let mut c = cluster();
    c.sync = SyncView::Read(Some(record(5, 3, 1, true)));
    let accepted = Memory {
        accept_loss: Some(TOKEN),
        ..Memory::default()
    };
    let d = decide(
        LEADING,
        &running(true, ""),
        &reached(&[3]),
        &c,
        &accepted,
        &rules(),
    );
    assert_eq!(d.act, Act::Promote);
    let other_office = Memory {
        accept_loss: Some(TOKEN - 1),
        ..Memory::default()
    };
    let d = decide(
        LEADING,
        &running(true, ""),
        &reached(&[3]),
        &c,
        &other_office,
        &rules(),
    );
    assert!(matches!(d.act, Act::Wait(_)));
}

#[test]
fn a_new_cluster_commits_its_identity_before_its_first_promotion_and_never_initdbs_twice() {
    let mut c = cluster();
    c.all_absent = true;
    c.held_data = false;
    c.system_id = 0;
    c.server_system_id = 0;
    let d = decide_fresh(LEADING, &Server::Absent, &[], &c);
    assert_eq!(d.act, Act::InitDb);
    // Not enough members answered: no initdb yet.
    c.sync = SyncView::Unread;
    let d = decide_fresh(LEADING, &Server::Absent, &[], &c);
    assert!(matches!(d.act, Act::Wait(_)), "{d:?}");
    // A majority keeps the identity of an initialized cluster: never initdb again.
    c.sync = SyncView::Read(Some(record(3, 1, 1, false)));
    let d = decide_fresh(LEADING, &Server::Absent, &[], &c);
    assert!(
        matches!(&d.act, Act::Wait(w) if w.contains("no second initdb")),
        "{d:?}"
    );
    assert!(!d.eligible);
    // After initdb: the record with the new system identifier first, then promote.
    c.sync = SyncView::Read(None);
    c.server_system_id = 99;
    let d = decide_fresh(LEADING, &running(true, ""), &[], &c);
    let Act::CommitSync { record } = d.act else {
        panic!("identity first: {d:?}");
    };
    assert_eq!(
        (record.system_id, record.primary, record.alone),
        (99, ME, false)
    );
    let kept = Memory {
        sync_written: (TOKEN, 1),
        committed: Some(record),
        ..Memory::default()
    };
    let d = decide(LEADING, &running(true, ""), &[], &c, &kept, &rules());
    assert_eq!(d.act, Act::Promote);
}

#[test]
fn a_missing_or_foreign_data_dir_is_left_for_the_operator() {
    let c = cluster();
    let following = FOLLOWING_3;
    let d = decide_fresh(following, &Server::Absent, &[], &c);
    assert!(
        matches!(&d.act, Act::Wait(w) if w.contains("missing")),
        "{d:?}"
    );
    assert!(!d.eligible);
    let mut new_member = c.clone();
    new_member.held_data = false;
    let d = decide_fresh(following, &Server::Absent, &[], &new_member);
    assert_eq!(
        d.act,
        Act::Clone {
            from: 3,
            by: Copier::BaseBackup
        }
    );
    let mut foreign = c.clone();
    foreign.server_system_id = 7;
    for server in [
        running(true, ""),
        Server::Stopped {
            was_primary: true,
            clean: true,
        },
    ] {
        let d = decide_fresh(following, &server, &[], &foreign);
        assert_waits_out(&d, "another cluster");
    }
    assert_never_promoted(&foreign);
    // A foreign primary without the office is still stopped.
    let d = decide_fresh(following, &running(false, ""), &[], &foreign);
    assert!(matches!(d.act, Act::Stop { .. }), "{d:?}");
}

#[test]
fn a_foreign_data_dir_this_nodes_own_initdb_made_is_replaced_by_a_clone() {
    let mut made = cluster();
    made.server_system_id = 7;
    made.made_here = 7;
    let following = FOLLOWING_3;
    let stopped = STANDBY_STOPPED;
    for server in [running(true, ""), stopped.clone()] {
        made.leader_primary = true;
        let d = decide_fresh(following, &server, &[], &made);
        assert_eq!(
            d.act,
            Act::Reinit {
                from: 3,
                by: Copier::BaseBackup
            }
        );
        assert!(!d.eligible);
        // No primary to clone from yet: it waits, out, and never leads.
        made.leader_primary = false;
        let d = decide_fresh(following, &server, &[], &made);
        assert_waits_out(&d, "initdb made");
    }
    assert_never_promoted(&made);
    // The note names another data dir (a stranger mounted since): left for the operator.
    made.made_here = 8;
    made.leader_primary = true;
    let d = decide_fresh(following, &stopped, &[], &made);
    assert_waits_out(&d, "another cluster");
}

/// The decision waits, its words saying `why`, and the member may not lead.
fn assert_waits_out(d: &Decision, why: &str) {
    assert!(matches!(&d.act, Act::Wait(w) if w.contains(why)), "{d:?}");
    assert!(!d.eligible, "{d:?}");
}

/// A coordinator whose server holds the foreign data of `c` never promotes it.
fn assert_never_promoted(c: &Cluster) {
    let d = decide_fresh(LEADING, &running(true, ""), &reached(&[1, 3]), c);
    assert!(
        matches!(d.act, Act::Wait(_)) && !d.eligible,
        "never promoted: {d:?}"
    );
}

#[test]
fn paused_the_manager_starts_stops_and_promotes_nothing() {
    let mut c = cluster();
    c.paused = true;
    let following = FOLLOWING_3;
    let stopped = STANDBY_STOPPED;
    for (office, server) in [
        (following, stopped.clone()),
        (following, running(false, "")),
        (LEADING, running(true, "")),
        (Office::Nobody, stopped),
    ] {
        let unpaused = Cluster {
            paused: false,
            ..c.clone()
        };
        let would = decide_fresh(office, &server, &reached(&[1]), &unpaused);
        assert!(
            !matches!(would.act, Act::Wait(_)),
            "unpaused it acts: {would:?}"
        );
        let d = decide_fresh(office, &server, &reached(&[1]), &c);
        assert!(
            matches!(&d.act, Act::Wait(w) if w.starts_with("paused")),
            "{d:?}"
        );
    }
    // The primary's synchronous bookkeeping goes on.
    let d = decide_fresh(LEADING, &running(false, ""), &[], &c);
    assert!(matches!(d.act, Act::SetSynchronous { .. }), "{d:?}");
}

#[test]
fn the_names_are_noted_with_where_the_wal_ended_when_they_first_appear() {
    let mut m = Memory::default();
    m.observe(&running(false, FULL));
    assert_eq!(m.names_from, Some((FULL.into(), 10)));
    let later = Server::Running(Running {
        wal: Position { branch: 1, lsn: 90 },
        ..match running(false, FULL) {
            Server::Running(r) => r,
            _ => unreachable!(),
        }
    });
    m.observe(&later);
    assert_eq!(m.names_from, Some((FULL.into(), 10)), "same names: kept");
    m.observe(&running(false, ""));
    assert_eq!(m.names_from, Some(("".into(), 10)));
    m.observe(&running(true, ""));
    assert_eq!(m.names_from, None);
}

/// A record no majority kept may surface later as the newest (seed 11685 of the
/// simulator): after one, the primary narrows only on a newer `alone` record a majority
/// kept, never on the office's older one.
#[test]
fn after_a_record_no_majority_kept_the_primary_narrows_only_on_a_newer_one() {
    let mut c = cluster();
    c.streaming = 0;
    let mut m = memory(FULL, 10, Some(record(TOKEN, 1, ME, true)));
    let failed = Done::SyncWritten {
        record: record(TOKEN, 2, ME, false),
        kept_by_majority: false,
    };
    m.on_done(failed, &rules());
    let d = decide(LEADING, &running(false, FULL), &[], &c, &m, &rules());
    let Act::CommitSync { record } = d.act else {
        panic!("a newer record first: {d:?}");
    };
    assert_eq!((record.seq, record.alone), (3, true));
    let kept = Done::SyncWritten {
        record,
        kept_by_majority: true,
    };
    m.on_done(kept, &rules());
    let d = decide(LEADING, &running(false, FULL), &[], &c, &m, &rules());
    assert_eq!(d.act, Act::SetSynchronous { names: "".into() });
}

/// Node 3 tagged `nofailover` in [`cluster`].
fn with_nofailover_3() -> Cluster {
    Cluster {
        nofailover: vec![3],
        ..cluster()
    }
}

#[test]
fn a_nofailover_member_is_named_only_when_the_others_are_too_few_for_k() {
    let c = with_nofailover_3();
    assert_eq!(c.sync_candidates(ME), vec![1]);
    // `nosync` members come back before `nofailover` ones.
    let c = Cluster {
        nosync: vec![1],
        ..with_nofailover_3()
    };
    assert_eq!(c.sync_candidates(ME), vec![1]);
    let c = Cluster {
        nofailover: vec![1, 3],
        ..cluster()
    };
    assert_eq!(c.sync_candidates(ME), vec![1, 3], "k keeps its full value");
}

/// Its WAL may hold acknowledged commits whatever the record says (named before its
/// tag, or where the others were too few), and it may not be promoted: a coordinator
/// behind it only streams from it first, keeping the office.
#[test]
fn a_coordinator_behind_only_a_nofailover_member_catches_up_from_it() {
    let ahead = [
        PeerWal {
            id: 3,
            wal: Some(Position { branch: 1, lsn: 90 }),
        },
        PeerWal {
            id: 1,
            wal: Some(Position { branch: 1, lsn: 10 }),
        },
    ];
    let mut c = with_nofailover_3();
    for record in [
        record(5, 3, 2, false),
        SyncRecord {
            standbys: vec![1],
            ..record(5, 3, 2, false)
        },
        record(5, 3, 3, true),
    ] {
        c.sync = SyncView::Read(Some(record));
        let d = decide_fresh(LEADING, &running(true, ""), &ahead, &c);
        assert_eq!(d.act, Act::Repoint { upstream: Some(3) });
        assert!(d.eligible);
        let mut from_3 = running(true, "");
        if let Server::Running(r) = &mut from_3 {
            r.upstream = Some(3);
        }
        let d = decide_fresh(LEADING, &from_3, &ahead, &c);
        assert!(
            matches!(&d.act, Act::Wait(w) if w.contains("catches up from node 3")) && d.eligible,
            "{d:?}"
        );
        // Behind a member that may lead as well: it resigns to the fresher one.
        let mut ahead_1 = ahead;
        ahead_1[1].wal = Some(Position { branch: 1, lsn: 95 });
        let d = decide_fresh(LEADING, &running(true, ""), &ahead_1, &c);
        assert!(
            matches!(&d.act, Act::Wait(w) if w.contains("refuses")) && !d.eligible,
            "{d:?}"
        );
    }
}

#[test]
fn a_nofailover_member_never_leads_nor_promotes() {
    let c = Cluster {
        nofailover: vec![ME],
        sync: SyncView::Read(None),
        ..cluster()
    };
    assert!(c.never_leads());
    let d = decide_fresh(LEADING, &running(true, ""), &reached(&[1, 3]), &c);
    assert!(
        matches!(&d.act, Act::Wait(w) if w.contains("nofailover")) && !d.eligible,
        "{d:?}"
    );
    let d = decide_fresh(FOLLOWING_3, &running(true, ""), &[], &c);
    assert!(!d.eligible && !matches!(d.act, Act::Promote), "{d:?}");
    let new = Cluster {
        all_absent: true,
        system_id: 0,
        server_system_id: 0,
        held_data: false,
        ..c
    };
    let d = decide_fresh(LEADING, &Server::Absent, &[], &new);
    assert!(!d.eligible && d.act != Act::InitDb, "{d:?}");
}
