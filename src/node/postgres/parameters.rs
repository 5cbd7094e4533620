//! Server parameters as cluster settings (issue 47, docs/design.md#cluster-settings):
//! the parameters every member's server runs with are part of the committed member
//! list, changed with `bully config set postgres.parameters.NAME=VALUE`, never by one
//! host's file (its `[postgres] parameters` seed a new cluster only). Each manager
//! follows the list its node holds: it rewrites its include file with the list's
//! parameters (`files::write_conf`, the writer every start uses), checks that
//! PostgreSQL would start with it, and has the server reread it. A set PostgreSQL
//! refuses is put back and reported (`PgState::parameters_refused`) until the list
//! changes; what the server could not take without a restart shows as
//! `pending_restart` (`pg_settings`) until `bully pg restart` applies it in place.
//! `bully pg reload N` applies the list's parameters again and has the server reread its
//! files (after an edit of `postgresql.conf` by hand).

use super::programs::Programs;
use super::sql::why;
use crate::config::postgres::{parameter_problem, TlsMode};
use crate::protocol::membership::{ConfigId, Membership};
use crate::protocol::NodeId;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;
use tokio::time::Instant;
use tokio_postgres::Client;

/// Server parameters: name to value.
pub type Parameters = BTreeMap<String, String>;

/// The parameters member list `list` gives the servers, with the list's ID; `None`
/// while the node holds no settings. A name bully owns itself
/// (`tls` on or not) is left out and named in the third part: `bully config set`
/// refuses them, so only a list written another way can hold one.
pub fn of_the_cluster(
    list: Option<&Membership>,
    tls: TlsMode,
) -> Option<(ConfigId, Parameters, Vec<String>)> {
    let list = list?;
    let held = list.settings.as_ref()?.pg_parameters.as_ref()?;
    let (kept, dropped): (Parameters, Parameters) = held
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .partition(|(name, value)| parameter_problem(name, value, tls).is_none());
    Some((list.id, kept, dropped.into_keys().collect()))
}

