//! `bully pause` and `bully resume`: switch automatic failover and preemption off and
//! on for the whole cluster (src/api/pause.rs). The command reads every member's
//! status, writes a record one generation above the newest it saw to every member that
//! answered, and names those that did not (the members that keep it pass it on to
//! every peer they are connected to, and to any peer whose link comes up later,
//! src/node/serve/pause_sync.rs).

use super::endpoints::{self, Answer};
use super::QueryArgs;
use crate::api::{Pause, Request, Response, Status};
use crate::protocol::{membership::majority_of, NodeId, Role};
use std::process::ExitCode;
use tokio::task::JoinSet;

/// Exit 0 when a majority of the members keep the new record, 1 when fewer do or
/// (pause) when there is no coordinator to hold the role, 2 when no member answered.
pub async fn run(args: &QueryArgs, paused: bool) -> ExitCode {
    let (targets, answers) = match endpoints::ask_cluster(args).await {
        Ok(found) => found,
        Err(code) => return code,
    };
    let statuses: Vec<&Status> = answers
        .iter()
        .filter_map(|a| a.status.as_ref().ok())
        .collect();
    if statuses.is_empty() {
        for answer in &answers {
            if let Err(e) = &answer.status {
                eprintln!("error: {e}");
            }
        }
        eprintln!("error: no member answered; nothing changed");
        return ExitCode::from(2);
    }
    let holder = statuses
        .iter()
        .find(|s| s.role == Role::Coordinator)
        .map(|s| s.id);
    if paused && holder.is_none() {
        eprintln!(
            "error: no member leads now; a pause would keep every node from leading. Wait \
             for a coordinator (`bully status --cluster`), then pause. Nothing changed."
        );
        return ExitCode::from(1);
    }
    let newest = endpoints::newest_pause(&answers).unwrap_or_default();
    let pause = Pause {
        generation: newest.generation + 1,
        paused,
        holder: holder.filter(|_| paused),
        set_at_ms: crate::wall_clock::wall_ms(),
    };
    let kept = write_everywhere(&targets.tls, &answers, &pause, args.timeout).await;
    let members = member_count(&statuses);
    let unanswered: Vec<String> = answers
        .iter()
        .filter(|a| a.status.is_err())
        .map(|a| a.endpoint.to_string())
        .collect();
    if !unanswered.is_empty() {
        println!(
            "no answer from {}: each learns it from the first member it reaches",
            unanswered.join(", ")
        );
    }
    let verb = if paused { "paused" } else { "resumed" };
    if kept.len() >= majority_of(members) {
        println!("{pause}");
        if paused {
            println!(
                "node {} keeps leading while its lease holds; if it goes, no other node \
                 takes over until `bully resume`",
                holder.unwrap_or_default()
            );
        }
        println!("{verb}: kept by nodes {}", list(&kept));
        ExitCode::SUCCESS
    } else {
        println!(
            "not {verb}: only nodes {} of {members} members keep generation {}; run it again \
             when more members answer",
            list(&kept),
            pause.generation
        );
        ExitCode::from(1)
    }
}

/// Sends `pause` to every member that answered the status round, all at once; the IDs
/// of those that kept it (or a newer one), with a line for each refusal or error.
async fn write_everywhere(
    tls: &crate::certs::TlsFiles,
    answers: &[Answer],
    pause: &Pause,
    timeout: std::time::Duration,
) -> Vec<NodeId> {
    let mut pending = JoinSet::new();
    for answer in answers {
        let Ok(status) = &answer.status else { continue };
        let (endpoint, tls, id) = (answer.endpoint.clone(), tls.clone(), status.id);
        let request = Request::SetPause {
            pause: pause.clone(),
        };
        pending.spawn(async move {
            let call = |client: crate::client::Client| async move { client.request(request).await };
            (
                id,
                endpoints::ask_with(&endpoint, &tls, timeout, call).await,
            )
        });
    }
    let mut kept = Vec::new();
    while let Some(joined) = pending.join_next().await {
        let Ok((id, answer)) = joined else { continue };
        match answer {
            Ok(Response::Done(_)) => kept.push(id),
            Ok(Response::Refused(why)) => eprintln!("error: node {id}: {why}"),
            Ok(other) => eprintln!("error: node {id} answered {other:?}"),
            Err(e) => eprintln!("error: node {id}: {e}"),
        }
    }
    kept.sort_unstable();
    kept
}

/// How many voting members the answering nodes' lists hold (the largest list seen;
/// the answering nodes themselves when no list is shown).
fn member_count(statuses: &[&Status]) -> usize {
    statuses
        .iter()
        .filter_map(|s| s.members.as_ref().map(|list| list.voters().len()))
        .max()
        .unwrap_or(statuses.len())
}

fn list(ids: &[NodeId]) -> String {
    if ids.is_empty() {
        return "none".into();
    }
    ids.iter()
        .map(|id| id.to_string())
        .collect::<Vec<_>>()
        .join(",")
}
