//! The SQL round trips the manager makes (tokio-postgres; TLS with `[postgres] tls =
//! "on"`, src/node/postgres/tls.rs): connecting with a deadline, the one query that
//! describes a server, promotion, reload, and the replication role.

use super::tls::Connector;
use crate::api::postgres::parse_lsn;
use crate::postgres_rules::{Slot, SlotChange};
use std::net::SocketAddr;
use std::time::Duration;
use tokio_postgres::Client;

/// What one query told about a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Described {
    pub in_recovery: bool,
    pub timeline: u32,
    /// Flushed WAL on a primary; received, else replayed, WAL on a standby.
    pub wal: u64,
    /// A standby's replayed WAL.
    pub replayed: Option<u64>,
    /// A standby's WAL receiver streams.
    pub streaming: bool,
    /// `primary_conninfo`'s host and port.
    pub upstream: Option<SocketAddr>,
    pub synchronous_standby_names: String,
    /// A primary's standbys that stream now, by application name, with their flushed WAL.
    pub standbys: Vec<(String, u64)>,
    /// Its system identifier: a promotion check counts only servers of its own cluster
    /// (src/sim/postgres/strangers.rs found a stranger's volume making up a majority,
    /// seed 7910).
    pub system_id: u64,
    /// It runs with a `restore_command` (from any of its files): a standby replays
    /// from the archive what its upstream no longer keeps.
    pub archive: bool,
}

/// What a failed round trip says: the server's own message when it sent one (the
/// client's error prints only "db error" then).
pub fn why(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.severity(), db.message()),
        None => e.to_string(),
    }
}

/// Connects to `server` as `user` within `timeout`, by `connector` (plain, or TLS
/// with `[postgres] tls = "on"`).
pub async fn connect(
    connector: &Connector,
    server: SocketAddr,
    user: &str,
    password: Option<&str>,
    timeout: Duration,
) -> Result<Client, String> {
    let mut config = tokio_postgres::Config::new();
    config
        .host(server.ip().to_string())
        .port(server.port())
        .user(user)
        .dbname("postgres")
        .application_name("bully")
        .connect_timeout(timeout);
    if let Some(password) = password {
        config.password(password);
    }
    tokio::time::timeout(timeout, connector.connect(config))
        .await
        .map_err(|_| format!("no answer from {server} within {timeout:?}"))?
        .map_err(|e| format!("{server}: {}", why(&e)))
}

/// What a look reads of its server. A standby streams when its walreceiver's status is
/// `streaming` *and* it heard from its upstream (the send and receipt times of the last
/// message differ: PostgreSQL sets both to the same instant when the process starts) or
/// has run 3 s (an idle upstream sends nothing until a keepalive): PostgreSQL shows
/// `streaming` from the process's start, before the upstream accepted anything, so a
/// walreceiver refused again and again (a missing slot, WAL the upstream no longer
/// has) would otherwise read as streaming between refusals and the manager's count of
/// looks without streaming would keep starting over
/// (src/node/postgres/real_server_tests.rs).
const DESCRIBE: &str = "SELECT pg_is_in_recovery(),
    CASE WHEN pg_is_in_recovery() THEN NULL
         ELSE pg_walfile_name(pg_current_wal_flush_lsn()) END,
    (SELECT timeline_id FROM pg_control_checkpoint()),
    (SELECT received_tli FROM pg_stat_wal_receiver),
    CASE WHEN pg_is_in_recovery() THEN NULL ELSE pg_current_wal_flush_lsn()::text END,
    pg_last_wal_receive_lsn()::text,
    pg_last_wal_replay_lsn()::text,
    coalesce((SELECT r.status = 'streaming'
        AND (r.last_msg_send_time IS DISTINCT FROM r.last_msg_receipt_time
             OR a.backend_start < now() - interval '3 s')
        FROM pg_stat_wal_receiver r LEFT JOIN pg_stat_activity a ON a.pid = r.pid), false),
    current_setting('primary_conninfo'),
    current_setting('synchronous_standby_names'),
    (SELECT min_recovery_end_timeline FROM pg_control_recovery()),
    (SELECT system_identifier FROM pg_control_system()),
    current_setting('restore_command') <> ''";

