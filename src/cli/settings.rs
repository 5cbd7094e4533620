//! `bully config`: the cluster settings as the cluster holds them, and changes to them
//! (docs/design.md#cluster-settings), Patroni's `edit-config` for bully. A change is
//! read from the coordinator's list, applied here, and sent to the first member that
//! answers, which passes it to the coordinator; the answer comes once the list that
//! carries it is committed. A host's file never changes them.

use super::endpoints;
use super::query::{connect_first, leader_status, print_answer};
use super::{print_json, QueryArgs};
use crate::api::Status;
use crate::config::postgres::{parameter_problem, TlsMode};
use crate::postgres_rules::Synchronous;
use crate::protocol::membership::ConfigId;
use crate::protocol::{
    Change, ClusterSettings, Role, PG_KEYS, PG_PARAMETER_KEY, PG_STANDBY_CLUSTER_KEY,
    PG_SYNCHRONOUS_KEY,
};
use clap::Subcommand;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// How long `bully config set` of PostgreSQL parameters waits for every member's
/// server to take them up (each manager does at its next look).
const SERVERS_TAKE_UP: Duration = Duration::from_secs(30);

/// What `bully config` does.
#[derive(Debug, Subcommand, Clone)]
pub enum ConfigAction {
    /// The cluster settings every member lives by (the coordinator's, if it answers),
    /// one `key = value` per line, and the list version that carries them.
    Show(QueryArgs),
    /// Set cluster keys, e.g. `bully config set timing.suspect_after_ms=3000` or
    /// `postgres.parameters.work_mem=64MB` (an empty value removes a parameter) or
    /// `postgres.synchronous=off` or `postgres.standby_cluster=` (empty: a standby
    /// cluster stops following its remote primary, and its standby leader is promoted;
    /// HOST:PORT: the remote a new cluster follows). Every member lives by the new values once the
    /// coordinator has committed them; no node restarts. PostgreSQL parameters reach
    /// every server by a reload, the synchronous mode at each manager's next look; `set`
    /// then waits (30 s at most) for each member's server and says what applies now,
    /// what waits for `bully pg restart` and what PostgreSQL refused. Exit 0: committed
    /// (and taken up by every server), 1: refused, not committed or refused by a
    /// server, 2: no member answered or a bad KEY=VALUE.
    Set {
        #[command(flatten)]
        query: QueryArgs,
        /// KEY=VALUE pairs; the keys are those `bully config show` prints.
        #[arg(required = true, value_name = "KEY=VALUE")]
        assignments: Vec<String>,
    },
    /// Open the cluster settings in $VISUAL or $EDITOR (else `vi`) and set what was
    /// changed, as `set` does.
    Edit(QueryArgs),
}

/// Runs `bully config ...`.
pub async fn run(action: ConfigAction) -> ExitCode {
    match action {
        ConfigAction::Show(query) => show(&query).await,
        ConfigAction::Set { query, assignments } => {
            let pairs: Result<Vec<(String, String)>, String> =
                assignments.iter().map(|a| split_assignment(a)).collect();
            match pairs {
                Ok(pairs) => set(&query, &pairs).await,
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::from(2)
                }
            }
        }
        ConfigAction::Edit(query) => edit(&query).await,
    }
}

