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

/// One request to a write route, as the connection carried it.
pub struct Write<'a> {
    pub method: &'a str,
    pub path: &'a str,
    /// The `Authorization` header, if sent.
    pub authorization: Option<&'a str>,
    pub body: &'a [u8],
    pub caller: Caller,
}

/// The answer to a write route (`http_write`): refused unless `http_auth` lets the
/// caller in, then asked of the client API as the command line would ask it.
pub async fn write(write: Write<'_>, state: &HttpState) -> Reply {
    let security = state.security();
    if let Err(refused) =
        http_auth::authorize(&write.caller, write.authorization, security.basic.as_ref())
    {
        return refused;
    }
    let now = state.api.status_now();
    let wall_ms = crate::wall_clock::wall_ms();
    let ask = match http_write::ask(write.method, write.path, write.body, &now, wall_ms) {
        Ok(ask) => ask,
        Err(refused) => return refused,
    };
    tracing::info!(
        method = write.method,
        path = write.path,
        caller = ?write.caller.certificate,
        "http write route: {:?}",
        ask.request
    );
    let answer = state.api.answer(ask.request).await;
    http_write::reply_for(answer, ask.scheduled)
}

/// The answer to a GET (or HEAD, OPTIONS) of `path` with `query`.
pub async fn get(path: &str, query: Option<&str>, state: &HttpState) -> Reply {
    match path {
        "/cluster" => {
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
