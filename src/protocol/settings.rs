//! The cluster settings: what every member lives by and no host's file decides once the
//! cluster exists (docs/design.md#cluster-settings). They travel inside the member list
//! (`super::membership`), so they are stored, spread, ordered and committed exactly as
//! the list is, one change at a time, by the coordinator only.
//!
//! Why this is safe to change while the cluster runs: a follower's promise lasts at
//! least the D its coordinator leases under (every message carries the sender's D,
//! `super::message::Message::promise_ms`), so a coordinator and a follower that hold
//! different settings for a while still keep Q3; and a node whose D shrinks keeps
//! storing and honouring the longer one until every promise made under it has run
//! out (`Machine::carry_promise` in src/protocol/machine/quorum.rs).

use super::mode::Preempt;
use super::timing::Timing;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The cluster settings a member list carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ClusterSettings {
    /// h, D, T, T' and the preempt delay.
    pub timing: Timing,
    /// Whether a restarted higher node takes over from a healthy lower coordinator.
    pub preempt: Preempt,
}

impl ClusterSettings {
    /// Settings with `timing` and `preempt`.
    pub fn new(timing: Timing, preempt: Preempt) -> ClusterSettings {
        ClusterSettings { timing, preempt }
    }

    /// Every key and its value as `bully config show` prints them, in order.
    pub fn entries(&self) -> Vec<(String, String)> {
        let t = &self.timing;
        let mut out: Vec<(String, String)> = [
            ("timing.heartbeat_ms", t.heartbeat_ms),
            ("timing.suspect_after_ms", t.suspect_after_ms),
            ("timing.answer_timeout_ms", t.answer_timeout_ms),
            ("timing.coordinator_timeout_ms", t.coordinator_timeout_ms),
            ("timing.preempt_delay_ms", t.preempt_delay_ms),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        out.push(("preempt".into(), preempt_word(self.preempt).into()));
        out
    }

    /// These settings with `key` set to `value`, or why not: an unknown key, a value
    /// that does not parse, or timing the algorithm cannot run on
    /// ([`Timing::validate`]). `mode` is refused with the reason it is not a setting.
    pub fn with(&self, key: &str, value: &str) -> Result<ClusterSettings, String> {
        let next = self.with_unchecked(key, value)?;
        next.timing.validate()?;
        Ok(next)
    }

    /// Every `(key, value)` of `pairs` set in turn, the timing checked once at the end
    /// (so `timing.heartbeat_ms` and `timing.suspect_after_ms` may move together in
    /// either order).
    pub fn with_all(&self, pairs: &[(String, String)]) -> Result<ClusterSettings, String> {
        let next = pairs
            .iter()
            .try_fold(*self, |s, (key, value)| s.with_unchecked(key, value))?;
        next.timing.validate()?;
        Ok(next)
    }

    /// [`ClusterSettings::with`] without the timing check.
    fn with_unchecked(&self, key: &str, value: &str) -> Result<ClusterSettings, String> {
        let mut next = *self;
        let number = || {
            value
                .parse::<u64>()
                .map_err(|_| format!("{key}: `{value}` is not a whole number of milliseconds"))
        };
        match key {
            "timing.heartbeat_ms" => next.timing.heartbeat_ms = number()?,
            "timing.suspect_after_ms" => next.timing.suspect_after_ms = number()?,
            "timing.answer_timeout_ms" => next.timing.answer_timeout_ms = number()?,
            "timing.coordinator_timeout_ms" => next.timing.coordinator_timeout_ms = number()?,
            "timing.preempt_delay_ms" => next.timing.preempt_delay_ms = number()?,
            "preempt" => {
                next.preempt = match value {
                    "always" => Preempt::Always,
                    "never" => Preempt::Never,
                    _ => return Err(format!("preempt: `{value}` is neither always nor never")),
                }
            }
            "mode" => return Err(MODE_IS_OFFLINE.into()),
            _ if key.starts_with("postgres.") => {
                return Err(format!(
                    "`{key}` is still read from each host's file: PostgreSQL's settings are \
                     not cluster settings yet (docs/configuration.md)"
                ))
            }
            _ => {
                return Err(format!(
                    "unknown cluster key `{key}`; the cluster keys are timing.heartbeat_ms, \
                     timing.suspect_after_ms, timing.answer_timeout_ms, \
                     timing.coordinator_timeout_ms, timing.preempt_delay_ms and preempt"
                ))
            }
        }
        Ok(next)
    }
}

/// Why `bully config set mode=…` is refused (docs/design.md#config-agreement).
pub const MODE_IS_OFFLINE: &str = "mode is not changed online: the two modes disagree on what \
     a vote and a lease mean, so no term could be valid under both while the change \
     spreads. Stop every node, change `mode` in every file, and start each once with \
     `bully node --change-mode` (docs/modes.md)";

fn preempt_word(preempt: Preempt) -> &'static str {
    match preempt {
        Preempt::Always => "always",
        Preempt::Never => "never",
    }
}

impl fmt::Display for ClusterSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entries: Vec<String> = self
            .entries()
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        f.write_str(&entries.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_parses_checks_and_names_what_is_wrong() {
        let base = ClusterSettings::new(Timing::default(), Preempt::Always);
        let slow = base.with("timing.suspect_after_ms", "3000").unwrap();
        assert_eq!(slow.timing.suspect_after_ms, 3000);
        assert_eq!(
            base.with("preempt", "never").unwrap().preempt,
            Preempt::Never
        );
        let err = base.with("timing.suspect_after_ms", "200").unwrap_err();
        assert!(err.contains("at least 3 x timing.heartbeat_ms"), "{err}");
        let err = base.with("timing.heartbeat_ms", "fast").unwrap_err();
        assert!(err.contains("not a whole number"), "{err}");
        assert!(base
            .with("mode", "classic")
            .unwrap_err()
            .contains("--change-mode"));
        assert!(base
            .with("id", "3")
            .unwrap_err()
            .contains("unknown cluster key"));
        let err = base
            .with("postgres.parameters.work_mem", "64MB")
            .unwrap_err();
        assert!(err.contains("each host's file"), "{err}");
    }
}
