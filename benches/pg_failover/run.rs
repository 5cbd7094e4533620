//! One system under the bench's load, and one measured fault on it. The load is the
//! PostgreSQL test's (`tests/common/postgres_load.rs`): two `PgWriter`s through HAProxy,
//! each an autocommit INSERT per 10 ms with `synchronous_commit = on`, every answered
//! one recorded as a commit, and a `RolePoller` asking each server every 25 ms whether
//! it takes writes.

use crate::postgres_load::{self, PgWriter, RolePoller};
use crate::system::{Fault, Kind, System};
use crate::writers::{self, Attempt};
use std::future::Future;
use std::time::{Duration, Instant};

/// How long writes may take to resume after a fault before the run counts as failed
/// (Patroni at its defaults needs its 30 s TTL and more).
const RESUME: Duration = Duration::from_secs(120);
/// Steady writes before each fault, so a gap starts from a commit.
const STEADY: Duration = Duration::from_secs(2);

/// What one run measured.
#[derive(Debug, Clone, Copy)]
pub struct Figures {
    /// The longest time either writer went without a commit, from the fault until both
    /// wrote again after it was over.
    pub gap: Duration,
    /// Commits answered to a writer that the primary afterwards does not hold.
    pub lost: usize,
    /// The longest stretch with two servers taking writes, from the fault until the
    /// system was whole again.
    pub two_writable: Duration,
}

/// A running system with the writers and the poller on it.
pub struct Session {
    writers: Vec<PgWriter>,
    poller: RolePoller,
    system: System,
}

impl Session {
    /// Starts `kind`, waits until it is whole, creates the table and starts the load.
    pub async fn open(kind: Kind) -> Result<Session, String> {
        let system = System::start(kind).await?;
        system.healthy().await?;
        let poller = RolePoller::start(&system.locals());
        let front = system.front();
        within(RESUME, "the table created through HAProxy", || async {
            postgres_load::create_table(front).await.ok()
        })
        .await?;
        let writers = vec![PgWriter::start("w1", front), PgWriter::start("w2", front)];
        let session = Session {
            writers,
            poller,
            system,
        };
        session.resumed(Instant::now()).await?;
        Ok(session)
    }

    /// Every writer's attempts so far, one list per writer.
    fn attempts(&self) -> Vec<Vec<Attempt>> {
        self.writers.iter().map(PgWriter::records).collect()
    }

    /// Waits (bounded by [`RESUME`]) until every writer had a commit that started after
    /// `since`; returns when.
    async fn resumed(&self, since: Instant) -> Result<Instant, String> {
        within(RESUME, "commits from every writer", || async {
            self.attempts()
                .iter()
                .all(|mine| mine.iter().any(|a| a.start > since && a.epoch.is_some()))
                .then(Instant::now)
        })
        .await
    }

    /// Applies `fault` to the primary's host and measures it: for a kill, until writes
    /// resumed (then the host boots again); for a pause or a cut, `hold` long, then
    /// until writes resumed after it ended; for a full restart, until writes resumed.
    /// Every run then waits until the system is whole again, and checks the commits
    /// answered since it began against the primary's rows.
    pub async fn run(&mut self, fault: Fault, hold: Duration) -> Result<Figures, String> {
        let old = self.system.healthy().await?;
        let began = Instant::now();
        tokio::time::sleep(STEADY).await;
        // Commits go on while the fault's command runs (patroni.sh takes a moment): gaps
        // count from before it, writes resume only with a commit begun after it.
        let at = Instant::now();
        self.system.fault(fault, old).await?;
        let done = Instant::now();
        let settled = match fault {
            Fault::Kill | Fault::Restart => {
                let settled = self.resumed(done).await?;
                self.system.heal(fault, old).await?;
                settled
            }
            Fault::Pause | Fault::Cut => {
                tokio::time::sleep(hold.saturating_sub(done.elapsed())).await;
                self.system.heal(fault, old).await?;
                self.resumed(Instant::now()).await?
            }
        };
        eprintln!(
            "=== {fault:?} on node {old}: writes resumed {} ms after the fault",
            (settled - at).as_millis()
        );
        let primary = self.system.healthy().await?;
        let whole = Instant::now();
        let attempts = self.attempts();
        let gap = attempts
            .iter()
            .map(|mine| writers::longest_gap(mine, at, settled).0)
            .max()
            .unwrap_or_default();
        let answered: Vec<Attempt> = attempts
            .into_iter()
            .flatten()
            .filter(|a| a.end >= began)
            .collect();
        let lost = postgres_load::missing(self.system.locals()[&primary], &answered)
            .await
            .map_err(|e| format!("reading node {primary}'s rows: {e}"))?
            .len();
        let two_writable = self.poller.two_writable(at, whole).longest;
        Ok(Figures {
            gap,
            lost,
            two_writable,
        })
    }
}

/// Polls `probe` every 50 ms until it gives a value, or fails after `limit`.
async fn within<T, F, Fut>(limit: Duration, what: &str, mut probe: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(value) = probe().await {
            return Ok(value);
        }
        if started.elapsed() > limit {
            return Err(format!("no {what} within {limit:?}"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
