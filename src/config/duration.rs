//! Durations as people write them, the one parser for the command line and the config:
//! humantime's forms (`250ms`, `2s`, `1m30s`, `1h`, `2 days`), plus one number with a
//! decimal point and a unit (`1.5s`, `0.5m`). A bare number keeps the unit of the place
//! it is written in: seconds on the command line, milliseconds in a `_ms` config key.
//! Precision stops at the millisecond for the decimal forms, as it always has.

use serde::de::{self, Deserializer, Unexpected, Visitor};
use std::fmt;
use std::time::Duration;
use thiserror::Error;

/// What a number without a unit means where it is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BareUnit {
    /// `--for 60` on the command line: a minute.
    Seconds,
    /// `timeout_ms = "250"` in a config: a quarter of a second.
    Millis,
}

/// Why text is not a duration; the text is quoted so the user sees what was read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DurationError {
    #[error("`{0}` is not a duration (try 500ms, 2s, 1m30s or 1h)")]
    NotADuration(String),
    #[error("unknown duration unit `{unit}` in `{text}` (use ms, s, m or h, e.g. 1m30s)")]
    UnknownUnit { text: String, unit: String },
    #[error("`{0}` is too long a duration")]
    TooLong(String),
}

/// Parses `text` (surrounding white space ignored); see the module docs for the forms.
pub fn parse(text: &str, bare: BareUnit) -> Result<Duration, DurationError> {
    let text = text.trim();
    if let Some(parsed) = decimal(text, bare) {
        return parsed;
    }
    humantime::parse_duration(text).map_err(|e| match e {
        humantime::DurationError::UnknownUnit { unit, .. } => DurationError::UnknownUnit {
            text: text.to_string(),
            unit,
        },
        humantime::DurationError::NumberOverflow => DurationError::TooLong(text.to_string()),
        _ => DurationError::NotADuration(text.to_string()),
    })
}

/// One number (digits and a decimal point) and an optional unit among `ms`, `s`, `m`,
/// `min`, `h`, truncated to whole milliseconds; `None` for any other form.
fn decimal(text: &str, bare: BareUnit) -> Option<Result<Duration, DurationError>> {
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number.parse().ok()?;
    let unit_ms = match (unit.trim(), bare) {
        ("ms", _) | ("", BareUnit::Millis) => 1.0,
        ("s", _) | ("", BareUnit::Seconds) => 1000.0,
        ("m" | "min", _) => 60_000.0,
        ("h", _) => 3_600_000.0,
        _ => return None,
    };
    let ms = value * unit_ms;
    // As before humantime: a huge but finite figure saturates.
    Some(if ms.is_finite() {
        Ok(Duration::from_millis(ms as u64))
    } else {
        Err(DurationError::TooLong(text.to_string()))
    })
}

/// For `#[serde(deserialize_with)]` on a `_ms` key: an integer is milliseconds, as it
/// always was; a string is any form [`parse`] takes (a bare number: milliseconds).
pub fn millis<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    deserializer.deserialize_any(MillisVisitor)
}

struct MillisVisitor;

impl Visitor<'_> for MillisVisitor {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a number of milliseconds or a duration such as \"250ms\" or \"5s\"")
    }

    fn visit_u64<E: de::Error>(self, ms: u64) -> Result<u64, E> {
        Ok(ms)
    }

    fn visit_i64<E: de::Error>(self, ms: i64) -> Result<u64, E> {
        u64::try_from(ms).map_err(|_| E::invalid_value(Unexpected::Signed(ms), &self))
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<u64, E> {
        let duration = parse(text, BareUnit::Millis).map_err(E::custom)?;
        u64::try_from(duration.as_millis())
            .map_err(|_| E::custom(DurationError::TooLong(text.to_string())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(text: &str) -> Result<Duration, DurationError> {
        parse(text, BareUnit::Seconds)
    }

    #[test]
    fn the_forms_taken_before_humantime_keep_their_meaning() {
        let ms = Duration::from_millis;
        for (text, expected) in [
            ("500ms", ms(500)),
            ("2s", ms(2000)),
            ("3", ms(3000)),
            ("1m", ms(60_000)),
            ("2min", ms(120_000)),
            ("1.5s", ms(1500)),
            (" 0.25 s ", ms(250)),
            ("0.0005s", ms(0)),
        ] {
            assert_eq!(secs(text), Ok(expected), "{text:?}");
        }
        assert_eq!(parse("250", BareUnit::Millis), Ok(ms(250)));
    }

    #[test]
    fn humantime_forms_are_taken_too() {
        let s = Duration::from_secs;
        for (text, expected) in [
            ("1h", s(3600)),
            ("1.5h", s(5400)),
            ("1m30s", s(90)),
            ("1h 2m 3s", s(3723)),
            ("2days", s(2 * 86_400)),
            ("1500us", Duration::from_micros(1500)),
        ] {
            assert_eq!(secs(text), Ok(expected), "{text:?}");
        }
    }

    #[test]
    fn bad_durations_say_what_was_read() {
        let cases = [
            (
                "soon",
                "`soon` is not a duration (try 500ms, 2s, 1m30s or 1h)",
            ),
            ("", "`` is not a duration"),
            ("-5s", "`-5s` is not a duration"),
            ("5x", "unknown duration unit `x` in `5x`"),
            ("1m30q", "unknown duration unit `q` in `1m30q`"),
            ("99999999999999999999999y", "is too long a duration"),
        ];
        for (text, expected) in cases {
            let err = secs(text).unwrap_err().to_string();
            assert!(err.contains(expected), "{text:?}: {err}");
        }
        let endless = format!("{}s", "9".repeat(400));
        assert_eq!(secs(&endless), Err(DurationError::TooLong(endless.clone())));
    }
}
