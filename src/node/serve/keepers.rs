//! The node's end of the keeper channel (`src/api/keeper.rs`): a unix socket in the
//! data dir. Every keeper that connects gets the current [`Grant`] at once and again on
//! every change (each lease renewal moves its deadlines); what it reports is kept in
//! one table, which the runtime reads before a voluntary Resign
//! ([`Keepers::released`]): the successor may start its job moments after the Resign,
//! so every local keeper must have heard that the office ended and stopped its job.
//! A keeper counts from the moment it connects, before its first report: it may have
//! started a job on the grant it was sent at once.
//!
//! A keeper that goes away is dropped from the table: it fences by itself when its
//! connection ends, so there is nothing to wait for.
//!
//! When the node stops, both tasks of every connection end with its other tasks: the
//! writer first sends the last grant if the keeper has not had it yet (the runtime
//! withdrew the office before it stopped its tasks), then the connection closes, and
//! the keeper, having heard the office end or seen its node go, fences by itself. A
//! connection's tasks that waited on the keeper instead would hold the node's stop
//! for its whole grace (issue 38).

use crate::api::keeper::{decode_line, encode_line, Connected, Grant, Report, MAX_LINE};
use crate::api::Status;
use crate::boot_clock::BootInstant;
use crate::node::shared::tasks::NodeTasks;
use crate::protocol::Epoch;
use std::collections::BTreeMap;
use std::path::Path;
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

/// The grace assumed for a keeper that has not reported yet.
const UNREPORTED_GRACE: Duration = Duration::from_secs(1);

/// The connected keepers, by connection number, with their last report (`None`
/// before the first).
type Table = BTreeMap<u64, Option<Report>>;

/// The runtime's view of its keepers (cloned into the task that waits for a release).
#[derive(Clone)]
pub struct Keepers {
    table: watch::Receiver<Table>,
    /// The grants as published, to know which one withdrew an epoch.
    grants: watch::Receiver<Grant>,
}

impl Keepers {
    /// Binds the socket at `path` (mode 0660: the node's user and group may connect),
    /// replacing a stale one a killed node left behind (the caller holds the data
    /// dir's lock, so no live node owns it). Done before anything runs, so a bad path
    /// fails the start.
    pub fn bind(path: &Path) -> std::io::Result<UnixListener> {
        match std::fs::remove_file(path) {
            Ok(()) => tracing::debug!(path = %path.display(), "removed a stale keeper socket"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let listener = UnixListener::bind(path)?;
        // Keepers run as the node's user or in its group (config/bully-run.service).
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))?;
        Ok(listener)
    }

