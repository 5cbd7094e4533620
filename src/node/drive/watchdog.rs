//! The `[watchdog]` device as the runtime uses it: carries out the steps of the pure
//! duty (`src/node/policy/watchdog.rs`) on a [`WatchdogDevice`], and turns a device
//! that cannot be armed into what the mode asks for: with `auto` one warning and no
//! watchdog from then on, with `required` a reason not to lead, which the runtime
//! hands to the eligibility policy.

use super::watchdog_device::WatchdogDevice;
use crate::config::{WatchdogConfig, WatchdogMode};
use crate::node::policy::office_grant::Office;
use crate::node::policy::watchdog::{self, DeviceStep, WatchdogDuty};
use crate::protocol::{Millis, Timing};
use std::path::PathBuf;

/// The node's watchdog: its mode and device, the duty and the open device, if armed.
#[derive(Debug)]
pub struct Watchdog {
    mode: WatchdogMode,
    path: PathBuf,
    /// What the device is armed with ([`watchdog::device_timeout_secs`]).
    timeout_secs: u32,
    duty: WatchdogDuty,
    device: Option<WatchdogDevice>,
    /// A keepalive failed since the device was armed (logged once per arming).
    keepalive_failed: bool,
}

impl Watchdog {
    /// The watchdog `config` describes, arming with the timeout `timing` calls for.
    pub fn new(config: &WatchdogConfig, timing: &Timing) -> Watchdog {
        Watchdog {
            mode: config.mode,
            path: config.device.clone(),
            timeout_secs: watchdog::device_timeout_secs(timing),
            duty: WatchdogDuty::new(timing),
            device: None,
            keepalive_failed: false,
        }
    }

    /// At start, with `required`: whether the device can be opened and armed (it is
    /// armed and at once disarmed with the magic close); `Some(why)` when it cannot,
    /// the node's reason not to lead. `None` in the other modes.
    pub fn check_required(&self) -> Option<String> {
        if self.mode != WatchdogMode::Required {
            return None;
        }
        match WatchdogDevice::arm(&self.path, self.timeout_secs) {
            Ok(device) => {
                device.disarm();
                None
            }
            Err(e) => watchdog::unavailable_reason(self.mode, &self.path, &e.to_string()),
        }
    }

    /// Arms, keeps alive or disarms the device for `office` at `now`. `Some(why)` when
    /// the device cannot be armed in `required` mode: the node must not lead.
    pub fn tend(&mut self, office: &Office, now: Millis) -> Option<String> {
        if self.mode == WatchdogMode::Off {
            return None;
        }
        match self.duty.step(office, now)? {
            DeviceStep::Arm { timeout_secs } => return self.arm(timeout_secs),
            DeviceStep::Keepalive => self.keepalive(),
            DeviceStep::Disarm => {
                if let Some(device) = self.device.take() {
                    device.disarm();
                }
            }
        }
        None
    }

    fn arm(&mut self, timeout_secs: u32) -> Option<String> {
        match WatchdogDevice::arm(&self.path, timeout_secs) {
            Ok(device) => {
                self.device = Some(device);
                self.keepalive_failed = false;
                None
            }
            Err(e) => {
                self.duty.arm_failed();
                let device = self.path.display();
                if self.mode == WatchdogMode::Auto {
                    tracing::warn!(%device, "cannot arm the watchdog: {e}; leading without it");
                    self.mode = WatchdogMode::Off;
                }
                watchdog::unavailable_reason(self.mode, &self.path, &e.to_string())
            }
        }
    }

    fn keepalive(&mut self) {
        let Some(device) = &mut self.device else {
            return;
        };
        if let Err(e) = device.keepalive() {
            if !std::mem::replace(&mut self.keepalive_failed, true) {
                tracing::error!(device = %self.path.display(), "watchdog keepalive failed: {e}");
            }
        }
    }
}
