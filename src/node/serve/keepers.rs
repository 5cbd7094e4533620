//! The node's end of the keeper channel (`src/api/keeper.rs`): a unix socket in the
//! data dir. Every keeper that connects gets the current [`Grant`] at once and again on
//! every change (each lease renewal moves its deadlines); what it reports it holds is
//! kept in one table, which the runtime reads before a voluntary Resign
//! ([`Keepers::released`]): the successor may start its job moments after the Resign,
//! so the local one must have stopped.
//!
//! A keeper that goes away is dropped from the table: it fences by itself when its
//! connection ends, so there is nothing to wait for.

use crate::api::keeper::{decode_line, encode_line, Grant, Report, MAX_LINE};
use crate::node::shared::tasks::NodeTasks;
use crate::protocol::Epoch;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{oneshot, watch};

/// A keeper that has not read a grant for this long is dropped (it fences by itself
/// once it notices its connection is gone).
const WRITE_TIMEOUT: Duration = Duration::from_secs(1);

/// How long past the longest grace a release is waited for: SIGKILL and reaping.
const REAP_MARGIN: Duration = Duration::from_secs(1);

/// The connected keepers, by connection number, as last reported.
type Table = BTreeMap<u64, Report>;

/// The runtime's view of its keepers.
pub struct Keepers {
    table: watch::Receiver<Table>,
    path: PathBuf,
}

