//! systemd's readiness protocol (`Type=notify`): one datagram such as `READY=1` to
//! the unix socket named by `$NOTIFY_SOCKET` (a path, or `@name` for an abstract
//! socket). A few lines rather than a crate; without the variable it does nothing, so
//! the node runs the same outside systemd.

use std::os::unix::net::UnixDatagram;

/// The node knows a coordinator: `systemctl start` returns, units ordered after it start.
pub const READY: &str = "READY=1";
/// A reload (SIGHUP) is being applied; answered by [`READY`] when it is done.
pub const RELOADING: &str = "RELOADING=1";
/// The node is shutting down.
pub const STOPPING: &str = "STOPPING=1";

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
