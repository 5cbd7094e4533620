//! `bully pg adopt` (src/cli/pg.rs): a server that ran without bully becomes the one a
//! node keeps, with its data. Run on the host with the node stopped, before the node
//! first starts with this `[postgres] data_dir`:
//! - the data dir must hold a cluster of the configured binaries' major version, owned
//!   by the user bully runs the server as;
//! - bully starts the server as `postgres -D <data dir>`, so its config files must be
//!   inside. A Debian cluster (`pg_createcluster`) keeps them in
//!   `/etc/postgresql/<version>/<name>/` and its postmaster runs with `-c
//!   config_file=...`: that config file is found on the running postmaster's command
//!   line (`/proc/<pid>/cmdline`, the PID `postmaster.pid` names, checked as every stop
//!   checks it: src/postmaster.rs), or given as `--config-file` when no server runs
//!   (nothing else says where it is; a guess at `/etc/postgresql` could take another
//!   cluster's). It must name this data dir (its `data_directory`, as `postgres -C`
//!   reads it). Copies of it, of the `hba_file` and `ident_file` it names (as
//!   `pg_hba.conf`, `pg_ident.conf`), and of the files it includes by a relative path
//!   (a `conf.d` dir) are brought into the data dir (`BringIn`); `/etc` is left as
//!   it was;
//! - a node that already noted another cluster's data, or keeps a record naming
//!   another system, refuses (its data would be a stranger's there);
//! - a server running on the data dir is stopped cleanly (fast shutdown, checked
//!   against its /proc identity as every stop is: src/postmaster.rs);
//! - on a primary's data dir the replication role is made if missing and both roles'
//!   passwords are set from `[postgres]`, in single-user mode (no login needed, nothing
//!   else running);
//! - bully's `pg_hba.conf` lines for the members are added, once, to the file the
//!   server reads;
//! - the node notes that its server holds this data (src/node/postgres/held.rs): a
//!   volume missing later is a lost volume, never a reason for `initdb`.
//!
//! Then the node's first start runs it as any found data dir: with every other member
//! reporting an empty data dir (or holding the same system's standby), the freshest
//! server's node is elected and promotes it (docs/postgresql.md, "Taking over a
//! running server").

use super::held::{IdNote, HELD_FILE};
use super::outside_config::{file_setting, outside_config, read_text, BringIn, HBA};
use super::programs::Programs;
use super::sync_store::SyncStore;
use super::{control, files, secrets};
use crate::config::postgres::PostgresConfig;
use crate::config::NodeConfig;
use crate::postmaster::{self, Stopped};
use crate::storage::{Storage, StorageError};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long the running server gets for its fast shutdown (a checkpoint of a busy
/// database) before adopt gives up and kills it: PostgreSQL recovers a killed server
/// at its next start, losing nothing it committed.
const STOP_TIMEOUT: Duration = Duration::from_secs(300);
/// How long one PostgreSQL program may run (`postgres --version`, `-C`, single-user).
const PROGRAM_TIMEOUT: Duration = Duration::from_secs(120);

/// What `bully pg adopt` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adopted {
    pub data_dir: PathBuf,
    /// The cluster's PostgreSQL system identifier.
    pub system_id: u64,
    /// The PID of the server it stopped, and whether it had to kill it.
    pub stopped: Option<(i32, bool)>,
    /// The data dir is a standby's (`standby.signal`): its roles come from its primary.
    pub standby: bool,
    /// The `pg_hba.conf` it added bully's lines to (`None`: they were there already).
    pub hba: Option<PathBuf>,
    /// Replication slots on the server that bully does not manage (Patroni's, a
    /// user's): each holds WAL back until someone drops it.
    pub other_slots: Vec<String>,
    /// The config file outside the data dir it brought in (with the files it names),
    /// `None` when the data dir held the config already.
    pub brought_in: Option<PathBuf>,
}

