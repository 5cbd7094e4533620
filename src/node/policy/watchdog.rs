//! The `[watchdog]` device's rules, pure (the device I/O is
//! `src/node/drive/watchdog.rs`): a coordinator arms the device when it takes office,
//! keeps it alive on every renewal of its office and disarms it when it leaves office
//! cleanly; the timeout it arms with; and whether a device that cannot be armed keeps
//! the node from leading.
//!
//! **Timeout.** Ideally the device would fire before a successor can take over,
//! [`Timing::takeover_floor_ms`] after the newest round that renewed the office (see
//! `src/node/policy/office_grant.rs`); it cannot: it counts from the keepalive, later
//! than that round, and in whole seconds. The timeout is the floor rounded up, at
//! least 1 s ([`device_timeout_secs`]). With the
//! default D of 300 ms that is 1 s, three times the floor: the device then only resets
//! a host whose node hung in office, a last resort; fencing the database before a
//! successor can take over is the keeper's job (`bully run`, `src/api/keeper.rs`).
//!
//! **Renewal.** What counts as a renewal is what keeps the office: in quorum mode a
//! new lease end (a round a majority acked), in classic mode a heartbeat round sent;
//! a node without peers has no successor, so each pass of its runtime counts.

use super::office_grant::Office;
use crate::config::WatchdogMode;
use crate::protocol::{Millis, Mode, Role, Timing};
use std::path::Path;

/// The device's timeout for `timing`: the takeover floor rounded up to whole seconds
/// (the devices' granularity), at least 1 s.
pub fn device_timeout_secs(timing: &Timing) -> u32 {
    let secs = timing.takeover_floor_ms().div_ceil(1000).max(1);
    u32::try_from(secs).unwrap_or(u32::MAX)
}

/// Why a node whose device cannot be armed (`error`, about `device`) may not lead:
/// `Some` in `required` mode only; with `auto` it leads without the device.
pub fn unavailable_reason(mode: WatchdogMode, device: &Path, error: &str) -> Option<String> {
    (mode == WatchdogMode::Required)
        .then(|| format!("watchdog unavailable ({}: {error})", device.display()))
}

/// What to do with the device now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceStep {
    /// Open it and arm it with this timeout: the node took office.
    Arm { timeout_secs: u32 },
    /// The office was renewed: reset the device's timer.
    Keepalive,
    /// The node left office: disarm it (the magic close) and close it.
    Disarm,
}

/// Whether the device is armed and the renewal it was last kept alive for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchdogDuty {
    timeout_secs: u32,
    armed: bool,
    renewal: Option<Millis>,
}

impl WatchdogDuty {
    /// Not armed; arms with the timeout `timing` calls for ([`device_timeout_secs`]).
    pub fn new(timing: &Timing) -> WatchdogDuty {
        WatchdogDuty {
            timeout_secs: device_timeout_secs(timing),
            armed: false,
            renewal: None,
        }
    }

    /// The step `office` calls for at `now`, if any; the duty assumes it is carried
    /// out (see [`WatchdogDuty::arm_failed`]).
    pub fn step(&mut self, office: &Office, now: Millis) -> Option<DeviceStep> {
        let leading = office.view.role == Role::Coordinator && office.view.epoch.is_some();
        let renewal = renewal(office, now);
        match (leading, self.armed) {
            (true, false) => {
                self.armed = true;
                self.renewal = renewal;
                Some(DeviceStep::Arm {
                    timeout_secs: self.timeout_secs,
                })
            }
            (true, true) if renewal != self.renewal => {
                self.renewal = renewal;
                Some(DeviceStep::Keepalive)
            }
            (false, true) => {
                self.armed = false;
                self.renewal = None;
                Some(DeviceStep::Disarm)
            }
            _ => None,
        }
    }

    /// The device could not be armed: nothing is armed to disarm later.
    pub fn arm_failed(&mut self) {
        self.armed = false;
        self.renewal = None;
    }
}

