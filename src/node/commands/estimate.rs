//! est(S) from the host (docs/design.md#elected-by-data-est): the health command may
//! print a line `est=N`, or `[health] estimate` names a command of its own that prints
//! `N` (or `est=N`). N is a decimal u64 and nothing else; anything else is a warning in
//! the log and counts as no fresh estimate, never a panic. A value is fresh for
//! [`fresh_for`] after its command started: a node that was stopped longer than that
//! runs its next election with estimate 0.

use crate::config::HealthConfig;
use std::time::Duration;

/// What one run's stdout said about the estimate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Said {
    /// No `est=` line (a health command that reports no estimate).
    Nothing,
    Value(u64),
    /// Present but unusable, and why.
    Malformed(String),
}

impl Said {
    /// The value, if the run gave one.
    pub fn value(&self) -> Option<u64> {
        match self {
            Said::Value(v) => Some(*v),
            _ => None,
        }
    }
}

/// How long a measured estimate may be used to win an election: two check intervals
/// and one timeout, counted from the start of the command that measured it. One late
/// or failed run is tolerated; after a longer gap (a stopped process, a hung command)
/// the old value no longer counts.
pub fn fresh_for(config: &HealthConfig) -> Duration {
    Duration::from_millis(2 * config.interval_ms + config.timeout_ms)
}

/// The health command's output: the one line that starts with `est=`, if any.
pub fn from_health_output(out: &[u8]) -> Said {
    let text = String::from_utf8_lossy(out);
    let mut lines = text.lines().filter(|l| l.starts_with("est="));
    match (lines.next(), lines.next()) {
        (None, _) => Said::Nothing,
        (Some(_), Some(_)) => Said::Malformed("more than one est= line".into()),
        (Some(line), None) => number(&line["est=".len()..]),
    }
}

/// The estimate command's output: `N` or `est=N` on its one line.
pub fn from_estimate_output(out: &[u8]) -> Said {
    let text = String::from_utf8_lossy(out);
    let text = text.trim_end_matches(['\n', '\r']);
    if text.is_empty() {
        return Said::Malformed("the estimate command printed nothing".into());
    }
    if text.contains('\n') {
        return Said::Malformed("the estimate command printed more than one line".into());
    }
    number(text.strip_prefix("est=").unwrap_or(text))
}

/// A decimal u64, digits only.
fn number(text: &str) -> Said {
    let text = text.trim_end_matches('\r');
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Said::Malformed(format!("{text:?} is not a decimal number"));
    }
    match text.parse() {
        Ok(v) => Said::Value(v),
        Err(_) => Said::Malformed(format!("{text} does not fit in 64 bits")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_parsing() {
        assert_eq!(from_health_output(b"ok\nest=42\n"), Said::Value(42));
        assert_eq!(from_health_output(b"ok\n"), Said::Nothing);
        assert_eq!(from_health_output(b"est=1\nest=2\n").value(), None);
        for bad in [
            &b"est=\n"[..],
            b"est=-1",
            b"est= 5",
            b"est=0x10",
            b"est=99999999999999999999",
        ] {
            assert!(
                matches!(from_health_output(bad), Said::Malformed(_)),
                "{bad:?}"
            );
        }
        assert_eq!(from_estimate_output(b"7\n"), Said::Value(7));
        assert_eq!(from_estimate_output(b"est=7\r\n"), Said::Value(7));
        for bad in [&b""[..], b"\n", b"7\n8\n", b"seven"] {
            assert!(
                matches!(from_estimate_output(bad), Said::Malformed(_)),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn freshness_bound() {
        let config = HealthConfig::new("true");
        assert_eq!(fresh_for(&config), Duration::from_millis(2500));
    }
}
