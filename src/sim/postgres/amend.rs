//! Proposed amendments to the decisions, applied around `decide` when a spec asks for
//! them: what the simulator found missing in src/node/policy/postgres.rs, kept here
//! (that file belongs to the decisions) until the decisions carry them, so the sweeps
//! can test everything else meanwhile. Each becomes a no-op once the decisions do the
//! same, because it only rewrites the act the unamended decisions return.

use super::decisions::{Act, Cluster, Decision, Office, Server};

/// Which amendments apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Amendments {
    /// A standby that needs a rewind (or cannot follow) keeps running until the
    /// coordinator's server is a primary to rewind from, and a stopped former primary
    /// starts as a standby of nobody meanwhile. Without: every such member stops as soon
    /// as a coordinator is known, its WAL no longer counts toward the coordinator's
    /// majority, and with too many of them the coordinator refuses, resigns and is
    /// elected again for ever.
    pub rewind_waits_for_primary: bool,
    /// A promotion's new timeline is the promoting office's fencing token (the runtime
    /// would place the timeline history files that make PostgreSQL pick it), and an
    /// office promotes at most once (a coordinator whose server is on its own token's
    /// timeline already resigns instead). Without: PostgreSQL picks the newest timeline
    /// it knows + 1, so two sides of a failover each create "timeline 2"; [`rank`]
    /// then compares positions on different branches, and a coordinator on one branch
    /// promotes over a reached standby holding commits acknowledged on the other.
    ///
    /// [`rank`]: super::decisions::rank
    pub timeline_is_token: bool,
    /// A reachable member without data is not reached (as a stopped server is not),
    /// and only in a new cluster (every other member reported no data) does the
    /// coordinator promote without the majority check. Without: the runtime reads such
    /// a member as `Some(0)` (src/node/postgres/manager.rs, `peer_wals`), so a member
    /// whose directory was lost makes up the majority, and the coordinator promotes over
    /// commits that a member that is only down still holds.
    pub absent_is_unreached: bool,
}

impl Amendments {
    /// The decisions as they are.
    pub const NONE: Amendments = Amendments {
        rewind_waits_for_primary: false,
        timeline_is_token: false,
        absent_is_unreached: false,
    };
    /// Every amendment proposed.
    pub const ALL: Amendments = Amendments {
        rewind_waits_for_primary: true,
        timeline_is_token: true,
        absent_is_unreached: true,
    };
}

/// `decided` with the amendments `a` applied.
pub(super) fn amend(
    a: Amendments,
    office: Office,
    server: &Server,
    cluster: &Cluster,
    decided: Decision,
) -> Decision {
    let Decision { act, eligible } = decided;
    let leading = matches!(office, Office::Leading { .. });
    let waiting_for_primary = matches!(office, Office::Following { .. }) && !cluster.leader_primary;
    let (act, eligible) = match (server, act) {
        (Server::Running(r), Act::Wait(why))
            if a.absent_is_unreached
                && leading
                && r.in_recovery
                && cluster.all_absent
                && why.contains("a majority") =>
        {
            (Act::Promote, true)
        }
        (Server::Running(r), Act::Stop { .. })
            if a.rewind_waits_for_primary && r.in_recovery && waiting_for_primary =>
        {
            let why = "a standby to be rewound waits, running, for the coordinator's primary";
            (Act::Wait(why.into()), true)
        }
        (Server::Stopped { .. }, Act::Wait(why))
            if a.rewind_waits_for_primary
                && waiting_for_primary
                && why.contains("a former primary waits") =>
        {
            (Act::StartStandby { upstream: None }, false)
        }
        (Server::Running(r), Act::Promote)
            if a.timeline_is_token
                && matches!(office, Office::Leading { token } if u64::from(r.timeline) >= token) =>
        {
            let why = "this office promoted once already: resign for a new token";
            (Act::Wait(why.into()), false)
        }
        (_, act) => (act, eligible),
    };
    Decision { act, eligible }
}