/// `KEY=VALUE` split at the first `=`, both sides trimmed.
fn split_assignment(text: &str) -> Result<(String, String), String> {
    let (key, value) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}` is not KEY=VALUE"))?;
    Ok((key.trim().to_string(), value.trim().to_string()))
}

/// The settings `status` reports, or the exit code after saying why there are none.
fn settings_of(status: &Status) -> Result<ClusterSettings, ExitCode> {
    status
        .members
        .as_ref()
        .and_then(|list| list.settings.clone())
        .ok_or_else(|| {
            eprintln!(
                "error: node {} reports no cluster settings (an older version?)",
                status.id
            );
            ExitCode::from(2)
        })
}

/// The coordinator's status (another member's if it does not answer) and the
/// settings it reports, or the exit code after saying why not.
async fn read_settings(query: &QueryArgs) -> Result<(Status, ClusterSettings), ExitCode> {
    let status = leader_status(query).await?;
    let settings = settings_of(&status)?;
    Ok((status, settings))
}

/// `bully config show`.
async fn show(query: &QueryArgs) -> ExitCode {
    let (status, settings) = match read_settings(query).await {
        Ok(read) => read,
        Err(code) => return code,
    };
    let version = status.members.as_ref().map(|l| l.id);
    if query.json {
        let entries: serde_json::Map<String, serde_json::Value> = settings
            .entries()
            .into_iter()
            .map(|(k, v)| (k, serde_json::Value::String(v)))
            .collect();
        print_json(&serde_json::json!({
            "asked": status.id,
            "coordinator": status.coordinator(),
            "committed": status.members_committed,
            "list": version.map(|v| v.to_string()),
            "mode": status.mode.to_string(),
            "settings": entries,
        }));
        return ExitCode::SUCCESS;
    }
    let whose = match (status.role, status.members_committed) {
        (Role::Coordinator, true) => "committed",
        (Role::Coordinator, false) => "change in progress",
        _ => "as held by this follower",
    };
    if let Some(version) = version {
        println!(
            "# cluster settings, member list {version}, from node {} ({whose})",
            status.id
        );
    }
    println!(
        "# mode = {} (changed offline only: docs/modes.md)",
        status.mode
    );
    for (key, value) in settings.entries() {
        println!("{key} = {value}");
    }
    if let Some(differs) = &status.file_differs {
        println!("# node {}: {differs}", status.id);
    }
    ExitCode::SUCCESS
}

/// `bully config set`: `pairs` sent as one change, which the coordinator applies to the
/// settings it holds.
async fn set(query: &QueryArgs, pairs: &[(String, String)]) -> ExitCode {
    let client = match connect_first(query, |s| s.role == Role::Coordinator).await {
        Ok(client) => client,
        Err(code) => return code,
    };
    let status = match client.status().await {
        Ok(status) => status,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let from = match settings_of(&status) {
        Ok(settings) => settings,
        Err(code) => return code,
    };
    // Checked here against the settings of the node asked, so a bad value never leaves
    // this host; the coordinator applies the pairs to its own.
    let wanted = match from.with_all(pairs) {
        Ok(wanted) => wanted,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(why) = standby_of_a_primary(&from, &wanted, &status) {
        eprintln!("error: {why}");
        return ExitCode::from(1);
    }
    let synchronous = pairs
        .iter()
        .any(|(key, _)| key == PG_SYNCHRONOUS_KEY)
        .then_some(wanted.pg_synchronous)
        .flatten();
    if let Some(problem) = pairs.iter().find_map(|(key, value)| {
        let name = key.strip_prefix(PG_PARAMETER_KEY)?;
        parameter_problem(name, value, TlsMode::Off).map(|p| format!("{key}: {p}"))
    }) {
        eprintln!("error: {problem}");
        return ExitCode::from(2);
    }
    let set = pairs.to_vec();
    let committed = print_answer(client.change_members(Change::Settings { set }).await);
    let for_servers = pairs.iter().any(|(key, _)| key.starts_with(PG_KEYS));
    if committed != ExitCode::SUCCESS || !for_servers {
        return committed;
    }
    match leader_status(query).await {
        Ok(status) => match status.members {
            Some(list) => servers_take_up(query, list.id, synchronous).await,
            None => ExitCode::from(1),
        },
        Err(code) => code,
    }
}

/// Waits until every answering member with a server reports having taken up the
/// parameters of member list `list` or a later one (and runs by `synchronous`, when
/// that was set), and prints each one's outcome; exit 1 when a server refused them or
/// did not take them up in time.
async fn servers_take_up(
    query: &QueryArgs,
    list: ConfigId,
    synchronous: Option<Synchronous>,
) -> ExitCode {
    let deadline = Instant::now() + SERVERS_TAKE_UP;
    loop {
        let answers = match endpoints::ask_cluster(query).await {
            Ok((_, answers)) => answers,
            Err(code) => return code,
        };
        let mut servers: Vec<&Status> = answers
            .iter()
            .filter_map(|a| a.status.as_ref().ok())
            .filter(|s| s.postgres.is_some())
            .collect();
        servers.sort_by_key(|s| s.id);
        servers.dedup_by_key(|s| s.id);
        let taken = |s: &Status| {
            let pg = s.postgres.as_ref().expect("filtered");
            pg.parameters_list.is_some_and(|l| l >= list)
                && synchronous.map_or(true, |mode| pg.synchronous == Some(mode))
        };
        let all = servers.iter().all(|s| taken(s));
        if all || Instant::now() >= deadline {
            let mut code = ExitCode::SUCCESS;
            for status in servers {
                let pg = status.postgres.as_ref().expect("filtered");
                let line = match (&pg.parameters_refused, taken(status)) {
                    (_, false) => {
                        code = ExitCode::from(1);
                        format!("not taken up in {SERVERS_TAKE_UP:?} ({})", pg.note)
                    }
                    (Some(why), true) => {
                        code = ExitCode::from(1);
                        format!("refused: {why}")
                    }
                    (None, true) if pg.pending_restart.is_empty() => "applied".into(),
                    (None, true) => format!(
                        "applied; pending a restart (`bully pg restart`): {}",
                        pg.pending_restart.join(", ")
                    ),
                };
                println!("node {}: {line}", status.id);
            }
            return code;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `bully config edit`.
async fn edit(query: &QueryArgs) -> ExitCode {
    let from = match read_settings(query).await {
        Ok((_, settings)) => settings,
        Err(code) => return code,
    };
    let pairs = match edited_pairs(&from).map(|pairs| with_removals(&from, pairs)) {
        Ok(pairs) => pairs,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    set(query, &pairs).await
}

/// Writes `settings` to a temporary file, runs the editor on it, and reads back the
/// `key = value` lines (`#` starts a comment).
fn edited_pairs(settings: &ClusterSettings) -> Result<Vec<(String, String)>, String> {
    let file = tempfile::Builder::new()
        .prefix("bully-config-")
        .suffix(".conf")
        .tempfile()
        .map_err(|e| format!("cannot create a temporary file: {e}"))?;
    let mut text = String::from(
        "# bully cluster settings: change values, save and quit\n\
         # add `postgres.parameters.NAME = VALUE` lines; a removed line removes it\n",
    );
    for (key, value) in settings.entries() {
        text.push_str(&format!("{key} = {value}\n"));
    }
    std::fs::write(file.path(), text).map_err(|e| format!("cannot write the file: {e}"))?;
    let editor = std::env::var("VISUAL")
        .or_else(|_| std::env::var("EDITOR"))
        .unwrap_or_else(|_| "vi".into());
    let ran = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{editor} \"$1\""))
        .arg("sh")
        .arg(file.path())
        .status()
        .map_err(|e| format!("cannot run the editor `{editor}`: {e}"))?;
    if !ran.success() {
        return Err(format!(
            "the editor `{editor}` exited with {ran}; nothing changed"
        ));
    }
    let edited =
        std::fs::read_to_string(file.path()).map_err(|e| format!("cannot read it back: {e}"))?;
    parse_lines(&edited)
}