/// The newest renewal of `office` (see the module docs); `now` for a node without
/// peers.
fn renewal(office: &Office, now: Millis) -> Option<Millis> {
    if !office.has_peers {
        return Some(now);
    }
    match office.mode {
        Mode::Quorum => office.lease_until,
        Mode::Classic => office.last_round_sent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Epoch;

    fn timing(suspect_after_ms: Millis) -> Timing {
        Timing {
            suspect_after_ms,
            ..Timing::default()
        }
    }

    #[test]
    fn the_timeout_is_the_takeover_floor_in_whole_seconds_at_least_one() {
        assert_eq!(Timing::default().takeover_floor_ms(), 294);
        assert_eq!(device_timeout_secs(&Timing::default()), 1);
        for (d, secs) in [(1_000, 1), (1_100, 2), (3_000, 3), (10_000, 10)] {
            let t = timing(d);
            let floor = t.takeover_floor_ms();
            assert_eq!(device_timeout_secs(&t), secs, "D {d} ms, floor {floor} ms");
            assert!(u64::from(secs) * 1000 >= floor, "never before the floor");
        }
    }

    #[test]
    fn only_required_mode_makes_a_missing_device_a_reason_not_to_lead() {
        let device = Path::new("/dev/watchdog3");
        let why = unavailable_reason(WatchdogMode::Required, device, "No such file");
        assert_eq!(
            why.as_deref(),
            Some("watchdog unavailable (/dev/watchdog3: No such file)")
        );
        assert_eq!(unavailable_reason(WatchdogMode::Auto, device, "x"), None);
        assert_eq!(unavailable_reason(WatchdogMode::Off, device, "x"), None);
    }

    fn office(role: Role, mode: Mode) -> Office {
        Office::for_test(role, mode, Epoch { term: 2, leader: 3 })
    }

    #[test]
    fn armed_on_taking_office_kept_alive_on_each_renewal_disarmed_on_leaving() {
        let mut duty = WatchdogDuty::new(&Timing::default());
        let mut o = office(Role::Follower, Mode::Quorum);
        assert_eq!(duty.step(&o, 0), None, "a follower arms nothing");
        o.view.role = Role::Coordinator;
        assert_eq!(duty.step(&o, 10), Some(DeviceStep::Arm { timeout_secs: 1 }));
        assert_eq!(duty.step(&o, 20), None, "no lease yet: nothing renewed");
        o.lease_until = Some(300);
        assert_eq!(duty.step(&o, 100), Some(DeviceStep::Keepalive));
        assert_eq!(duty.step(&o, 150), None, "the same lease: no keepalive");
        o.lease_until = Some(400);
        assert_eq!(duty.step(&o, 200), Some(DeviceStep::Keepalive));
        o.view.role = Role::Candidate;
        assert_eq!(duty.step(&o, 250), Some(DeviceStep::Disarm));
        assert_eq!(duty.step(&o, 260), None, "disarmed once");
    }

    #[test]
    fn classic_renews_on_rounds_sent_and_a_lone_node_on_every_pass() {
        let mut duty = WatchdogDuty::new(&Timing::default());
        let mut o = office(Role::Coordinator, Mode::Classic);
        o.last_round_sent = Some(5);
        assert!(matches!(duty.step(&o, 5), Some(DeviceStep::Arm { .. })));
        assert_eq!(duty.step(&o, 50), None);
        o.last_round_sent = Some(105);
        assert_eq!(duty.step(&o, 105), Some(DeviceStep::Keepalive));
        o.has_peers = false;
        assert_eq!(duty.step(&o, 110), Some(DeviceStep::Keepalive));
        assert_eq!(duty.step(&o, 120), Some(DeviceStep::Keepalive));
    }

    #[test]
    fn a_failed_arm_leaves_nothing_to_disarm_and_is_retried_in_office() {
        let mut duty = WatchdogDuty::new(&timing(3_000));
        let o = office(Role::Coordinator, Mode::Quorum);
        assert_eq!(duty.step(&o, 0), Some(DeviceStep::Arm { timeout_secs: 3 }));
        duty.arm_failed();
        let follower = office(Role::Follower, Mode::Quorum);
        assert_eq!(duty.step(&follower, 1), None);
        assert!(matches!(duty.step(&o, 2), Some(DeviceStep::Arm { .. })));
    }
}
