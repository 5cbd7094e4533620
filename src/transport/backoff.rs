//! How long a dialer waits between attempts: the peers' dialer (`outbound`) and the
//! one that tells given-up members (`given_up`) back off alike.

use std::time::Duration;

/// First retry delay after a failed dial; doubles up to [`MAX_BACKOFF`].
pub const MIN_BACKOFF: Duration = Duration::from_millis(20);
/// Retry delay cap: a peer that comes back is reached within about this long even if
/// it does not dial us first.
pub const MAX_BACKOFF: Duration = Duration::from_millis(500);

/// The delay after one more failure, `delay` the last one (`None`: the first failure).
pub fn next_delay(delay: Option<Duration>) -> Duration {
    delay.map_or(MIN_BACKOFF, |d| (d * 2).min(MAX_BACKOFF))
}