const STANDBYS: &str = "SELECT application_name, coalesce(flush_lsn::text, '0/0')
    FROM pg_stat_replication WHERE state = 'streaming'";

/// Describes the server behind `client` within `timeout`.
pub async fn describe(client: &Client, timeout: Duration) -> Result<Described, String> {
    let asked = async {
        let row = client.query_one(DESCRIBE, &[]).await?;
        let standbys = match row.get::<_, bool>(0) {
            true => Vec::new(),
            false => client.query(STANDBYS, &[]).await?,
        };
        Ok::<_, tokio_postgres::Error>((row, standbys))
    };
    let (row, standbys) = tokio::time::timeout(timeout, asked)
        .await
        .map_err(|_| format!("the server did not answer within {timeout:?}"))?
        .map_err(|e| why(&e))?;
    let lsn = |i: usize| {
        row.get::<_, Option<String>>(i)
            .as_deref()
            .and_then(parse_lsn)
    };
    let in_recovery: bool = row.get(0);
    let walfile_timeline = row
        .get::<_, Option<String>>(1)
        .and_then(|name| u32::from_str_radix(name.get(..8)?, 16).ok());
    let checkpoint_timeline = row.get::<_, Option<i32>>(2).unwrap_or(0).max(0) as u32;
    let received_timeline = row.get::<_, Option<i32>>(3).unwrap_or(0).max(0) as u32;
    // A standby's checkpoint lags its replay, and its WAL receiver may be down: the
    // timeline its minimum recovery point is on (set by a rewind, raised as it
    // replays) covers the gap.
    let recovery_timeline = row.get::<_, Option<i32>>(10).unwrap_or(0).max(0) as u32;
    let timeline = walfile_timeline.unwrap_or(
        checkpoint_timeline
            .max(received_timeline)
            .max(recovery_timeline),
    );
    let (received, replayed) = (lsn(5), lsn(6));
    let wal = match in_recovery {
        false => lsn(4).unwrap_or(0),
        true => received.max(replayed).unwrap_or(0),
    };
    Ok(Described {
        system_id: row.get::<_, Option<i64>>(11).unwrap_or(0) as u64,
        archive: row.get::<_, Option<bool>>(12).unwrap_or(false),
        in_recovery,
        timeline,
        wal,
        replayed,
        streaming: row.get(7),
        upstream: upstream_of(&row.get::<_, String>(8)),
        synchronous_standby_names: row.get(9),
        standbys: standbys
            .iter()
            .map(|r| {
                let flushed = parse_lsn(&r.get::<_, String>(1)).unwrap_or(0);
                (r.get::<_, String>(0), flushed)
            })
            .collect(),
    })
}

/// The host and port of a `primary_conninfo` string (as bully writes it).
pub fn upstream_of(conninfo: &str) -> Option<SocketAddr> {
    let mut host = None;
    let mut port = None;
    for word in conninfo.split_whitespace() {
        let Some((key, value)) = word.split_once('=') else {
            continue;
        };
        let value = value.trim_matches('\'');
        match key {
            "host" => host = value.parse::<std::net::IpAddr>().ok(),
            "port" => port = value.parse::<u16>().ok(),
            _ => {}
        }
    }
    Some(SocketAddr::new(host?, port?))
}

/// How often a promotion is checked for its end (`pg_promote(true)` itself checks
/// every 100 ms, a tenth of a failover).
const PROMOTION_POLL: Duration = Duration::from_millis(5);

/// Promotes a standby and waits up to `timeout` for it to leave recovery.
pub async fn promote(client: &Client, timeout: Duration) -> Result<(), String> {
    let asked = async {
        client.query_one("SELECT pg_promote(false)", &[]).await?;
        loop {
            let row = client.query_one("SELECT pg_is_in_recovery()", &[]).await?;
            if !row.get::<_, bool>(0) {
                return Ok::<_, tokio_postgres::Error>(());
            }
            tokio::time::sleep(PROMOTION_POLL).await;
        }
    };
    tokio::time::timeout(timeout, asked)
        .await
        .map_err(|_| format!("the promotion did not end within {timeout:?}"))?
        .map_err(|e| format!("pg_promote: {}", why(&e)))
}

