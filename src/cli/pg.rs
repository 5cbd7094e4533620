//! `bully pg reinit|restart|reload N`: an operator's verb for the PostgreSQL server
//! node N keeps (`[postgres]`, src/node/postgres/), like `patronictl reinit`,
//! `restart` and `reload` (a reload rereads the parameters from N's config file,
//! src/node/postgres/parameters.rs). The verb goes to node N itself, found among the endpoints
//! and the members they list; its manager answers once it has acted (a reinit: once the
//! clone is done).

use super::endpoints;
use super::query::print_answer;
use super::QueryArgs;
use crate::api::postgres::{PgRole, PgVerb};
use crate::api::Status;
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
    /// (no election, the same timeline), answering once it takes writes again. Without
    /// N: every server with parameters pending a restart, one at a time, the standbys
    /// first and the primary last, each back before the next.
    Restart {
        #[command(flatten)]
        query: QueryArgs,
        /// The node whose server it is (its node ID); the command goes to that node.
        node: Option<NodeId>,
    },
    /// Apply the cluster's PostgreSQL parameters (`bully config set
    /// postgres.parameters.NAME=VALUE`) on node N again and have its server reread its
    /// files, e.g. after an edit of `postgresql.conf` by hand; the answer names what
    /// applies now and what waits for `bully pg restart N` (`pending_restart`, also
    /// shown by `bully status --cluster`).
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
    /// Take over a PostgreSQL server that ran without bully, with its data: run on its
    /// host with this node stopped, before the node first starts. Checks the config's
    /// `[postgres] data_dir` holds a cluster of the configured binaries' version (owned
    /// by the server's user), brings a config kept outside it (Debian's
    /// /etc/postgresql/<version>/<name>/, found on the running server's command line or
    /// named by --config-file) into it, stops a server running on it (fast shutdown),
    /// on a primary makes the replication role and sets both roles'
    /// passwords from `[postgres]` (single-user mode), adds bully's pg_hba.conf lines
    /// for the members, and notes the data as this node's. Then start the node: with
    /// the other members empty (they clone it) or holding standbys of the same cluster,
    /// the freshest server is promoted and nothing it committed is lost. Running it
    /// again changes nothing more.
    Adopt {
        /// The node's config file.
        #[arg(long, short = 'c')]
        config: std::path::PathBuf,
        /// The server's own config file when it is outside the data dir and no server
        /// runs to say so (Debian: /etc/postgresql/15/main/postgresql.conf); a running
        /// server's must be this one.
        #[arg(long, value_name = "FILE")]
        config_file: Option<std::path::PathBuf>,
    },
}

/// Runs `bully pg ...`: exit 0 when the node did it, 1 when it refused or failed, 2
/// when node N did not answer.
pub async fn run(command: &PgCommand) -> ExitCode {
    let (query, node, verb) = match command {
        PgCommand::Reinit { query, node } => (query, *node, PgVerb::Reinit),
        PgCommand::Restart { query, node: None } => return restart_pending(query).await,
        PgCommand::Restart {
            query,
            node: Some(node),
        } => (query, *node, PgVerb::Restart),
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
        PgCommand::Adopt {
            config,
            config_file,
        } => return adopt(config, config_file.as_deref()).await,
    };
    ask_node(query, node, verb).await
}

