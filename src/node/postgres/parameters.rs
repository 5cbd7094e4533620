//! Server parameters without a failover (issue 49): `bully pg reload` rereads
//! `[postgres] parameters` from the config file the node started from, validated as at
//! start (`crate::config::load`), and the manager rewrites its include file with them
//! (`files::write_conf`, the writer every start uses) and has the server reread it.
//! What the server could not take without a restart shows as `pending_restart`
//! (`pg_settings`), in each member's report ([`PgState`](crate::api::postgres::PgState))
//! until `bully pg restart N` applies it in place.
//!
//! Parameters stay per node: each node rereads its own file, so members may differ for
//! a while (during a rolling change, or on purpose: a smaller `work_mem` on a weaker
//! host). Parameters that must match across members (`max_connections` and the other
//! settings a standby needs at least as high as its primary's) are the operator's to
//! change in the right order, as with PostgreSQL alone.

use super::programs::Programs;
use super::sql::why;
use crate::config::postgres::PostgresConfig;
use crate::protocol::NodeId;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tokio_postgres::Client;

/// `[postgres] parameters`: name to value.
pub type Parameters = BTreeMap<String, String>;

/// The parameters `bully pg reload` applied last, `None` before the first: held by the
/// node's services (src/node/drive/services.rs), so a manager started after a stall
/// writes these, not the ones the node started with.
pub type Reloaded = Arc<Mutex<Option<Parameters>>>;

/// Puts the last reloaded parameters, if any, into `config` (a manager's start).
pub fn apply_reloaded(config: &mut PostgresConfig, reloaded: &Reloaded) {
    if let Some(parameters) = reloaded.lock().unwrap_or_else(|e| e.into_inner()).clone() {
        config.parameters = parameters;
    }
}

/// Keeps `parameters` for the managers after this one.
pub fn keep_reloaded(reloaded: &Reloaded, parameters: &Parameters) {
    *reloaded.lock().unwrap_or_else(|e| e.into_inner()) = Some(parameters.clone());
}

/// What rereading the config file found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reread {
    /// The file's `[postgres] parameters`.
    pub parameters: Parameters,
    /// The names added, changed or removed against the running parameters.
    pub changed: Vec<String>,
    /// The other `[postgres]` keys that differ: they need the node restarted.
    pub not_applied: Vec<String>,
}

/// Rereads `file` (the node's config, checked exactly as at start) for node `id`, whose
/// manager runs with `running`; an error says why nothing changes.
pub fn reread(file: Option<&Path>, id: NodeId, running: &PostgresConfig) -> Result<Reread, String> {
    let Some(file) = file else {
        return Err(
            "this node was not started from a config file (`bully node --config F`): \
                    there is none to reread; nothing changed"
                .into(),
        );
    };
    let config = crate::config::load(file).map_err(|e| format!("{e}; nothing changed"))?;
    if config.id != id {
        return Err(format!(
            "{}: id is {} now, but this node is {id}; nothing changed",
            file.display(),
            config.id
        ));
    }
    let Some(new) = config.postgres else {
        return Err(format!(
            "{}: [postgres] is gone; removing it needs the node restarted; nothing changed",
            file.display()
        ));
    };
    Ok(Reread {
        changed: changed(&running.parameters, &new.parameters),
        not_applied: other_keys_changed(running, &new),
        parameters: new.parameters,
    })
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

/// The `[postgres]` keys other than `parameters` that differ between `running` and
/// `new`, by their names in the file.
fn other_keys_changed(running: &PostgresConfig, new: &PostgresConfig) -> Vec<String> {
    let table = |c: &PostgresConfig| match toml::Value::try_from(c) {
        Ok(toml::Value::Table(t)) => t,
        _ => Default::default(),
    };
    let (old, new) = (table(running), table(new));
    let mut keys: Vec<String> = old
        .keys()
        .chain(new.keys())
        .filter(|k| *k != "parameters" && old.get(*k) != new.get(*k))
        .cloned()
        .collect();
    keys.sort();
    keys.dedup();
    keys
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

/// The answer to `bully pg reload` on node `id`: what changed and applies now, what
/// waits for a restart, and what the reread could not apply.
pub fn answer(id: NodeId, reread: &Reread, pending: &[String], seen: bool) -> String {
    let (waiting, now): (Vec<&String>, Vec<&String>) =
        reread.changed.iter().partition(|n| pending.contains(n));
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
    let earlier: Vec<&String> = pending
        .iter()
        .filter(|n| !reread.changed.contains(n))
        .collect();
    if !earlier.is_empty() {
        text += &format!("; also pending a restart from before: {}", list(&earlier));
    }
    if !seen {
        text += "; the server was not seen rereading its files in time (see its log)";
    }
    if !reread.not_applied.is_empty() {
        text += &format!(
            "; not applied (the node must be restarted for them): postgres.{}",
            reread.not_applied.join(", postgres.")
        );
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
        let reread = Reread {
            parameters: Parameters::new(),
            changed: vec!["shared_buffers".into(), "work_mem".into()],
            not_applied: vec!["interval_ms".into()],
        };
        let text = answer(
            2,
            &reread,
            &["shared_buffers".into(), "max_connections".into()],
            true,
        );
        assert!(text.contains("applied now: work_mem"), "{text}");
        assert!(
            text.contains("waiting for a restart (`bully pg restart 2`): shared_buffers"),
            "{text}"
        );
        assert!(text.contains("from before: max_connections"), "{text}");
        assert!(text.contains("postgres.interval_ms"), "{text}");
        let none = Reread {
            changed: vec![],
            not_applied: vec![],
            ..reread
        };
        assert!(answer(2, &none, &[], true).contains("no parameter changed"));
    }

    #[test]
    fn a_reread_is_refused_without_a_file_or_with_a_bad_one() {
        let running = PostgresConfig::new("/tmp/pg", "127.0.0.1:5432".parse().unwrap());
        let none = reread(None, 1, &running).unwrap_err();
        assert!(none.contains("nothing changed"), "{none}");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("node.toml");
        std::fs::write(&file, "id = [").unwrap();
        let bad = reread(Some(&file), 1, &running).unwrap_err();
        assert!(
            bad.contains("node.toml") && bad.contains("nothing changed"),
            "{bad}"
        );
    }

    #[test]
    fn other_postgres_keys_that_changed_are_named() {
        let running = PostgresConfig::new("/tmp/pg", "127.0.0.1:5432".parse().unwrap());
        let mut new = running.clone();
        new.interval_ms = 100;
        new.parameters.insert("work_mem".into(), "8MB".into());
        assert_eq!(other_keys_changed(&running, &new), ["interval_ms"]);
    }

    #[test]
    fn reloaded_parameters_replace_the_started_ones_for_later_managers() {
        let reloaded = Reloaded::default();
        let mut config = PostgresConfig::new("/tmp/pg", "127.0.0.1:5432".parse().unwrap());
        config.parameters = params(&[("work_mem", "4MB")]);
        apply_reloaded(&mut config, &reloaded);
        assert_eq!(config.parameters, params(&[("work_mem", "4MB")]));
        keep_reloaded(&reloaded, &params(&[("work_mem", "8MB")]));
        apply_reloaded(&mut config, &reloaded);
        assert_eq!(config.parameters, params(&[("work_mem", "8MB")]));
    }
}
