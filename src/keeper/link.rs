//! A keeper's connection to its node's socket (`src/api/keeper.rs`): grants in, reports
//! out. Reading a grant is cancellation-safe, so it can sit in the keeper's `select!`.

use crate::api::keeper::{decode_line, encode_line, Grant, Report};
use std::path::Path;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;

/// A report the node does not take within this long means the node is stalled (its
/// socket buffer, hundreds of reports deep, is full); the keeper goes on by its
/// deadlines either way, and waits no longer, since its timers wait with it.
const REPORT_TIMEOUT: Duration = Duration::from_millis(50);

/// One connection to the node.
pub struct Link {
    grants: Lines<BufReader<OwnedReadHalf>>,
    reports: OwnedWriteHalf,
}

/// What reading the link gave.
#[derive(Debug)]
pub enum Heard {
    Grant(Grant),
    /// The node closed the connection (it stopped, or was killed).
    Closed,
    /// The node sent something that is not a grant, or reading failed.
    Broken(String),
}

impl Link {
    /// Connects to the node's socket at `path`.
    pub async fn connect(path: &Path) -> std::io::Result<Link> {
        let (read, reports) = UnixStream::connect(path).await?.into_split();
        Ok(Link {
            grants: BufReader::new(read).lines(),
            reports,
        })
    }

    /// The next grant (cancellation-safe).
    pub async fn next(&mut self) -> Heard {
        match self.grants.next_line().await {
            Ok(Some(line)) => match decode_line(&line) {
                Ok(grant) => Heard::Grant(grant),
                Err(e) => Heard::Broken(e),
            },
            Ok(None) => Heard::Closed,
            Err(e) => Heard::Broken(format!("read failed: {e}")),
        }
    }

    /// Tells the node what this keeper holds; an error when the node did not take it.
    pub async fn report(&mut self, report: &Report) -> Result<(), String> {
        let line = encode_line(report);
        match tokio::time::timeout(REPORT_TIMEOUT, self.reports.write_all(line.as_bytes())).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(format!("write failed: {e}")),
            Err(_) => Err(format!("the node took no report for {REPORT_TIMEOUT:?}")),
        }
    }
}
