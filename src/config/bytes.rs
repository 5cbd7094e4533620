//! Byte sizes as PostgreSQL and Patroni write them: a bare number of bytes, or a number
//! with `B`, `kB`, `MB`, `GB` or `TB` (powers of 1024, as in `postgresql.conf`). The one
//! parser for `[postgres] maximum_lag_on_failover`, `max_slot_wal_keep_size` and the HTTP route `/replica?lag=`,
//! so `16MB` means the same in both places.

use serde::de::{self, Deserializer, Visitor};
use std::fmt;
use thiserror::Error;

/// Why text is not a byte size; the text is quoted so the user sees what was read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BytesError {
    #[error("`{0}` is not a byte size (try 1048576, 512kB, 16MB or 1GB)")]
    NotASize(String),
    #[error("`{0}` is too large a byte size")]
    TooLarge(String),
}

/// Parses `text` (white space around the number and unit ignored).
pub fn parse(text: &str) -> Result<u64, BytesError> {
    let trimmed = text.trim();
    let digits_end = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(digits_end);
    let not_a_size = || BytesError::NotASize(text.to_string());
    if number.is_empty() {
        return Err(not_a_size());
    }
    let factor: u64 = match unit.trim() {
        "" | "B" => 1,
        "kB" => 1 << 10,
        "MB" => 1 << 20,
        "GB" => 1 << 30,
        "TB" => 1 << 40,
        _ => return Err(not_a_size()),
    };
    let number: u64 = number
        .parse()
        .map_err(|_| BytesError::TooLarge(text.to_string()))?;
    number
        .checked_mul(factor)
        .ok_or_else(|| BytesError::TooLarge(text.to_string()))
}

/// serde: a byte size from a TOML integer or a string such as `"16MB"`.
pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    struct Size;
    impl Visitor<'_> for Size {
        type Value = u64;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a byte size: a number of bytes, or a string such as \"16MB\"")
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
            Ok(v)
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
            u64::try_from(v).map_err(|_| E::custom(format!("{v} is not a byte size")))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<u64, E> {
            parse(v).map_err(E::custom)
        }
    }
    deserializer.deserialize_any(Size)
}

/// serde: a byte size as [`deserialize`] reads it, or -1 (a TOML integer or `"-1"`) for
/// no limit, as PostgreSQL writes `max_slot_wal_keep_size`; the size comes back as an
/// i64 (-1: unlimited).
pub fn deserialize_or_unlimited<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<i64, D::Error> {
    struct SizeOrUnlimited;
    impl Visitor<'_> for SizeOrUnlimited {
        type Value = i64;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str(
                "a byte size (a number of bytes, or a string such as \"8GB\"), or -1 for no limit",
            )
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<i64, E> {
            i64::try_from(v).map_err(|_| E::custom(format!("{v} is too large a byte size")))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<i64, E> {
            match v {
                -1 => Ok(-1),
                v if v >= 0 => Ok(v),
                v => Err(E::custom(format!("{v} is not a byte size (-1: no limit)"))),
            }
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<i64, E> {
            if v.trim() == "-1" {
                return Ok(-1);
            }
            let size = parse(v).map_err(E::custom)?;
            self.visit_u64(size)
        }
    }
    deserializer.deserialize_any(SizeOrUnlimited)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_postgres_units_and_bad_ones_are_named() {
        assert_eq!(parse("0"), Ok(0));
        assert_eq!(parse("1048576"), Ok(1 << 20));
        assert_eq!(parse("16MB"), Ok(16 << 20));
        assert_eq!(parse(" 512 kB "), Ok(512 << 10));
        assert_eq!(parse("1GB"), Ok(1 << 30));
        assert_eq!(parse("3B"), Ok(3));
        for bad in ["", "MB", "16mb", "1.5MB", "-1", "16 M", "x"] {
            assert_eq!(
                parse(bad),
                Err(BytesError::NotASize(bad.to_string())),
                "{bad}"
            );
        }
        assert!(matches!(
            parse("99999999999TB"),
            Err(BytesError::TooLarge(_))
        ));
    }

    #[test]
    fn a_limit_reads_as_a_size_or_minus_one_for_none() {
        #[derive(serde::Deserialize)]
        struct Keep {
            #[serde(deserialize_with = "deserialize_or_unlimited")]
            keep: i64,
        }
        let read = |text: &str| toml::from_str::<Keep>(text).map(|k| k.keep);
        assert_eq!(read("keep = \"8GB\"").unwrap(), 8 << 30);
        assert_eq!(read("keep = 1048576").unwrap(), 1 << 20);
        assert_eq!(read("keep = -1").unwrap(), -1);
        assert_eq!(read("keep = \"-1\"").unwrap(), -1);
        let bad = read("keep = -2").unwrap_err().to_string();
        assert!(bad.contains("-1: no limit"), "{bad}");
        assert!(read("keep = \"8 gigs\"").is_err());
    }
}
