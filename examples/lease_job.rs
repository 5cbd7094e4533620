//! A singleton job for `bully run`, as `tests/run_fencing.rs` runs it: it writes when
//! it starts, that it is alive every 2 ms, and when SIGTERM stops it, each line with
//! its fencing token, its pid and the boot clock (shared by every process on the host,
//! `src/boot_clock.rs`), so the test can check from the files alone that no two jobs
//! ever ran at once. Like a database flushing on its way down, it lingers for
//! `LINGER_MS` (default 0) after SIGTERM, still alive, before it stops.
//!
//! ```sh
//! bully run --config config/node1.toml -- target/debug/examples/lease_job /tmp/job-1.log
//! ```
//! Lines: `start TOKEN PID NANOS`, `alive TOKEN PID NANOS`, `stop TOKEN PID NANOS`.

use bully::boot_clock::BootInstant;
use std::fs::OpenOptions;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

static TERMINATED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigterm(_: nix::libc::c_int) {
    TERMINATED.store(true, Ordering::SeqCst);
}

fn main() -> std::io::Result<()> {
    let path = std::env::args()
        .nth(1)
        .ok_or_else(|| std::io::Error::other("usage: lease_job FILE"))?;
    let token = std::env::var("BULLY_TOKEN").unwrap_or_else(|_| "none".into());
    let mut file = OpenOptions::new().create(true).append(true).open(path)?;
    let pid = std::process::id();
    let mut line = |kind: &str| {
        let at = BootInstant::now().as_nanos();
        // One write per line on an append-only file: lines never interleave.
        file.write_all(format!("{kind} {token} {pid} {at}\n").as_bytes())
    };
    let handler = nix::sys::signal::SigHandler::Handler(on_sigterm);
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe { nix::sys::signal::signal(nix::sys::signal::Signal::SIGTERM, handler) }
        .map_err(std::io::Error::from)?;
    let linger = std::env::var("LINGER_MS")
        .ok()
        .and_then(|ms| ms.parse().ok())
        .map_or(Duration::ZERO, Duration::from_millis);
    line("start")?;
    while !TERMINATED.load(Ordering::SeqCst) {
        line("alive")?;
        std::thread::sleep(Duration::from_millis(2));
    }
    let stopping = std::time::Instant::now();
    while stopping.elapsed() < linger {
        line("alive")?;
        std::thread::sleep(Duration::from_millis(2));
    }
    line("stop")
}