/// `bully pg adopt --config FILE [--config-file FILE]`: exit 0 once the data dir is this node's to start, 1
/// when it refused (saying why, having changed nothing after the refusal), 2 when the
/// config cannot be read.
async fn adopt(path: &std::path::Path, config_file: Option<&std::path::Path>) -> ExitCode {
    let config = match crate::config::load(path) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    match crate::node::postgres::adopt::adopt(&config, config_file).await {
        Ok(done) => {
            println!("{}", adopted_words(config.id, &done));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

/// What `bully pg adopt` tells the operator it did.
fn adopted_words(id: NodeId, done: &crate::node::postgres::adopt::Adopted) -> String {
    let mut lines = vec![format!(
        "Adopted {} (system identifier {}) for node {id}.",
        done.data_dir.display(),
        done.system_id
    )];
    lines.push(match done.stopped {
        None => "No server was running on it.".into(),
        Some((pid, false)) => format!("Stopped its server (PID {pid}) cleanly."),
        Some((pid, true)) => format!(
            "Its server (PID {pid}) did not stop in time and was killed; PostgreSQL \
             recovers it at the next start."
        ),
    });
    if let Some(source) = &done.brought_in {
        lines.push(format!(
            "Brought {} into the data dir (as postgresql.conf, with the pg_hba.conf, \
             pg_ident.conf and relative includes it names); the originals are left as they \
             were.",
            source.display()
        ));
    }
    lines.push(match done.standby {
        false => "Roles: the replication role exists and both roles' passwords are set.".into(),
        true => {
            "A standby's data dir: its roles come from its primary (adopt that one too).".into()
        }
    });
    lines.push(match &done.hba {
        Some(path) => format!("Added bully's lines for the members to {}.", path.display()),
        None => "pg_hba.conf already had bully's lines.".into(),
    });
    if !done.other_slots.is_empty() {
        lines.push(format!(
            "Replication slots bully does not manage: {}. Each keeps WAL until dropped: once \
             bully's standbys stream, drop those no one uses (SELECT \
             pg_drop_replication_slot('NAME') on the primary).",
            done.other_slots.join(", ")
        ));
    }
    lines.push(
        "Start the node now (systemctl start --no-block bully bully-run): the freshest \
         server of the members is promoted once every member answers."
            .into(),
    );
    lines.join("\n")
}

/// Sends `verb` to node `node`, found among the endpoints and the members they list,
/// and prints its answer.
async fn ask_node(query: &QueryArgs, node: NodeId, verb: PgVerb) -> ExitCode {
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

/// `bully pg restart` without N: the servers with parameters pending a restart, in the
/// order [`restart_order`] gives, one at a time; each restart must succeed and its
/// server report nothing pending before the next begins, so at most one server is
/// down at any time and the primary goes last.
async fn restart_pending(query: &QueryArgs) -> ExitCode {
    let answers = match endpoints::ask_cluster(query).await {
        Ok((_, answers)) => answers,
        Err(code) => return code,
    };
    let statuses: Vec<&Status> = answers
        .iter()
        .filter_map(|a| a.status.as_ref().ok())
        .collect();
    let order = restart_order(&statuses);
    if order.is_empty() {
        println!("no server has parameters pending a restart");
        return ExitCode::SUCCESS;
    }
    println!("restarting, one at a time: nodes {order:?}");
    for node in order {
        let code = ask_node(query, node, PgVerb::Restart).await;
        if code != ExitCode::SUCCESS {
            eprintln!("error: node {node}'s restart failed; the rest were left as they are");
            return code;
        }
        if let Err(why) = back_without_pending(query, node).await {
            eprintln!("error: {why}; the rest were left as they are");
            return ExitCode::from(1);
        }
    }
    ExitCode::SUCCESS
}

/// The members whose servers hold parameters for their next restart: standbys (and
/// any other role) by ID, then the primary.
fn restart_order(statuses: &[&Status]) -> Vec<NodeId> {
    let mut pending: Vec<(bool, NodeId)> = statuses
        .iter()
        .filter_map(|s| {
            let pg = s.postgres.as_ref()?;
            (!pg.pending_restart.is_empty()).then_some((pg.role == PgRole::Primary, s.id))
        })
        .collect();
    pending.sort_unstable();
    pending.dedup();
    pending.into_iter().map(|(_, id)| id).collect()
}

/// Waits (within [`AT_LEAST`]) until node `node`'s server runs again with nothing
/// pending a restart.
async fn back_without_pending(query: &QueryArgs, node: NodeId) -> Result<(), String> {
    let deadline = std::time::Instant::now() + AT_LEAST;
    loop {
        let (_, answers) = endpoints::ask_cluster(query)
            .await
            .map_err(|_| "the members no longer answer".to_string())?;
        let back = answers
            .iter()
            .filter_map(|a| a.status.as_ref().ok())
            .filter(|s| s.id == node)
            .filter_map(|s| s.postgres.as_ref())
            .any(|pg| {
                matches!(pg.role, PgRole::Primary | PgRole::Replica)
                    && pg.pending_restart.is_empty()
            });
        if back {
            return Ok(());
        }
        if std::time::Instant::now() >= deadline {
            return Err(format!(
                "node {node}'s server did not come back without pending parameters within {AT_LEAST:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::postgres::PgState;

    fn member(id: NodeId, role: PgRole, pending: &[&str]) -> Status {
        let mut status = Status::starting_candidate(id, &[]);
        let mut pg = PgState::bare("127.0.0.1:5432".parse().unwrap(), role, String::new(), 0);
        pg.pending_restart = pending.iter().map(|p| p.to_string()).collect();
        status.postgres = Some(pg);
        status
    }

    #[test]
    fn pending_restarts_go_standbys_first_and_the_primary_last() {
        let members = [
            member(3, PgRole::Primary, &["shared_buffers"]),
            member(1, PgRole::Replica, &["shared_buffers"]),
            member(2, PgRole::Replica, &[]),
            member(4, PgRole::Replica, &["max_connections"]),
        ];
        let refs: Vec<&Status> = members.iter().collect();
        assert_eq!(restart_order(&refs), [1, 4, 3]);
        let none: Vec<&Status> = members[2..3].iter().collect();
        assert!(restart_order(&none).is_empty());
    }
}