/// Runs a checkpoint (after a promotion, so the control file names the new timeline).
pub async fn checkpoint(client: &Client, timeout: Duration) -> Result<(), String> {
    tokio::time::timeout(timeout, client.batch_execute("CHECKPOINT"))
        .await
        .map_err(|_| format!("CHECKPOINT did not end within {timeout:?}"))?
        .map_err(|e| format!("CHECKPOINT: {}", why(&e)))
}

/// Makes sure the control file of the primary behind `client` names its current
/// timeline (a checkpoint if it does not), as `pg_rewind` from it needs.
pub async fn checkpointed(client: &Client, timeout: Duration) -> Result<(), String> {
    let asked = client.query_one(
        "SELECT (SELECT timeline_id FROM pg_control_checkpoint())::text = \
         ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int::text",
        &[],
    );
    let row = tokio::time::timeout(timeout, asked)
        .await
        .map_err(|_| "the source did not answer".to_string())?
        .map_err(|e| format!("the source's timeline: {e}"))?;
    match row.get::<_, bool>(0) {
        true => Ok(()),
        false => checkpoint(client, timeout).await,
    }
}

/// The branch the WAL of the server behind `client` on `timeline` ranks as, read
/// through SQL (a superuser's `pg_read_file` and `pg_ls_dir`): its `bully.branch`, the
/// records coordinators wrote into its data dir and the timeline's history file
/// ([`files::Records::wal_branch`]).
pub async fn wal_branch(client: &Client, timeline: u32, timeout: Duration) -> Result<u64, String> {
    use crate::node::postgres::files::{history_file, Records, BRANCHES};
    const READ: &str = "SELECT coalesce(pg_read_file($1, 0, 1048576, true), '')";
    let asked = async {
        let text = client.query_one(READ, &[&BRANCHES]).await?;
        let history = client.query_one(READ, &[&history_file(timeline)]).await?;
        let names = client
            .query(
                "SELECT name FROM pg_ls_dir('.') AS name WHERE name LIKE 'bully.branch.%'",
                &[],
            )
            .await?;
        Ok::<_, tokio_postgres::Error>((text.get::<_, String>(0), history.get(0), names))
    };
    let (text, history, names): (String, String, _) = tokio::time::timeout(timeout, asked)
        .await
        .map_err(|_| "the server did not answer".to_string())?
        .map_err(|e| format!("reading {BRANCHES}: {}", why(&e)))?;
    let records = Records {
        text,
        names: names.iter().map(|row| row.get(0)).collect(),
    };
    Ok(records.wal_branch(timeline, &history))
}

/// Writes a branch record into the data dir of the server behind `client` (a
/// superuser's `COPY ... TO` a file named by [`files::written_name`]).
pub async fn write_branch(
    client: &Client,
    timeline: u32,
    term: u64,
    timeout: Duration,
) -> Result<(), String> {
    let name = crate::node::postgres::files::written_name(timeline, term);
    let asked = async {
        // COPY takes absolute paths only.
        let row = client
            .query_one("SELECT current_setting('data_directory')", &[])
            .await?;
        let dir: String = row.get(0);
        let path = format!("{}/{name}", dir.trim_end_matches('/')).replace('\'', "''");
        client
            .batch_execute(&format!("COPY (SELECT '{timeline} {term}') TO '{path}'"))
            .await
    };
    tokio::time::timeout(timeout, asked)
        .await
        .map_err(|_| "the standby did not answer".to_string())?
        .map_err(|e| format!("writing {name}: {}", why(&e)))
}

/// bully's physical slots on the server behind `client` (`bully_*`; the user's
/// others are not read).
pub async fn slots(client: &Client, timeout: Duration) -> Result<Vec<Slot>, String> {
    let asked = client.query(
        "SELECT slot_name::text, active, restart_lsn IS NOT NULL, \
         coalesce(wal_status = 'lost', false) FROM pg_replication_slots \
         WHERE slot_type = 'physical' AND slot_name LIKE 'bully\\_%'",
        &[],
    );
    let rows = tokio::time::timeout(timeout, asked)
        .await
        .map_err(|_| "pg_replication_slots did not answer".to_string())?
        .map_err(|e| format!("pg_replication_slots: {}", why(&e)))?;
    Ok(rows
        .iter()
        .map(|row| Slot {
            name: row.get(0),
            active: row.get(1),
            reserved: row.get(2),
            lost: row.get(3),
        })
        .collect())
}