/// The names whose values differ between `old` and `new` (added and removed ones too).
pub fn changed(old: &Parameters, new: &Parameters) -> Vec<String> {
    let mut names: Vec<String> = old
        .keys()
        .chain(new.keys())
        .filter(|name| old.get(*name) != new.get(*name))
        .cloned()
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Whether PostgreSQL would start with the data dir's configuration files as they are
/// on disk now: `postgres -C port` reads them exactly as a start does (the syntax, the
/// names and every value, those that wait for a restart too) and fails on what a start
/// would refuse; runs beside a running server. An error quotes PostgreSQL.
pub async fn check_files(
    programs: &Programs,
    data_dir: &Path,
    timeout: Duration,
) -> Result<(), String> {
    let args = [
        "-D".to_string(),
        data_dir.display().to_string(),
        "-C".into(),
        "port".into(),
    ];
    let env = [("LC_ALL".to_string(), "C".to_string())];
    programs
        .run("postgres", &args, &env, timeout)
        .await
        .map(|_| ())
        .map_err(|e| format!("PostgreSQL refuses the new parameters: {e}"))
}

/// `pg_reload_conf()`, then waits (within `timeout`) until this session has reread the
/// files (`pg_conf_load_time()` moved on: the reload is a signal, taken up a moment
/// later), so the [`pending`] read after it sees the new files; `false` when it did
/// not see that in time.
pub async fn reload_and_wait(client: &Client, timeout: Duration) -> Result<bool, String> {
    let deadline = Instant::now() + timeout;
    let load_time = "SELECT extract(epoch FROM pg_conf_load_time())::float8";
    let ask = |sql: &'static str| async move {
        tokio::time::timeout_at(deadline, client.query_one(sql, &[]))
            .await
            .map_err(|_| format!("`{sql}` did not answer"))?
            .map_err(|e| format!("`{sql}`: {}", why(&e)))
    };
    let before: f64 = ask(load_time).await?.get(0);
    ask("SELECT pg_reload_conf()").await?;
    // Bounded by the deadline: each round trip is a point where the session takes up
    // the signal.
    while Instant::now() < deadline {
        let now: f64 = ask(load_time).await?.get(0);
        if now > before {
            return Ok(true);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(false)
}

/// The parameters the server holds for its next restart (`pg_settings.pending_restart`),
/// by name.
pub async fn pending(client: &Client, timeout: Duration) -> Result<Vec<String>, String> {
    let sql = "SELECT name FROM pg_settings WHERE pending_restart ORDER BY name";
    let rows = tokio::time::timeout(timeout, client.query(sql, &[]))
        .await
        .map_err(|_| "pg_settings did not answer".to_string())?
        .map_err(|e| format!("pg_settings: {}", why(&e)))?;
    Ok(rows.iter().map(|r| r.get::<_, String>(0)).collect())
}

/// What applying the list's parameters on node `id` did: which of `changed` apply now,
/// which wait for a restart, and what was pending before.
pub fn answer(id: NodeId, changed: &[String], pending: &[String], seen: bool) -> String {
    let (waiting, now): (Vec<&String>, Vec<&String>) =
        changed.iter().partition(|n| pending.contains(n));
    let list = |names: &[&String]| {
        names
            .iter()
            .map(|n| n.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut text = match (now.is_empty(), waiting.is_empty()) {
        (true, true) => format!("node {id}: no parameter changed; the server reread its files"),
        (false, true) => format!("node {id}: applied now: {}", list(&now)),
        (true, false) => format!(
            "node {id}: written, waiting for a restart (`bully pg restart {id}`): {}",
            list(&waiting)
        ),
        (false, false) => format!(
            "node {id}: applied now: {}; waiting for a restart (`bully pg restart {id}`): {}",
            list(&now),
            list(&waiting)
        ),
    };
    let earlier: Vec<&String> = pending.iter().filter(|n| !changed.contains(n)).collect();
    if !earlier.is_empty() {
        text += &format!("; also pending a restart from before: {}", list(&earlier));
    }
    if !seen {
        text += "; the server was not seen rereading its files in time (see its log)";
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> Parameters {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn changed_names_added_changed_and_removed_parameters_once() {
        let old = params(&[("work_mem", "4MB"), ("shared_buffers", "128MB"), ("a", "1")]);
        let new = params(&[("work_mem", "8MB"), ("shared_buffers", "128MB"), ("b", "1")]);
        assert_eq!(changed(&old, &new), ["a", "b", "work_mem"]);
        assert!(changed(&old, &old).is_empty());
    }

    #[test]
    fn the_answer_says_what_applies_and_what_waits() {
        let changed = vec!["shared_buffers".to_string(), "work_mem".to_string()];
        let pending = ["shared_buffers".to_string(), "max_connections".to_string()];
        let text = answer(2, &changed, &pending, true);
        assert!(text.contains("applied now: work_mem"), "{text}");
        assert!(
            text.contains("waiting for a restart (`bully pg restart 2`): shared_buffers"),
            "{text}"
        );
        assert!(text.contains("from before: max_connections"), "{text}");
        assert!(answer(2, &[], &[], true).contains("no parameter changed"));
        assert!(answer(2, &[], &[], false).contains("not seen rereading"));
    }

    #[test]
    fn the_cluster_parameters_leave_out_names_bully_owns() {
        use crate::protocol::{ClusterSettings, Preempt, Timing};
        assert!(of_the_cluster(None, TlsMode::Off).is_none(), "no list");
        let bare = Membership::seeded(vec![]);
        assert!(
            of_the_cluster(Some(&bare), TlsMode::Off).is_none(),
            "no settings"
        );
        let settings = ClusterSettings::new(Timing::default(), Preempt::Never)
            .with_pg_parameters(params(&[("work_mem", "8MB"), ("port", "1"), ("ssl", "on")]));
        let list = bare.with_settings(settings);
        let (_, kept, dropped) = of_the_cluster(Some(&list), TlsMode::Off).unwrap();
        assert_eq!(kept, params(&[("work_mem", "8MB"), ("ssl", "on")]));
        assert_eq!(dropped, ["port"]);
        let (_, kept, dropped) = of_the_cluster(Some(&list), TlsMode::On).unwrap();
        assert_eq!(kept, params(&[("work_mem", "8MB")]));
        assert_eq!(dropped, ["port", "ssl"]);
    }
}
