//! `bully status --cluster`: one row per member, like `patronictl list`, from every
//! endpoint asked at once. Members that some node lists as a peer but that did not
//! answer get a row too ("no answer"), so a missing member is visible; an endpoint that
//! did not answer is named on stderr.

use super::endpoints::{self, Answer};
use super::{print_json, QueryArgs};
use crate::api::postgres::lsn_text;
use crate::api::Status;
use crate::protocol::NodeId;
use std::collections::BTreeSet;
use std::process::ExitCode;

/// Exit 0 when at least one member answered (the table says which did not), 2 when
/// none did or the flags are wrong.
pub async fn run(args: &QueryArgs) -> ExitCode {
    let answers = match endpoints::ask_cluster(args).await {
        Ok((_, answers)) => answers,
        Err(code) => return code,
    };
    if args.json {
        let rows: Vec<serde_json::Value> = answers
            .iter()
            .map(|a| match &a.status {
                Ok(status) => serde_json::json!({
                    "endpoint": a.endpoint.addr.to_string(), "status": status }),
                Err(e) => serde_json::json!({
                    "endpoint": a.endpoint.addr.to_string(), "member": a.endpoint.expect,
                    "error": e.to_string() }),
            })
            .collect();
        print_json(&rows);
    } else {
        let rows = rows(&answers);
        match keeps_postgres(&answers) {
            true => print!("{}", super::table::render(&rows)),
            false => print!("{}", super::table::render(&without_postgres(rows))),
        }
        for answer in &answers {
            if let Err(e) = &answer.status {
                eprintln!("error: {e}");
            }
        }
        if let Some(text) = endpoints::disagreement(&answers) {
            eprintln!("warning: {text}");
        }
        for status in answers.iter().filter_map(|a| a.status.as_ref().ok()) {
            if let Some(differs) = &status.file_differs {
                eprintln!("warning: node {}: {differs}", status.id);
            }
            let refused = status
                .postgres
                .as_ref()
                .and_then(|pg| pg.parameters_refused.as_ref());
            if let Some(why) = refused {
                eprintln!(
                    "warning: node {}: its server does not run the cluster's parameters: {why}",
                    status.id
                );
            }
        }
        if let Some(pause) = endpoints::newest_pause(&answers).filter(|p| p.paused) {
            println!("{pause}");
        }
    }
    if answers.iter().any(|a| a.status.is_ok()) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    }
}

/// The columns of every row; the last [`PG_COLUMNS`] are about PostgreSQL servers.
const COLUMNS: usize = 14;
/// PostgreSQL's columns, like `patronictl list`: the server's role, timeline, WAL
/// position, lag behind the primary and the parameters pending a restart (Patroni's
/// `Pending restart`); shown when a member keeps a server.
const PG_COLUMNS: usize = 5;

/// Whether any member that answered keeps a PostgreSQL server (`[postgres]`).
fn keeps_postgres(answers: &[Answer]) -> bool {
    answers
        .iter()
        .any(|a| a.status.as_ref().is_ok_and(|s| s.postgres.is_some()))
}

/// The rows without PostgreSQL's columns.
fn without_postgres(rows: Vec<[String; COLUMNS]>) -> Vec<[String; COLUMNS - PG_COLUMNS]> {
    rows.into_iter()
        .map(|row| std::array::from_fn(|i| row[i].clone()))
        .collect()
}

/// The table: a header, then one row per member in ID order.
fn rows(answers: &[Answer]) -> Vec<[String; COLUMNS]> {
    let mut rows: Vec<(NodeId, [String; COLUMNS])> = Vec::new();
    for answer in answers {
        let endpoint = answer.endpoint.addr.to_string();
        match &answer.status {
            Ok(status) => rows.push((status.id, member_row(status, endpoint))),
            // An endpoint nobody knows the member of is on stderr only: one row per member.
            Err(_) => {
                if let Some(id) = answer.endpoint.expect {
                    rows.push((id, missing_row(id, endpoint, "unreachable")));
                }
            }
        }
    }
    let listed: BTreeSet<NodeId> = rows.iter().map(|(id, _)| *id).collect();
    let named: BTreeSet<NodeId> = answers
        .iter()
        .filter_map(|a| a.status.as_ref().ok())
        .flat_map(|s| s.peers.iter().map(|p| p.id))
        .collect();
    for id in named.difference(&listed) {
        rows.push((*id, missing_row(*id, "-".into(), "no answer")));
    }
    rows.sort_by_key(|(id, _)| *id);
    let header = [
        "MEMBER",
        "ENDPOINT",
        "ROLE",
        "EPOCH",
        "COORDINATOR",
        "ELIGIBLE",
        "PEERS UP",
        "LAG",
        "EST",
        "PG",
        "TL",
        "WAL",
        "PG LAG",
        "PENDING RESTART",
    ]
    .map(String::from);
    std::iter::once(header)
        .chain(rows.into_iter().map(|(_, row)| row))
        .collect()
}

fn member_row(status: &Status, endpoint: String) -> [String; COLUMNS] {
    let up = status.peers.iter().filter(|p| p.connected).count();
    let pg = status.postgres.as_ref();
    let dash = || "-".to_string();
    [
        status.id.to_string(),
        endpoint,
        status.role.to_string(),
        status.epoch.map(|e| e.to_string()).unwrap_or_else(dash),
        status
            .coordinator()
            .map(|c| c.to_string())
            .unwrap_or_else(dash),
        if status.eligible { "yes" } else { "no" }.to_string(),
        format!("{up}/{}", status.peers.len()),
        status
            .heartbeat_age_ms
            .map(|ms| format!("{ms} ms"))
            .unwrap_or_else(dash),
        status
            .estimate
            .map(|est| match est.fresh {
                true => est.value.to_string(),
                false => format!("{} (stale)", est.value),
            })
            .unwrap_or_else(dash),
        pg.map(|p| p.role.to_string()).unwrap_or_else(dash),
        pg.and_then(|p| p.timeline)
            .map(|t| t.to_string())
            .unwrap_or_else(dash),
        pg.and_then(|p| p.wal_position)
            .map(lsn_text)
            .unwrap_or_else(dash),
        pg.and_then(|p| p.lag_bytes)
            .map(|b| format!("{b} B"))
            .unwrap_or_else(dash),
        pg.filter(|p| !p.pending_restart.is_empty())
            .map(|p| p.pending_restart.join(","))
            .unwrap_or_else(dash),
    ]
}

fn missing_row(id: NodeId, endpoint: String, why: &str) -> [String; COLUMNS] {
    let mut row: [String; COLUMNS] = std::array::from_fn(|_| "-".to_string());
    row[0] = id.to_string();
    row[1] = endpoint;
    row[2] = why.to_string();
    row
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::postgres::{PgRole, PgState};

    #[test]
    fn a_members_row_names_the_parameters_pending_a_restart() {
        let mut status = Status::starting_candidate(2, &[1, 3]);
        let mut pg = PgState::bare(
            "127.0.0.1:5432".parse().unwrap(),
            PgRole::Replica,
            "".into(),
            0,
        );
        status.postgres = Some(pg.clone());
        assert_eq!(member_row(&status, "e".into())[COLUMNS - 1], "-");
        pg.pending_restart = vec!["max_connections".into(), "shared_buffers".into()];
        status.postgres = Some(pg);
        let row = member_row(&status, "e".into());
        assert_eq!(row[COLUMNS - 1], "max_connections,shared_buffers");
        assert_eq!(missing_row(3, "-".into(), "no answer")[2], "no answer");
    }
}
