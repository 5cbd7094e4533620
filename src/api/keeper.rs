//! The keeper channel: a unix socket in the node's data dir over which the node tells
//! the processes that fence its host (`bully run`, `src/keeper/`) whether it leads and
//! until when, and they tell it what they still hold. One JSON object per line each
//! way, so `socat - UNIX-CONNECT:<data_dir>/keeper.sock` shows it too (the path:
//! `NodeConfig::keeper_socket`).
//!
//! Instants travel as nanoseconds of [`crate::boot_clock`]'s clock, which every process
//! on the host reads alike; the grant names the clock, and a keeper reading another
//! one refuses it. A keeper is not trusted to be told in time: it acts on the deadlines
//! it was given even when the node stops talking (stalled, killed, hung).
//!
//! Grants are numbered; a keeper reports whenever what it holds changes and whenever a
//! grant changes the epoch, naming the newest grant it acted on. A node leaving office
//! on purpose therefore knows when every keeper has heard the withdrawal and holds
//! nothing: only then does it resign (`src/node/serve/keepers.rs`).

use crate::boot_clock::{BootInstant, Source};
use crate::protocol::{Epoch, NodeId};
use serde::ser::{SerializeStruct, Serializer};
use serde::{de::DeserializeOwned, Deserialize, Serialize};

/// The longest line either side accepts: a grant or a report is about 300 bytes.
pub const MAX_LINE: usize = 4096;

/// What the node grants its keepers: sent on connect, on every change of office and on
/// every lease renewal. On the wire it also carries the epoch's fencing token
/// ([`Grant::token`], derived, see the `Serialize` impl below); reading a line ignores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct Grant {
    /// Numbers the grants a node has made since it started; a keeper's [`Report`]
    /// names the newest it has acted on, so the node knows a withdrawal was heard.
    #[serde(default)]
    pub seq: u64,
    /// The node speaking.
    pub node: NodeId,
    /// The epoch the node leads now; `None` when it does not lead (then everything
    /// held for an earlier epoch must stop).
    pub epoch: Option<Epoch>,
    /// When the node's own office ends unless renewed (its lease end): from here on it
    /// no longer claims to lead. `None`: no end is known (a one-node classic cluster).
    pub lease_end_ns: Option<u64>,
    /// The earliest instant another node could take office if this one renewed nothing
    /// more (`Timing::takeover_floor_ms` after the newest round): whatever this node
    /// leads must be dead by then.
    pub fence_by_ns: Option<u64>,
    /// How long before `lease_end_ns` a healthy node's renewal is due at the latest,
    /// one round lost or late allowed for (the lease span less two heartbeats): a
    /// keeper's SIGTERM must not come earlier, or a healthy node's job would be stopped.
    pub renewal_slack_ms: u64,
    /// The clock the instants are on.
    pub clock: Source,
}

impl Grant {
    /// A grant that leads nothing.
    pub fn none(node: NodeId) -> Grant {
        Grant {
            seq: 0,
            node,
            epoch: None,
            lease_end_ns: None,
            fence_by_ns: None,
            renewal_slack_ms: 0,
            clock: crate::boot_clock::source(),
        }
    }

    /// The fencing token of the epoch led ([`Epoch::token`]), if any.
    pub fn token(&self) -> Option<u64> {
        self.epoch.map(|e| e.token())
    }

    /// The node's lease end on this host's clock.
    pub fn lease_end(&self) -> Option<BootInstant> {
        self.lease_end_ns.map(BootInstant::from_nanos)
    }

    /// The fencing deadline on this host's clock.
    pub fn fence_by(&self) -> Option<BootInstant> {
        self.fence_by_ns.map(BootInstant::from_nanos)
    }
}

/// The grant's JSON object: its fields in declaration order with the derived `token`
/// after `epoch`, the line the keeper socket has always carried (`socat` readers and
/// keepers of earlier versions see the same keys). A field added to [`Grant`] is added
/// here too; `the_grant_line_keeps_its_keys_and_order` below fails otherwise.
impl Serialize for Grant {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut line = serializer.serialize_struct("Grant", 8)?;
        line.serialize_field("seq", &self.seq)?;
        line.serialize_field("node", &self.node)?;
        line.serialize_field("epoch", &self.epoch)?;
        line.serialize_field("token", &self.token())?;
        line.serialize_field("lease_end_ns", &self.lease_end_ns)?;
        line.serialize_field("fence_by_ns", &self.fence_by_ns)?;
        line.serialize_field("renewal_slack_ms", &self.renewal_slack_ms)?;
        line.serialize_field("clock", &self.clock)?;
        line.end()
    }
}

