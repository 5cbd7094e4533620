//! The `[watchdog]` table: a hardware (or softdog) watchdog device that a coordinator
//! keeps armed while it leads, so a host whose node hangs in office is reset (like
//! Patroni's `watchdog` section). What it does at run time is in
//! `src/node/drive/watchdog.rs`; when to arm and for how long, in
//! `src/node/policy/watchdog.rs`.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// `[watchdog]`: whether and which watchdog device the node arms while coordinator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WatchdogConfig {
    /// `off` (default), `auto` or `required`.
    pub mode: WatchdogMode,
    /// The watchdog device; an absolute path, `/dev/watchdog` by default.
    pub device: PathBuf,
}

impl Default for WatchdogConfig {
    fn default() -> Self {
        WatchdogConfig {
            mode: WatchdogMode::Off,
            device: PathBuf::from(WatchdogConfig::DEFAULT_DEVICE),
        }
    }
}

impl WatchdogConfig {
    /// The device used when the table names none.
    pub const DEFAULT_DEVICE: &'static str = "/dev/watchdog";

    /// Whether this is the table's default (then it is left out of a rendered config).
    pub fn is_default(&self) -> bool {
        *self == WatchdogConfig::default()
    }

    /// The table's checks (see the module docs of [`crate::config`]): the key path
    /// and the problem of the first that fails. `witness`: the node's `witness` key.
    pub(super) fn check(&self, witness: bool) -> Result<(), (String, String)> {
        let invalid = |key: &str, message: String| (format!("watchdog.{key}"), message);
        super::validate::check_path("watchdog.device", &self.device)?;
        if !self.device.is_absolute() {
            return Err(invalid(
                "device",
                format!(
                    "{} is not an absolute path (the default is {})",
                    self.device.display(),
                    WatchdogConfig::DEFAULT_DEVICE
                ),
            ));
        }
        if witness && self.mode != WatchdogMode::Off {
            return Err(invalid(
                "mode",
                "a witness never leads, so it would never arm the watchdog; set mode = \"off\" \
                 or witness = false"
                    .into(),
            ));
        }
        Ok(())
    }

    /// The device path, for messages.
    pub fn device(&self) -> &Path {
        &self.device
    }
}

/// `[watchdog] mode`: what a node does with its watchdog device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WatchdogMode {
    /// No watchdog device is used.
    #[default]
    Off,
    /// Arm the device while coordinator if it can be opened; if it cannot, log a
    /// warning once and lead without it.
    Auto,
    /// Lead only with the device armed: a node that cannot open and arm it is not
    /// eligible (its status says "watchdog unavailable").
    Required,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(mode: WatchdogMode, device: &str) -> WatchdogConfig {
        WatchdogConfig {
            mode,
            device: PathBuf::from(device),
        }
    }

    #[test]
    fn the_default_is_off_on_dev_watchdog_and_passes() {
        let default = WatchdogConfig::default();
        assert_eq!(default.mode, WatchdogMode::Off);
        assert_eq!(default.device(), Path::new("/dev/watchdog"));
        assert!(default.is_default());
        assert_eq!(default.check(true), Ok(()), "off suits a witness too");
    }

    #[test]
    fn a_relative_or_empty_device_and_a_witness_that_would_arm_are_refused() {
        let (key, why) = table(WatchdogMode::Auto, "watchdog")
            .check(false)
            .unwrap_err();
        assert_eq!(key, "watchdog.device");
        assert!(why.contains("not an absolute path"), "{why}");
        let (key, why) = table(WatchdogMode::Off, "").check(false).unwrap_err();
        assert_eq!(
            (key.as_str(), why.as_str()),
            ("watchdog.device", "must not be empty")
        );
        let (key, why) = table(WatchdogMode::Required, "/dev/watchdog1")
            .check(true)
            .unwrap_err();
        assert_eq!(key, "watchdog.mode");
        assert!(why.contains("a witness never leads"), "{why}");
        assert_eq!(
            table(WatchdogMode::Required, "/dev/watchdog1").check(false),
            Ok(())
        );
    }
}
