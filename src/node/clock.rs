//! The runtime's clock: milliseconds since the node started, the machine's notion of
//! `now`, and the two conversions its times need (a tokio deadline to sleep until, a
//! wall-clock time for the event log and the status).

use crate::protocol::Millis;
use crate::wall_clock::wall_ms;
use std::time::{Duration, Instant};

/// Milliseconds since the node started.
pub struct Clock {
    origin: Instant,
    /// Wall-clock ms (Unix) at `origin`, to put machine times into the event log.
    wall_origin: Millis,
}

impl Clock {
    /// A clock starting at 0 now.
    pub fn new() -> Clock {
        Clock {
            origin: Instant::now(),
            wall_origin: wall_ms(),
        }
    }

    /// A machine time as wall-clock ms, the event log's clock.
    pub fn wall(&self, at: Millis) -> Millis {
        self.wall_origin + at
    }

    /// The machine time now.
    pub fn now(&self) -> Millis {
        self.origin.elapsed().as_millis() as Millis
    }

    /// A machine time as an instant to sleep until.
    pub fn instant(&self, at: Millis) -> tokio::time::Instant {
        (self.origin + Duration::from_millis(at)).into()
    }
}
