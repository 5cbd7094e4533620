//! The hello both ends of a peer connection send first, each on its own unidirectional
//! stream: the dialer on the stream that then carries its messages, the accepting node
//! on a stream of its own that ends after the hello.
//!
//! A hello carries a random nonce chosen once per process. The dialer learns which
//! process it reached; the accepting side learns which process dialed it. When a peer
//! dials us with a nonce other than the one our own outbound connection reached, that
//! connection points at a dead process (the peer restarted) and is redialed at once
//! instead of after the idle timeout. The dialer also waits for the accepting side's
//! hello before it reports the peer up, which proves the peer accepted our certificate.

use super::frame::{read_frame, write_frame, FrameError};
use crate::codec::{CodecError, HEADER_LEN};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The first frame on a peer stream. Public because it is part of the wire protocol
/// (tests speak it with raw quinn).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// Random, fixed for the life of the sending process.
    pub nonce: u64,
}

/// Both hellos must arrive within this long of the handshake, or the connection is
/// dropped: a peer that connects must speak.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(2);

/// Opens a unidirectional stream and writes our hello on it. Not cancellation-safe.
pub(super) async fn send(
    conn: &quinn::Connection,
    nonce: u64,
) -> Result<quinn::SendStream, FrameError> {
    let mut stream = conn.open_uni().await.map_err(io_error)?;
    write_frame(&mut stream, &Hello { nonce }).await?;
    Ok(stream)
}

/// Accepts the peer's unidirectional stream and reads its hello. A stream that ends
/// before the hello is a truncated frame. Not cancellation-safe.
pub(super) async fn recv(
    conn: &quinn::Connection,
) -> Result<(quinn::RecvStream, Hello), FrameError> {
    let mut stream = conn.accept_uni().await.map_err(io_error)?;
    match read_frame::<Hello>(&mut stream).await? {
        Some(hello) => Ok((stream, hello)),
        None => Err(CodecError::Truncated {
            expected: HEADER_LEN,
            got: 0,
        }
        .into()),
    }
}

fn io_error(e: quinn::ConnectionError) -> FrameError {
    FrameError::Io(e.into())
}
