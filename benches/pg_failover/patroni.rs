//! The Patroni side of the comparison: Patroni 3 + etcd + three PostgreSQL 15 + HAProxy,
//! run through `examples/postgres-primary/patroni/patroni.sh` (the same script its
//! README's hand figures come from), in a temp dir with ports picked free. Every
//! command is bounded; on drop `patroni.sh stop --kill` kills what it started, by the
//! PIDs it recorded.

use bully::ports::free_tcp_addrs;
use bully::protocol::NodeId;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// How long `patroni.sh start` may wait for a healthy cluster (a first start runs
/// initdb and two base backups on a busy machine).
const START_SECS: u64 = 240;

/// Why Patroni cannot run here, if it cannot: a program `patroni.sh` needs is missing.
pub fn cannot_run() -> Option<String> {
    let missing: Vec<&str> = ["patroni", "etcd", "jq", "curl", "python3", "setpriv"]
        .into_iter()
        .filter(|p| which(p).is_none())
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "{} missing (apt-get install -y patroni etcd-server jq curl)",
            missing.join(", ")
        )
    })
}

/// The example's `patroni.sh`.
fn script() -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/postgres-primary/patroni/patroni.sh")
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// A running Patroni cluster.
pub struct Patroni {
    /// Where clients write: HAProxy, routing to the node whose REST API answers
    /// `GET /primary` with 200.
    pub front: SocketAddr,
    /// Each PostgreSQL server, straight.
    pub locals: BTreeMap<NodeId, SocketAddr>,
    timing: String,
    env: Vec<(String, String)>,
    dir: tempfile::TempDir,
}

impl Patroni {
    /// `patroni.sh start --timing TIMING` (`default` or `tight`) in a new temp dir.
    pub async fn start(timing: &str) -> Result<Patroni, String> {
        let dir = tempfile::Builder::new()
            .prefix("bully-patroni-")
            .tempdir()
            .map_err(|e| e.to_string())?;
        {
            // As root the cluster runs as `postgres`, which must reach the temp dir.
            use std::os::unix::fs::PermissionsExt;
            let open = std::fs::Permissions::from_mode(0o711);
            std::fs::set_permissions(dir.path(), open).map_err(|e| e.to_string())?;
        }
        let ports = free_tcp_addrs(12).map_err(|e| e.to_string())?;
        let names = [
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
        ];
        let mut env: Vec<(String, String)> = names
            .iter()
            .zip(&ports)
            .map(|(name, addr)| {
                // PT_PG1 -> PT_PG_PORT1, PT_HAPROXY -> PT_HAPROXY_PORT
                let (stem, n) = name.split_at(name.trim_end_matches(char::is_numeric).len());
                (format!("PT_{stem}_PORT{n}"), addr.port().to_string())
            })
            .collect();
        env.push(("PT_BASE".into(), dir.path().display().to_string()));
        env.push(("PT_START_TIMEOUT".into(), START_SECS.to_string()));
        let locals = (1..=3).map(|id| (id, ports[2 + id as usize])).collect();
        let patroni = Patroni {
            front: ports[0],
            locals,
            timing: timing.to_string(),
            env,
            dir,
        };
        patroni.start_again().await?;
        Ok(patroni)
    }

    /// `patroni.sh start` on this cluster's dir: a new cluster, or every process of a
    /// stopped one started again.
    async fn start_again(&self) -> Result<(), String> {
        let secs = START_SECS + 60;
        self.sh(&["start", "--timing", &self.timing], secs).await?;
        Ok(())
    }

    /// Runs `patroni.sh ARGS`, killed after `secs`; its stdout, or why it failed.
    async fn sh(&self, args: &[&str], secs: u64) -> Result<String, String> {
        let mut command = tokio::process::Command::new(script());
        command.args(args).kill_on_drop(true);
        for (k, v) in &self.env {
            command.env(k, v);
        }
        let out = tokio::time::timeout(Duration::from_secs(secs), command.output())
            .await
            .map_err(|_| format!("patroni.sh {args:?}: no end within {secs} s"))?
            .map_err(|e| format!("patroni.sh {args:?}: {e}"))?;
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        if out.status.success() {
            Ok(text)
        } else {
            Err(format!(
                "patroni.sh {args:?}: {}{}",
                text,
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    /// Waits (bounded) until the cluster is healthy (`patroni.sh wait-healthy`: one
    /// primary, a sync standby, a replica, a write commits); returns the primary.
    pub async fn healthy(&self, secs: u64) -> Result<NodeId, String> {
        self.sh(&["wait-healthy", &secs.to_string()], secs + 30)
            .await?;
        let out = self.sh(&["primary", "--wait", "30"], 60).await?;
        out.trim()
            .parse()
            .map_err(|_| format!("patroni.sh primary printed {out:?}"))
    }

    /// One `patroni.sh` fault or repair command on node `id`: `kill`, `restart`, `cut`,
    /// `heal`, or `pause`/`resume` (of `all`: Patroni and PostgreSQL).
    pub async fn node(&self, command: &str, id: NodeId) -> Result<(), String> {
        let n = id.to_string();
        let mut args = vec![command, n.as_str()];
        if matches!(command, "pause" | "resume") {
            args.push("all");
        }
        self.sh(&args, 60).await.map(drop)
    }

    /// Every host loses every process (`patroni.sh stop --kill`), then all start again.
    pub async fn restart_all(&self) -> Result<(), String> {
        self.sh(&["stop", "--kill"], 120).await?;
        self.start_again().await
    }
}

impl Drop for Patroni {
    fn drop(&mut self) {
        let mut command = std::process::Command::new(script());
        command.args(["stop", "--kill"]);
        command.env("PT_BASE", self.dir.path());
        let _ = command.output();
    }
}
