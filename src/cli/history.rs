//! `bully history`: one timeline merged from every member's event log, like
//! `patronictl history` or `pg_autoctl show events`. Every endpoint is asked at once
//! (with --config the node and all its peers, and members added at runtime that their
//! member lists name) for its log's lines since `--since`; the
//! events (see [`super::history_words`] for which records make one) are ordered by time,
//! then node, and the members that did not answer are named.

use super::endpoints::{self, AskError, Endpoint};
use super::history_words::{Event, Words};
use super::{print_json, QueryArgs};
use crate::api::event_log::RecentEvents;
use crate::api::Status;
use crate::history::parse_json_lines;
use std::process::ExitCode;
use std::time::Duration;
use tokio::task::JoinSet;

/// Lines asked of each node at most; the node's frame cap usually binds first.
const MAX_EVENTS: u32 = 10_000;

/// What one endpoint gave: its events and, on the same connection, its status.
struct Reply {
    endpoint: Endpoint,
    events: Result<RecentEvents, AskError>,
    status: Option<Status>,
}

/// Exit 0 when at least one member answered (the output names those that did not), 2
/// when none did or the flags are wrong.
pub async fn run(args: &QueryArgs, since: Duration) -> ExitCode {
    let targets = match endpoints::targets_or_exit(args, true) {
        Ok(targets) => targets,
        Err(code) => return code,
    };
    let now_ms = crate::wall_clock::wall_ms();
    let since_ms = now_ms.saturating_sub(since.as_millis() as u64);
    let mut replies = ask_every(&targets, since_ms, args.timeout).await;
    // The statuses name members added at runtime that no config lists (`bully member
    // add`); they are asked too.
    let statuses: Vec<&Status> = replies.iter().filter_map(|r| r.status.as_ref()).collect();
    let added = endpoints::listed_elsewhere(&targets, &statuses);
    if !added.endpoints.is_empty() {
        replies.extend(ask_every(&added, since_ms, args.timeout).await);
    }
    let mut entries = Vec::new();
    let mut notes = Vec::new();
    for reply in &replies {
        let Ok(recent) = &reply.events else { continue };
        let parsed = parse_json_lines(recent.lines.join("\n").as_bytes());
        let who = &reply.endpoint;
        if recent.truncated {
            notes.push(format!(
                "{who}: older events since --since left out (reply size cap); \
                 ask for a shorter span"
            ));
        }
        let unparsed = recent.unparsed + parsed.unparsed;
        if unparsed > 0 {
            notes.push(format!(
                "{who}: {unparsed} line(s) skipped (torn by a kill, or from a newer version)"
            ));
        }
        entries.extend(parsed.entries);
    }
    // A stable sort: each node's own order stands among equal times.
    entries.sort_by_key(|e| (e.at_ms, e.node));
    let events = Words::events(&entries);
    let silent: Vec<(&Endpoint, &AskError)> = replies
        .iter()
        .filter_map(|r| r.events.as_ref().err().map(|e| (&r.endpoint, e)))
        .collect();
    if args.json {
        print_json_lines(&events, &silent, &notes, now_ms);
    } else {
        print_text(&events, &silent, &notes);
    }
    match replies.iter().any(|r| r.events.is_ok()) {
        true => ExitCode::SUCCESS,
        false => ExitCode::from(2),
    }
}

/// Every endpoint's recent events, asked at once; each ask ends within `timeout`.
async fn ask_every(targets: &endpoints::Targets, since_ms: u64, timeout: Duration) -> Vec<Reply> {
    let mut asks = JoinSet::new();
    for (i, endpoint) in targets.endpoints.iter().cloned().enumerate() {
        let tls = targets.tls.clone();
        asks.spawn(async move {
            let asked = endpoints::ask_with(&endpoint, &tls, timeout, |client| async move {
                let events = client.events(since_ms, MAX_EVENTS).await?;
                Ok((events, client.status().await.ok()))
            })
            .await;
            let (events, status) = match asked {
                Ok((events, status)) => (Ok(events), status),
                Err(e) => (Err(e), None),
            };
            (
                i,
                Reply {
                    endpoint,
                    events,
                    status,
                },
            )
        });
    }
    let mut replies = Vec::new();
    while let Some(joined) = asks.join_next().await {
        if let Ok(reply) = joined {
            replies.push(reply);
        }
    }
    replies.sort_by_key(|(i, _)| *i);
    replies.into_iter().map(|(_, r)| r).collect()
}

/// One line per event, a date line whenever the (UTC) day changes, then notes and the
/// members that did not answer.
fn print_text(events: &[Event], silent: &[(&Endpoint, &AskError)], notes: &[String]) {
    let mut day = String::new();
    for event in events {
        let (date, time) = utc(event.at_ms);
        if date != day {
            println!("{date} (UTC)");
            day = date;
        }
        println!("{time}  node {:<3} {}", event.node, event.text);
    }
    if events.is_empty() {
        println!("no events in that span");
    }
    for note in notes {
        println!("note: {note}");
    }
    if !silent.is_empty() {
        let named: Vec<String> = silent
            .iter()
            .map(|(endpoint, e)| match endpoint.expect {
                Some(id) => format!("node {id} ({e})"),
                None => e.to_string(),
            })
            .collect();
        println!("no answer from: {}", named.join(", "));
    }
}

/// One JSON object per line: each event (`at_ms`, `node`, `kind`, `details`, `text`),
/// then a `note` per note and a `no_answer` per member that did not answer (stamped
/// with the time of asking).
fn print_json_lines(
    events: &[Event],
    silent: &[(&Endpoint, &AskError)],
    notes: &[String],
    now_ms: u64,
) {
    for e in events {
        print_json(&serde_json::json!({
            "at_ms": e.at_ms, "node": e.node, "kind": e.kind,
            "details": e.details, "text": e.text,
        }));
    }
    for note in notes {
        print_json(&serde_json::json!({
            "at_ms": now_ms, "node": null, "kind": "note", "details": {}, "text": note,
        }));
    }
    for (endpoint, error) in silent {
        print_json(&serde_json::json!({
            "at_ms": now_ms, "node": endpoint.expect, "kind": "no_answer",
            "details": { "endpoint": endpoint.addr.to_string(), "error": error.to_string() },
            "text": format!("no answer from {endpoint}"),
        }));
    }
}

/// `("2026-11-26", "12:01:03.120")` for wall-clock ms since the Unix epoch.
fn utc(at_ms: u64) -> (String, String) {
    let at = crate::wall_clock::time_of(at_ms);
    let text = humantime::format_rfc3339_millis(at).to_string();
    match text.split_once('T') {
        Some((date, time)) => (date.to_string(), time.trim_end_matches('Z').to_string()),
        None => (String::new(), text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_utc_dates_and_clock_times() {
        // 2026-11-26T12:01:03.120Z
        let ms = 1_795_694_463_120;
        assert_eq!(
            utc(ms),
            ("2026-11-26".to_string(), "12:01:03.120".to_string())
        );
    }
}
