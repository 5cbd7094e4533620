//! Deliberately broken behaviour for tests, compiled into debug builds only (the
//! module does not exist in release builds), switched on per process by the
//! environment variable `BULLY_TEST_FAULT` (comma separated):
//!
//! - `skip_flush`: [`crate::storage::Storage::save`] returns before sled flushes and
//!   fsyncs, and sled's background flusher is off, so a `kill -9` loses epochs the node
//!   has already revealed (breaks I3; the checker sees I1/I2 go backwards on restart).
//! - `ignore_higher_coordinator`: the transport drops Coordinator and Heartbeat
//!   messages from higher IDs, so lower nodes never follow them (breaks I5).
//! - `resign_before_on_demoted`: a coordinator leaving office voluntarily sends its
//!   Resign before its `on_demoted` has ended, so a successor may promote its database
//!   while the old one is still primary (`tests/hook_order.rs` checks it is caught).
//! - `deaf_handover`: the machine runs with `Flaw::DeafHandover`: a coordinator hands
//!   office to any higher candidate, heard or not (`tests/one_way.rs` checks the
//!   flapping under a deaf node is caught).
//! - `late_fence`: a keeper (`bully run`, `src/keeper/plan.rs`) stops its job half a
//!   second after the fencing deadline instead of before it, so a successor's job can
//!   start while the old one still runs (`tests/run_fencing_sabotage.rs` checks it is
//!   caught).
//! - `ignore_stall`: the runtime does not notice that it was stopped
//!   (`src/node/drive/runtime.rs`), so a resumed node leads on the health verdict it
//!   held before the stop (`tests/stale_health_sabotage.rs` checks it is caught).
//!
//! - `ignore_pause`: a node keeps and spreads the maintenance pause but never lets it
//!   hold it back (`src/node/policy/pause_gate.rs`), so a paused cluster still fails
//!   over (`tests/pause_sabotage.rs` checks it is caught).
//!
//! - `id_order`: the machine runs with `Flaw::IdOrder`: estimates travel but every
//!   election compares IDs only, so the highest ID wins over fresher data
//!   (docs/design.md#elected-by-data-est; the model checker's
//!   `sabotage_id_order_is_caught` and `tests/estimate_sim.rs` catch the same flaw).
//!
//! - `holdoff_by_new_d`: the machine runs with `Flaw::HoldoffByNewD`: a restart holds
//!   off for the D it restarts with, not the D its last promise was made under
//!   (`tests/rolling_d_sabotage.rs` checks the second coordinator is caught).
//!
//! - `ignores_given_up`: the machine runs with `Flaw::IgnoresGivenUp`: a node the
//!   survivors of a forced recovery refuse as given up goes on leading
//!   (`tests/recover_sabotage.rs` checks the two coordinators are caught).
//!
//! - `trust_pid_file`: the PostgreSQL server's `postmaster.pid` is believed without
//!   checking /proc (src/postmaster/identity.rs), so a stranger reusing its PID is
//!   taken for the server and signalled by the fence
//!   (`tests/postmaster_identity_sabotage.rs` checks it is caught).
//!
//! `tests/chaos.rs` runs chaos with each switch and asserts the checker flags it:
//! proof that a passing chaos run means something.

use crate::protocol::{Body, Message, NodeId};

/// The environment variable that switches sabotage on.
pub const ENV: &str = "BULLY_TEST_FAULT";

fn enabled(name: &str) -> bool {
    std::env::var(ENV).is_ok_and(|v| v.split(',').any(|f| f.trim() == name))
}

/// Whether saves should skip the flush (and sled's background flusher be off).
pub fn skip_flush() -> bool {
    enabled("skip_flush")
}

/// Whether node `me` should drop this message from `from`.
pub fn drops(me: NodeId, from: NodeId, msg: &Message) -> bool {
    from > me
        && matches!(msg.body, Body::Coordinator { .. } | Body::Heartbeat { .. })
        && enabled("ignore_higher_coordinator")
}

/// Whether a coordinator leaving office voluntarily should send its Resign at once,
/// before `on_demoted` has ended (the old order; `tests/hook_order.rs` must notice).
pub fn resign_before_on_demoted() -> bool {
    enabled("resign_before_on_demoted")
}

/// Whether the coordinator should hand over to candidates that cannot hear it.
pub fn deaf_handover() -> bool {
    enabled("deaf_handover")
}

/// Whether a keeper should fence half a second too late.
pub fn late_fence() -> bool {
    enabled("late_fence")
}

/// Whether the runtime should not notice a stall (and keep its stale health verdict).
pub fn ignore_stall() -> bool {
    enabled("ignore_stall")
}

/// Whether the node should ignore the maintenance pause it keeps (it stays eligible).
pub fn ignore_pause() -> bool {
    enabled("ignore_pause")
}

/// Whether elections should compare IDs only, ignoring estimates.
pub fn id_order() -> bool {
    enabled("id_order")
}

/// Whether a restart should hold off for the D it restarts with (the old rule).
pub fn holdoff_by_new_d() -> bool {
    enabled("holdoff_by_new_d")
}

/// Whether a node refused as given up by a forced recovery should go on as before.
pub fn ignores_given_up() -> bool {
    enabled("ignores_given_up")
}

/// Whether any live process `postmaster.pid` names passes for the postmaster.
pub fn trust_pid_file() -> bool {
    enabled("trust_pid_file")
}
