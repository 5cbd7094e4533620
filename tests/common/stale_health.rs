//! A node stopped in office while its database goes bad must not lead again on the
//! health verdict it held before the stop (tests/stale_health.rs and its sabotage
//! twin). Included with `#[path = "common/stale_health.rs"] mod stale_health;` next to
//! `mod common;` and `mod primary;`.
#![allow(dead_code)]

use super::common::{wait_until, TestCluster};
use super::primary::{events, phase, quoted, status};
use bully::api::HealthState;
use bully::config::HealthConfig;
use bully::history::Record;
use bully::protocol::{Epoch, Fact, Preempt, Timing};
use bully::wall_clock::wall_ms;
use std::time::Duration;

const AGREE: Duration = Duration::from_secs(20);

/// What node 3 did after it was continued.
pub struct AfterResume {
    /// Epochs node 3 declared after the SIGCONT.
    pub declared: Vec<Epoch>,
    /// Its health as its status shows it once a fresh check failed (or the last seen).
    pub health: HealthState,
}

/// Three nodes whose checks fail while a marker file exists (default interval 1 s,
/// rise 2, fall 3); node 3 leads, is SIGSTOPped, its marker appears, node 2 takes over,
/// node 3 is continued. Returns what node 3 declared afterwards, by the time its status
/// shows a failing check (or 20 s).
pub async fn stop_sicken_resume() -> AfterResume {
    let mut t = TestCluster::new(3, Timing::default(), Preempt::Always);
    let dir = t.dir.path().to_path_buf();
    let sick = |id| dir.join(format!("sick-{id}"));
    for id in t.cluster.ids() {
        let check = HealthConfig::new(format!("test ! -e {}", quoted(&sick(id))));
        t.cluster
            .edit_config(id, |c| c.health = Some(check))
            .unwrap();
    }
    phase("start; node 3 leads once its first check passed");
    t.start_all();
    t.wait_for_leader(&[1, 2, 3], 3, AGREE).await;

    phase("SIGSTOP node 3; its database goes bad meanwhile; node 2 takes over");
    t.cluster.pause(3).unwrap();
    std::fs::write(sick(3), "").unwrap();
    t.wait_for_leader(&[1, 2], 2, AGREE).await;

    phase("SIGCONT node 3: it must not lead on its old verdict");
    let resumed_at = wall_ms();
    t.cluster.resume(3).unwrap();
    let health = wait_until("node 3 to show a fresh failing check", AGREE, || async {
        let s = status(&t, 3).await?;
        (s.health == HealthState::Failing).then_some(s.health)
    })
    .await;
    let declared = events(&t, 3)
        .into_iter()
        .filter(|e| e.at_ms >= resumed_at)
        .filter_map(|e| match e.record {
            Record::Fact(Fact::Declared { epoch }) => Some(epoch),
            _ => None,
        })
        .collect();
    let history = t.cluster.history();
    let mut broken = bully::checker::check_safety(&history);
    broken.extend(bully::checker::check_one_per_term(&history));
    assert!(broken.is_empty(), "{broken:#?}\n{}", t.log_tail());
    AfterResume { declared, health }
}
