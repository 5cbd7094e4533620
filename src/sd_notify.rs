//! systemd's notify protocol (`Type=notify`): one datagram such as `READY=1` to the
//! unix socket named by `$NOTIFY_SOCKET` (a path, or `@name` for an abstract socket).
//! A few lines rather than a crate; without the variable it does nothing, so the node
//! runs the same outside systemd.
//!
//! The service watchdog (`WatchdogSec=` in `config/bully.service`): systemd passes
//! `$WATCHDOG_USEC` (and `$WATCHDOG_PID`) and expects [`WATCHDOG`] more often than
//! that; [`watchdog_interval`] says how often to send it (half the period, as
//! `sd_watchdog_enabled(3)` advises). The CLI sends readiness; the node's runtime
//! sends the pings from its own loop (`src/node/drive/service_watchdog.rs`).

use std::os::unix::net::UnixDatagram;

/// The node knows a coordinator: `systemctl start` returns, units ordered after it start.
pub const READY: &str = "READY=1";
/// A reload (SIGHUP) is being applied; answered by [`READY`] when it is done.
pub const RELOADING: &str = "RELOADING=1";
/// The node is shutting down.
pub const STOPPING: &str = "STOPPING=1";
/// The service is alive: resets systemd's watchdog timer (`WatchdogSec=`).
pub const WATCHDOG: &str = "WATCHDOG=1";

/// How often to send [`WATCHDOG`] when systemd asked for it (`$WATCHDOG_USEC`, and
/// `$WATCHDOG_PID` unset or naming this process): half the watchdog period. `None`
/// when no watchdog is set up for this process; a value that is not a positive number
/// of microseconds is logged and ignored.
pub fn watchdog_interval() -> Option<std::time::Duration> {
    let usec = std::env::var("WATCHDOG_USEC").ok();
    let pid = std::env::var("WATCHDOG_PID").ok();
    let interval = ping_interval(usec.as_deref(), pid.as_deref(), std::process::id());
    match interval {
        Ok(interval) => interval,
        Err(why) => {
            tracing::warn!("systemd watchdog ignored: {why}");
            None
        }
    }
}

/// [`watchdog_interval`] from the variables' values and this process's ID: `Ok(None)`
/// without a watchdog or when it is meant for another process, `Err` for a value that
/// cannot be read.
fn ping_interval(
    usec: Option<&str>,
    pid: Option<&str>,
    own_pid: u32,
) -> Result<Option<std::time::Duration>, String> {
    let Some(usec) = usec else {
        return Ok(None);
    };
    if let Some(pid) = pid {
        let pid: u32 = pid
            .trim()
            .parse()
            .map_err(|_| format!("WATCHDOG_PID={pid:?} is not a process ID"))?;
        if pid != own_pid {
            return Ok(None);
        }
    }
    match usec.trim().parse::<u64>() {
        Ok(usec) if usec > 0 => Ok(Some(std::time::Duration::from_micros(usec / 2))),
        _ => Err(format!(
            "WATCHDOG_USEC={usec:?} is not a positive number of microseconds"
        )),
    }
}

/// Sends `state` (newline-separated `KEY=value` lines) to the service manager, if any.
/// Errors are logged, never fatal: readiness is a courtesy to systemd.
pub fn notify(state: &str) {
    let Some(socket) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    if let Err(e) = send(&socket, state) {
        tracing::warn!(socket = ?socket, "cannot notify systemd ({state}): {e}");
    }
}

fn send(socket: &std::ffi::OsStr, state: &str) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let datagram = UnixDatagram::unbound()?;
    let name = socket.as_bytes();
    match name.strip_prefix(b"@") {
        Some(abstract_name) => {
            use std::os::linux::net::SocketAddrExt;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(abstract_name)?;
            datagram.send_to_addr(state.as_bytes(), &addr)?;
        }
        None => {
            datagram.send_to(state.as_bytes(), std::path::Path::new(socket))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pings_come_at_half_the_period_for_this_process_only() {
        use std::time::Duration;
        let half = Ok(Some(Duration::from_millis(100)));
        assert_eq!(ping_interval(Some("200000"), None, 7), half);
        assert_eq!(ping_interval(Some("200000"), Some("7"), 7), half);
        assert_eq!(ping_interval(Some("200000"), Some("8"), 7), Ok(None));
        assert_eq!(ping_interval(None, Some("7"), 7), Ok(None));
        for bad in ["0", "-5", "2s", ""] {
            let why = ping_interval(Some(bad), None, 7).unwrap_err();
            assert!(why.contains("WATCHDOG_USEC"), "{why}");
        }
        let why = ping_interval(Some("200000"), Some("me"), 7).unwrap_err();
        assert!(why.contains("WATCHDOG_PID"), "{why}");
    }

    #[test]
    fn a_datagram_reaches_a_path_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let listener = UnixDatagram::bind(&path).unwrap();
        send(path.as_os_str(), "READY=1\nSTATUS=x").unwrap();
        let mut buf = [0u8; 64];
        let n = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1\nSTATUS=x");
    }

    #[test]
    fn a_datagram_reaches_an_abstract_socket() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("bully-test-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let listener = UnixDatagram::bind_addr(&addr).unwrap();
        send(std::ffi::OsStr::new(&format!("@{name}")), READY).unwrap();
        let mut buf = [0u8; 64];
        let n = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], READY.as_bytes());
    }
}