/// What a keeper tells the node: who it is, how long it needs to stop what it runs,
/// and which epoch it still holds (its child runs, or its fence command has not run).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    pub pid: u32,
    /// What it runs, for the node's log.
    pub what: String,
    /// SIGTERM to SIGKILL: the longest the node should wait for a release.
    pub grace_ms: u64,
    /// The epoch whose job still runs here; `None` once it has stopped.
    pub holding: Option<Epoch>,
    /// The newest grant ([`Grant::seq`]) this report takes into account.
    #[serde(default)]
    pub seen: u64,
}

/// A connected keeper as `bully status` shows it: who, running what, holding which
/// epoch (`None` before its first report, or while it holds nothing).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Connected {
    pub pid: Option<u32>,
    pub what: Option<String>,
    pub holding: Option<Epoch>,
}

impl Connected {
    /// One keeper in a status line: `4711 (./job) holding 5@3`.
    pub fn describe(&self) -> String {
        let pid = self.pid.map_or("?".into(), |p| p.to_string());
        let what = self.what.as_deref().unwrap_or("not reported yet");
        match self.holding {
            Some(epoch) => format!("{pid} ({what}) holding {epoch}"),
            None => format!("{pid} ({what})"),
        }
    }
}

/// One line of `value` as JSON, newline included.
pub fn encode_line(value: &impl Serialize) -> String {
    // Both types serialise to plain objects of numbers and strings: this cannot fail.
    let mut line = serde_json::to_string(value).unwrap_or_default();
    line.push('\n');
    line
}

/// Reads one line (without its newline) as `T`; a clear error for anything else.
pub fn decode_line<T: DeserializeOwned>(line: &str) -> Result<T, String> {
    if line.len() > MAX_LINE {
        return Err(format!(
            "a line of {} bytes (at most {MAX_LINE})",
            line.len()
        ));
    }
    serde_json::from_str(line).map_err(|e| format!("not a keeper message: {e}: {line:.80}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_and_a_report_cross_as_one_line_each() {
        let grant = Grant {
            epoch: Some(Epoch { term: 7, leader: 3 }),
            lease_end_ns: Some(1_000),
            fence_by_ns: Some(2_000),
            renewal_slack_ms: 100,
            ..Grant::none(3)
        };
        let line = encode_line(&grant);
        assert!(line.ends_with('\n') && line.matches('\n').count() == 1);
        assert_eq!(decode_line::<Grant>(line.trim_end()), Ok(grant));
        let report = Report {
            pid: 42,
            what: "sleep 1".into(),
            grace_ms: 70,
            holding: grant.epoch,
            seen: 9,
        };
        let line = encode_line(&report);
        assert_eq!(decode_line::<Report>(line.trim_end()), Ok(report));
    }

    #[test]
    fn the_grant_line_keeps_its_keys_and_order() {
        let grant = Grant {
            seq: 5,
            epoch: Some(Epoch { term: 7, leader: 3 }),
            lease_end_ns: Some(1_000),
            fence_by_ns: Some(2_000),
            renewal_slack_ms: 100,
            clock: Source::Boottime,
            ..Grant::none(3)
        };
        assert_eq!(
            encode_line(&grant),
            "{\"seq\":5,\"node\":3,\"epoch\":{\"term\":7,\"leader\":3},\"token\":7340035,\
             \"lease_end_ns\":1000,\"fence_by_ns\":2000,\"renewal_slack_ms\":100,\
             \"clock\":\"boottime\"}\n"
        );
        assert_eq!(
            encode_line(&Grant::none(3)).split(",\"clock\"").next(),
            Some(
                "{\"seq\":0,\"node\":3,\"epoch\":null,\"token\":null,\"lease_end_ns\":null,\
                 \"fence_by_ns\":null,\"renewal_slack_ms\":0"
            )
        );
    }

    #[test]
    fn garbage_and_oversized_lines_are_refused_with_a_reason() {
        let err = decode_line::<Grant>("hello").unwrap_err();
        assert!(err.starts_with("not a keeper message"), "{err}");
        let long = "x".repeat(MAX_LINE + 1);
        let err = decode_line::<Grant>(&long).unwrap_err();
        assert!(err.contains("at most 4096"), "{err}");
    }
}
