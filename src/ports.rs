//! Free loopback ports for generated clusters and tests. A port is found by binding
//! port 0 and letting go; the node that is later configured with it binds it again.
//! Ports wanted together are picked together, every socket held until the last is
//! bound, so the kernel cannot hand one port out twice (picked one at a time, two HTTP
//! listeners of one test once got the same port and the second node could not start).

use anyhow::{Context, Result};
use std::net::{SocketAddr, TcpListener, UdpSocket};

/// A free UDP port on 127.0.0.1, found by binding port 0 and letting go.
pub fn free_udp_addr() -> Result<SocketAddr> {
    Ok(free_udp_addrs(1)?[0])
}

/// `count` distinct free UDP ports on 127.0.0.1: every socket is held until all are
/// bound, so the kernel cannot hand the same port out twice (picking them one at a
/// time and letting go can repeat a port, and two nodes then fight over it).
pub fn free_udp_addrs(count: usize) -> Result<Vec<SocketAddr>> {
    hold_distinct(count, || {
        let socket =
            UdpSocket::bind("127.0.0.1:0").context("cannot bind a UDP port on 127.0.0.1")?;
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
    hold_distinct(count, || {
        let listener =
            TcpListener::bind("127.0.0.1:0").context("cannot bind a TCP port on 127.0.0.1")?;
        Ok((listener.local_addr()?, listener))
    })
}

/// Binds `count` sockets with `bind_one`, keeping each open until the last is bound,
/// then lets all of them go and returns their addresses.
fn hold_distinct<S>(
    count: usize,
    mut bind_one: impl FnMut() -> Result<(SocketAddr, S)>,
) -> Result<Vec<SocketAddr>> {
    let mut held = Vec::with_capacity(count);
    for _ in 0..count {
        held.push(bind_one()?);
    }
    Ok(held.into_iter().map(|(addr, _socket)| addr).collect())
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
        // Let go means let go: each can be bound again by whoever it is meant for.
        let _rebound: Vec<TcpListener> =
            tcp.iter().map(|a| TcpListener::bind(a).unwrap()).collect();
        let _rebound: Vec<UdpSocket> = udp.iter().map(|a| UdpSocket::bind(a).unwrap()).collect();
    }
}
