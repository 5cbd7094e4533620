//! `bully node --config F`: runs one node until SIGTERM/Ctrl-C, re-reads its config on
//! SIGHUP (`systemctl reload`), and tells systemd when it is ready (`Type=notify`).

use crate::node::NodeHandle;
use crate::sd_notify::{self, READY, RELOADING, STOPPING};
use std::path::Path;
use std::process::ExitCode;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;

/// Runs the node; exit 2 on a config or start error, 1 on a fatal runtime error.
/// `new_cluster`: an empty store votes at once (`bully node --new-cluster`);
/// `change_mode`: the file's mode replaces the stored one (`--change-mode`).
pub async fn run(path: &Path, new_cluster: bool, change_mode: bool) -> ExitCode {
    // Before anything slow: SIGHUP's default action would end the process.
    let mut hangup = match signal(SignalKind::hangup()) {
        Ok(hangup) => Some(hangup),
        Err(e) => {
            eprintln!("warning: cannot handle SIGHUP, reload disabled: {e}");
            None
        }
    };
    let config = match crate::config::load(path) {
        Ok(config) => crate::config::NodeConfig {
            new_cluster,
            change_mode,
            ..config
        },
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    // Hooks and health checks run beside the config file (e.g. `./health.sh`).
    let workdir = crate::config::directory_of(path).to_path_buf();
    let node = match crate::node::start_in(config, workdir).await {
        Ok(node) => node,
        Err(e) => {
            match e.config_field() {
                Some(field) => eprintln!("error: {}: {field}: {}", path.display(), e.explain()),
                None => eprintln!("error: {}", e.explain()),
            }
            return ExitCode::from(2);
        }
    };
    let ready = tokio::spawn(announce_ready(node.subscribe()));
    let requested = loop {
        tokio::select! {
            _ = super::sigterm_or_ctrl_c() => break true,
            Some(()) = async { hangup.as_mut()?.recv().await } => reload(path, &node).await,
            // The runtime task ends only on a fatal error (e.g. the disk failed).
            _ = node.ended() => break false,
        }
    };
    ready.abort();
    sd_notify::notify(STOPPING);
    let result = if requested {
        tracing::info!("stop requested; shutting down");
        node.shutdown().await
    } else {
        node.wait().await
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Tells systemd the node is ready once it knows a coordinator (itself or another):
/// only then can it answer `leader` and serve `/coordinator` meaningfully.
async fn announce_ready(mut status: watch::Receiver<crate::api::Status>) {
    let Ok(status) = status.wait_for(|s| s.coordinator().is_some()).await else {
        return;
    };
    let coordinator = status.coordinator().map_or(0, |c| c);
    tracing::info!(coordinator, "ready: a coordinator is known");
    sd_notify::notify(&format!(
        "{READY}\nSTATUS=coordinator is node {coordinator}"
    ));
}

/// Re-reads the config file and applies it; a broken file changes nothing.
async fn reload(path: &Path, node: &NodeHandle) {
    tracing::info!(config = %path.display(), "SIGHUP: reloading");
    sd_notify::notify(&format!("{RELOADING}\nMONOTONIC_USEC={}", monotonic_usec()));
    match crate::config::load(path) {
        Ok(config) => match node.reload(config).await {
            Ok(_) => {} // the runtime logged what changed
            Err(e) => tracing::error!("reload failed: {e}"),
        },
        Err(e) => tracing::error!("reload refused, nothing changed: {e}"),
    }
    sd_notify::notify(READY);
}

/// CLOCK_MONOTONIC in microseconds, which systemd wants with `RELOADING=1`.
fn monotonic_usec() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map(|t| t.tv_sec() as u64 * 1_000_000 + t.tv_nsec() as u64 / 1000)
        .unwrap_or(0)
}
