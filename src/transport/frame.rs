//! One frame on a QUIC stream: the header is read first and its length checked against
//! [`MAX_FRAME`](crate::codec::MAX_FRAME) before any of the body is read, then the body
//! is decoded by [`crate::codec`] with the same limit.
//!
//! Both functions take any tokio reader/writer (quinn's streams implement them), so the
//! property tests can feed them in-memory bytes.

use crate::codec::{self, CodecError, HEADER_LEN};
use serde::{de::DeserializeOwned, Serialize};
use std::io;
use thiserror::Error;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Why a frame could not be read or written.
#[derive(Debug, Error)]
pub enum FrameError {
    /// The bytes are wrong (version, size, truncation, body): the sender misbehaved.
    #[error(transparent)]
    Codec(#[from] CodecError),
    /// The stream or connection failed underneath (reset, closed, timed out).
    #[error("stream error: {0}")]
    Io(#[from] io::Error),
}

/// Writes one frame. Not cancellation-safe (a partly written frame would corrupt the
/// stream): do not race it in `select!`; run it from a branch body instead.
pub async fn write_frame<T: Serialize>(
    send: &mut (impl AsyncWrite + Unpin),
    value: &T,
) -> Result<(), FrameError> {
    let frame = codec::encode_frame(value)?;
    send.write_all(&frame).await?;
    Ok(())
}

/// Reads one frame. `Ok(None)` means the stream ended cleanly between frames; an end
/// inside a frame is [`CodecError::Truncated`]. Not cancellation-safe: bytes already
/// read are lost if the future is dropped.
pub async fn read_frame<T: DeserializeOwned>(
    recv: &mut (impl AsyncRead + Unpin),
) -> Result<Option<T>, FrameError> {
    let mut header = [0u8; HEADER_LEN];
    match read_full(recv, &mut header).await? {
        0 => return Ok(None),
        n if n < HEADER_LEN => {
            return Err(CodecError::Truncated {
                expected: HEADER_LEN,
                got: n,
            }
            .into())
        }
        _ => {}
    }
    let len = codec::parse_header(&header)?;
    let mut body = vec![0u8; len];
    let got = read_full(recv, &mut body).await?;
    if got < len {
        return Err(CodecError::Truncated { expected: len, got }.into());
    }
    Ok(Some(codec::decode_value(&body)?))
}

/// Fills `buf` unless the stream ends first; returns how many bytes were read.
async fn read_full(recv: &mut (impl AsyncRead + Unpin), buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match recv.read(&mut buf[filled..]).await? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{MAX_FRAME, WIRE_VERSION};
    use crate::protocol::{Body, Message};

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    /// Any message will do: frames do not look inside.
    fn msg(term: u64) -> Message {
        Message {
            promise_ms: 0,
            term,
            config: Default::default(),
            est: None,
            body: Body::Vote { term },
        }
    }

    #[test]
    fn frames_round_trip_in_order_and_end_cleanly() {
        block_on(async {
            let mut buf = Vec::new();
            for t in 1..=3 {
                write_frame(&mut buf, &msg(t)).await.unwrap();
            }
            let mut r = buf.as_slice();
            for t in 1..=3 {
                assert_eq!(read_frame::<Message>(&mut r).await.unwrap(), Some(msg(t)));
            }
            assert_eq!(read_frame::<Message>(&mut r).await.unwrap(), None);
        });
    }

    #[test]
    fn a_frame_cut_anywhere_is_truncated() {
        block_on(async {
            let mut buf = Vec::new();
            write_frame(&mut buf, &msg(9)).await.unwrap();
            for cut in 1..buf.len() {
                let mut r = &buf[..cut];
                let err = read_frame::<Message>(&mut r).await.unwrap_err();
                assert!(
                    matches!(err, FrameError::Codec(CodecError::Truncated { .. })),
                    "cut at {cut}: {err}"
                );
            }
        });
    }

    #[test]
    fn oversized_length_is_refused_without_reading_the_body() {
        block_on(async {
            let mut frame = vec![WIRE_VERSION];
            frame.extend_from_slice(&(MAX_FRAME as u32 + 1).to_be_bytes());
            // No body at all: the refusal must come from the header alone.
            let err = read_frame::<Message>(&mut frame.as_slice())
                .await
                .unwrap_err();
            assert!(
                matches!(err, FrameError::Codec(CodecError::TooLarge(_))),
                "{err}"
            );
        });
    }

    proptest::proptest! {
        #[test]
        fn random_bytes_never_panic_read_frame(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
            block_on(async {
                let mut r = bytes.as_slice();
                // Read until the stream ends or a frame is refused; never panic.
                for _ in 0..bytes.len() + 1 {
                    match read_frame::<Message>(&mut r).await {
                        Ok(Some(_)) => continue,
                        Ok(None) | Err(_) => break,
                    }
                }
            });
        }

        #[test]
        fn random_bodies_behind_valid_headers_never_panic(body in proptest::collection::vec(proptest::num::u8::ANY, 0..128), claimed in 0u32..200) {
            block_on(async {
                let mut frame = vec![WIRE_VERSION];
                frame.extend_from_slice(&claimed.to_be_bytes());
                frame.extend_from_slice(&body);
                let _ = read_frame::<Message>(&mut frame.as_slice()).await;
            });
        }
    }
}
