//! The one place bincode is called. Network frames and stored values both go through
//! here, so the wire format can change in one file (bincode 2 is unmaintained,
//! RUSTSEC-2025-0141; postcard would be the serde-compatible replacement).
//!
//! A frame is `[version: u8][length: u32 big-endian][body: bincode]`. The length is
//! checked against [`MAX_FRAME`] before any byte of the body is read, and the body is
//! decoded with the same limit, so a hostile peer cannot make us allocate more.

use serde::{de::DeserializeOwned, Serialize};
use thiserror::Error;

/// Version byte at the start of every frame; bump it when the message layout changes
/// (6: the member list's settings carry PostgreSQL's parameters and synchronous mode).
pub const WIRE_VERSION: u8 = 6;

/// Hard cap on a frame body. Our largest message (a status with 32 peers) is far below.
pub const MAX_FRAME: usize = 64 * 1024;

/// Bytes before the body: version and length.
pub const HEADER_LEN: usize = 5;

/// Why bytes could not be turned into a value. Every case closes the peer's
/// connection; none of them panics.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum CodecError {
    #[error("unsupported wire version {0} (this build speaks {WIRE_VERSION})")]
    Version(u8),
    #[error("frame of {0} bytes exceeds the {MAX_FRAME}-byte cap")]
    TooLarge(usize),
    #[error("frame truncated: expected {expected} bytes, got {got}")]
    Truncated { expected: usize, got: usize },
    #[error("undecodable body: {0}")]
    Body(String),
    #[error("{0} trailing bytes after the body")]
    Trailing(usize),
    #[error("cannot encode: {0}")]
    Encode(String),
}

fn config() -> impl bincode::config::Config {
    bincode::config::standard()
        .with_big_endian()
        .with_limit::<MAX_FRAME>()
}

/// Serializes a value without framing (used for stored cells).
pub fn encode_value<T: Serialize>(value: &T) -> Result<Vec<u8>, CodecError> {
    bincode::serde::encode_to_vec(value, config()).map_err(|e| CodecError::Encode(e.to_string()))
}

/// Deserializes a value that must fill `bytes` exactly.
pub fn decode_value<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CodecError> {
    if bytes.len() > MAX_FRAME {
        return Err(CodecError::TooLarge(bytes.len()));
    }
    let (value, used) = bincode::serde::decode_from_slice(bytes, config())
        .map_err(|e| CodecError::Body(e.to_string()))?;
    if used != bytes.len() {
        return Err(CodecError::Trailing(bytes.len() - used));
    }
    Ok(value)
}

/// Builds a complete frame: header and body.
pub fn encode_frame<T: Serialize>(value: &T) -> Result<Vec<u8>, CodecError> {
    let body = encode_value(value)?;
    if body.len() > MAX_FRAME {
        return Err(CodecError::TooLarge(body.len()));
    }
    let mut frame = Vec::with_capacity(HEADER_LEN + body.len());
    frame.push(WIRE_VERSION);
    frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
    frame.extend_from_slice(&body);
    Ok(frame)
}

/// Reads a header and returns the body length it announces, refusing a wrong version
/// or an oversized length before the body is read.
pub fn parse_header(header: &[u8; HEADER_LEN]) -> Result<usize, CodecError> {
    if header[0] != WIRE_VERSION {
        return Err(CodecError::Version(header[0]));
    }
    let len = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
    if len > MAX_FRAME {
        return Err(CodecError::TooLarge(len));
    }
    Ok(len)
}

/// Decodes one whole frame held in memory (header and body, nothing after).
pub fn decode_frame<T: DeserializeOwned>(frame: &[u8]) -> Result<T, CodecError> {
    if frame.len() < HEADER_LEN {
        return Err(CodecError::Truncated {
            expected: HEADER_LEN,
            got: frame.len(),
        });
    }
    let mut header = [0u8; HEADER_LEN];
    header.copy_from_slice(&frame[..HEADER_LEN]);
    let len = parse_header(&header)?;
    let body = &frame[HEADER_LEN..];
    if body.len() < len {
        return Err(CodecError::Truncated {
            expected: len,
            got: body.len(),
        });
    }
    if body.len() > len {
        return Err(CodecError::Trailing(body.len() - len));
    }
    decode_value(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Body, Epoch, Message};

    #[test]
    fn message_round_trips_through_a_frame() {
        let msg = Message {
            promise_ms: 0,
            term: 7,
            config: Default::default(),
            est: None,
            body: Body::Coordinator {
                epoch: Epoch { term: 7, leader: 3 },
            },
        };
        let frame = encode_frame(&msg).unwrap();
        assert_eq!(frame[0], WIRE_VERSION);
        assert_eq!(decode_frame::<Message>(&frame).unwrap(), msg);
    }

    #[test]
    fn an_estimate_is_on_the_wire_and_in_json_only_when_present() {
        // src/protocol/message_serde.rs: histories of runs without estimates keep their
        // JSON (the simulator's fingerprints), frames always carry the field.
        let plain = Message::seeded(3, Body::Probe);
        let json = serde_json::to_string(&plain).unwrap();
        assert!(!json.contains("est"), "{json}");
        assert_eq!(serde_json::from_str::<Message>(&json).unwrap(), plain);
        let ranked = Message {
            est: Some(7),
            ..plain.clone()
        };
        let json = serde_json::to_string(&ranked).unwrap();
        assert!(json.contains(r#""est":7"#), "{json}");
        assert_eq!(serde_json::from_str::<Message>(&json).unwrap(), ranked);
        for msg in [plain, ranked] {
            let frame = encode_frame(&msg).unwrap();
            assert_eq!(decode_frame::<Message>(&frame).unwrap(), msg);
        }
    }

    #[test]
    fn wrong_version_is_refused() {
        let mut frame = encode_frame(&Message {
            promise_ms: 0,
            term: 1,
            config: Default::default(),
            est: None,
            body: Body::Answer,
        })
        .unwrap();
        frame[0] = 99;
        assert_eq!(
            decode_frame::<Message>(&frame),
            Err(CodecError::Version(99))
        );
    }

    #[test]
    fn oversized_length_is_refused_before_reading_the_body() {
        let mut header = [WIRE_VERSION, 0, 0, 0, 0];
        header[1..].copy_from_slice(&((MAX_FRAME as u32) + 1).to_be_bytes());
        assert_eq!(
            parse_header(&header),
            Err(CodecError::TooLarge(MAX_FRAME + 1))
        );
    }

    #[test]
    fn truncated_and_trailing_frames_are_refused() {
        let frame = encode_frame(&Message {
            promise_ms: 0,
            term: 1,
            config: Default::default(),
            est: None,
            body: Body::Probe,
        })
        .unwrap();
        assert!(matches!(
            decode_frame::<Message>(&frame[..frame.len() - 1]),
            Err(CodecError::Truncated { .. })
        ));
        let mut longer = frame.clone();
        longer.push(0);
        assert!(matches!(
            decode_frame::<Message>(&longer),
            Err(CodecError::Trailing(1))
        ));
    }

    proptest::proptest! {
        #[test]
        fn random_bytes_never_panic_the_decoder(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..256)) {
            let _ = decode_frame::<Message>(&bytes);
            let _ = decode_value::<Message>(&bytes);
        }

        #[test]
        fn random_bodies_behind_a_valid_header_never_panic(body in proptest::collection::vec(proptest::num::u8::ANY, 0..64)) {
            let mut frame = vec![WIRE_VERSION];
            frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
            frame.extend_from_slice(&body);
            let _ = decode_frame::<Message>(&frame);
        }
    }
}