/// Takes over the data dir of `config`'s `[postgres]`; `config_file` names the server's
/// config file outside the data dir when no running server says it. Everything that
/// can be checked or read is, before the server is stopped: a refusal leaves it running
/// as it was.
pub async fn adopt(config: &NodeConfig, config_file: Option<&Path>) -> Result<Adopted, String> {
    let pg = config.postgres.as_ref().ok_or_else(|| {
        "the config has no [postgres] section: there is no server to adopt".to_string()
    })?;
    // Held to the end: a node started meanwhile finds its store locked and stops.
    let _store = node_stopped(&config.data_dir)?;
    let dir = &pg.data_dir;
    let system_id = found_cluster(dir)?;
    same_cluster_as_noted(&config.data_dir, system_id)?;
    let programs = Programs::find(pg.bin_dir.as_deref(), pg.run_as.as_deref())?;
    same_major(&programs, dir).await?;
    owned_by_the_server_user(&programs, dir)?;
    let bring_in = match outside_config(dir, config_file)? {
        Some(outside) => BringIn::plan(&programs, dir, &outside).await?,
        None => None,
    };
    no_settings_overriding_bullys(dir, pg.tls)?;
    let standby = dir.join("standby.signal").exists();
    let passwords = secrets::Passwords::prepare(pg, &config.data_dir)?;
    let script = match standby {
        false => Some(role_script(pg, &passwords)?),
        true => None,
    };
    let hosts: Vec<String> = config.peers.iter().map(|p| p.addr.to_string()).collect();
    let addresses = secrets::addresses_for(pg, &hosts).await?;
    let (hba_path, current) = match &bring_in {
        Some(bring_in) => (dir.join(HBA), bring_in.hba().to_string()),
        None => {
            let path = file_setting(&programs, dir, None, "hba_file").await?;
            let text = read_text(&path)?;
            (path, text)
        }
    };
    crate::storage::create_dir_durably(&config.data_dir)
        .map_err(|e| format!("cannot create {}: {e}", config.data_dir.display()))?;
    let stopped = stop_running(dir).await?;
    if let Some(bring_in) = &bring_in {
        bring_in.write(dir, programs.owner())?;
    }
    if let Some(script) = script {
        single_user(&programs, dir, &script).await?;
    }
    let hba = match secrets::hba_with_members(pg, &addresses, &current) {
        Some(text) => {
            files::write_owned(&hba_path, &text, programs.owner())?;
            Some(hba_path)
        }
        None => None,
    };
    IdNote::new(&config.data_dir, HELD_FILE).note(system_id)?;
    Ok(Adopted {
        data_dir: dir.clone(),
        system_id,
        stopped,
        standby,
        hba,
        other_slots: other_slots(dir),
        brought_in: bring_in.map(|b| b.source),
    })
}

/// `postgresql.auto.conf` (`ALTER SYSTEM`) is read after bully's include file, so a
/// setting bully owns there (`primary_conninfo`, `synchronous_standby_names`, ...)
/// would override what the decisions set, and a recovery target would end a standby's
/// replay short of what it received (a promotion then drops the rest): refused, naming
/// each. Checked when a server is adopted and when the replica method restored one
/// (src/node/postgres/manager/copies.rs).
pub(super) fn no_settings_overriding_bullys(
    dir: &Path,
    tls: crate::config::postgres::TlsMode,
) -> Result<(), String> {
    let path = dir.join("postgresql.auto.conf");
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(());
    };
    let owned = owned_settings_in(&text, tls);
    match owned.is_empty() {
        true => Ok(()),
        false => Err(format!(
            "{} sets {} (ALTER SYSTEM): settings bully sets itself, or recovery targets \
             that would end a standby's replay early; run ALTER SYSTEM RESET for each (or \
             remove the lines), then try again",
            path.display(),
            owned.join(", ")
        )),
    }
}

/// Recovery targets: a standby bully keeps replays all it receives.
const RECOVERY_TARGETS: &[&str] = &[
    "recovery_target",
    "recovery_target_lsn",
    "recovery_target_name",
    "recovery_target_time",
    "recovery_target_xid",
    "recovery_target_action",
    "recovery_target_inclusive",
];

