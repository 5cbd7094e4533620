//! `bully status`, `watch` and `step-down`: ask the nodes (see [`super::endpoints`]),
//! print (`bully leader` is in [`super::leader`]).

use super::{endpoints, print_json, QueryArgs};
use crate::api::Status;
use crate::client::Client;
use crate::protocol::{NodeId, Role};
use std::process::ExitCode;
use std::time::Duration;

/// Asks every endpoint at once and returns the first status, after reporting on stderr
/// any endpoint that failed (when none answered) and any disagreement between them.
pub(super) async fn first_status(args: &QueryArgs) -> Result<Status, ExitCode> {
    answered_status(args, false).await
}

/// As [`first_status`], but the coordinator's status if it is among the answers: what
/// the cluster holds (its member list, its settings), not one follower's view.
pub(super) async fn leader_status(args: &QueryArgs) -> Result<Status, ExitCode> {
    answered_status(args, true).await
}

async fn answered_status(args: &QueryArgs, prefer_leader: bool) -> Result<Status, ExitCode> {
    let targets = endpoints::targets(args, false).map_err(|e| {
        eprintln!("error: {e}");
        ExitCode::from(2)
    })?;
    let answers = if prefer_leader {
        let status = |client: Client| async move { client.status().await };
        let leads: fn(&Status) -> bool = |s| s.role == Role::Coordinator;
        let enough = endpoints::Enough::When(leads);
        endpoints::ask_all_with(&targets, args.timeout, enough, None, status).await
    } else {
        endpoints::ask_all(&targets, args.timeout, false).await
    };
    if let Some(text) = endpoints::disagreement(&answers) {
        eprintln!("warning: {text}");
    }
    let mut errors = Vec::new();
    let mut first = None;
    for answer in answers {
        match answer.status {
            Ok(status) if prefer_leader && status.role == Role::Coordinator => return Ok(status),
            Ok(status) => {
                first.get_or_insert(status);
            }
            Err(e) => errors.push(e),
        }
    }
    if let Some(status) = first {
        return Ok(status);
    }
    for e in errors {
        eprintln!("error: {e}");
    }
    Err(ExitCode::from(2))
}

/// Connects to the first endpoint that accepts (in the order given), or to the one
/// `pick` chooses among the answers, for the commands that keep a connection.
pub(super) async fn connect_first(
    args: &QueryArgs,
    pick: impl Fn(&Status) -> bool,
) -> Result<Client, ExitCode> {
    fn fail(e: impl std::fmt::Display) -> ExitCode {
        eprintln!("error: {e}");
        ExitCode::from(2)
    }
    let targets = endpoints::targets(args, false).map_err(fail)?;
    let answers = endpoints::ask_all(&targets, args.timeout, true).await;
    let chosen = answers
        .iter()
        .find(|a| a.status.as_ref().is_ok_and(&pick))
        .or_else(|| answers.iter().find(|a| a.status.is_ok()));
    let Some(chosen) = chosen else {
        for answer in &answers {
            if let Err(e) = &answer.status {
                eprintln!("error: {e}");
            }
        }
        return Err(ExitCode::from(2));
    };
    endpoints::connect(&chosen.endpoint, &targets.tls, args.timeout)
        .await
        .map_err(fail)
}