/// `pairs` plus an empty value (a removal) for each PostgreSQL parameter `from` holds
/// that the edited lines no longer name.
fn with_removals(
    from: &ClusterSettings,
    mut pairs: Vec<(String, String)>,
) -> Vec<(String, String)> {
    for (key, _) in from.entries() {
        if key.starts_with(PG_PARAMETER_KEY) && !pairs.iter().any(|(k, _)| *k == key) {
            pairs.push((key, String::new()));
        }
    }
    pairs
}

/// The `key = value` lines of `text`, comments and blank lines left out.
fn parse_lines(text: &str) -> Result<Vec<(String, String)>, String> {
    text.lines()
        .map(|line| line.split('#').next().unwrap_or("").trim())
        .enumerate()
        .filter(|(_, line)| !line.is_empty())
        .map(|(n, line)| split_assignment(line).map_err(|e| format!("line {}: {e}", n + 1)))
        .collect()
}

/// Why `wanted` may not be set, as seen from the coordinator's `status`: it makes a
/// cluster whose coordinator runs a primary a standby cluster. bully never demotes that
/// primary or rewinds it onto the remote (src/postgres_rules.rs, `standby_leader`), so
/// the setting would only take hold at its next failover, throwing away what it
/// acknowledged then; the set is refused instead.
fn standby_of_a_primary(
    from: &ClusterSettings,
    wanted: &ClusterSettings,
    status: &Status,
) -> Option<String> {
    let turned_on = from.pg_standby_cluster.is_none() && wanted.pg_standby_cluster.is_some();
    let primary = status.role == Role::Coordinator
        && status
            .postgres
            .as_ref()
            .is_some_and(|pg| pg.role == crate::api::postgres::PgRole::Primary);
    (turned_on && primary).then(|| {
        format!(
            "{PG_STANDBY_CLUSTER_KEY}: node {}'s server is this cluster's primary; bully \
             never turns a cluster with its own primary into a standby cluster (what it \
             acknowledged would go). Build the standby cluster from empty data dirs \
             (docs/postgresql.md#a-standby-cluster)",
            status.id
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Preempt, Timing};

    /// Turning a cluster whose coordinator runs a primary into a standby cluster is
    /// refused naming the key; unsetting it, changing the remote, or a coordinator whose
    /// server is a standby leader are not.
    #[test]
    fn a_primary_is_never_made_a_standby_cluster() {
        use crate::api::postgres::PgRole;
        let plain = ClusterSettings::new(Timing::default(), Preempt::Always);
        let standby = plain.with(PG_STANDBY_CLUSTER_KEY, "dr:5432").unwrap();
        let moved = plain.with(PG_STANDBY_CLUSTER_KEY, "dr2:5432").unwrap();
        let mut status = Status::starting_candidate(3, &[1, 2]);
        let epoch = Some(crate::protocol::Epoch { term: 4, leader: 3 });
        status.set_office(Role::Coordinator, epoch);
        let addr = "127.0.0.1:5432".parse().unwrap();
        let mut pg = crate::api::postgres::PgState::bare(addr, PgRole::Primary, String::new(), 0);
        status.postgres = Some(pg.clone());
        let why = standby_of_a_primary(&plain, &standby, &status).unwrap();
        assert!(why.starts_with("postgres.standby_cluster: node 3"), "{why}");
        assert!(standby_of_a_primary(&standby, &plain, &status).is_none());
        assert!(standby_of_a_primary(&standby, &moved, &status).is_none());
        pg.role = PgRole::Replica;
        status.postgres = Some(pg);
        assert!(standby_of_a_primary(&plain, &standby, &status).is_none());
    }

    #[test]
    fn pairs_apply_together_and_a_bad_one_is_named() {
        let base = ClusterSettings::new(Timing::default(), Preempt::Always);
        let pairs = vec![
            split_assignment("timing.heartbeat_ms = 1000").unwrap(),
            split_assignment("timing.suspect_after_ms=3000").unwrap(),
        ];
        let to = base.with_all(&pairs).unwrap();
        assert_eq!(to.timing.suspect_after_ms, 3000);
        assert_eq!(to.timing.heartbeat_ms, 1000);
        let reversed: Vec<_> = pairs.iter().rev().cloned().collect();
        assert_eq!(base.with_all(&reversed).unwrap(), to, "either order");
        let alone = vec![pairs[0].clone()];
        let err = base.with_all(&alone).unwrap_err();
        assert!(err.contains("at least 3 x timing.heartbeat_ms"), "{err}");
        assert!(split_assignment("timing.heartbeat_ms").is_err());
    }

    #[test]
    fn an_edited_file_reads_back_as_the_lines_it_holds() {
        let base = ClusterSettings::new(Timing::default(), Preempt::Always);
        let mut text = String::from("# header\n\n");
        for (k, v) in base.entries() {
            text.push_str(&format!("{k} = {v}  # was\n"));
        }
        let pairs = parse_lines(&text).unwrap();
        assert_eq!(base.with_all(&pairs).unwrap(), base);
        let err = parse_lines("# x\npreempt never\n").unwrap_err();
        assert!(err.starts_with("line 2:"), "{err}");
    }

    #[test]
    fn a_parameter_line_removed_in_the_editor_is_a_removal() {
        let params = [("work_mem", "8MB"), ("jit", "off")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let base =
            ClusterSettings::new(Timing::default(), Preempt::Always).with_pg_parameters(params);
        let kept: Vec<(String, String)> = base
            .entries()
            .into_iter()
            .filter(|(k, _)| k != "postgres.parameters.jit")
            .collect();
        let pairs = with_removals(&base, kept);
        let to = base.with_all(&pairs).unwrap();
        let left = to.pg_parameters.unwrap();
        assert_eq!(left.keys().collect::<Vec<_>>(), ["work_mem"]);
    }
}
