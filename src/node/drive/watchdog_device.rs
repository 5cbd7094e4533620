//! A Linux watchdog device (`/dev/watchdog`, see the kernel's watchdog API): opening it
//! starts its timer, `WDIOC_SETTIMEOUT` sets the timeout in whole seconds,
//! `WDIOC_KEEPALIVE` (or any write) resets the timer, and writing `V` before closing
//! (the "magic close") stops it; closed without `V` it keeps counting and resets the
//! host. The ioctls go through nix, in two of the crate's few `unsafe` blocks (the
//! others are in `src/signals.rs`, `src/exact_timer.rs` and `src/keeper/guard.rs`;
//! `src/lib.rs` lists them): nix's ioctl macros make unsafe functions, since the
//! kernel reads and writes the argument through a pointer, and no kept crate wraps
//! the watchdog API. A write resets the timer too, but nothing but the ioctl sets the
//! timeout.
//!
//! A file that is not a watchdog (a regular file or a FIFO, as the tests use) refuses
//! the ioctls with `ENOTTY`: such a device is driven by writes alone (`1` to keep
//! alive, `V` to disarm), which is logged, so a test can watch what a real device
//! would be told.

use nix::errno::Errno;
use nix::libc::c_int;
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

nix::ioctl_read!(wdioc_keepalive, b'W', 5, c_int);
nix::ioctl_readwrite!(wdioc_settimeout, b'W', 6, c_int);

/// What a write-only keepalive writes: any byte but `V` resets the timer.
const KEEPALIVE_BYTE: &[u8] = b"1";
/// The magic close: written just before closing, it stops the timer.
const MAGIC_CLOSE: &[u8] = b"V";

/// An open, armed watchdog device.
#[derive(Debug)]
pub struct WatchdogDevice {
    file: File,
    path: PathBuf,
    /// Whether the device takes the watchdog ioctls (a fake one does not).
    ioctls: bool,
}

impl WatchdogDevice {
    /// Opens `path` (without blocking: a FIFO nobody reads fails at once) and arms it
    /// with `timeout_secs`. A device that refuses the timeout is disarmed again and
    /// counts as unavailable: it would run on a timeout nobody chose.
    pub fn arm(path: &Path, timeout_secs: u32) -> io::Result<WatchdogDevice> {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(nix::libc::O_NONBLOCK)
            .open(path)?;
        let mut device = WatchdogDevice {
            file,
            path: path.to_path_buf(),
            ioctls: true,
        };
        let mut timeout = c_int::try_from(timeout_secs).unwrap_or(c_int::MAX);
        // SAFETY: the fd is open for the call's whole length and `timeout` is a live
        // c_int, the argument WDIOC_SETTIMEOUT reads and writes back.
        match unsafe { wdioc_settimeout(device.fd(), &mut timeout) } {
            Ok(_) if timeout.unsigned_abs() != timeout_secs => tracing::warn!(
                device = %path.display(),
                asked = timeout_secs,
                set = timeout,
                "watchdog device rounded the timeout"
            ),
            Ok(_) => {}
            Err(Errno::ENOTTY) => {
                tracing::warn!(
                    device = %path.display(),
                    "not a watchdog device (no watchdog ioctls): driving it by writes only"
                );
                device.ioctls = false;
            }
            Err(e) => {
                device.disarm();
                return Err(io::Error::other(format!(
                    "cannot set its timeout to {timeout_secs} s: {e}"
                )));
            }
        }
        device.keepalive()?;
        tracing::info!(device = %path.display(), timeout_secs, "watchdog armed");
        Ok(device)
    }

    /// Resets the device's timer.
    pub fn keepalive(&mut self) -> io::Result<()> {
        if !self.ioctls {
            return self.file.write_all(KEEPALIVE_BYTE);
        }
        let mut unused: c_int = 0;
        // SAFETY: the fd is open and `unused` is a live c_int for the call's length.
        unsafe { wdioc_keepalive(self.fd(), &mut unused) }
            .map(drop)
            .map_err(io::Error::from)
    }

    /// Stops the timer (the magic close) and closes the device. A device whose driver
    /// was built with `nowayout` ignores it and keeps counting: nothing can be done
    /// about that here but say so in the docs.
    pub fn disarm(mut self) {
        match self.file.write_all(MAGIC_CLOSE) {
            Ok(()) => tracing::info!(device = %self.path.display(), "watchdog disarmed"),
            Err(e) => tracing::error!(
                device = %self.path.display(),
                "cannot disarm the watchdog (magic close): {e}; it may reset the host"
            ),
        }
    }

    fn fd(&self) -> c_int {
        use std::os::fd::AsRawFd;
        self.file.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_is_driven_by_writes_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("watchdog");
        std::fs::write(&path, "").unwrap();
        let mut device = WatchdogDevice::arm(&path, 1).unwrap();
        assert!(!device.ioctls);
        device.keepalive().unwrap();
        device.disarm();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "11V");
    }

    #[test]
    fn a_missing_device_or_a_fifo_nobody_reads_is_an_error_not_a_wait() {
        let dir = tempfile::tempdir().unwrap();
        let missing = WatchdogDevice::arm(&dir.path().join("none"), 1).unwrap_err();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let unread = WatchdogDevice::arm(&fifo, 1).unwrap_err();
        assert_eq!(unread.raw_os_error(), Some(nix::libc::ENXIO), "{unread}");
    }
}
