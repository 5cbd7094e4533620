//! A cluster run by one of the examples' shell scripts, `patroni.sh` or `pgaf.sh`: both
//! take the same commands (`start`, `stop --kill`, `wait-healthy`, `primary --wait`,
//! `kill`/`restart`, `pause`/`resume`, `cut`/`heal`), read their ports and base dir
//! from `PREFIX_*` variables, and record every PID they start, so one driver serves
//! both. The cluster lives in a temp dir with ports picked free; every command is
//! bounded; on drop `SCRIPT stop --kill` kills what the script started, by the PIDs it
//! recorded.

use bully::ports::free_tcp_addrs;
use bully::protocol::NodeId;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long `SCRIPT start` may wait for a healthy cluster (a first start runs initdb
/// and two base backups on a busy machine).
const START_SECS: u64 = 240;

/// How to run one script.
pub struct Spec {
    /// The script, relative to the repository.
    pub script: &'static str,
    /// Its variables' prefix: `PT_` (`PT_BASE`, `PT_PG_PORT1`, ...) or `PGAF_`.
    pub prefix: &'static str,
    /// The ports it takes, by name: `PG1` is `{prefix}PG_PORT1`, `HAPROXY` is
    /// `{prefix}HAPROXY_PORT`. Must hold `HAPROXY`, `PG1`, `PG2` and `PG3`.
    pub ports: &'static [&'static str],
    /// `start`'s arguments after `start` (Patroni's `--timing T`).
    pub start: Vec<String>,
    /// Other variables the script gets (Patroni's program).
    pub env: Vec<(String, String)>,
    /// An argument `pause` and `resume` take after the node (Patroni's `all`: Patroni
    /// and PostgreSQL).
    pub pause_what: Option<&'static str>,
}

/// The repository's `path`.
pub fn in_repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// `program` on the PATH, if there.
pub fn which(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// A running cluster.
pub struct Scripted {
    /// Where clients write: HAProxy.
    pub front: SocketAddr,
    /// Each PostgreSQL server, straight.
    pub locals: BTreeMap<NodeId, SocketAddr>,
    spec: Spec,
    env: Vec<(String, String)>,
    dir: tempfile::TempDir,
}

impl Scripted {
    /// `SCRIPT start ...` in a new temp dir.
    pub async fn start(spec: Spec) -> Result<Scripted, String> {
        let dir = tempfile::Builder::new()
            .prefix("bully-bench-")
            .tempdir()
            .map_err(|e| e.to_string())?;
        {
            // As root the servers run as `postgres`, which must reach the temp dir.
            use std::os::unix::fs::PermissionsExt;
            let open = std::fs::Permissions::from_mode(0o711);
            std::fs::set_permissions(dir.path(), open).map_err(|e| e.to_string())?;
        }
        let addrs = free_tcp_addrs(spec.ports.len()).map_err(|e| e.to_string())?;
        let named: BTreeMap<&str, SocketAddr> = spec.ports.iter().copied().zip(addrs).collect();
        let prefix = spec.prefix;
        let mut env: Vec<(String, String)> = named
            .iter()
            .map(|(name, addr)| {
                // PG1 -> {prefix}PG_PORT1, HAPROXY -> {prefix}HAPROXY_PORT
                let (stem, n) = name.split_at(name.trim_end_matches(char::is_numeric).len());
                (format!("{prefix}{stem}_PORT{n}"), addr.port().to_string())
            })
            .collect();
        env.push((format!("{prefix}BASE"), dir.path().display().to_string()));
        env.push((format!("{prefix}START_TIMEOUT"), START_SECS.to_string()));
        env.extend(spec.env.iter().cloned());
        let port = |name: &str| {
            named
                .get(name)
                .copied()
                .ok_or_else(|| format!("{}: no port {name}", spec.script))
        };
        let front = port("HAPROXY")?;
        let locals = (1..=3)
            .map(|id| Ok((id, port(&format!("PG{id}"))?)))
            .collect::<Result<_, String>>()?;
        let cluster = Scripted {
            front,
            locals,
            spec,
            env,
            dir,
        };
        cluster.start_again().await?;
        Ok(cluster)
    }

    /// `SCRIPT start` on this cluster's dir: a new cluster, or every process of a
    /// stopped one started again.
    async fn start_again(&self) -> Result<(), String> {
        let mut args = vec!["start"];
        args.extend(self.spec.start.iter().map(String::as_str));
        self.sh(&args, START_SECS + 60).await.map(drop)
    }

    /// Runs `SCRIPT ARGS`, killed after `secs`; its stdout, or why it failed.
    async fn sh(&self, args: &[&str], secs: u64) -> Result<String, String> {
        let name = self.spec.script.rsplit('/').next().unwrap_or_default();
        let mut command = tokio::process::Command::new(in_repo(self.spec.script));
        command.args(args).kill_on_drop(true);
        for (k, v) in &self.env {
            command.env(k, v);
        }
        let out = tokio::time::timeout(Duration::from_secs(secs), command.output())
            .await
            .map_err(|_| format!("{name} {args:?}: no end within {secs} s"))?
            .map_err(|e| format!("{name} {args:?}: {e}"))?;
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        if out.status.success() {
            Ok(text)
        } else {
            Err(format!(
                "{name} {args:?}: {}{}",
                text,
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    /// Waits (bounded) until the cluster is healthy (`SCRIPT wait-healthy`: one
    /// primary, every other server replicating, a write commits); returns the primary.
    pub async fn healthy(&self, secs: u64) -> Result<NodeId, String> {
        self.sh(&["wait-healthy", &secs.to_string()], secs + 30)
            .await?;
        let out = self.sh(&["primary", "--wait", "30"], 60).await?;
        out.trim()
            .parse()
            .map_err(|_| format!("{} primary printed {out:?}", self.spec.script))
    }

    /// One fault or repair command on node `id`: `kill`, `restart`, `cut`, `heal`,
    /// `pause` or `resume`.
    pub async fn node(&self, command: &str, id: NodeId) -> Result<(), String> {
        let n = id.to_string();
        let mut args = vec![command, n.as_str()];
        if let (Some(what), "pause" | "resume") = (self.spec.pause_what, command) {
            args.push(what);
        }
        self.sh(&args, 60).await.map(drop)
    }

    /// Every host loses every process (`SCRIPT stop --kill`), then all start again.
    pub async fn restart_all(&self) -> Result<(), String> {
        self.sh(&["stop", "--kill"], 120).await?;
        self.start_again().await
    }
}

impl Drop for Scripted {
    fn drop(&mut self) {
        let mut command = std::process::Command::new(in_repo(self.spec.script));
        command.args(["stop", "--kill"]);
        command.env(format!("{}BASE", self.spec.prefix), self.dir.path());
        let _ = command.output();
    }
}