impl Keepers {
    /// Binds the socket at `path`, replacing a stale one a killed node left behind
    /// (the caller holds the data dir's lock, so no live node owns it). Done before
    /// anything runs, so a bad path fails the start.
    pub fn bind(path: &Path) -> std::io::Result<UnixListener> {
        match std::fs::remove_file(path) {
            Ok(()) => tracing::debug!(path = %path.display(), "removed a stale keeper socket"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        UnixListener::bind(path)
    }

    /// Serves every keeper that connects to `listener` (bound at `path`), as one of
    /// `tasks`, with the grants `grants` publishes.
    pub fn serve(
        listener: UnixListener,
        path: &Path,
        grants: watch::Receiver<Grant>,
        tasks: &NodeTasks,
    ) -> Keepers {
        let (table_tx, table) = watch::channel(Table::new());
        let accepting = tasks.clone();
        tasks.spawn(async move {
            let table = Arc::new(table_tx);
            let mut next_id = 0u64;
            while let Some(accepted) = accepting.until_stopped(listener.accept()).await {
                match accepted {
                    Ok((stream, _)) => {
                        next_id += 1;
                        serve_keeper(stream, next_id, grants.clone(), &table, &accepting);
                    }
                    Err(e) => {
                        tracing::warn!("keeper socket: accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        });
        Keepers {
            table,
            path: path.to_path_buf(),
        }
    }

    /// Where keepers connect.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many keepers are connected.
    pub fn connected(&self) -> usize {
        self.table.borrow().len()
    }

    /// Waits until no connected keeper holds `epoch` any more, at most the longest
    /// grace among those holding it plus [`REAP_MARGIN`]. Returns how many still held
    /// it when the wait ended (0: all released).
    pub async fn released(&self, epoch: Epoch) -> usize {
        let mut table = self.table.clone();
        let holders = |t: &Table| t.values().filter(|r| r.holding == Some(epoch)).count();
        let bound = {
            let now = table.borrow();
            let grace = now
                .values()
                .filter(|r| r.holding == Some(epoch))
                .map(|r| r.grace_ms)
                .max();
            match grace {
                None => return 0,
                Some(ms) => Duration::from_millis(ms) + REAP_MARGIN,
            }
        };
        let released = {
            let wait = table.wait_for(|t| holders(t) == 0);
            tokio::time::timeout(bound, wait).await.is_ok()
        };
        match released {
            true => 0,
            false => holders(&self.table.borrow()),
        }
    }
}

/// Serves one keeper: grants out, reports in, each in a task of its own (so neither
/// waits on the other), until either side ends.
fn serve_keeper(
    stream: UnixStream,
    id: u64,
    grants: watch::Receiver<Grant>,
    table: &Arc<watch::Sender<Table>>,
    tasks: &NodeTasks,
) {
    let (read, write) = stream.into_split();
    let (reader_done, writer_stop) = oneshot::channel::<()>();
    tasks.spawn(send_grants(write, grants, writer_stop));
    let table = Arc::clone(table);
    tasks.spawn(async move {
        let why = read_reports(read, id, &table).await;
        let gone = remove_entry(&table, id);
        match gone {
            Some(r) => tracing::info!(
                pid = r.pid,
                what = %r.what,
                holding = ?r.holding,
                "keeper disconnected: {why}"
            ),
            None => tracing::debug!("keeper connection ended before it reported: {why}"),
        }
        drop(reader_done);
    });
}

/// Removes one keeper's entry from the table; the entry, if it had reported.
fn remove_entry(table: &watch::Sender<Table>, id: u64) -> Option<Report> {
    let mut removed = None;
    table.send_if_modified(|t| {
        removed = t.remove(&id);
        removed.is_some()
    });
    removed
}

/// Writes the current grant, then every change, until the keeper stops reading, the
/// reader ends (`stop`) or the node stops.
async fn send_grants(
    mut write: OwnedWriteHalf,
    mut grants: watch::Receiver<Grant>,
    mut stop: oneshot::Receiver<()>,
) {
    loop {
        let line = encode_line(&*grants.borrow_and_update());
        match tokio::time::timeout(WRITE_TIMEOUT, write.write_all(line.as_bytes())).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::debug!("keeper connection: write failed: {e}");
                return;
            }
            Err(_) => {
                tracing::warn!("a keeper read no grant for {WRITE_TIMEOUT:?}; dropping it");
                return;
            }
        }
        tokio::select! {
            changed = grants.changed() => if changed.is_err() { return },
            _ = &mut stop => return,
        }
    }
}

/// Reads the keeper's reports into the table until it goes away or sends something
/// that is not a report; says why it ended.
async fn read_reports(read: OwnedReadHalf, id: u64, table: &watch::Sender<Table>) -> String {
    let mut reader = BufReader::new(read);
    let mut line = String::new();
    loop {
        line.clear();
        let limit = (MAX_LINE + 1) as u64;
        match (&mut reader).take(limit).read_line(&mut line).await {
            Ok(0) => return "closed".into(),
            Ok(_) if !line.ends_with('\n') => {
                return format!("a line over {MAX_LINE} bytes or cut off");
            }
            Ok(_) => {}
            Err(e) => return format!("read failed: {e}"),
        }
        let report: Report = match decode_line(line.trim_end()) {
            Ok(report) => report,
            Err(e) => return e,
        };
        let first = !table.borrow().contains_key(&id);
        if first {
            tracing::info!(pid = report.pid, what = %report.what, grace_ms = report.grace_ms, "keeper connected");
        }
        table.send_if_modified(|t| t.insert(id, report.clone()).as_ref() != Some(&report));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Epoch;

    const EPOCH: Epoch = Epoch { term: 2, leader: 1 };

    async fn next_grant(lines: &mut tokio::io::Lines<BufReader<OwnedReadHalf>>) -> Grant {
        let line = tokio::time::timeout(Duration::from_secs(5), lines.next_line())
            .await
            .expect("a grant in time")
            .unwrap()
            .expect("the node still talks");
        decode_line(&line).unwrap()
    }

    #[tokio::test]
    async fn a_keeper_hears_every_grant_and_its_release_ends_the_wait() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keeper.sock");
        std::fs::write(&path, b"stale").unwrap();
        let tasks = NodeTasks::new();
        let (grants, grants_rx) = watch::channel(Grant::none(1));
        let listener = Keepers::bind(&path).expect("a stale socket file is replaced");
        let keepers = Keepers::serve(listener, &path, grants_rx, &tasks);
        assert_eq!(keepers.released(EPOCH).await, 0, "nobody holds it");

        let (read, mut write) = UnixStream::connect(&path).await.unwrap().into_split();
        let mut lines = BufReader::new(read).lines();
        assert_eq!(next_grant(&mut lines).await, Grant::none(1));
        let leading = Grant {
            epoch: Some(EPOCH),
            ..Grant::none(1)
        };
        grants.send_replace(leading);
        assert_eq!(next_grant(&mut lines).await, leading);

        let holding = Report {
            pid: 7,
            what: "job".into(),
            grace_ms: 50,
            holding: Some(EPOCH),
        };
        write
            .write_all(encode_line(&holding).as_bytes())
            .await
            .unwrap();
        let mut table = keepers.table.clone();
        tokio::time::timeout(Duration::from_secs(5), table.wait_for(|t| t.len() == 1))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(keepers.connected(), 1);

        // Not released: the wait ends after the grace plus the reap margin, saying so.
        let started = std::time::Instant::now();
        assert_eq!(keepers.released(EPOCH).await, 1);
        assert!(started.elapsed() >= Duration::from_millis(50) + REAP_MARGIN);

        // Released while the node waits.
        let waiting = keepers.released(EPOCH);
        let released = Report {
            holding: None,
            ..holding
        };
        let release = async {
            write
                .write_all(encode_line(&released).as_bytes())
                .await
                .unwrap();
        };
        let (left, ()) = tokio::join!(waiting, release);
        assert_eq!(left, 0);
        tasks.stop();
    }

    #[tokio::test]
    async fn garbage_from_a_keeper_drops_it_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keeper.sock");
        let tasks = NodeTasks::new();
        let (_grants, grants_rx) = watch::channel(Grant::none(1));
        let keepers = Keepers::serve(Keepers::bind(&path).unwrap(), &path, grants_rx, &tasks);
        let mut stream = UnixStream::connect(&path).await.unwrap();
        stream.write_all(b"not json\n").await.unwrap();
        let mut rest = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut rest));
        read.await.expect("the node closes the connection").unwrap();
        assert_eq!(keepers.connected(), 0);
        // The socket still serves the next keeper.
        let again = UnixStream::connect(&path).await.unwrap();
        let mut lines = BufReader::new(again.into_split().0).lines();
        assert_eq!(next_grant(&mut lines).await, Grant::none(1));
        tasks.stop();
    }
}