/// The names in a `postgresql.auto.conf` text that bully sets itself, or that are
/// recovery targets.
fn owned_settings_in(text: &str, tls: crate::config::postgres::TlsMode) -> Vec<String> {
    use crate::config::postgres::{TlsMode, RESERVED_PARAMETERS, TLS_PARAMETERS};
    text.lines()
        .map(str::trim)
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.split(['=', ' ', '\t']).next())
        .map(|name| name.trim().to_ascii_lowercase())
        .filter(|name| {
            RESERVED_PARAMETERS.contains(&name.as_str())
                || RECOVERY_TARGETS.contains(&name.as_str())
                || tls == TlsMode::On && TLS_PARAMETERS.contains(&name.as_str())
        })
        .collect()
}

/// The slots in `dir` (`pg_replslot/<name>`) that are not bully's own `bully_<id>`
/// (src/postgres_rules.rs, `slot_changes`), sorted.
fn other_slots(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir.join("pg_replslot")) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| !crate::postgres_rules::bully_slot(name))
        .collect();
    names.sort();
    names
}

/// The node must not run: its manager would act on the data dir meanwhile. Its store
/// is locked while it does; the store opened here (a node never started has none, and
/// gets none) is held until adopt ends, so the node cannot start meanwhile.
fn node_stopped(node_data_dir: &Path) -> Result<Option<Storage>, String> {
    if !node_data_dir.exists() {
        return Ok(None);
    }
    match Storage::open(node_data_dir) {
        Ok(store) => Ok(Some(store)),
        Err(StorageError::Locked { .. }) => Err(format!(
            "the node runs (its store in {} is locked): stop it first (systemctl stop bully \
             bully-run), then adopt",
            node_data_dir.display()
        )),
        Err(e) => Err(format!("cannot open the node's store: {e}")),
    }
}

/// The system identifier of the cluster in `dir`, which must hold one.
fn found_cluster(dir: &Path) -> Result<u64, String> {
    if !dir.is_dir() {
        return Err(format!(
            "{} does not exist: adopt takes over an existing server's data dir; for a new \
             cluster just start the nodes (the first coordinator runs initdb)",
            dir.display()
        ));
    }
    if !files::has_data(dir) {
        return Err(format!(
            "{} holds no PostgreSQL cluster (no PG_VERSION): adopt takes over an existing \
             server's data dir; for a new cluster just start the nodes",
            dir.display()
        ));
    }
    control::system_id(dir).ok_or_else(|| {
        format!(
            "cannot read the system identifier in {}/global/pg_control",
            dir.display()
        )
    })
}