/// `bully status`: everything the node knows about itself and its peers.
pub async fn status(args: &QueryArgs) -> ExitCode {
    let status = match first_status(args).await {
        Ok(status) => status,
        Err(code) => return code,
    };
    if args.json {
        print_json(&status);
        return ExitCode::SUCCESS;
    }
    println!("{}", status.line());
    println!(
        "  incarnation {}  durable term {}  accepted {}",
        status.incarnation,
        status.term,
        status
            .accepted
            .map(|e| e.to_string())
            .unwrap_or_else(|| "-".into())
    );
    let peers: Vec<String> = status
        .peers
        .iter()
        .map(|p| format!("{}:{}", p.id, if p.connected { "up" } else { "down" }))
        .collect();
    println!("  peers {}", peers.join(" "));
    let health = status.health.described();
    let stepped_down = match status.stepped_down_until_ms {
        Some(until) => format!(
            "  stepped down for {} more ms",
            until.saturating_sub(crate::wall_clock::wall_ms())
        ),
        None => String::new(),
    };
    println!(
        "  eligible {}  health check {health}{stepped_down}",
        if status.eligible { "yes" } else { "no" }
    );
    if status.pause.paused {
        println!("  {}", status.pause);
    }
    if let Some(differs) = &status.file_differs {
        println!("  config file differs: {differs}");
    }
    if let Some(est) = status.estimate {
        let stale = if est.fresh {
            ""
        } else {
            " (stale: counts as 0)"
        };
        println!("  estimate {}{stale}", est.value);
    }
    if let Some(plan) = status.scheduled_switchover {
        let at = crate::wall_clock::time_of(plan.at_ms);
        println!(
            "  switchover to node {} scheduled at {} (in {} s)",
            plan.to,
            humantime::format_rfc3339_seconds(at),
            plan.at_ms
                .saturating_sub(crate::wall_clock::wall_ms())
                .div_ceil(1000)
        );
    }
    let keepers: Vec<String> = status.keepers.iter().map(|k| k.describe()).collect();
    match keepers.is_empty() {
        true => println!("  keepers none (bully run)"),
        false => println!("  keepers {}", keepers.join(", ")),
    }
    ExitCode::SUCCESS
}

/// `bully watch`: one line per coordinator change until the node goes away.
pub async fn watch(args: &QueryArgs) -> ExitCode {
    let client = match connect_first(args, |_| true).await {
        Ok(client) => client,
        Err(code) => return code,
    };
    let mut stream = match client.watch().await {
        Ok(stream) => stream,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let mut last = None;
    loop {
        let next = tokio::select! {
            next = stream.next() => next,
            _ = super::sigterm_or_ctrl_c() => return ExitCode::SUCCESS,
        };
        match next {
            Ok(Some(status)) => {
                let key = (status.coordinator(), status.epoch);
                if last == Some(key) {
                    continue;
                }
                last = Some(key);
                if args.json {
                    print_json(&status);
                } else {
                    println!("{}", status.line());
                }
            }
            Ok(None) => {
                eprintln!("the node closed the watch (it shut down)");
                return ExitCode::from(2);
            }
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        }
    }
}

/// `bully step-down`: ask the coordinator (among the endpoints, if one of them is) to
/// hand over for a while, to node `to` if given, at TIME if `at` is given (the
/// coordinator holds it until then; clap lets `--at` come only with `--to`).
pub async fn step_down(
    args: &QueryArgs,
    for_: Duration,
    to: Option<NodeId>,
    at: Option<super::switch_time::SwitchTime>,
) -> ExitCode {
    let client = match connect_first(args, |s| s.role == Role::Coordinator).await {
        Ok(client) => client,
        Err(code) => return code,
    };
    let for_ms = for_.as_millis() as u64;
    let answer = match (to, at) {
        (Some(to), Some(at)) => {
            let at_ms = at.wall_ms(std::time::SystemTime::now());
            client.schedule_switch_over(to, at_ms, for_ms).await
        }
        (Some(to), None) => client.switch_over(to, for_ms).await,
        (None, _) => client.step_down(for_ms).await,
    };
    print_answer(answer)
}

/// `bully step-down --cancel`: drops the coordinator's scheduled switchover.
pub async fn cancel_switch_over(args: &QueryArgs) -> ExitCode {
    let client = match connect_first(args, |s| s.role == Role::Coordinator).await {
        Ok(client) => client,
        Err(code) => return code,
    };
    print_answer(client.cancel_switch_over().await)
}

/// A command's answer on stdout (exit 0), or its refusal on stderr (exit 1).
pub(super) fn print_answer(answer: Result<String, crate::client::ClientError>) -> ExitCode {
    match answer {
        Ok(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
