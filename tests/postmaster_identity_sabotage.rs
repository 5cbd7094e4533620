//! The identity tests catch a stop that believes `postmaster.pid`: with the debug-only
//! sabotage `trust_pid_file` (src/sabotage.rs) any live process the file names passes
//! for the postmaster, as before issue 49, and the stranger `tests/postmaster_identity.rs`
//! must find alive is signalled. In its own test binary because the switch is an
//! environment variable of the whole process.
#![cfg(debug_assertions)]

#[path = "common/postmaster_fake.rs"]
mod postmaster_fake;

use bully::postmaster::{self, Found, Stopped};
use postmaster_fake::{stranger, write_pid_file, HOUR};
use std::time::Duration;

#[tokio::test]
async fn a_stop_that_believes_the_pid_file_signals_the_stranger() {
    // The only test in this binary: no other test inherits the switch.
    std::env::set_var(bully::sabotage::ENV, "trust_pid_file");
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let mut proc = stranger(elsewhere.path());
    write_pid_file(dir.path(), proc.pid(), proc.started - HOUR);
    assert!(
        matches!(postmaster::find(dir.path()), Found::Running(_)),
        "the sabotage is off: the stranger is not taken for the postmaster"
    );
    let stopped = postmaster::stop(dir.path(), Duration::from_secs(5)).await;
    assert!(matches!(stopped, Ok(Stopped::Fast(_))), "{stopped:?}");
    assert_eq!(
        proc.ended_by(Duration::from_secs(5)),
        Some(nix::sys::signal::Signal::SIGINT as i32),
        "under the sabotage the stranger must be signalled, or the identity test \
         would not notice a fence without the check"
    );
}
