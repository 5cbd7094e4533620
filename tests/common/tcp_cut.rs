//! A TCP forwarder that can be cut like a network partition, for the Redis tests: the
//! other hosts reach a Redis through it (its hooks, health checks and the replication
//! stream), so one host's Redis can be cut off on loopback. Cut, it forwards nothing
//! and closes nothing: bytes already read wait, senders block once the socket buffers
//! fill, a FIN waits, a new connection is accepted and hears nothing, the way TCP
//! behaves across a partition (after the heal, everything held goes through, as
//! retransmission would deliver it). Both sides keep their connections, so a primary
//! cut off from its replicas sees no disconnection; `min-replicas-max-lag` notices the
//! silence only after 2 s. Its threads end and its sockets close on drop.
//! Included with `#[path = "common/tcp_cut.rs"]`.
#![allow(dead_code)]

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How often a blocked thread looks at the cut and stop flags.
const TICK: Duration = Duration::from_millis(10);

/// The forwarder: `addr` leads to the upstream address while not cut.
pub struct CutProxy {
    pub addr: SocketAddr,
    flags: Arc<Flags>,
}

#[derive(Default)]
struct Flags {
    cut: AtomicBool,
    stop: AtomicBool,
}

impl Flags {
    /// Waits while cut; false once stopping.
    fn wait_open(&self) -> bool {
        while self.cut.load(Ordering::SeqCst) {
            if self.stop.load(Ordering::SeqCst) {
                return false;
            }
            std::thread::sleep(TICK);
        }
        !self.stop.load(Ordering::SeqCst)
    }
}

impl CutProxy {
    /// Listens on `listen` and forwards every connection to `upstream`.
    pub fn start(listen: SocketAddr, upstream: SocketAddr) -> CutProxy {
        let listener = TcpListener::bind(listen).expect("bind the cut proxy");
        listener.set_nonblocking(true).unwrap();
        let flags = Arc::new(Flags::default());
        let f = Arc::clone(&flags);
        std::thread::spawn(move || accept_loop(listener, upstream, f));
        CutProxy {
            addr: listen,
            flags,
        }
    }

    /// Cuts (`true`) or heals (`false`) every connection through the proxy.
    pub fn cut(&self, cut: bool) {
        self.flags.cut.store(cut, Ordering::SeqCst);
    }
}

impl Drop for CutProxy {
    fn drop(&mut self) {
        self.flags.stop.store(true, Ordering::SeqCst);
    }
}

fn accept_loop(listener: TcpListener, upstream: SocketAddr, flags: Arc<Flags>) {
    while !flags.stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((client, _)) => {
                let f = Arc::clone(&flags);
                std::thread::spawn(move || connect(client, upstream, f));
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(TICK),
            Err(_) => std::thread::sleep(TICK),
        }
    }
}

/// Connects a new client upstream (once not cut) and pumps both ways.
fn connect(client: TcpStream, upstream: SocketAddr, flags: Arc<Flags>) {
    if !flags.wait_open() {
        return;
    }
    let Ok(server) = TcpStream::connect_timeout(&upstream, Duration::from_secs(1)) else {
        return; // dropping the client closes it: the upstream is down
    };
    let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
    let f = Arc::clone(&flags);
    std::thread::spawn(move || pump(c2, s2, &f));
    pump(server, client, &flags);
}

/// Copies `from` to `to`, holding every chunk (and the end of the stream) while cut.
fn pump(mut from: TcpStream, mut to: TcpStream, flags: &Flags) {
    let _ = from.set_nonblocking(false);
    let _ = from.set_read_timeout(Some(TICK));
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) => {
                if flags.wait_open() {
                    let _ = to.shutdown(Shutdown::Write);
                }
                return;
            }
            Ok(n) => {
                if !flags.wait_open() || to.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if flags.stop.load(Ordering::SeqCst) {
                    return;
                }
            }
            Err(_) => {
                if flags.wait_open() {
                    let _ = to.shutdown(Shutdown::Both);
                }
                return;
            }
        }
    }
}
