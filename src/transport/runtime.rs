//! quinn's tokio runtime with one change: a connection timer moved to a later deadline
//! is re-registered, so the thread does not wake for the deadline it left behind.
//!
//! Why: each packet a connection sends arms QUIC's probe timeout (about 25 ms ahead);
//! the ACK, a fraction of a millisecond later, moves the connection's deadline out to
//! the idle timeout. tokio's `Sleep::reset` to a later deadline only notes the new one
//! and leaves the entry where it was, to be found and re-filed when the old deadline
//! comes: one idle wake-up per heartbeat per connection for nothing. Dropping the old
//! sleep takes it out of the timer wheel at once.

use quinn::{AsyncTimer, AsyncUdpSocket, Runtime, TokioRuntime};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;
use tokio::time::Sleep;

/// [`TokioRuntime`] with [`RefilingTimer`]s.
#[derive(Debug)]
pub(super) struct QuietRuntime;

impl Runtime for QuietRuntime {
    fn new_timer(&self, at: Instant) -> Pin<Box<dyn AsyncTimer>> {
        Box::pin(RefilingTimer::new(at))
    }

    fn spawn(&self, future: Pin<Box<dyn Future<Output = ()> + Send>>) {
        TokioRuntime.spawn(future);
    }

    fn wrap_udp_socket(&self, socket: std::net::UdpSocket) -> io::Result<Arc<dyn AsyncUdpSocket>> {
        TokioRuntime.wrap_udp_socket(socket)
    }

    fn now(&self) -> Instant {
        TokioRuntime.now()
    }
}

/// A tokio sleep that is replaced, not extended, when its deadline moves later.
#[derive(Debug)]
struct RefilingTimer {
    sleep: Pin<Box<Sleep>>,
}

impl RefilingTimer {
    fn new(at: Instant) -> Self {
        Self {
            sleep: Box::pin(tokio::time::sleep_until(at.into())),
        }
    }
}

impl AsyncTimer for RefilingTimer {
    fn reset(self: Pin<&mut Self>, at: Instant) {
        let this = self.get_mut();
        let at = tokio::time::Instant::from_std(at);
        if at > this.sleep.deadline() {
            // The old entry leaves the wheel when dropped; the new one is filed at
            // `at` when first polled.
            this.sleep = Box::pin(tokio::time::sleep_until(at));
        } else {
            this.sleep.as_mut().reset(at);
        }
    }

    fn poll(self: Pin<&mut Self>, cx: &mut Context) -> Poll<()> {
        Future::poll(self.get_mut().sleep.as_mut(), cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn fires_at_the_last_deadline_set_whichever_way_it_moved() {
        let start = Instant::now();
        let mut timer = Box::pin(RefilingTimer::new(start + Duration::from_secs(60)));
        timer.as_mut().reset(start + Duration::from_millis(10)); // earlier
        timer.as_mut().reset(start + Duration::from_millis(40)); // later: refiled
        std::future::poll_fn(|cx| timer.as_mut().poll(cx)).await;
        let took = start.elapsed();
        assert!(
            took >= Duration::from_millis(40),
            "fired early, after {took:?}"
        );
        assert!(took < Duration::from_secs(5), "took {took:?}");
    }
}
