//! The endpoint's UDP socket, wrapped so that shutdown can tell when quinn has let go
//! of it: from then on the port is free for a restarted node to bind.
//!
//! quinn closes the socket when the last handle on it is dropped: the endpoint driver's
//! and each connection's (a connection keeps one, with a write poller, as long as
//! anyone holds the `quinn::Connection`). Every poller made here holds the wrapper too,
//! so the wrapper is dropped only after all of them, and it drops the socket before it
//! signals.

use quinn::udp::{RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, Runtime, UdpPoller};
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::sync::oneshot;

/// Resolves once the socket is closed.
pub(super) struct Released(oneshot::Receiver<()>);

impl Released {
    /// Waits until the socket is closed (cancellation-safe through `&mut`).
    pub async fn wait(&mut self) {
        // The sender is never used: only its drop, after the socket's, is the signal.
        let _ = (&mut self.0).await;
    }
}

/// Wraps `socket` for quinn on `runtime`, with the [`Released`] that resolves once it
/// is closed.
pub(super) fn wrap(
    socket: std::net::UdpSocket,
    runtime: &dyn Runtime,
) -> io::Result<(Arc<dyn AsyncUdpSocket>, Released)> {
    let (closed, released) = oneshot::channel();
    let tracked = Tracked {
        inner: runtime.wrap_udp_socket(socket)?,
        _closed: closed,
    };
    Ok((Arc::new(tracked), Released(released)))
}

/// The runtime's socket and the signal sent when it is gone. Fields drop in order:
/// the socket first, then the signal.
#[derive(Debug)]
struct Tracked {
    inner: Arc<dyn AsyncUdpSocket>,
    _closed: oneshot::Sender<()>,
}

impl AsyncUdpSocket for Tracked {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        Box::pin(TrackedPoller {
            inner: self.inner.clone().create_io_poller(),
            _socket: self,
        })
    }

    fn try_send(&self, transmit: &Transmit) -> io::Result<()> {
        self.inner.try_send(transmit)
    }

    fn poll_recv(
        &self,
        cx: &mut Context,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        self.inner.poll_recv(cx, bufs, meta)
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.inner.max_transmit_segments()
    }

    fn max_receive_segments(&self) -> usize {
        self.inner.max_receive_segments()
    }

    fn may_fragment(&self) -> bool {
        self.inner.may_fragment()
    }
}

/// The runtime's poller, holding the wrapper so the socket outlives every poller.
#[derive(Debug)]
struct TrackedPoller {
    inner: Pin<Box<dyn UdpPoller>>,
    _socket: Arc<Tracked>,
}

impl UdpPoller for TrackedPoller {
    fn poll_writable(self: Pin<&mut Self>, cx: &mut Context) -> Poll<io::Result<()>> {
        self.get_mut().inner.as_mut().poll_writable(cx)
    }
}
