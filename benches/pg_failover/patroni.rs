//! The Patroni side of the comparison: Patroni 4.1 (from PyPI, in the venv that
//! `examples/postgres-primary/patroni/install.sh` makes) + etcd 3.4 (its v3 API) + three
//! PostgreSQL 15 + HAProxy, run through `examples/postgres-primary/patroni/patroni.sh`
//! (driven by `scripted::Scripted`).
//!
//! Settings (written by `patroni.sh`, why in its README): `synchronous_mode: on` with
//! one synchronous standby, the only one Patroni may promote besides the old leader —
//! bully's servers replicate synchronously too (`ANY 1`). `on` is the mode the issue
//! asks for and the one most deployments run: `patroni-default` and `patroni-tight`
//! run it. Patroni 4's `synchronous_mode: quorum` is measured too, as `patroni-quorum`
//! (`PT_SYNC_MODE=quorum`, `synchronous_node_count: 1`): `ANY 1 (both standbys)`, the
//! setting of bully's servers, and a standby may be promoted once a quorum (1) of the
//! other voters shows it is not behind; at `tight` timing only. Timing `default` is
//! Patroni's own (ttl 30, loop_wait 10, retry_timeout 10); `tight` is the lowest
//! Patroni 4.1 accepts: it raises ttl to at least 20, loop_wait to 1 and retry_timeout
//! to 3, and lowers loop_wait until `loop_wait + 2 * retry_timeout <= ttl`; 20, 1, 3
//! meet all of it (1 + 6 <= 20).
//! `examples/postgres-primary/patroni/README.md` ("Timing") says where that is checked.

use crate::scripted::{in_repo, which, Spec};
use std::path::PathBuf;

/// The venv `install.sh` makes by default.
const VENV: &str = "target/patroni-venv";

/// The `patroni` program: `PT_PATRONI`, else the venv's.
fn program() -> PathBuf {
    std::env::var_os("PT_PATRONI")
        .map(PathBuf::from)
        .unwrap_or_else(|| in_repo(VENV).join("bin/patroni"))
}

/// Why Patroni cannot run here, if it cannot: a program `patroni.sh` needs is missing,
/// or the venv's Patroni is not 4.1.
pub fn cannot_run() -> Option<String> {
    let mut missing: Vec<String> = ["etcd", "jq", "curl", "python3", "setpriv"]
        .into_iter()
        .filter(|p| which(p).is_none())
        .map(String::from)
        .collect();
    let patroni = program();
    if patroni.is_file() {
        let version = std::process::Command::new(&patroni)
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        if !version.starts_with("patroni 4.1.") {
            missing.push(format!("{} is {version:?}, not 4.1", patroni.display()));
        }
    } else {
        missing.push(patroni.display().to_string());
    }
    (!missing.is_empty()).then(|| {
        format!(
            "{} missing (examples/postgres-primary/patroni/install.sh; apt-get install -y jq curl)",
            missing.join(", ")
        )
    })
}

/// `patroni.sh start --timing TIMING` (`default` or `tight`) with
/// `PT_SYNC_MODE=SYNC_MODE` (`on` or `quorum`).
pub fn spec(timing: &str, sync_mode: &str) -> Spec {
    Spec {
        script: "examples/postgres-primary/patroni/patroni.sh",
        prefix: "PT_",
        ports: &[
            "HAPROXY",
            "ETCD",
            "ETCD_PEER",
            "PG1",
            "PG2",
            "PG3",
            "API1",
            "API2",
            "API3",
            "PROXY1",
            "PROXY2",
            "PROXY3",
        ],
        start: vec!["--timing".into(), timing.into()],
        env: vec![
            ("PT_PATRONI".into(), program().display().to_string()),
            ("PT_DCS".into(), "etcd3".into()),
            ("PT_SYNC_MODE".into(), sync_mode.into()),
        ],
        pause_what: Some("all"),
    }
}
