//! The files bully writes in the PostgreSQL data dir: its include file (`bully.conf`,
//! rewritten before every start and on every change of upstream or synchronous names),
//! the one line in `postgresql.conf` that includes it, `standby.signal`, and, once after
//! `initdb`, the `pg_hba.conf` lines the other members need. Everything else in the data
//! dir is PostgreSQL's and the user's.

use super::owned::give;
use super::quote::{self, conninfo_value};
use super::tls;
use crate::config::postgres::{PostgresConfig, OWNED_INCLUDE};
use crate::postgres_rules::application_name;
use crate::protocol::NodeId;
use nix::unistd::{Gid, Uid};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;

/// The line that includes bully's file, appended once to `postgresql.conf`.
const INCLUDE_LINE: &str = "include_if_exists = 'bully.conf'";

/// Server parameters bully sets unless `[postgres] parameters` does:
/// - `wal_keep_size`: pg_rewind reads the former primary's WAL back to the last
///   checkpoint the two servers share; without a floor, the checkpoints after it
///   recycle that WAL.
/// - `wal_retrieve_retry_interval`: how soon a standby whose upstream went away tries
///   to stream again. PostgreSQL's 5 s held every synchronous commit that long after a
///   primary's restart in place (`bully pg restart`, tests/postgres_parameters.rs),
///   while the standbys waited to reconnect.
/// - `wal_receiver_status_interval`: how often an idle standby reports its position.
///   A commit that waits while its primary's names still list a standby as
///   unconfirmed (just after a promotion) is released only at the next report once
///   the names change: PostgreSQL's 10 s held it that long
///   (tests/postgres_unstreamable.rs).
const DEFAULTS: [(&str, &str); 3] = [
    ("wal_keep_size", "256MB"),
    ("wal_retrieve_retry_interval", "250ms"),
    ("wal_receiver_status_interval", "1s"),
];

/// Whether `data_dir` holds a cluster (its `PG_VERSION`).
pub fn has_data(data_dir: &Path) -> bool {
    data_dir.join("PG_VERSION").is_file()
}

/// A libpq connection string to `server` as `user`, quoted as libpq wants; a
/// password comes from `passfile` (see src/node/postgres/secrets.rs), never inline;
/// with `ca` (`[postgres] tls = "on"`), the server is verified against it
/// (src/node/postgres/tls.rs).
pub fn conninfo(
    server: SocketAddr,
    user: &str,
    passfile: Option<&Path>,
    app: &str,
    ca: Option<&Path>,
) -> String {
    let mut text = format!(
        "host={} port={} user={} application_name={}",
        server.ip(),
        server.port(),
        conninfo_value(user),
        conninfo_value(app)
    );
    if let Some(passfile) = passfile {
        let _ = write!(
            text,
            " passfile={}",
            conninfo_value(&passfile.display().to_string())
        );
    }
    if let Some(ca) = ca {
        text.push_str(&tls::conninfo_words(ca));
    }
    text
}

/// `value` as a `postgresql.conf` string literal; a NUL (refused in the config by
/// `PostgresConfig::problem`) is dropped rather than written.
fn conf_string(value: &str) -> String {
    quote::conf_string(&value.replace('\0', "")).unwrap_or_default()
}

/// The server a standby streams from, as bully's include file names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Upstream {
    pub server: SocketAddr,
    /// It is a member's server, which keeps a slot (`bully_<id>`) for this standby; a
    /// standby cluster's remote primary keeps none of bully's, and a slot named that
    /// does not exist would keep the standby from streaming at all.
    pub member: bool,
}

