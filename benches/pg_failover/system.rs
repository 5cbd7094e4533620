//! The systems compared and the faults applied, each the same way to every system:
//! bully's PostgreSQL example (`postgres_bully::BullyPg`, as `tests/postgres_failover.rs`
//! runs it), written to through the example's HAProxy or through Patroni's documented
//! HAProxy section (`BullyPg::patroni_haproxy`), Patroni 4.1 at its defaults or at its tightest supported timing with
//! `synchronous_mode: on`, and at the tightest with `synchronous_mode: quorum`
//! (`patroni::spec`), and pg_auto_failover 2.0 at its defaults (`pgaf::spec`), the last
//! two through their scripts (`scripted::Scripted`).

use crate::postgres_bully::{BullyPg, IDS};
use crate::redis_servers::Haproxy;
use crate::scripted::Scripted;
use crate::{patroni, pgaf};
use bully::protocol::NodeId;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

/// A system under test, by the name the bench takes in `PG_BENCH_SYSTEMS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Bully,
    /// bully as [`Kind::Bully`], its writers going through Patroni's documented HAProxy
    /// section (3 s × 3 checks to mark a server down) instead of the example's (100 ms ×
    /// 1): what a Patroni user who keeps their HAProxy config gets (issue 50).
    BullyPatroniHaproxy,
    PatroniDefault,
    PatroniTight,
    PatroniQuorum,
    PgafDefault,
}

impl Kind {
    /// Every system, in the table's order.
    pub const ALL: [Kind; 6] = [
        Kind::Bully,
        Kind::BullyPatroniHaproxy,
        Kind::PatroniDefault,
        Kind::PatroniTight,
        Kind::PatroniQuorum,
        Kind::PgafDefault,
    ];

    /// Its name in `PG_BENCH_SYSTEMS` and in the table.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Bully => "bully",
            Kind::BullyPatroniHaproxy => "bully-patroni-haproxy",
            Kind::PatroniDefault => "patroni-default",
            Kind::PatroniTight => "patroni-tight",
            Kind::PatroniQuorum => "patroni-quorum",
            Kind::PgafDefault => "pgaf-default",
        }
    }

    /// Why it cannot run here (its own programs; what every system needs is checked
    /// by the bench), if it cannot.
    pub fn cannot_run(self) -> Option<String> {
        match self {
            Kind::Bully | Kind::BullyPatroniHaproxy => None,
            Kind::PatroniDefault | Kind::PatroniTight | Kind::PatroniQuorum => {
                patroni::cannot_run()
            }
            Kind::PgafDefault => pgaf::cannot_run(),
        }
    }
}

/// A fault, by the name the bench takes in `PG_BENCH_FAULTS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// kill -9 of every process on the primary's host (bully: server, node, keeper;
    /// Patroni: `patroni.sh kill N`, Patroni and PostgreSQL; pg_auto_failover:
    /// `pgaf.sh kill N`, pg_autoctl and PostgreSQL); the host restarts once writes
    /// resumed elsewhere.
    Kill,
    /// SIGSTOP of the coordinator process (bully's node, Patroni, pg_autoctl) and the
    /// PostgreSQL server on the primary's host for `HOLD`.
    Pause,
    /// The primary's host cut off for `HOLD` (bully: its peer links and its server as
    /// the other hosts reach it; Patroni: its link to etcd, `patroni.sh cut N`;
    /// pg_auto_failover: its links to the monitor and its server as the monitor and the
    /// other hosts reach it, `pgaf.sh cut N`).
    Cut,
    /// kill -9 of every process of every host, then all started again.
    Restart,
}

impl Fault {
    /// Every fault, in the table's order.
    pub const ALL: [Fault; 4] = [Fault::Kill, Fault::Pause, Fault::Cut, Fault::Restart];

    /// Its name in `PG_BENCH_FAULTS`.
    pub fn name(self) -> &'static str {
        match self {
            Fault::Kill => "kill",
            Fault::Pause => "pause",
            Fault::Cut => "cut",
            Fault::Restart => "restart",
        }
    }

    /// What the table calls it.
    pub fn label(self, hold: Duration) -> String {
        let s = hold.as_secs_f64();
        match self {
            Fault::Kill => "kill -9 primary host".into(),
            Fault::Pause => format!("SIGSTOP primary {s} s"),
            Fault::Cut => format!("primary cut off {s} s"),
            Fault::Restart => "full restart".into(),
        }
    }
}

/// A running system.
pub enum System {
    /// bully's example; with `patroni`, clients write through that HAProxy (Patroni's
    /// section) instead of the example's. Fields drop in order: that HAProxy before the
    /// cluster whose temp dir holds its files.
    Bully {
        patroni: Option<Haproxy>,
        b: Box<BullyPg>,
    },
    /// Patroni or pg_auto_failover.
    Scripted(Box<Scripted>),
}

