//! What the HTTP endpoint answers to one request, given what it reads from
//! ([`HttpState`]): the routes that ask beyond the node's own status (`/cluster` asks
//! every member, `/history` reads the server's data dir) here, the rest decided from
//! the status alone by `http_routes`. `http_conn` carries the request and the answer.

use super::api::ApiRequests;
use super::http_auth::{self, Security};
use super::http_cluster;
use super::http_history;
use super::http_reply::Reply;
use super::http_routes;
use super::http_tls::Caller;
use super::http_write;
use crate::boot_clock::BootInstant;
use crate::node::shared::metrics::Metrics;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

/// What the endpoint reads from.
#[derive(Clone)]
pub struct HttpState {
    /// The node's status as of now, and the members, asked as the client API asks.
    pub api: ApiRequests,
    pub metrics: Arc<Metrics>,
    /// The PostgreSQL data dir (`[postgres] data_dir`), whose history `/history` reads.
    pub pg_data_dir: Option<PathBuf>,
    /// HTTPS and the write routes' credentials, replaced in place by a reload.
    pub security: Arc<RwLock<Security>>,
    /// One `/cluster` asks the members at a time: a flood of requests waits here
    /// rather than opening a connection to every member each.
    pub cluster_asks: Arc<tokio::sync::Mutex<()>>,
}

impl HttpState {
    /// The security in force now.
    pub fn security(&self) -> Security {
        self.security
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// How long a write route waits for its act's answer before saying it goes on: inside
/// the connection's `http_conn::WRITE_DEADLINE`, so the caller always hears back.
pub const ANSWER_WITHIN: std::time::Duration = std::time::Duration::from_secs(35);

/// Whether `caller`, with the `authorization` header it sent, may use a write route
/// (`http_auth`); checked before its body is read.
pub fn admit(caller: &Caller, authorization: Option<&str>, state: &HttpState) -> Result<(), Reply> {
    let security = state.security();
    http_auth::authorize(caller, authorization, security.basic.as_ref())
}

/// The answer to an admitted write route (`http_write`), asked of the client API as
/// the command line would ask it; an act still running after [`ANSWER_WITHIN`] (a
/// reinit's clone) goes on, and the answer is a 202 saying so.
pub async fn write(method: &str, path: &str, body: &[u8], state: &HttpState) -> Reply {
    let now = state.api.status_now();
    let wall_ms = crate::wall_clock::wall_ms();
    let ask = match http_write::ask(method, path, body, &now, wall_ms) {
        Ok(ask) => ask,
        Err(refused) => return refused,
    };
    tracing::info!(method, path, "http write route: {:?}", ask.request);
    match state.api.answer_within(ask.request, ANSWER_WITHIN).await {
        Some(answer) => http_write::reply_for(answer, ask.scheduled),
        None => Reply::text(
            202,
            format!(
                "still running after {} s: it goes on (`bully status` and the node's log \
                 show how it ends)\n",
                ANSWER_WITHIN.as_secs()
            ),
        ),
    }
}

/// The answer to a GET (or HEAD, OPTIONS) of `path` with `query`.
pub async fn get(path: &str, query: Option<&str>, state: &HttpState) -> Reply {
    match path {
        "/cluster" => {
            let _one_at_a_time = state.cluster_asks.lock().await;
            let (own, answers) = http_cluster::gather(&state.api).await;
            Reply::json(200, &http_cluster::cluster_json(&own, &answers))
        }
        "/history" => history(state).await,
        _ => {
            let status = state.api.status_now();
            let now_ns = BootInstant::now().as_nanos();
            http_routes::route(path, query, &status, &state.metrics, now_ns)
        }
    }
}

/// Patroni's `/history` from this node's server; 503 naming why it cannot be read.
async fn history(state: &HttpState) -> Reply {
    let status = state.api.status_now();
    let Some(dir) = state.pg_data_dir.clone() else {
        return Reply::json(200, &serde_json::json!([]));
    };
    match http_history::read(dir, status.id, status.postgres).await {
        Ok(lines) => Reply::json(200, &lines),
        Err(why) => Reply::text(503, format!("{why}\n")),
    }
}