/// What bully's include file says for node `id`.
pub fn owned_conf(
    config: &PostgresConfig,
    id: NodeId,
    upstream: Option<Upstream>,
    passfile: Option<&Path>,
    synchronous_standby_names: &str,
) -> String {
    let mut text = format!(
        "# Written by bully (node {id}) before every start and on every change; edit the\n\
         # node's [postgres] section instead. postgresql.conf stays yours.\n"
    );
    let mut set = |name: &str, value: String| {
        let _ = writeln!(text, "{name} = {value}");
    };
    set(
        "listen_addresses",
        conf_string(&config.listen.ip().to_string()),
    );
    set("port", config.listen.port().to_string());
    // No socket in the data dir, where pg_rewind and pg_basebackup would trip on it;
    // a user who wants one sets it in `[postgres] parameters`.
    if !config.parameters.contains_key("unix_socket_directories") {
        set("unix_socket_directories", conf_string(""));
    }
    let tls = tls::installed(config);
    for (name, value) in tls.iter().flat_map(tls::server_settings) {
        set(name, conf_string(&value));
    }
    set("hot_standby", "on".into());
    set("wal_log_hints", "on".into());
    let primary = upstream
        .map(|up| {
            conninfo(
                up.server,
                &config.replication.user,
                passfile,
                &application_name(id),
                tls.as_ref().map(|t| t.ca.as_path()),
            )
        })
        .unwrap_or_default();
    set("primary_conninfo", conf_string(&primary));
    // Its slot on the upstream holds the WAL it has not streamed yet
    // (`postgres_rules::slot_changes`).
    let slot = upstream
        .filter(|up| up.member)
        .map(|_| application_name(id))
        .unwrap_or_default();
    set("primary_slot_name", conf_string(&slot));
    set(
        "synchronous_standby_names",
        conf_string(synchronous_standby_names),
    );
    for (name, value) in DEFAULTS {
        if !config.parameters.contains_key(name) {
            set(name, conf_string(value));
        }
    }
    set(
        "max_slot_wal_keep_size",
        conf_string(&slot_keep(config.max_slot_wal_keep_size)),
    );
    for (name, value) in &config.parameters {
        set(name, conf_string(value));
    }
    text
}

/// `[postgres] max_slot_wal_keep_size` as PostgreSQL reads it: `-1`, or kilobytes.
fn slot_keep(bytes: i64) -> String {
    match bytes {
        b if b < 0 => "-1".into(),
        b => format!("{}kB", b / 1024),
    }
}

/// Writes `text` to `path` atomically, owned by `owner`: a file beside it, flushed to
/// disk (fsync), then renamed over it, and the directory synced, so a crash leaves the
/// old file or the new one, never a part of either (the one writer of bully's files in
/// the data dir: at a start, a promotion and `bully pg reload` alike).
pub fn write_owned(path: &Path, text: &str, owner: Option<(Uid, Gid)>) -> Result<(), String> {
    use std::io::Write as _;
    let tmp = path.with_extension("tmp");
    let cannot = |e: std::io::Error| format!("cannot write {}: {e}", tmp.display());
    let mut file = std::fs::File::create(&tmp).map_err(cannot)?;
    file.write_all(text.as_bytes()).map_err(cannot)?;
    file.sync_all().map_err(cannot)?;
    drop(file);
    give(&tmp, owner)?;
    std::fs::rename(&tmp, path).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    // The rename itself lasts once the directory is synced; a directory that cannot be
    // opened for it (odd file systems) still has the file in place.
    if let Some(dir) = path.parent().and_then(|d| std::fs::File::open(d).ok()) {
        let _ = dir.sync_all();
    }
    Ok(())
}

/// Writes bully's include file and makes sure `postgresql.conf` includes it last.
pub fn write_conf(data_dir: &Path, text: &str, owner: Option<(Uid, Gid)>) -> Result<(), String> {
    write_owned(&data_dir.join(OWNED_INCLUDE), text, owner)?;
    let main = data_dir.join("postgresql.conf");
    let current = std::fs::read_to_string(&main)
        .map_err(|e| format!("cannot read {}: {e}", main.display()))?;
    let last = current.lines().rev().find(|l| !l.trim().is_empty());
    if last.map(str::trim) == Some(INCLUDE_LINE) {
        return Ok(());
    }
    let text = format!(
        "{current}\n# bully's settings, last so they hold (see {OWNED_INCLUDE})\n{INCLUDE_LINE}\n"
    );
    write_owned(&main, &text, owner)
}

/// The file in the data dir where bully records which office began each timeline.
pub const BRANCHES: &str = "bully.branch";

/// The branch records a data dir holds: `bully.branch`'s text and the names of the
/// records coordinators wrote into it ([`written_name`]). Read from the disk for the
/// local server, by SQL for a peer's (src/node/postgres/sql.rs, `records`).
#[derive(Debug, Clone, Default)]
pub struct Records {
    pub text: String,
    pub names: Vec<String>,
}

impl Records {
    /// The records in `data_dir` (none when it cannot be read).
    pub fn read(data_dir: &Path) -> Records {
        Records {
            text: std::fs::read_to_string(data_dir.join(BRANCHES)).unwrap_or_default(),
            names: std::fs::read_dir(data_dir)
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|entry| entry.file_name().to_str().map(String::from))
                .filter(|name| written_record(name).is_some())
                .collect(),
        }
    }

    /// The term recorded for `timeline`: the highest of the file's last record and the
    /// records coordinators wrote; 0 when none is.
    pub fn branch(&self, timeline: u32) -> u64 {
        self.names
            .iter()
            .filter_map(|name| written_record(name))
            .filter(|&(tl, _)| tl == timeline)
            .map(|(_, term)| term)
            .fold(branch_in(&self.text, timeline), u64::max)
    }

    /// The branch the WAL on `timeline` ranks as, given the timeline's history file
    /// (`history`, empty for timeline 1): its own record, else its newest recorded
    /// ancestor's (`postgres_rules::lineage_branch`).
    pub fn wal_branch(&self, timeline: u32, history: &str) -> u64 {
        let ancestors = ancestors_in(history);
        let lineage = std::iter::once(timeline).chain(ancestors.into_iter().rev());
        crate::postgres_rules::lineage_branch(lineage, |tl| self.branch(tl))
    }
}

