//! Which nodes a query asks and with which certificate: `--config F` (the node in F,
//! and for `--cluster` its peers too), or `--endpoints a,b,c` / `BULLY_ENDPOINTS` with
//! the client files from `--certs` / `BULLY_CERTS`. Only the CA and a client
//! certificate are read, never a node's key. Every node is asked at once, so one
//! that is down costs nothing while another answers (`bully leader --config` asks its
//! own node a moment ahead of the others: [`ask_all_with`]'s `lead`).

use super::QueryArgs;
use crate::api::Status;
use crate::certs::TlsFiles;
use crate::client::{Client, ClientError};
use crate::config::ConfigError;
use crate::protocol::NodeId;
use crate::transport::{PeerAddr, PeerAddrError, ResolveError};
use std::path::{Path, PathBuf};
use std::time::Duration;
use thiserror::Error;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// After the first answer, how long the others get to answer too, so a disagreement
/// can be reported without waiting the full `--timeout` for a node that is down.
const AFTER_FIRST: Duration = Duration::from_millis(300);

/// One node to ask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// As the user or the config wrote it (`host:port`).
    pub addr: PeerAddr,
    /// The node ID its certificate must carry, when the config says which it is.
    pub expect: Option<NodeId>,
}

/// `node 2 (db-2:7001)`, or the address alone when the node's ID is not known: how
/// every command names a member it asked.
impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.expect {
            Some(id) => write!(f, "node {id} ({})", self.addr),
            None => write!(f, "{}", self.addr),
        }
    }
}

/// Where to ask and how to prove who we are.
#[derive(Debug)]
pub struct Targets {
    pub endpoints: Vec<Endpoint>,
    pub tls: TlsFiles,
    /// With `--config`, the mode that file names: the first endpoint is then that
    /// file's node (on this host, usually; a member like any other).
    pub own_mode: Option<crate::protocol::Mode>,
}

/// One node's answer (its status, unless another question was asked), or why there was
/// none.
#[derive(Debug)]
pub struct Answer<T = Status> {
    pub endpoint: Endpoint,
    pub status: Result<T, AskError>,
}

/// Why the flags name no node to ask, or no certificate to ask with.
#[derive(Debug, Error)]
pub enum TargetsError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("--endpoints: {0}")]
    Endpoint(#[from] PeerAddrError),
    #[error(
        "say which node to ask: --config FILE, or --endpoints HOST:PORT,... (or BULLY_ENDPOINTS)"
    )]
    NoNode,
    #[error(
        "{flag}: {} does not exist (make a client certificate with `bully certs client`, \
         pass --certs DIR or set BULLY_CERTS, or pass {flag})",
        file.display()
    )]
    MissingFile { flag: &'static str, file: PathBuf },
}

/// Why one node gave no status.
#[derive(Debug, Error)]
pub enum AskError {
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("{addr} did not answer within {timeout:?}")]
    Timeout { addr: PeerAddr, timeout: Duration },
    /// Still asking when another node's answer had been waited on long enough.
    #[error("{0} did not answer in time")]
    Late(PeerAddr),
}

/// [`targets`] for a command that cannot go on without them: the error is printed and
/// becomes exit code 2 (`leader`, `status --cluster`).
pub fn targets_or_exit(args: &QueryArgs, peers: bool) -> Result<Targets, std::process::ExitCode> {
    targets(args, peers).map_err(|e| {
        eprintln!("error: {e}");
        std::process::ExitCode::from(2)
    })
}

/// Reads the flags: with `--config`, the node's own address (and, with `peers`, every
/// peer's) and the client files beside its CA; with `--endpoints`, those addresses and
/// the client files in `--certs`. `--ca/--cert/--key` override either.
pub fn targets(args: &QueryArgs, peers: bool) -> Result<Targets, TargetsError> {
    let mut own_mode = None;
    let (endpoints, default_dir) = match (&args.config, args.endpoints.is_empty()) {
        (Some(path), _) => {
            let config = crate::config::load(path)?;
            own_mode = Some(config.mode);
            let mut own = config.listen;
            if own.ip().is_unspecified() {
                own.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
            }
            let mut endpoints = vec![Endpoint {
                addr: own.into(),
                expect: Some(config.id),
            }];
            if peers {
                endpoints.extend(config.peers.iter().map(|p| Endpoint {
                    addr: p.addr.clone(),
                    expect: Some(p.id),
                }));
            }
            let dir = config.tls.ca.parent().map(Path::to_path_buf);
            (endpoints, dir.unwrap_or_default())
        }
        (None, false) => {
            let endpoints = args
                .endpoints
                .iter()
                .map(|text| {
                    let addr = text.trim().parse::<PeerAddr>()?;
                    Ok(Endpoint { addr, expect: None })
                })
                .collect::<Result<Vec<_>, PeerAddrError>>()?;
            (endpoints, args.certs.clone())
        }
        (None, true) => return Err(TargetsError::NoNode),
    };
    let in_dir = TlsFiles::for_client(&default_dir);
    let tls = TlsFiles {
        ca: args.ca.clone().unwrap_or(in_dir.ca),
        cert: args.cert.clone().unwrap_or(in_dir.cert),
        key: args.key.clone().unwrap_or(in_dir.key),
    };
    for (flag, file) in [
        ("--ca", &tls.ca),
        ("--cert", &tls.cert),
        ("--key", &tls.key),
    ] {
        if !file.is_file() {
            let file = file.clone();
            return Err(TargetsError::MissingFile { flag, file });
        }
    }
    Ok(Targets {
        endpoints,
        tls,
        own_mode,
    })
}

