//! The serde form of [`Message`]. On the wire (bincode, which is not human-readable)
//! every field is written, `est` and `promise_ms` included (since `WIRE_VERSION` 5,
//! src/codec.rs). In JSON (histories and event logs, human-readable) `est` is left out
//! while it is `None` and `promise_ms` while it is 0, so a history recorded before
//! either existed still reads.

use super::membership::ConfigId;
use super::message::{Body, Message};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Every field, in order: the wire form.
#[derive(Serialize)]
struct WireRef<'a> {
    term: u64,
    config: ConfigId,
    est: Option<u64>,
    promise_ms: u64,
    body: &'a Body,
}

#[derive(Deserialize)]
struct Wire {
    term: u64,
    config: ConfigId,
    est: Option<u64>,
    promise_ms: u64,
    body: Body,
}

/// The readable form: `est` only when present.
#[derive(Serialize)]
struct ReadableRef<'a> {
    term: u64,
    config: ConfigId,
    #[serde(skip_serializing_if = "Option::is_none")]
    est: Option<u64>,
    #[serde(skip_serializing_if = "is_zero")]
    promise_ms: u64,
    body: &'a Body,
}

#[derive(Deserialize)]
struct Readable {
    term: u64,
    config: ConfigId,
    #[serde(default)]
    est: Option<u64>,
    #[serde(default)]
    promise_ms: u64,
    body: Body,
}

impl Serialize for Message {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if serializer.is_human_readable() {
            ReadableRef {
                term: self.term,
                config: self.config,
                est: self.est,
                promise_ms: self.promise_ms,
                body: &self.body,
            }
            .serialize(serializer)
        } else {
            WireRef {
                term: self.term,
                config: self.config,
                est: self.est,
                promise_ms: self.promise_ms,
                body: &self.body,
            }
            .serialize(serializer)
        }
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Message, D::Error> {
        let (term, config, est, promise_ms, body) = if deserializer.is_human_readable() {
            let r = Readable::deserialize(deserializer)?;
            (r.term, r.config, r.est, r.promise_ms, r.body)
        } else {
            let w = Wire::deserialize(deserializer)?;
            (w.term, w.config, w.est, w.promise_ms, w.body)
        };
        Ok(Message {
            term,
            config,
            est,
            promise_ms,
            body,
        })
    }
}

fn is_zero(ms: &u64) -> bool {
    *ms == 0
}