/// The term recorded for `timeline` in `data_dir` ([`Records::branch`]).
pub fn branch_of(data_dir: &Path, timeline: u32) -> u64 {
    Records::read(data_dir).branch(timeline)
}

/// The branch the local WAL on `timeline` ranks as ([`Records::wal_branch`]).
pub fn wal_branch(data_dir: &Path, timeline: u32) -> u64 {
    let history = std::fs::read_to_string(data_dir.join(history_file(timeline)));
    Records::read(data_dir).wal_branch(timeline, &history.unwrap_or_default())
}

/// Removes everything in `dir` (links removed, not followed), keeping `dir` itself: a
/// clone's partial copy, in a dir that was empty when it began.
pub fn empty_dir(dir: &Path) -> Result<(), String> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("cannot read {}: {e}", dir.display())),
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let removed = match entry.file_type() {
            Ok(kind) if kind.is_dir() => std::fs::remove_dir_all(&path),
            _ => std::fs::remove_file(&path),
        };
        removed.map_err(|e| format!("cannot remove {}: {e}", path.display()))?;
    }
    Ok(())
}

/// PostgreSQL's history file for `timeline`, relative to the data dir: one line per
/// ancestor timeline, oldest first (timeline 1 has none).
pub fn history_file(timeline: u32) -> String {
    format!("pg_wal/{timeline:08X}.history")
}

/// The ancestor timelines a history file names, oldest first (comment and blank lines
/// skipped).
pub fn ancestors_in(history: &str) -> Vec<u32> {
    history
        .lines()
        .filter_map(|line| line.split_whitespace().next()?.parse().ok())
        .collect()
}

/// The record a coordinator wrote into this data dir before its promotion
/// ([`written_name`]), from the file's name: `(timeline, term)`.
fn written_record(name: &str) -> Option<(u32, u64)> {
    let rest = name.strip_prefix(BRANCHES)?.strip_prefix('.')?;
    let (timeline, term) = rest.split_once('.')?;
    Some((timeline.parse().ok()?, term.parse().ok()?))
}

/// The file a coordinator about to promote writes into a reached standby's data dir
/// (through SQL, `COPY ... TO`, which cannot append): `bully.branch.<timeline>.<term>`.
/// Terms only grow, so of several claims for one timeline the highest is the newest.
pub fn written_name(timeline: u32, term: u64) -> String {
    format!("{BRANCHES}.{timeline}.{term}")
}

/// The term a `bully.branch` text records for `timeline` (the last record wins); 0
/// when it records none.
pub fn branch_in(text: &str, timeline: u32) -> u64 {
    text.lines()
        .rev()
        .find_map(|line| {
            let (tl, term) = line.split_once(' ')?;
            (tl.parse::<u32>().ok()? == timeline).then(|| term.trim().parse::<u64>().ok())?
        })
        .unwrap_or(0)
}

/// Records that `timeline` began in the office of `term` (appended, flushed to disk),
/// then removes the claims coordinators wrote for it ([`written_name`]): the record
/// is this server's own knowledge of the timeline (its promotion, or the upstream it
/// streams it from), and a claim for that number may be a failed promotion's
/// (`postgres_rules::branch_to_adopt`). A crash between the two leaves a claim that
/// the next look supersedes again.
pub fn record_branch(
    data_dir: &Path,
    timeline: u32,
    term: u64,
    owner: Option<(Uid, Gid)>,
) -> Result<(), String> {
    use std::io::Write;
    let path = data_dir.join(BRANCHES);
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    writeln!(file, "{timeline} {term}")
        .and_then(|_| file.sync_all())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    give(&path, owner)?;
    for name in Records::read(data_dir).names {
        if written_record(&name).is_some_and(|(tl, _)| tl == timeline) {
            let claim = data_dir.join(&name);
            std::fs::remove_file(&claim)
                .map_err(|e| format!("cannot remove {}: {e}", claim.display()))?;
        }
    }
    Ok(())
}