/// Connects to one endpoint, resolving a host name now.
pub async fn connect(
    endpoint: &Endpoint,
    tls: &TlsFiles,
    timeout: Duration,
) -> Result<Client, AskError> {
    // A query has no endpoint of its own to match an address family against.
    let addr = endpoint.addr.resolve_any().await?;
    Ok(Client::connect(addr, tls, endpoint.expect, timeout).await?)
}

/// Connects to `endpoint` and makes one `call` on it, connecting and answering both
/// within `timeout` (every query command's one question to one node).
pub async fn ask_with<T, Fut>(
    endpoint: &Endpoint,
    tls: &TlsFiles,
    timeout: Duration,
    call: impl FnOnce(Client) -> Fut,
) -> Result<T, AskError>
where
    Fut: std::future::Future<Output = Result<T, ClientError>>,
{
    let answer = async {
        let client = connect(endpoint, tls, timeout).await?;
        Ok(call(client).await?)
    };
    match tokio::time::timeout(timeout, answer).await {
        Ok(result) => result,
        Err(_) => Err(AskError::Timeout {
            addr: endpoint.addr.clone(),
            timeout,
        }),
    }
}

/// Asks every endpoint at once. With `all`, waits for every answer (up to `timeout`);
/// otherwise returns [`AFTER_FIRST`] after the first status arrives. Answers come in
/// arrival order (the first is the one to report); endpoints that did not answer in
/// time are listed with an error.
pub async fn ask_all(targets: &Targets, timeout: Duration, all: bool) -> Vec<Answer> {
    let status = |client: Client| async move { client.status().await };
    let enough = match all {
        true => Enough::All,
        false => Enough::AfterFirst,
    };
    ask_all_with(targets, timeout, enough, None, status).await
}

/// When [`ask_all_with`] stops waiting for more answers.
#[derive(Debug, Clone, Copy)]
pub enum Enough<T> {
    /// Every endpoint answered, or `--timeout` passed.
    All,
    /// [`AFTER_FIRST`] after the first answer.
    AfterFirst,
    /// As `AfterFirst`, and at once when an answer passes this test (one that settles
    /// the question alone, such as a coordinator's word read against its lease).
    When(fn(&T) -> bool),
}

/// [`ask_all`] with another question: `call` on each endpoint at once, or, with
/// `lead`, on the first endpoint alone until it answers or `lead` passes (with
/// `--config` it is the node on this host, whose answer usually settles the question:
/// one handshake instead of one per member on a busy host), then on the rest.
pub async fn ask_all_with<T, F, Fut>(
    targets: &Targets,
    timeout: Duration,
    enough: Enough<T>,
    lead: Option<Duration>,
    call: F,
) -> Vec<Answer<T>>
where
    T: Send + 'static,
    F: Fn(Client) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Result<T, ClientError>> + Send,
{
    let mut pending = JoinSet::new();
    let ask = |pending: &mut JoinSet<(usize, Answer<T>)>, i: usize| {
        let endpoint = targets.endpoints[i].clone();
        let (tls, call) = (targets.tls.clone(), call.clone());
        pending.spawn(async move {
            let status = ask_with(&endpoint, &tls, timeout, call).await;
            (i, Answer { endpoint, status })
        });
    };
    let started = Instant::now();
    let count = targets.endpoints.len();
    let lead_until = lead.filter(|_| count > 1).map(|d| started + d);
    let mut unasked: Vec<usize> = match lead_until {
        Some(_) => (1..count).collect(),
        None => Vec::new(),
    };
    for i in (0..count).filter(|i| !unasked.contains(i)) {
        ask(&mut pending, i);
    }
    let mut deadline = started + timeout;
    let mut answers: Vec<(usize, Answer<T>)> = Vec::new();
    while !pending.is_empty() || !unasked.is_empty() {
        let wait_until = match (unasked.is_empty(), lead_until) {
            (false, Some(lead)) => deadline.min(lead),
            _ => deadline,
        };
        let next = tokio::time::timeout_at(wait_until, pending.join_next()).await;
        match next {
            Ok(Some(Ok((i, answer)))) => {
                let first = answer.status.is_ok() && answers.iter().all(|(_, a)| a.status.is_err());
                if first && !matches!(enough, Enough::All) {
                    deadline = deadline.min(Instant::now() + AFTER_FIRST);
                }
                let settled = match (&enough, &answer.status) {
                    (Enough::When(test), Ok(answer)) => test(answer),
                    _ => false,
                };
                answers.push((i, answer));
                if settled {
                    break;
                }
            }
            // The lead ran out: the others are asked now.
            Err(_) if !unasked.is_empty() && Instant::now() < deadline => {}
            _ => break,
        }
        // The first endpoint did not settle it: ask the rest.
        for i in std::mem::take(&mut unasked) {
            ask(&mut pending, i);
        }
    }
    pending.abort_all();
    for (i, endpoint) in targets.endpoints.iter().enumerate() {
        if answers.iter().all(|(j, _)| *j != i) {
            answers.push((
                i,
                Answer {
                    endpoint: endpoint.clone(),
                    status: Err(AskError::Late(endpoint.addr.clone())),
                },
            ));
        }
    }
    answers.into_iter().map(|(_, a)| a).collect()
}