/// How long a system may take to be whole again after a fault (every server back,
/// streaming from one primary).
pub const HEALTHY_SECS: u64 = 180;

impl System {
    /// Starts `kind`; returns once it runs (not necessarily with a primary yet).
    pub async fn start(kind: Kind) -> Result<System, String> {
        Ok(match kind {
            Kind::Bully => System::Bully {
                patroni: None,
                b: Box::new(BullyPg::start().await),
            },
            Kind::BullyPatroniHaproxy => Self::bully_patroni_haproxy().await,
            Kind::PatroniDefault => Self::patroni("default", "on").await?,
            Kind::PatroniTight => Self::patroni("tight", "on").await?,
            Kind::PatroniQuorum => Self::patroni("tight", "quorum").await?,
            Kind::PgafDefault => System::Scripted(Box::new(Scripted::start(pgaf::spec()).await?)),
        })
    }

    /// bully as [`Kind::Bully`] starts it, plus Patroni's HAProxy section in front of
    /// its servers, once a primary leads and that HAProxy sends every session to it
    /// (HAProxy starts with every server up), so no run starts with a standby in its
    /// round robin.
    async fn bully_patroni_haproxy() -> System {
        let b = Box::new(BullyPg::start().await);
        b.wait_primary(&IDS).await;
        let (haproxy, _) = b.patroni_haproxy().await;
        System::Bully {
            patroni: Some(haproxy),
            b,
        }
    }

    /// Patroni at `timing` with `synchronous_mode: sync_mode` (`patroni::spec`).
    async fn patroni(timing: &str, sync_mode: &str) -> Result<System, String> {
        let spec = patroni::spec(timing, sync_mode);
        Ok(System::Scripted(Box::new(Scripted::start(spec).await?)))
    }

    /// Where clients write (HAProxy).
    pub fn front(&self) -> SocketAddr {
        match self {
            System::Bully { patroni, b } => patroni.as_ref().map_or(b.front, |h| h.front),
            System::Scripted(p) => p.front,
        }
    }

    /// Each server, as a client on its own host reaches it.
    pub fn locals(&self) -> BTreeMap<NodeId, SocketAddr> {
        match self {
            System::Bully { b, .. } => b.pg.addrs.clone(),
            System::Scripted(p) => p.locals.clone(),
        }
    }

    /// Waits (bounded) until the system is whole: one primary and every other server
    /// streaming from it; returns the primary's node.
    pub async fn healthy(&self) -> Result<NodeId, String> {
        match self {
            // Bounded by postgres_bully::AGREE (a panic, caught per system by the bench).
            System::Bully { b, .. } => Ok(b.wait_primary(&IDS).await),
            System::Scripted(p) => p.healthy(HEALTHY_SECS).await,
        }
    }

    /// Applies `fault` to node `id` (ignored by [`Fault::Restart`], which hits every
    /// node and is over when this returns).
    pub async fn fault(&mut self, fault: Fault, id: NodeId) -> Result<(), String> {
        match (self, fault) {
            (System::Bully { b, .. }, Fault::Kill) => b.kill_host(id),
            (System::Bully { b, .. }, Fault::Pause) => {
                b.t.cluster.pause(id).map_err(|e| e.to_string())?;
                b.pg.pause(id);
            }
            (System::Bully { b, .. }, Fault::Cut) => b.cut_off(id, true),
            (System::Bully { b, .. }, Fault::Restart) => {
                b.restart_all();
            }
            (System::Scripted(p), Fault::Kill) => p.node("kill", id).await?,
            (System::Scripted(p), Fault::Pause) => p.node("pause", id).await?,
            (System::Scripted(p), Fault::Cut) => p.node("cut", id).await?,
            (System::Scripted(p), Fault::Restart) => p.restart_all().await?,
        }
        Ok(())
    }

    /// Undoes `fault` on node `id`: the killed host boots, the paused processes
    /// continue, the cut heals.
    pub async fn heal(&mut self, fault: Fault, id: NodeId) -> Result<(), String> {
        match (self, fault) {
            (_, Fault::Restart) => {}
            (System::Bully { b, .. }, Fault::Kill) => b.restart_host(id),
            (System::Bully { b, .. }, Fault::Pause) => {
                b.pg.resume(id);
                b.t.cluster.resume(id).map_err(|e| e.to_string())?;
            }
            (System::Bully { b, .. }, Fault::Cut) => b.cut_off(id, false),
            (System::Scripted(p), Fault::Kill) => p.node("restart", id).await?,
            (System::Scripted(p), Fault::Pause) => p.node("resume", id).await?,
            (System::Scripted(p), Fault::Cut) => p.node("heal", id).await?,
        }
        Ok(())
    }
}