/// Creates or drops one slot (`postgres_rules::slot_changes`).
pub async fn change_slot(
    client: &Client,
    change: &SlotChange,
    timeout: Duration,
) -> Result<(), String> {
    let asked = async {
        match change {
            SlotChange::Create { name, reserve } => {
                client
                    .execute(
                        "SELECT pg_create_physical_replication_slot($1, $2)",
                        &[name, reserve],
                    )
                    .await
            }
            SlotChange::Drop { name } => {
                client
                    .execute("SELECT pg_drop_replication_slot($1)", &[name])
                    .await
            }
        }
    };
    tokio::time::timeout(timeout, asked)
        .await
        .map_err(|_| format!("{change:?} did not answer"))?
        .map(|_| ())
        .map_err(|e| format!("{change:?}: {}", why(&e)))
}

/// Where the oldest WAL the server behind `client` still keeps in `pg_wal` begins (a
/// segment's start, any timeline); `None` when it keeps none. A standby that needs
/// WAL below it cannot stream from this server (`postgres_rules::WalRemoved`).
pub async fn oldest_wal(client: &Client, timeout: Duration) -> Result<Option<u64>, String> {
    // The last 16 hex digits of a segment's name are its number: fixed width, so the
    // smallest text is the smallest segment whatever the timeline.
    let asked = client.query_one(
        "SELECT (SELECT min(substr(name, 9)) FROM pg_ls_waldir() \
                 WHERE name ~ '^[0-9A-F]{24}$'), \
                (SELECT setting::bigint FROM pg_settings WHERE name = 'wal_segment_size')",
        &[],
    );
    let row = tokio::time::timeout(timeout, asked)
        .await
        .map_err(|_| "pg_ls_waldir() did not answer".to_string())?
        .map_err(|e| format!("pg_ls_waldir(): {}", why(&e)))?;
    let size = row.get::<_, i64>(1).max(1) as u64;
    Ok(row
        .get::<_, Option<String>>(0)
        .and_then(|number| segment_start(&number, size)))
}

/// Where a WAL segment begins, from the last 16 hex digits of its file name (the high
/// 32 bits of its position, then its number within them) and the segment size.
pub fn segment_start(number: &str, segment_size: u64) -> Option<u64> {
    let high = u64::from_str_radix(number.get(..8)?, 16).ok()?;
    let low = u64::from_str_radix(number.get(8..16)?, 16).ok()?;
    Some((high << 32) + low * segment_size)
}

/// Asks the server to reread its configuration.
pub async fn reload(client: &Client, timeout: Duration) -> Result<(), String> {
    tokio::time::timeout(timeout, client.execute("SELECT pg_reload_conf()", &[]))
        .await
        .map_err(|_| "pg_reload_conf() did not answer".to_string())?
        .map(|_| ())
        .map_err(|e| format!("pg_reload_conf(): {}", why(&e)))
}

/// Creates the replication role on a primary if it is missing (a new cluster's first
/// promotion; every clone then has it) and sets its password from its file (at every
/// promotion: a changed file is in force once a primary takes office).
pub async fn ensure_replication_role(
    client: &Client,
    user: &str,
    password: Option<&str>,
    timeout: Duration,
) -> Result<(), String> {
    tokio::time::timeout(timeout, replication_role(client, user, password))
        .await
        .map_err(|_| format!("creating the replication role did not end within {timeout:?}"))?
}

async fn replication_role(
    client: &Client,
    user: &str,
    password: Option<&str>,
) -> Result<(), String> {
    let exists = client
        .query_opt("SELECT 1 FROM pg_roles WHERE rolname = $1", &[&user])
        .await
        .map_err(|e| e.to_string())?
        .is_some();
    role_ddl(client, &role_statement(user, exists, password), user).await
}

/// Sets the password of the existing role `user` (the superuser's, from its changed
/// file) on a primary; the standbys get it by replication.
pub async fn set_password(
    client: &Client,
    user: &str,
    password: &str,
    timeout: Duration,
) -> Result<(), String> {
    let statement = role_statement(user, true, Some(password));
    tokio::time::timeout(timeout, role_ddl(client, &statement, user))
        .await
        .map_err(|_| format!("ALTER ROLE {user} did not end within {timeout:?}"))?
}