/// Every member's status, for a command about the whole cluster: the endpoints the
/// flags name (with --config the node and its peers), then members that an answer's
/// member list names and that were not asked yet (see [`listed_elsewhere`]); each
/// waited for up to `--timeout`. The targets come back for a second round of requests.
pub async fn ask_cluster(
    args: &QueryArgs,
) -> Result<(Targets, Vec<Answer>), std::process::ExitCode> {
    let targets = targets_or_exit(args, true)?;
    let mut answers = ask_all(&targets, args.timeout, true).await;
    let statuses: Vec<&Status> = answers
        .iter()
        .filter_map(|a| a.status.as_ref().ok())
        .collect();
    let listed = listed_elsewhere(&targets, &statuses);
    if !listed.endpoints.is_empty() {
        answers.extend(ask_all(&listed, args.timeout, true).await);
    }
    Ok((targets, answers))
}

/// The newest maintenance pause any answering member keeps (src/api/pause.rs).
pub fn newest_pause(answers: &[Answer]) -> Option<crate::api::Pause> {
    answers
        .iter()
        .filter_map(|a| a.status.as_ref().ok())
        .map(|s| s.pause.clone())
        .reduce(|newest, p| if p.supersedes(&newest) { p } else { newest })
}

/// What the answering nodes disagree about (coordinator or epoch), as one line per
/// distinct answer, or none when they agree.
pub fn disagreement(answers: &[Answer]) -> Option<String> {
    let mut seen: Vec<(String, Vec<String>)> = Vec::new();
    for answer in answers {
        let Ok(status) = &answer.status else { continue };
        let view = match (status.coordinator(), status.epoch) {
            (Some(c), Some(e)) => format!("coordinator {c} at epoch {e}"),
            _ => "no coordinator".to_string(),
        };
        let who = format!("node {} ({})", status.id, answer.endpoint.addr);
        match seen.iter_mut().find(|(v, _)| *v == view) {
            Some((_, nodes)) => nodes.push(who),
            None => seen.push((view, vec![who])),
        }
    }
    (seen.len() > 1).then(|| {
        let parts: Vec<String> = seen
            .iter()
            .map(|(view, nodes)| format!("{view}: {}", nodes.join(", ")))
            .collect();
        format!("the nodes disagree: {}", parts.join("; "))
    })
}

/// Members that an answer's member list names (with an address) but that were not among
/// the endpoints asked (by ID or by address): a cluster grown with `bully member add`
/// has members the config file never listed. Each once, expecting its ID.
pub fn listed_elsewhere(targets: &Targets, statuses: &[&Status]) -> Targets {
    let mut known: std::collections::BTreeSet<NodeId> =
        targets.endpoints.iter().filter_map(|e| e.expect).collect();
    known.extend(statuses.iter().map(|s| s.id));
    let mut endpoints = Vec::new();
    for status in statuses {
        for member in status.members.iter().flat_map(|list| list.members.iter()) {
            let Ok(addr) = member.addr.parse::<PeerAddr>() else {
                continue;
            };
            let asked = targets.endpoints.iter().any(|e| e.addr == addr);
            if !asked && known.insert(member.id) {
                endpoints.push(Endpoint {
                    addr,
                    expect: Some(member.id),
                });
            }
        }
    }
    Targets {
        endpoints,
        tls: targets.tls.clone(),
        own_mode: None,
    }
}
