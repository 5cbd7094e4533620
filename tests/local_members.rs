//! `bully local`'s `add K` and `remove K` (src/cli/local.rs) on real processes: a node
//! the session never had joins and takes over (preempt always), the coordinator's own
//! removal is refused with the reason, a follower is removed and leaves the board, and
//! is added again on an empty store; `replace K` refuses the coordinator and brings a
//! follower back from a wiped data dir to its seat. Every wait is bounded; the
//! session's process group is killed by ID when dropped, also on panic
//! (tests/common/session.rs).

#[path = "common/browser.rs"]
mod browser;
mod common;
#[path = "common/session.rs"]
mod session;

use common::binary;
use session::Session;
use std::time::Duration;

#[test]
fn local_adds_and_removes_members() {
    let dir = tempfile::tempdir().expect("temp dir");
    let within = Duration::from_secs(60);
    let mut local = Session::local_three(&binary(), dir.path(), within);

    local.type_line("add 4");
    local.lines_until("node 4 joined as a voting member", within);
    local.lines_until("coordinator 4 (4 of 4 reachable agree)", within);

    local.type_line("remove 4");
    local.lines_until("that node is the coordinator", within);

    local.type_line("remove 2");
    local.lines_until("node 2 left the cluster", within);
    local.type_line("status");
    let shown = local.lines_until("reachable", within);
    assert!(
        !shown.iter().any(|l| l.contains("node 2 ")),
        "node 2 left the board: {shown:#?}"
    );

    local.type_line("add 2");
    local.lines_until("node 2 joined as a voting member", within);
    local.lines_until("coordinator 4 (4 of 4 reachable agree)", within);

    // A lost disk: the coordinator's replacement is refused before anything is done;
    // a follower is killed, wiped, made a learner, started empty and seated again.
    local.type_line("replace 4");
    local.lines_until("node 4 is the coordinator", within);
    local.type_line("replace 3");
    local.lines_until("node 3 is a learner again", within);
    local.lines_until(
        "node 3 started on an empty data dir and took its seat",
        within,
    );
    local.lines_until("coordinator 4 (4 of 4 reachable agree)", within);
    local.type_line("quit");
    local.lines_until("stopped every node", within);
}

/// SIGTERM stops `bully local` as `quit` does, though its stdin is still open: the
/// nodes are stopped and the command exits (it used to stop the nodes, then hang on
/// the read of stdin).
#[test]
fn local_exits_on_sigterm_with_stdin_open() {
    let dir = tempfile::tempdir().expect("temp dir");
    let within = Duration::from_secs(60);
    let mut local = Session::local_three(&binary(), dir.path(), within);
    bully::signals::send(local.pid(), bully::signals::Signal::SIGTERM).expect("SIGTERM");
    local.lines_until("stopped every node", within);
    let status = local.wait_exit(Duration::from_secs(10));
    assert!(
        status.is_some(),
        "bully local still runs 10 s after stopping its nodes"
    );
}