/// Runs one role statement (none when empty) kept out of the server's log.
async fn role_ddl(client: &Client, statement: &str, user: &str) -> Result<(), String> {
    if statement.is_empty() {
        return Ok(());
    }
    let failed =
        |e: tokio_postgres::Error| format!("cannot create or alter the role {user}: {}", why(&e));
    // Three round trips: the server logs a query string as it receives it, so the
    // settings must be in force before the statement's string arrives.
    client.batch_execute(ROLE_PREAMBLE).await.map_err(failed)?;
    let done = client.batch_execute(statement).await;
    let end = match done {
        Ok(_) => "COMMIT",
        Err(_) => "ROLLBACK",
    };
    let ended = client.batch_execute(end).await;
    done.and(ended).map_err(failed)
}

/// `CREATE ROLE` (when it does not exist) or `ALTER ROLE` (when a password is given)
/// for the replication role, empty when there is nothing to do. The password goes as
/// its SCRAM verifier, computed here: the plain text never reaches the server.
pub fn role_statement(user: &str, exists: bool, password: Option<&str>) -> String {
    let ident = format!("\"{}\"", user.replace('"', "\"\""));
    let verifier = password.map(|p| {
        let hashed = postgres_protocol::password::scram_sha_256(p.as_bytes());
        format!(" PASSWORD '{}'", hashed.replace('\'', "''"))
    });
    match (exists, verifier) {
        (false, verifier) => format!(
            "CREATE ROLE {ident} WITH REPLICATION LOGIN{}",
            verifier.unwrap_or_default()
        ),
        (true, Some(verifier)) => format!("ALTER ROLE {ident} WITH{verifier}"),
        (true, None) => String::new(),
    }
}

/// What opens the transaction role DDL runs in: committed locally (the standbys that
/// would acknowledge it need this very role), and never written to the server's log
/// (`log_statement` and `log_min_duration_statement` off for it, whatever the user's
/// settings).
pub const ROLE_PREAMBLE: &str = "BEGIN; SET LOCAL synchronous_commit TO local; \
    SET LOCAL log_statement TO 'none'; SET LOCAL log_min_duration_statement TO -1";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_upstream_is_read_back_from_the_conninfo_bully_writes() {
        let text = "host=10.0.0.3 port=5433 user='r' application_name='bully_1'";
        assert_eq!(upstream_of(text), Some("10.0.0.3:5433".parse().unwrap()));
        assert_eq!(upstream_of(""), None);
        assert_eq!(upstream_of("host=db port=1"), None);
    }

    #[test]
    fn role_ddl_carries_a_verifier_and_is_not_logged() {
        let create = role_statement(r#"re"pl"#, false, Some("pa'ss\\wo rd é"));
        assert!(
            create.starts_with(
                r#"CREATE ROLE "re""pl" WITH REPLICATION LOGIN PASSWORD 'SCRAM-SHA-256$4096:"#
            ),
            "{create}"
        );
        assert!(
            !create.contains("pa'ss") && !create.contains("pa''ss"),
            "{create}"
        );
        let alter = role_statement("r", true, Some("x"));
        assert!(
            alter.starts_with(r#"ALTER ROLE "r" WITH PASSWORD 'SCRAM-SHA-256$"#),
            "{alter}"
        );
        assert_eq!(role_statement("r", true, None), "");
        assert_eq!(
            role_statement("r", false, None),
            r#"CREATE ROLE "r" WITH REPLICATION LOGIN"#
        );
        assert!(ROLE_PREAMBLE.contains("SET LOCAL log_statement TO 'none'"));
    }

    #[test]
    fn a_segment_name_gives_where_it_begins() {
        let mb16 = 16 << 20;
        assert_eq!(segment_start("0000000000000001", mb16), Some(mb16));
        assert_eq!(
            segment_start("00000001000000FF", mb16),
            Some((1 << 32) + 0xFF * mb16)
        );
        assert_eq!(segment_start("0000000000000003", 1 << 20), Some(3 << 20));
        assert_eq!(segment_start("000000000000", mb16), None);
        assert_eq!(segment_start("zz00000000000000", mb16), None);
    }
}
