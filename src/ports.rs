//! Free loopback ports for generated clusters and tests. A port is found by binding
//! it and letting go; the node that is later configured with it binds it again.
//! Ports wanted together are picked together, every socket held until the last is
//! bound, so one port is never handed out twice (picked one at a time, two HTTP
//! listeners of one test once got the same port and the second node could not start).
//!
//! Between the pick and the node's bind the port is free, and anything that binds port
//! 0 meanwhile (a client endpoint, another test's dialer) may be given it by the kernel:
//! a node of a CI run once failed to start with "Address already in use". So ports are
//! drawn at random *below* the kernel's ephemeral range, which port 0 never hands out,
//! and never twice in one process; where that range starts too low to leave room, the
//! kernel picks (port 0).

use anyhow::{Context, Result};
use rand::Rng;
use std::collections::BTreeSet;
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::sync::Mutex;

/// The lowest port drawn from: above the well-known and most registered services.
const DRAW_FROM: u16 = 10_000;

/// How many random ports are tried per port wanted before the kernel picks instead.
const TRIES_PER_PORT: usize = 50;

/// Ports this process has handed out: never drawn again.
static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// A free UDP port on 127.0.0.1, found by binding port 0 and letting go.
pub fn free_udp_addr() -> Result<SocketAddr> {
    Ok(free_udp_addrs(1)?[0])
}

/// `count` distinct free UDP ports on 127.0.0.1: every socket is held until all are
/// bound, so the kernel cannot hand the same port out twice (picking them one at a
/// time and letting go can repeat a port, and two nodes then fight over it).
pub fn free_udp_addrs(count: usize) -> Result<Vec<SocketAddr>> {
    hold_distinct(count, |port| {
        let socket = UdpSocket::bind(("127.0.0.1", port))
            .with_context(|| format!("cannot bind UDP port {port} on 127.0.0.1"))?;
        Ok((socket.local_addr()?, socket))
    })
}

/// A free TCP port on 127.0.0.1 (e.g. for a node's `[http] listen`), found by binding
/// port 0 and letting go.
pub fn free_tcp_addr() -> Result<SocketAddr> {
    Ok(free_tcp_addrs(1)?[0])
}

/// `count` distinct free TCP ports on 127.0.0.1 (HTTP listeners, Redis servers, a
/// proxy), held together while they are picked for the reason [`free_udp_addrs`] gives.
pub fn free_tcp_addrs(count: usize) -> Result<Vec<SocketAddr>> {
    hold_distinct(count, |port| {
        let listener = TcpListener::bind(("127.0.0.1", port))
            .with_context(|| format!("cannot bind TCP port {port} on 127.0.0.1"))?;
        Ok((listener.local_addr()?, listener))
    })
}

/// Binds `count` sockets with `bind_one` (given a port, 0: the kernel's choice),
/// keeping each open until the last is bound, then lets all of them go and returns
/// their addresses.
fn hold_distinct<S>(
    count: usize,
    mut bind_one: impl FnMut(u16) -> Result<(SocketAddr, S)>,
) -> Result<Vec<SocketAddr>> {
    let mut held = Vec::with_capacity(count);
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    let mut rng = rand::thread_rng();
    let below = ephemeral_start();
    let mut tries = 0;
    while held.len() < count {
        tries += 1;
        let drawn = (below > DRAW_FROM && tries <= TRIES_PER_PORT * count)
            .then(|| rng.gen_range(DRAW_FROM..below))
            .filter(|port| !handed_out.contains(port));
        let bound = match drawn {
            Some(port) => match bind_one(port) {
                Ok(bound) => bound,
                Err(_) => continue, // in use: draw again
            },
            None if tries <= TRIES_PER_PORT * count => continue,
            None => bind_one(0)?,
        };
        handed_out.insert(bound.0.port());
        held.push(bound);
    }
    Ok(held.into_iter().map(|(addr, _socket)| addr).collect())
}

/// The first port of the kernel's ephemeral range (what binding port 0 hands out);
/// Linux's default when it cannot be read.
fn ephemeral_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn ports_picked_together_are_distinct_and_free_again_afterwards() {
        let tcp = free_tcp_addrs(64).unwrap();
        let udp = free_udp_addrs(64).unwrap();
        assert_eq!(tcp.iter().collect::<BTreeSet<_>>().len(), 64, "{tcp:?}");
        assert_eq!(udp.iter().collect::<BTreeSet<_>>().len(), 64, "{udp:?}");
        assert!(tcp
            .iter()
            .chain(&udp)
            .all(|a| a.ip().is_loopback() && a.port() != 0));
        // Below the ephemeral range (where this machine leaves room for it), and never
        // handed out twice by one process.
        let below = ephemeral_start();
        if below > DRAW_FROM {
            assert!(
                tcp.iter().chain(&udp).all(|a| a.port() < below),
                "{tcp:?} {udp:?}"
            );
        }
        let all: BTreeSet<u16> = tcp.iter().chain(&udp).map(|a| a.port()).collect();
        assert_eq!(all.len(), 128, "no port handed out twice");
        // Let go means let go: each can be bound again by whoever it is meant for.
        let _rebound: Vec<TcpListener> =
            tcp.iter().map(|a| TcpListener::bind(a).unwrap()).collect();
        let _rebound: Vec<UdpSocket> = udp.iter().map(|a| UdpSocket::bind(a).unwrap()).collect();
    }
}