    /// Serves every keeper that connects to `listener`, as one of `tasks`, with the
    /// grants `grants` publishes; shows the keepers in `status`.
    pub fn serve(
        listener: UnixListener,
        grants: watch::Receiver<Grant>,
        status: watch::Sender<Status>,
        tasks: &NodeTasks,
    ) -> Keepers {
        let (table_tx, table) = watch::channel(Table::new());
        tasks.spawn(show_in_status(table.clone(), status, tasks.clone()));
        let accepting = tasks.clone();
        let granted = grants.clone();
        tasks.spawn(async move {
            let table = Arc::new(table_tx);
            let mut next_id = 0u64;
            while let Some(accepted) = accepting.until_stopped(listener.accept()).await {
                match accepted {
                    Ok((stream, _)) => {
                        next_id += 1;
                        table.send_modify(|t| {
                            t.insert(next_id, None);
                        });
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
            grants: granted,
        }
    }

    /// How many keepers are connected.
    pub fn connected(&self) -> usize {
        self.table.borrow().len()
    }

    /// Waits until every connected keeper has acted on the grant now published (which
    /// no longer grants `epoch`) and holds nothing for `epoch`, at most until the
    /// office's last fencing deadline `fence_by` (by then every keeper has SIGKILLed
    /// its job) plus [`REAP_MARGIN`]; without one, the longest grace among those not
    /// there yet plus that margin. Returns how many were not there when the wait ended
    /// (0: all released).
    pub async fn released(&self, epoch: Epoch, fence_by: Option<BootInstant>) -> usize {
        let withdrawn = self.grants.borrow().seq;
        let pending = |report: &Option<Report>| match report {
            None => true,
            Some(r) => r.seen < withdrawn || r.holding == Some(epoch),
        };
        let count = |t: &Table| t.values().filter(|r| pending(r)).count();
        let bound = {
            let table = self.table.borrow();
            let grace = table
                .values()
                .filter(|r| pending(r))
                .map(|r| match r {
                    Some(r) => Duration::from_millis(r.grace_ms),
                    None => UNREPORTED_GRACE,
                })
                .max();
            let until_fenced = fence_by.map(|at| at.saturating_duration_since(BootInstant::now()));
            match (grace, until_fenced) {
                (None, _) => return 0,
                (Some(_), Some(left)) => left + REAP_MARGIN,
                (Some(grace), None) => grace + REAP_MARGIN,
            }
        };
        let mut table = self.table.clone();
        let released = {
            let wait = table.wait_for(|t| count(t) == 0);
            tokio::time::timeout(bound, wait).await.is_ok()
        };
        match released {
            true => 0,
            false => count(&self.table.borrow()),
        }
    }
}

/// Copies the table into the status on every change, until the node stops.
async fn show_in_status(
    mut table: watch::Receiver<Table>,
    status: watch::Sender<Status>,
    tasks: NodeTasks,
) {
    loop {
        let keepers: Vec<Connected> = table
            .borrow_and_update()
            .values()
            .map(|report| Connected {
                pid: report.as_ref().map(|r| r.pid),
                what: report.as_ref().map(|r| r.what.clone()),
                holding: report.as_ref().and_then(|r| r.holding),
            })
            .collect();
        status.send_if_modified(|s| std::mem::replace(&mut s.keepers, keepers.clone()) != keepers);
        match tasks.until_stopped(table.changed()).await {
            Some(Ok(())) => {}
            _ => return,
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
    tasks.spawn(send_grants(write, grants, writer_stop, tasks.clone()));
    let table = Arc::clone(table);
    let node = tasks.clone();
    tasks.spawn(async move {
        let why = match node.until_stopped(read_reports(read, id, &table)).await {
            Some(why) => why,
            None => "the node is stopping".into(),
        };
        let gone = remove_entry(&table, id);
        match gone.flatten() {
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

/// Removes one keeper's entry from the table; the entry, if there was one.
fn remove_entry(table: &watch::Sender<Table>, id: u64) -> Option<Option<Report>> {
    let mut removed = None;
    table.send_if_modified(|t| {
        removed = t.remove(&id);
        removed.is_some()
    });
    removed
}

/// Writes the current grant, then every change, until the keeper stops reading, the
/// reader ends (`stop`) or the node stops (`node`). A stopping node first writes the
/// grant the keeper has not had yet, if any (bounded like every write), so the keeper
/// hears its office end before it sees the connection close.
async fn send_grants(
    mut write: OwnedWriteHalf,
    mut grants: watch::Receiver<Grant>,
    mut stop: oneshot::Receiver<()>,
    node: NodeTasks,
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
        if node.is_stopped() {
            // The newest grant is written: nothing more to say.
            return;
        }
        let stopping = tokio::select! {
            changed = grants.changed() => {
                if changed.is_err() {
                    return;
                }
                false
            }
            // The reader ends when the node stops too: that is the node's stop.
            _ = &mut stop => {
                if !node.is_stopped() {
                    return;
                }
                true
            }
            _ = node.stopped() => true,
        };
        // Stopping: one more write only if there is a grant the keeper has not had.
        if stopping && !grants.has_changed().unwrap_or(false) {
            return;
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
        let first = matches!(table.borrow().get(&id), Some(None));
        if first {
            tracing::info!(pid = report.pid, what = %report.what, grace_ms = report.grace_ms, "keeper connected");
        }
        let now = Some(report);
        table.send_if_modified(|t| t.insert(id, now.clone()) != Some(now.clone()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Epoch;

    const EPOCH: Epoch = Epoch { term: 2, leader: 1 };

    /// Node 1's keeper server on a socket in a temp dir (a stale file there first,
    /// if `stale`), its grants starting at none; its status is read by nobody.
    struct Served {
        _dir: tempfile::TempDir,
        path: std::path::PathBuf,
        tasks: NodeTasks,
        grants: watch::Sender<Grant>,
        keepers: Keepers,
    }

    fn served(stale: bool) -> Served {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keeper.sock");
        if stale {
            std::fs::write(&path, b"stale").unwrap();
        }
        let tasks = NodeTasks::new();
        let (grants, grants_rx) = watch::channel(Grant::none(1));
        let listener = Keepers::bind(&path).expect("bound, a stale file replaced");
        let candidate = crate::protocol::Role::Candidate;
        let status = Status::for_test(1, candidate, None, crate::protocol::Mode::Quorum, &[]);
        let keepers = Keepers::serve(listener, grants_rx, watch::channel(status).0, &tasks);
        Served {
            _dir: dir,
            path,
            tasks,
            grants,
            keepers,
        }
    }

    /// A keeper connected at `path` that has been handed the office of [`EPOCH`]
    /// (grant 1, after the empty one): its grant lines and its writing half.
    async fn keeper_holding_the_office(
        path: &std::path::Path,
        grants: &watch::Sender<Grant>,
    ) -> (tokio::io::Lines<BufReader<OwnedReadHalf>>, OwnedWriteHalf) {
        let (read, write) = UnixStream::connect(path).await.unwrap().into_split();
        let mut lines = BufReader::new(read).lines();
        assert_eq!(next_grant(&mut lines).await, Grant::none(1));
        let leading = Grant {
            seq: 1,
            epoch: Some(EPOCH),
            ..Grant::none(1)
        };
        grants.send_replace(leading);
        assert_eq!(next_grant(&mut lines).await, leading);
        (lines, write)
    }

    async fn next_grant(lines: &mut tokio::io::Lines<BufReader<OwnedReadHalf>>) -> Grant {
        let line = tokio::time::timeout(Duration::from_secs(5), lines.next_line())
            .await
            .expect("a grant in time")
            .unwrap()
            .expect("the node still talks");
        decode_line(&line).unwrap()
    }

    fn report(holding: Option<Epoch>, seen: u64) -> Report {
        Report {
            pid: 7,
            what: "job".into(),
            grace_ms: 50,
            holding,
            seen,
        }
    }

    #[tokio::test]
    async fn the_wait_ends_once_every_keeper_heard_the_withdrawal_and_holds_nothing() {
        let Served {
            path,
            tasks,
            grants,
            keepers,
            _dir,
            ..
        } = served(true);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o660, "{mode:o}");
        assert_eq!(
            keepers.released(EPOCH, None).await,
            0,
            "no keeper, nothing to wait for"
        );

        let (_lines, mut write) = keeper_holding_the_office(&path, &grants).await;
        assert_eq!(keepers.connected(), 1, "counted before its first report");

        // The office ends (grant 2). A keeper that never reported may hold it: the
        // wait ends only after the unreported grace plus the reap margin, saying so.
        grants.send_replace(Grant {
            seq: 2,
            ..Grant::none(1)
        });
        let started = std::time::Instant::now();
        assert_eq!(keepers.released(EPOCH, None).await, 1);
        assert!(started.elapsed() >= UNREPORTED_GRACE + REAP_MARGIN);

        // Holding nothing, but not having seen grant 2 yet, is not enough; having
        // seen it and holding nothing is.
        let send = |r: Report| encode_line(&r);
        write
            .write_all(send(report(None, 1)).as_bytes())
            .await
            .unwrap();
        let waiting = keepers.released(EPOCH, None);
        tokio::pin!(waiting);
        let early = tokio::time::timeout(Duration::from_millis(300), &mut waiting).await;
        assert!(early.is_err(), "released before the withdrawal was heard");
        write
            .write_all(send(report(Some(EPOCH), 2)).as_bytes())
            .await
            .unwrap();
        let still = tokio::time::timeout(Duration::from_millis(300), &mut waiting).await;
        assert!(still.is_err(), "released while the job runs");
        write
            .write_all(send(report(None, 2)).as_bytes())
            .await
            .unwrap();
        assert_eq!(waiting.await, 0);
        tasks.stop();
    }

    #[tokio::test]
    async fn the_office_fencing_deadline_bounds_the_wait() {
        let Served {
            path,
            tasks,
            grants,
            keepers,
            _dir,
            ..
        } = served(false);
        let _silent = UnixStream::connect(&path).await.unwrap();
        let mut table = keepers.table.clone();
        let counted = table.wait_for(|t| t.len() == 1);
        tokio::time::timeout(Duration::from_secs(5), counted)
            .await
            .unwrap()
            .unwrap();
        grants.send_replace(Grant {
            seq: 1,
            ..Grant::none(1)
        });
        // The deadline has passed: only the reap margin is left, not the 1 s an
        // unreported keeper would get on top.
        let started = std::time::Instant::now();
        let fence_by = BootInstant::now();
        assert_eq!(keepers.released(EPOCH, Some(fence_by)).await, 1);
        let took = started.elapsed();
        assert!(
            took >= REAP_MARGIN && took < UNREPORTED_GRACE + REAP_MARGIN,
            "{took:?}"
        );
        tasks.stop();
    }

    /// Issue 38: a connected keeper's two tasks end with the node's, at once, after
    /// the withdrawal the runtime published last has gone out; then the connection
    /// closes, so the keeper fences by itself.
    #[tokio::test]
    async fn a_stopping_node_sends_the_last_grant_and_closes_the_connection() {
        let Served {
            path,
            tasks,
            grants,
            keepers,
            _dir,
            ..
        } = served(false);
        let (mut lines, _write) = keeper_holding_the_office(&path, &grants).await;
        assert_eq!(keepers.connected(), 1);

        // The runtime withdraws the office, then stops its tasks at once.
        let withdrawn = Grant {
            seq: 2,
            ..Grant::none(1)
        };
        grants.send_replace(withdrawn);
        tasks.stop();
        assert_eq!(
            tasks.wait(Duration::from_secs(2)).await,
            0,
            "the connection's tasks ended with the node"
        );
        assert_eq!(next_grant(&mut lines).await, withdrawn);
        let end = tokio::time::timeout(Duration::from_secs(5), lines.next_line()).await;
        assert_eq!(end.expect("closed in time").unwrap(), None, "closed");
    }

    #[tokio::test]
    async fn garbage_from_a_keeper_drops_it_and_nothing_else() {
        let Served {
            path,
            tasks,
            keepers,
            _dir,
            ..
        } = served(false);
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
