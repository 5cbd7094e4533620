//! The TIME of `bully step-down --to N --at TIME`: `+DURATION` from now (`+10m`,
//! `+90s`, `+1h30m`) or a UTC time in RFC 3339 (`2026-11-26T15:00:00Z`; the `T` may be a
//! space and the `Z` may be left out, but no other offset is taken). Turned into
//! wall-clock ms since the Unix epoch when the command runs.

use std::time::{Duration, SystemTime};

/// A parsed `--at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SwitchTime {
    /// This long after the command runs.
    In(Duration),
    /// At this wall-clock time.
    At(SystemTime),
}

impl SwitchTime {
    /// Wall-clock ms since the Unix epoch, `now` being the command's time.
    pub fn wall_ms(self, now: SystemTime) -> u64 {
        let at = match self {
            SwitchTime::In(d) => now + d,
            SwitchTime::At(t) => t,
        };
        crate::wall_clock::ms_of(at)
    }
}

/// Parses `+DURATION` or an RFC 3339 UTC time.
pub fn parse(text: &str) -> Result<SwitchTime, String> {
    if let Some(rest) = text.strip_prefix('+') {
        return super::parse_duration(rest)
            .map(SwitchTime::In)
            .map_err(|e| e.to_string());
    }
    crate::wall_clock::parse_utc(text)
        .map(SwitchTime::At)
        .map_err(|e| {
            format!(
                "`{text}`: {e}; give +DURATION (e.g. +10m) or a UTC time like \
                 2026-11-26T15:00:00Z"
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    #[test]
    fn relative_and_utc_times_parse_and_others_are_refused() {
        assert_eq!(parse("+10m"), Ok(SwitchTime::In(Duration::from_secs(600))));
        let at = parse("2026-11-26T15:00:00Z").unwrap();
        assert_eq!(at.wall_ms(UNIX_EPOCH), 1_795_705_200_000);
        assert_eq!(
            parse("2026-11-26 15:00:00").map(|t| t.wall_ms(UNIX_EPOCH)),
            Ok(1_795_705_200_000)
        );
        assert!(parse("15:00+01:00").is_err());
        assert!(parse("tomorrow").is_err());
        assert!(parse("+5x").is_err());
    }
}