/// Refuses when this node already belongs to another cluster: its note of held data or
/// its synchronous record names another system.
fn same_cluster_as_noted(node_data_dir: &Path, system_id: u64) -> Result<(), String> {
    let held = IdNote::new(node_data_dir, HELD_FILE).system_id();
    let record = match node_data_dir.exists() {
        true => SyncStore::peek(node_data_dir)?.map(|r| r.system_id),
        false => None,
    };
    for (what, noted) in [
        ("its held-data note", held),
        ("its synchronous record", record),
    ] {
        match noted {
            Some(noted) if noted != 0 && noted != system_id => {
                return Err(format!(
                    "this node belongs to the cluster with system identifier {noted} \
                     ({what}), and the data dir holds {system_id}: adopting it would make \
                     it another cluster's data. Adopt on a node of a new bully cluster"
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

/// The data dir's major version must be the configured binaries' (`PG_VERSION`
/// against `postgres --version`).
async fn same_major(programs: &Programs, dir: &Path) -> Result<(), String> {
    let path = dir.join("PG_VERSION");
    let data = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let ran = programs
        .run("postgres", &["--version".into()], &[], PROGRAM_TIMEOUT)
        .await?;
    let binaries = major_of(&ran.stdout).unwrap_or_default();
    match data.trim() == binaries {
        true => Ok(()),
        false => Err(format!(
            "the data dir is PostgreSQL {}'s and the configured binaries ([postgres] \
             bin_dir) are {}: upgrade the cluster first (pg_upgrade), or point bin_dir at \
             its version",
            data.trim(),
            ran.stdout.trim()
        )),
    }
}

/// The major version in `postgres --version`'s answer (`postgres (PostgreSQL) 15.8 ...`).
fn major_of(version: &str) -> Option<String> {
    let number = version
        .split_whitespace()
        .find(|w| w.starts_with(|c: char| c.is_ascii_digit()))?;
    number.split('.').next().map(str::to_string)
}

/// The data dir must belong to the user bully runs the server as (PostgreSQL refuses
/// to start otherwise).
fn owned_by_the_server_user(programs: &Programs, dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let user = programs
        .owner()
        .map(|(uid, _)| uid.as_raw())
        .unwrap_or_else(|| nix::unistd::Uid::effective().as_raw());
    match meta.uid() == user {
        true => Ok(()),
        false => Err(format!(
            "{} belongs to uid {}, and bully runs the server as uid {user} ([postgres] \
             run_as): chown -R it, or set run_as to its owner",
            dir.display(),
            meta.uid()
        )),
    }
}

/// Stops a server running on `dir` cleanly: its PID and whether it had to be killed.
async fn stop_running(dir: &Path) -> Result<Option<(i32, bool)>, String> {
    match postmaster::stop(dir, STOP_TIMEOUT).await? {
        Stopped::NotRunning(_) => Ok(None),
        Stopped::Fast(pid) => Ok(Some((pid, false))),
        Stopped::Killed(pid) => Ok(Some((pid, true))),
    }
}

/// The statements single-user mode runs on a primary's data dir: the superuser must
/// exist as a superuser, the replication role is made if missing, and each role with a
/// password gets it (as its SCRAM verifier, never the plain text).
fn role_script(pg: &PostgresConfig, passwords: &secrets::Passwords) -> Result<String, String> {
    let su = &pg.superuser.user;
    let repl = &pg.replication.user;
    let body = format!(
        "BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = {} AND rolsuper) THEN \
         RAISE EXCEPTION 'bully: no superuser role named %', {}; END IF; \
         IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = {}) THEN CREATE ROLE {} WITH \
         REPLICATION LOGIN; END IF; END",
        literal(su),
        literal(su),
        literal(repl),
        ident(repl)
    );
    let tag = (0..)
        .map(|n| format!("$bully{n}$"))
        .find(|tag| !body.contains(tag.as_str()))
        .expect("some tag is free");
    let mut statements = vec![
        format!("DO {tag}{body}{tag}"),
        format!("ALTER ROLE {} WITH REPLICATION LOGIN", ident(repl)),
    ];
    for (user, password) in [(repl, &passwords.replication), (su, &passwords.superuser)] {
        if let Some(password) = password {
            statements.push(super::sql::role_statement(user, true, Some(password)));
        }
    }
    Ok(statements.iter().map(|s| format!("{s};\n\n")).collect())
}

/// `text` as an SQL string literal.
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// `name` as a quoted SQL identifier.
fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Runs `script` in single-user mode on the stopped data dir `dir`; an error quotes
/// PostgreSQL's. Its statements are kept out of the log, and its commits are local.
async fn single_user(programs: &Programs, dir: &Path, script: &str) -> Result<(), String> {
    let args: Vec<String> = [
        "--single",
        "-j",
        "-D",
        &dir.display().to_string(),
        "-c",
        "log_statement=none",
        "-c",
        "log_min_duration_statement=-1",
        "-c",
        "log_min_error_statement=panic",
        // A primary's own synchronous_standby_names (Patroni writes them) would hold
        // each commit for standbys that cannot connect to a single-user server.
        "-c",
        "synchronous_standby_names=",
        "-c",
        "synchronous_commit=local",
        // Any ERROR ends the run with a failure (the exit status says it, in any
        // language), messages in English, literals as `literal` writes them.
        "-c",
        "exit_on_error=on",
        "-c",
        "lc_messages=C",
        "-c",
        "standard_conforming_strings=on",
        // The error stays among the last lines an error quotes.
        "-c",
        "log_checkpoints=off",
        "template1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let env = [("LC_ALL".to_string(), "C".to_string())];
    let ran = programs
        .run_with_input("postgres", &args, &env, script, PROGRAM_TIMEOUT)
        .await?;
    let errors: Vec<&str> = ran
        .stderr
        .lines()
        .chain(ran.stdout.lines())
        .filter(|l| l.contains("ERROR:") || l.contains("FATAL:"))
        .collect();
    match errors.is_empty() {
        true => Ok(()),
        false => Err(format!(
            "setting up the roles in single-user mode failed: {}",
            errors.join(" / ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_other_than_bully_s_are_listed() {
        let dir = tempfile::tempdir().unwrap();
        assert!(other_slots(dir.path()).is_empty());
        for name in ["node2", "bully_3", "bully_x", "debezium"] {
            std::fs::create_dir_all(dir.path().join("pg_replslot").join(name)).unwrap();
        }
        assert_eq!(other_slots(dir.path()), ["bully_x", "debezium", "node2"]);
    }

    #[test]
    fn settings_bully_owns_in_postgresql_auto_conf_are_named() {
        use crate::config::postgres::TlsMode;
        let text = "# Do not edit this file manually!\nwork_mem = '64MB'\n\
                    primary_conninfo = 'host=x'\nSynchronous_Standby_Names='a'\nssl = 'on'\n";
        assert_eq!(
            owned_settings_in(text, TlsMode::Off),
            ["primary_conninfo", "synchronous_standby_names"]
        );
        assert_eq!(owned_settings_in(text, TlsMode::On).len(), 3);
        assert!(owned_settings_in("work_mem = '1MB'\n", TlsMode::Off).is_empty());
        // pgBackRest leaves restore_command there (an ordinary parameter); a recovery
        // target would end a standby's replay early.
        let restored = "restore_command = 'pgbackrest archive-get %f \"%p\"'\n\
                        recovery_target_action = 'promote'\n";
        assert_eq!(
            owned_settings_in(restored, TlsMode::Off),
            ["recovery_target_action"]
        );
    }

    #[test]
    fn the_major_version_is_read_from_postgres_version() {
        assert_eq!(
            major_of("postgres (PostgreSQL) 15.8 (Debian 15.8-0+deb12u1)\n").as_deref(),
            Some("15")
        );
        assert_eq!(
            major_of("postgres (PostgreSQL) 16beta1").as_deref(),
            Some("16beta1")
        );
        assert_eq!(major_of("nothing"), None);
    }

    #[test]
    fn the_role_script_quotes_names_and_never_holds_a_password() {
        let mut pg = PostgresConfig::new(PathBuf::from("/d"), "127.0.0.1:5432".parse().unwrap());
        pg.superuser.user = "post'gres".into();
        pg.replication.user = "rep\"l $bully0$".into();
        let passwords = secrets::Passwords {
            superuser: Some("s3cret'".into()),
            replication: Some("an0ther".into()),
        };
        let script = role_script(&pg, &passwords).unwrap();
        assert!(
            script.contains("rolname = 'post''gres' AND rolsuper"),
            "{script}"
        );
        assert!(
            script.contains("CREATE ROLE \"rep\"\"l $bully0$\" WITH"),
            "{script}"
        );
        assert!(
            script.contains("DO $bully1$"),
            "the tag is one the body lacks: {script}"
        );
        assert!(!script.contains("s3cret") && !script.contains("an0ther"));
        assert_eq!(script.matches("SCRAM-SHA-256$").count(), 2, "{script}");
        assert_eq!(script.matches(";\n\n").count(), 4, "{script}");
    }
}
