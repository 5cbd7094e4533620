//! `bully pg reinit|restart|reload N`: an operator's verb for the PostgreSQL server
//! node N keeps (`[postgres]`, src/node/postgres/), like `patronictl reinit`,
//! `restart` and `reload` (a reload rereads the parameters from N's config file,
//! src/node/postgres/parameters.rs). The verb goes to node N itself, found among the endpoints
//! and the members they list; its manager answers once it has acted (a reinit: once the
//! clone is done).

use super::endpoints;
use super::query::print_answer;
use super::QueryArgs;
use crate::api::postgres::PgVerb;
use crate::protocol::NodeId;
use clap::Subcommand;
use std::process::ExitCode;
use std::time::Duration;

/// The least time a verb's answer is waited for: a reinit copies the whole database.
const AT_LEAST: Duration = Duration::from_secs(600);

/// What `bully pg` does.
#[derive(Debug, Subcommand, Clone)]
pub enum PgCommand {
    /// Clone node N's server afresh from the coordinator's primary; its old data dir is
    /// kept aside as `<data_dir>.aside.<unix seconds>`. Refused on the primary (switch over first).
    Reinit {
        #[command(flatten)]
        query: QueryArgs,
        /// The node whose server it is (its node ID); the command goes to that node.
        node: NodeId,
    },
    /// Restart node N's server in place (fast shutdown, then a start in its role), e.g.
    /// to apply parameters pending a restart: a standby restarts as a standby; the
    /// coordinator's primary restarts as the primary while its node keeps the office
    /// (no election, the same timeline), answering once it takes writes again.
    Restart {
        #[command(flatten)]
        query: QueryArgs,
        /// The node whose server it is (its node ID); the command goes to that node.
        node: NodeId,
    },
    /// Apply node N's `[postgres] parameters` without a restart: N rereads its config
    /// file (checked as at start: a bad file or a key bully owns changes nothing),
    /// rewrites its include file `bully.conf` and has the server reread it; the answer
    /// names what applies now and what waits for `bully pg restart N`
    /// (`pending_restart`, also shown by `bully status --cluster`).
    Reload {
        #[command(flatten)]
        query: QueryArgs,
        /// The node whose server it is (its node ID); the command goes to that node.
        node: NodeId,
    },
    /// Let coordinator N promote its server although the cluster's synchronous record
    /// says acknowledged commits may be on servers it cannot reach (the cluster waits
    /// rather than lose them: `status --cluster` says why). Commits only those servers
    /// hold are lost. For N's current office only; N must lead (`bully step-down --to
    /// N` first).
    Failover {
        #[command(flatten)]
        query: QueryArgs,
        /// The coordinator that is to promote (its node ID).
        #[arg(long)]
        to: NodeId,
        /// Required: you accept that acknowledged commits may be lost.
        #[arg(long)]
        accept_loss: bool,
    },
}

/// Runs `bully pg ...`: exit 0 when the node did it, 1 when it refused or failed, 2
/// when node N did not answer.
pub async fn run(command: &PgCommand) -> ExitCode {
    let (query, node, verb) = match command {
        PgCommand::Reinit { query, node } => (query, *node, PgVerb::Reinit),
        PgCommand::Restart { query, node } => (query, *node, PgVerb::Restart),
        PgCommand::Reload { query, node } => (query, *node, PgVerb::Reload),
        PgCommand::Failover {
            accept_loss: false, ..
        } => {
            eprintln!(
                "error: `bully pg failover` only overrides the durability rule, and needs \
                 --accept-loss to say so: without it the cluster promotes by itself as soon \
                 as it may without losing a commit"
            );
            return ExitCode::from(2);
        }
        PgCommand::Failover { query, to, .. } => (query, *to, PgVerb::AcceptLoss),
    };
    // The endpoints, then every member their lists name: node N is found from any
    // member's config or endpoint.
    let (targets, answers) = match endpoints::ask_cluster(query).await {
        Ok(found) => found,
        Err(code) => return code,
    };
    let Some(answer) = answers
        .iter()
        .find(|a| a.status.as_ref().is_ok_and(|s| s.id == node))
    else {
        eprintln!(
            "error: node {node} did not answer (asked {} endpoints)",
            answers.len()
        );
        return ExitCode::from(2);
    };
    let patient = query.timeout.max(AT_LEAST);
    let client = match endpoints::connect(&answer.endpoint, &targets.tls, patient).await {
        Ok(client) => client,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    print_answer(client.postgres(verb).await)
}