/// The timeline PostgreSQL will pick at its next promotion from `timeline`: one past
/// the newest history file in `pg_wal` counting up from it (as its startup process
/// probes them).
pub fn next_timeline(data_dir: &Path, timeline: u32) -> u32 {
    let mut newest = timeline;
    while data_dir.join(history_file(newest + 1)).exists() {
        newest += 1;
    }
    newest + 1
}

/// Makes the next start a standby's (`standby.signal`).
pub fn standby_signal(data_dir: &Path, owner: Option<(Uid, Gid)>) -> Result<(), String> {
    write_owned(&data_dir.join("standby.signal"), "", owner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partial_copy_is_emptied_and_the_dir_kept() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir_all(data.join("base/1")).unwrap();
        std::fs::write(data.join("PG_VERSION"), "15\n").unwrap();
        let elsewhere = dir.path().join("tablespace");
        std::fs::create_dir(&elsewhere).unwrap();
        std::fs::write(elsewhere.join("kept"), "x").unwrap();
        std::os::unix::fs::symlink(&elsewhere, data.join("link")).unwrap();
        empty_dir(&data).unwrap();
        assert!(data.is_dir(), "the dir itself stays");
        assert_eq!(std::fs::read_dir(&data).unwrap().count(), 0);
        assert!(
            elsewhere.join("kept").exists(),
            "a link is removed, not followed"
        );
        assert_eq!(empty_dir(&dir.path().join("missing")), Ok(()));
    }

    #[test]
    fn the_owned_file_names_the_upstream_and_quotes_what_it_must() {
        let mut config = PostgresConfig::new("/var/lib/pg/n1", "10.0.0.1:5432".parse().unwrap());
        config
            .parameters
            .insert("shared_buffers".into(), "128MB".into());
        config.replication.user = r"rep'l\ica".into();
        config
            .parameters
            .insert("bully.note".into(), "it's C:\\tmp\nnext é".into());
        let member = Upstream {
            server: "10.0.0.3:5433".parse().unwrap(),
            member: true,
        };
        let text = owned_conf(
            &config,
            1,
            Some(member),
            Some(Path::new("/var/lib/pg/n1.pgpass")),
            "ANY 1 (bully_2, bully_3)",
        );
        assert!(text.contains("listen_addresses = '10.0.0.1'\n"), "{text}");
        assert!(text.contains("port = 5432\n"), "{text}");
        let conninfo = r"primary_conninfo = 'host=10.0.0.3 port=5433 user=''rep\\''l\\\\ica'' application_name=''bully_1'' passfile=''/var/lib/pg/n1.pgpass'''";
        assert!(text.contains(&format!("{conninfo}\n")), "{text}");
        let note = r"bully.note = 'it''s C:\\tmp\nnext é'";
        assert!(text.contains(&format!("{note}\n")), "{text}");
        assert!(!text.contains("password"), "{text}");
        assert!(text.contains("synchronous_standby_names = 'ANY 1 (bully_2, bully_3)'\n"));
        assert!(text.contains("shared_buffers = '128MB'\n"));
        assert!(text.contains("primary_slot_name = 'bully_1'\n"), "{text}");
        assert!(
            text.contains("max_slot_wal_keep_size = '8388608kB'\n"),
            "{text}"
        );
        let none = owned_conf(&config, 1, None, None, "");
        assert!(none.contains("primary_conninfo = ''\n"), "{none}");
        assert!(none.contains("primary_slot_name = ''\n"), "{none}");
        let remote = Upstream {
            member: false,
            ..member
        };
        let remote = owned_conf(&config, 1, Some(remote), None, "");
        assert!(remote.contains("host=10.0.0.3 port=5433"), "{remote}");
        assert!(
            remote.contains("primary_slot_name = ''\n"),
            "no slot on a standby cluster's remote: {remote}"
        );
        config.max_slot_wal_keep_size = -1;
        let unlimited = owned_conf(&config, 1, None, None, "");
        assert!(
            unlimited.contains("max_slot_wal_keep_size = '-1'\n"),
            "{unlimited}"
        );
    }

    #[test]
    fn with_tls_on_the_server_gets_its_files_and_the_standby_verifies_the_ca() {
        use crate::config::postgres::TlsMode;
        let mut config = PostgresConfig::new("/var/lib/pg/n'1", "10.0.0.1:5432".parse().unwrap());
        let upstream = Some(Upstream {
            server: "10.0.0.3:5433".parse().unwrap(),
            member: true,
        });
        let off = owned_conf(&config, 1, upstream, None, "");
        assert!(
            !off.contains("ssl"),
            "no TLS setting of bully's when off: {off}"
        );
        config.tls = TlsMode::On;
        let on = owned_conf(&config, 1, upstream, None, "");
        for line in [
            "ssl = 'on'\n",
            "ssl_cert_file = '/var/lib/pg/n''1.server.pem'\n",
            "ssl_key_file = '/var/lib/pg/n''1.server.key'\n",
            "ssl_ca_file = '/var/lib/pg/n''1.ca.pem'\n",
        ] {
            assert!(on.contains(line), "{line:?} missing from:\n{on}");
        }
        // The standby's conninfo, read back as the config lexer and then libpq do.
        let conninfo = conninfo_of(&on);
        let pairs = quote::readers::conninfo(&conninfo).unwrap();
        let get = |key: &str| {
            pairs
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("sslmode"), Some("verify-ca"), "{conninfo}");
        assert_eq!(
            get("sslrootcert"),
            Some("/var/lib/pg/n'1.ca.pem"),
            "{conninfo}"
        );
        assert_eq!(get("host"), Some("10.0.0.3"), "{conninfo}");
        assert_eq!(
            crate::node::postgres::sql::upstream_of(&conninfo),
            Some("10.0.0.3:5433".parse().unwrap()),
            "the manager still reads its upstream back"
        );
        let plain = conninfo_of(&off);
        assert!(!plain.contains("sslmode"), "{plain}");
    }

    /// The `primary_conninfo` an include file holds, as the server reads it.
    fn conninfo_of(text: &str) -> String {
        let literal = text
            .lines()
            .find_map(|l| l.strip_prefix("primary_conninfo = "))
            .unwrap();
        quote::readers::conf_string(literal).unwrap()
    }

    #[test]
    fn claims_written_by_coordinators_count_until_the_server_records_the_timeline() {
        let dir = tempfile::tempdir().unwrap();
        record_branch(dir.path(), 3, 5, None).unwrap();
        assert_eq!(branch_of(dir.path(), 3), 5);
        assert_eq!(branch_of(dir.path(), 4), 0);
        std::fs::write(dir.path().join(written_name(4, 9)), "4 9\n").unwrap();
        std::fs::write(dir.path().join(written_name(4, 7)), "4 7\n").unwrap();
        std::fs::write(dir.path().join(written_name(3, 6)), "3 6\n").unwrap();
        assert_eq!(
            branch_of(dir.path(), 4),
            9,
            "the highest claim is the newest"
        );
        assert_eq!(branch_of(dir.path(), 3), 6, "a claim above the record");
        // The server's own record of 4 (the upstream it streams 4 from) supersedes
        // both claims for 4, also the higher one, and leaves the claim for 3.
        record_branch(dir.path(), 4, 8, None).unwrap();
        assert_eq!(branch_of(dir.path(), 4), 8);
        assert_eq!(branch_of(dir.path(), 3), 6);
        let left = Records::read(dir.path()).names;
        assert_eq!(left, vec![written_name(3, 6)]);
    }

    #[test]
    fn a_timeline_without_a_record_ranks_as_its_newest_recorded_ancestor() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("pg_wal")).unwrap();
        let history = "1\t0/3000000\tno recovery target specified\n\n\
                       # a comment\n2\t0/5000000\tno recovery target specified\n";
        std::fs::write(dir.path().join(history_file(3)), history).unwrap();
        assert_eq!(ancestors_in(history), vec![1, 2]);
        assert_eq!(wal_branch(dir.path(), 3), 0, "nothing recorded");
        record_branch(dir.path(), 1, 4, None).unwrap();
        assert_eq!(wal_branch(dir.path(), 3), 4, "timeline 1's");
        record_branch(dir.path(), 2, 6, None).unwrap();
        assert_eq!(wal_branch(dir.path(), 3), 6, "the newest ancestor's");
        record_branch(dir.path(), 3, 8, None).unwrap();
        assert_eq!(wal_branch(dir.path(), 3), 8, "its own");
        assert_eq!(branch_of(dir.path(), 4), 0, "a record is per timeline");
        assert_eq!(wal_branch(dir.path(), 4), 0, "no history: no ancestor");
    }

    #[test]
    fn the_include_line_is_appended_once() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("postgresql.conf"), "port = 1\n").unwrap();
        write_conf(dir.path(), "x = 1\n", None).unwrap();
        write_conf(dir.path(), "x = 2\n", None).unwrap();
        let main = std::fs::read_to_string(dir.path().join("postgresql.conf")).unwrap();
        assert_eq!(main.matches(INCLUDE_LINE).count(), 1, "{main}");
        let owned = std::fs::read_to_string(dir.path().join(OWNED_INCLUDE)).unwrap();
        assert_eq!(owned, "x = 2\n");
    }
}
