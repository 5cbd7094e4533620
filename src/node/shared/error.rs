//! Why a node could not start or had to stop, and which config field to fix (an
//! operator reads `node1.toml: listen: ... is in use`, not a bare OS error); why a
//! reload changed nothing.

use crate::storage::StorageError;
use crate::transport::TransportError;
use std::net::SocketAddr;
use thiserror::Error;

/// Why a node could not start or had to stop.
#[derive(Debug, Error)]
pub enum NodeError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Transport(#[from] TransportError),
    #[error("cannot open the event log in {dir}: {source}")]
    EventLog { dir: String, source: std::io::Error },
    #[error(
        "cannot read the maintenance pause in {path}: {why}; fix the file, or remove it \
         (this node then takes part in failover again until a peer tells it otherwise)"
    )]
    PauseFile { path: String, why: String },
    #[error("cannot read the synchronous record: {0}")]
    SyncRecord(String),
    /// The config file names another mode than the one the store was first started in
    /// (src/node/drive/start.rs): the mode is the cluster's, and a node on another mode
    /// beside the others could lead beside their coordinator.
    #[error(
        "this node's store runs the cluster in {stored} mode, but the config file says \
         mode = \"{file}\"; the mode is the cluster's, not one file's (two members edited \
         under a partition could lead beside the others). Put mode = \"{stored}\" back, \
         or change the whole cluster: stop every node, set the mode in every file, and \
         start each once with `bully node --change-mode`"
    )]
    ModeDiffers {
        stored: crate::protocol::Mode,
        file: crate::protocol::Mode,
    },
    #[error("cannot listen for HTTP on {addr}: {source}")]
    Http {
        addr: SocketAddr,
        source: std::io::Error,
    },
    /// `[http] tls` or the write routes' password cannot be loaded.
    #[error("{0}")]
    HttpSecurity(String),
    #[error("cannot listen for keepers on {path}: {source}")]
    KeeperSocket {
        path: String,
        source: std::io::Error,
    },
    /// The blocking task that writes the cells panicked or was cancelled.
    #[error("the storage task failed: {0}")]
    StorageTask(#[from] tokio::task::JoinError),
    /// The runtime task itself panicked or was cancelled.
    #[error("the node's runtime task failed: {0}")]
    RuntimeTask(#[source] tokio::task::JoinError),
}

impl NodeError {
    /// The config field an operator changes to fix this, when one is to blame.
    pub fn config_field(&self) -> Option<&'static str> {
        match self {
            NodeError::Storage(_)
            | NodeError::EventLog { .. }
            | NodeError::KeeperSocket { .. }
            | NodeError::PauseFile { .. }
            | NodeError::SyncRecord(_) => Some("data_dir"),
            NodeError::Transport(TransportError::Bind { .. }) => Some("listen"),
            NodeError::Transport(TransportError::IdentityMismatch { .. }) => Some("tls.cert"),
            NodeError::Http { .. } => Some("http.listen"),
            NodeError::HttpSecurity(_) => Some("http"),
            NodeError::ModeDiffers { .. } => Some("mode"),
            _ => None,
        }
    }

    /// The message with what to do next, for the cases people meet when deploying.
    pub fn explain(&self) -> String {
        let in_use = |source: &std::io::Error| source.kind() == std::io::ErrorKind::AddrInUse;
        match self {
            NodeError::Transport(TransportError::Bind { source, .. })
            | NodeError::Http { source, .. }
                if in_use(source) =>
            {
                format!(
                    "{self}; another process holds this port (another bully node, or a stale one?)"
                )
            }
            NodeError::Transport(TransportError::IdentityMismatch {
                path, configured, ..
            }) => {
                let dir = path
                    .parent()
                    .filter(|d| !d.as_os_str().is_empty())
                    .map(|d| d.display().to_string())
                    .unwrap_or_else(|| ".".into());
                format!(
                    "{self}; point tls.cert/tls.key at node-{configured}.pem/.key (issue them \
                     with: bully certs add --dir {dir} --nodes {configured}) or fix id"
                )
            }
            _ => self.to_string(),
        }
    }
}

/// Why a reload changed nothing.
#[derive(Debug, Error)]
pub enum ReloadError {
    /// The new certificates do not load or do not fit the running node.
    #[error(transparent)]
    Tls(#[from] TransportError),
    /// The new HTTP address cannot be listened on.
    #[error("http.listen: cannot listen on {addr}: {source}")]
    Http {
        addr: SocketAddr,
        source: std::io::Error,
    },
    /// `[http] tls` or the write routes' password cannot be loaded.
    #[error("{0}")]
    HttpSecurity(String),
    /// The node stopped before it could apply the reload.
    #[error("the node is stopping")]
    Stopping,
}
