//! Where the roles' passwords live and who may log in (issue 49, "Secrets and
//! defaults"):
//! - each password is read from its `password_file`; without one, under `[postgres]
//!   auth = "scram-sha-256"` (the default), from a file bully generates once in the
//!   node's data dir (`postgres-superuser.password`, `postgres-replication.password`,
//!   random, mode 0600);
//! - libpq's programs and the standbys' WAL receivers read them from a passfile
//!   ([`passfile_of`]: beside the server's data dir, mode 0600, owned by the server's
//!   user), named by `passfile=` in `primary_conninfo` and by `PGPASSFILE` for
//!   `pg_basebackup` and `pg_rewind`, never inline in `bully.conf`;
//! - `pg_hba.conf` gets one line per role and member address ([`hba_lines`]), not
//!   `0.0.0.0/0`, and `trust` only with `auth = "trust"`; with `tls = "on"` the lines
//!   are `hostssl`, and bully's roles without TLS from those addresses are rejected
//!   ([`hba_refusals`]).

use super::owned::{create_private, replace_private};
use super::quote::pgpass_field;
use crate::config::postgres::{Auth, Credentials, PostgresConfig, TlsMode};
use nix::unistd::{Gid, Uid};
use rand::Rng;
use std::fmt::Write as _;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// How many characters a generated password has (from 62: about 190 bits).
const GENERATED_LENGTH: usize = 32;

/// The roles' passwords as the manager uses them; `None`: the role has none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Passwords {
    pub superuser: Option<String>,
    pub replication: Option<String>,
}

/// The file a generated password for `role` (`superuser`, `replication`) lives in.
pub fn generated_file(node_data_dir: &Path, role: &str) -> PathBuf {
    node_data_dir.join(format!("postgres-{role}.password"))
}

/// Where `credentials`' password is read: its `password_file`, else (under SCRAM) the
/// generated file; `None` under `auth = "trust"` without a file.
fn file_of(
    credentials: &Credentials,
    auth: Auth,
    node_data_dir: &Path,
    role: &str,
) -> Option<PathBuf> {
    match (&credentials.password_file, auth) {
        (Some(file), _) => Some(file.clone()),
        (None, Auth::ScramSha256) => Some(generated_file(node_data_dir, role)),
        (None, Auth::Trust) => None,
    }
}

impl Passwords {
    /// Reads both passwords from their files (see [`file_of`]).
    pub fn read(config: &PostgresConfig, node_data_dir: &Path) -> Result<Passwords, String> {
        let read = |credentials: &Credentials, role: &str| {
            file_of(credentials, config.auth, node_data_dir, role)
                .map(|file| read_password(&file))
                .transpose()
        };
        Ok(Passwords {
            superuser: read(&config.superuser, "superuser")?,
            replication: read(&config.replication, "replication")?,
        })
    }

    /// Generates each missing generated file (logging where), then reads both.
    pub fn prepare(config: &PostgresConfig, node_data_dir: &Path) -> Result<Passwords, String> {
        for (credentials, role) in [
            (&config.superuser, "superuser"),
            (&config.replication, "replication"),
        ] {
            if credentials.password_file.is_some() || config.auth == Auth::Trust {
                continue;
            }
            let file = generated_file(node_data_dir, role);
            if generate(&file)? {
                tracing::warn!(
                    file = %file.display(),
                    "postgres: generated the {role} password (mode 0600); every member \
                     needs the same one: copy this file to the others' data dirs, or set \
                     [postgres] {role}.password_file on every member"
                );
            }
        }
        Passwords::read(config, node_data_dir)
    }
}

/// The password in `file`: its first line. A password a pgpass line cannot carry (a
/// carriage return, a NUL) or an empty one is refused.
pub fn read_password(file: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read the password file {}: {e}", file.display()))?;
    let password = text.split('\n').next().unwrap_or("");
    if password.is_empty() {
        return Err(format!("the password file {} is empty", file.display()));
    }
    if pgpass_field(password).is_none() {
        return Err(format!(
            "the password in {} holds a carriage return or a NUL, which no pgpass line \
             can carry",
            file.display()
        ));
    }
    Ok(password.to_string())
}

/// Writes a random password to `file` (mode 0600) unless it exists; whether it wrote.
fn generate(file: &Path) -> Result<bool, String> {
    if file.exists() {
        return Ok(false);
    }
    let password: String = rand::thread_rng()
        .sample_iter(rand::distributions::Alphanumeric)
        .take(GENERATED_LENGTH)
        .map(char::from)
        .collect();
    create_private(file, &format!("{password}\n"), None)?;
    Ok(true)
}

/// The passfile of the server at `data_dir`: beside it (`<data_dir>.pgpass`), so it
/// never travels in a base backup nor is moved aside with the data.
pub fn passfile_of(data_dir: &Path) -> PathBuf {
    let mut path = data_dir.as_os_str().to_owned();
    path.push(".pgpass");
    PathBuf::from(path)
}

/// The passfile's lines: one per role with a password, any host, port and database.
pub fn passfile_text(config: &PostgresConfig, passwords: &Passwords) -> Result<String, String> {
    let mut text =
        String::from("# Written by bully from the password files; rewritten on every change.\n");
    let roles = [
        (&config.replication.user, &passwords.replication),
        (&config.superuser.user, &passwords.superuser),
    ];
    for (user, password) in roles {
        let Some(password) = password else { continue };
        let (Some(user), Some(password)) = (pgpass_field(user), pgpass_field(password)) else {
            return Err(format!(
                "the role {user:?} or its password cannot be written to a pgpass line"
            ));
        };
        let _ = writeln!(text, "*:*:*:{user}:{password}");
    }
    Ok(text)
}

/// Writes the passfile of the server at `config.data_dir` (mode 0600 from its
/// creation, owned by `owner`, replaced by a rename); returns its path, `None` when no
/// role has a password.
pub fn write_passfile(
    config: &PostgresConfig,
    passwords: &Passwords,
    owner: Option<(Uid, Gid)>,
) -> Result<Option<PathBuf>, String> {
    if passwords.superuser.is_none() && passwords.replication.is_none() {
        return Ok(None);
    }
    let path = passfile_of(&config.data_dir);
    let text = passfile_text(config, passwords)?;
    replace_private(&path, &text, owner)?;
    Ok(Some(path))
}

/// The environment that points libpq's programs at the passfile.
pub fn passfile_env(passfile: Option<&Path>) -> Vec<(String, String)> {
    passfile
        .map(|p| vec![("PGPASSFILE".to_string(), p.display().to_string())])
        .unwrap_or_default()
}

/// `pg_hba.conf`'s method for the members under `auth`.
pub fn method(auth: Auth) -> &'static str {
    match auth {
        Auth::ScramSha256 => "scram-sha-256",
        Auth::Trust => "trust",
    }
}

/// A role name as a `pg_hba.conf` token: double-quoted, so no name reads as a keyword
/// (`all`, `replication`) or splits at a comma (`problem()` refuses `"` in names).
fn hba_role(name: &str) -> String {
    format!("\"{name}\"")
}

/// `ip` as a `pg_hba.conf` address of one host (/32 or /128).
fn hba_net(ip: &IpAddr) -> String {
    match ip {
        IpAddr::V4(_) => format!("{ip}/32"),
        IpAddr::V6(_) => format!("{ip}/128"),
    }
}

/// The `pg_hba.conf` lines a new cluster gets after `initdb`: replication and the
/// superuser from each member address (one host each), by `auth`; `hostssl` with
/// `[postgres] tls = "on"`, so a member's standby or manager gets in over TLS only.
pub fn hba_lines(config: &PostgresConfig, addresses: &[IpAddr]) -> String {
    let method = method(config.auth);
    let kind = match config.tls {
        TlsMode::Off => "host",
        TlsMode::On => "hostssl",
    };
    let mut text = String::from(
        "\n# Added by bully (after initdb, or by `bully pg adopt`): the members' standbys \
         and managers, from the members' addresses. Yours from now on.\n",
    );
    let repl = hba_role(&config.replication.user);
    let su = hba_role(&config.superuser.user);
    for ip in addresses {
        let net = hba_net(ip);
        let _ = writeln!(text, "{kind} replication {repl} {net} {method}");
        let _ = writeln!(text, "{kind} all {su} {net} {method}");
    }
    text
}

/// With `[postgres] tls = "on"`, the lines that go first in `pg_hba.conf`: bully's two
/// roles from a member address without TLS are rejected, before `initdb`'s own lines
/// for `127.0.0.1` and `::1` could let them in (a member at a loopback address, as in
/// tests/postgres_tls.rs). Other roles are left to the user's lines. Empty when off.
pub fn hba_refusals(config: &PostgresConfig, addresses: &[IpAddr]) -> String {
    if config.tls == TlsMode::Off {
        return String::new();
    }
    let roles = format!(
        "{},{}",
        hba_role(&config.replication.user),
        hba_role(&config.superuser.user)
    );
    let mut text = String::from(
        "# Added by bully ([postgres] tls = \"on\"): its roles from the \
         members' addresses only over TLS. Yours from now on.\n",
    );
    for ip in addresses {
        let net = hba_net(ip);
        let _ = writeln!(text, "hostnossl replication {roles} {net} reject");
        let _ = writeln!(text, "hostnossl all {roles} {net} reject");
    }
    text.push('\n');
    text
}

/// `pg_hba.conf` as `initdb` wrote it (`initdb_text`) with bully's lines for the
/// members: [`hba_refusals`] before it, [`hba_lines`] after.
pub fn hba_file(config: &PostgresConfig, addresses: &[IpAddr], initdb_text: &str) -> String {
    format!(
        "{}{initdb_text}{}",
        hba_refusals(config, addresses),
        hba_lines(config, addresses)
    )
}

/// The member addresses `hosts` (`host:port`, names resolved now) name, with
/// `own`, sorted and without repeats; a name that does not resolve is an error.
pub async fn member_addresses(hosts: &[String], own: &[IpAddr]) -> Result<Vec<IpAddr>, String> {
    let mut addresses: Vec<IpAddr> = own.to_vec();
    for host in hosts {
        let found = tokio::net::lookup_host(host.as_str())
            .await
            .map_err(|e| format!("cannot resolve the member address {host}: {e}"))?;
        addresses.extend(found.map(|a| a.ip()));
    }
    addresses.sort();
    addresses.dedup();
    Ok(addresses)
}

/// The addresses `pg_hba.conf` lets in for a server configured by `config`: the
/// member hosts `hosts` and the server's own addresses (its manager logs in from
/// there), as after `initdb` and `bully pg adopt` alike.
pub async fn addresses_for(
    config: &PostgresConfig,
    hosts: &[String],
) -> Result<Vec<IpAddr>, String> {
    member_addresses(hosts, &[config.listen.ip(), config.reached_at().ip()]).await
}

/// `pg_hba.conf`'s text `current` with bully's lines for `addresses` added
/// ([`hba_file`]), or `None` when it holds them already (a second `bully pg adopt`).
pub fn hba_with_members(
    config: &PostgresConfig,
    addresses: &[IpAddr],
    current: &str,
) -> Option<String> {
    let has = |lines: String| current.contains(lines.trim());
    let present = has(hba_lines(config, addresses)) && has(hba_refusals(config, addresses));
    (!present).then(|| hba_file(config, addresses, current))
}

/// Writes `text` (the superuser's password) where initdb's `--pwfile` reads it and
/// returns that file; removed by the caller once initdb ran.
pub fn initdb_pwfile(
    config: &PostgresConfig,
    password: &str,
    owner: Option<(Uid, Gid)>,
) -> Result<PathBuf, String> {
    let mut path = config.data_dir.as_os_str().to_owned();
    path.push(".pwfile");
    let path = PathBuf::from(path);
    let _ = std::fs::remove_file(&path);
    create_private(&path, &format!("{password}\n"), owner)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::postgres::PostgresConfig;

    fn config(dir: &Path) -> PostgresConfig {
        let mut config = PostgresConfig::new(dir.join("pg"), "127.0.0.1:5432".parse().unwrap());
        config.replication.user = r"rep:l\ica".into();
        config
    }

    #[test]
    fn the_passfile_is_private_and_libpq_reads_each_password_back() {
        let dir = tempfile::tempdir().unwrap();
        let config = config(dir.path());
        let passwords = Passwords {
            superuser: Some(r"pa'ss\wo rd é:#".into()),
            replication: Some(r"\:'".into()),
        };
        let path = write_passfile(&config, &passwords, None).unwrap().unwrap();
        assert_eq!(path, dir.path().join("pg.pgpass"));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let text = std::fs::read_to_string(&path).unwrap();
        let find = |user: &str| {
            text.lines()
                .find_map(|l| super::super::quote::readers::pgpass_password(l, user))
        };
        assert_eq!(find(&config.replication.user), passwords.replication);
        assert_eq!(find("postgres"), passwords.superuser);
        let none = write_passfile(&config, &Passwords::default(), None).unwrap();
        assert_eq!(none, None);
    }

    #[test]
    fn generated_passwords_are_made_once_private_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let config = config(dir.path());
        let first = Passwords::prepare(&config, dir.path()).unwrap();
        let su = first.superuser.clone().unwrap();
        assert_eq!(su.len(), GENERATED_LENGTH);
        assert_ne!(first.superuser, first.replication);
        use std::os::unix::fs::PermissionsExt;
        let file = generated_file(dir.path(), "superuser");
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(Passwords::prepare(&config, dir.path()).unwrap(), first);
        let trust = PostgresConfig {
            auth: Auth::Trust,
            ..config.clone()
        };
        assert_eq!(
            Passwords::read(&trust, dir.path()).unwrap(),
            Passwords::default()
        );
        std::fs::write(&file, "a\rb\n").unwrap();
        let refused = Passwords::read(&config, dir.path()).unwrap_err();
        assert!(refused.contains("carriage return"), "{refused}");
    }

    #[test]
    fn hba_lines_name_each_member_address_and_trust_only_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = config(dir.path());
        let addresses: Vec<IpAddr> = vec!["10.0.0.2".parse().unwrap(), "fd00::3".parse().unwrap()];
        let text = hba_lines(&config, &addresses);
        assert!(
            text.contains("host replication \"rep:l\\ica\" 10.0.0.2/32 scram-sha-256\n"),
            "{text}"
        );
        assert!(
            text.contains("host all \"postgres\" fd00::3/128 scram-sha-256\n"),
            "{text}"
        );
        assert!(!text.contains("0.0.0.0/0") && !text.contains("::/0") && !text.contains("trust"));
        config.auth = Auth::Trust;
        assert!(hba_lines(&config, &addresses).contains("10.0.0.2/32 trust\n"));
    }

    #[test]
    fn with_tls_on_members_get_in_over_tls_only() {
        use crate::config::postgres::TlsMode;
        let dir = tempfile::tempdir().unwrap();
        let mut config = config(dir.path());
        let addresses: Vec<IpAddr> = vec!["127.0.0.1".parse().unwrap(), "fd00::3".parse().unwrap()];
        let initdb = "host all all 127.0.0.1/32 trust\n";
        let off = hba_file(&config, &addresses, initdb);
        assert!(
            off.starts_with(initdb),
            "nothing before initdb's lines: {off}"
        );
        assert!(!off.contains("hostssl") && !off.contains("reject"), "{off}");
        config.tls = TlsMode::On;
        let on = hba_file(&config, &addresses, initdb);
        let at = |line: &str| on.find(line).unwrap_or_else(|| panic!("{line:?}:\n{on}"));
        let roles = "\"rep:l\\ica\",\"postgres\"";
        let refused = at(&format!("hostnossl all {roles} 127.0.0.1/32 reject\n"));
        at(&format!(
            "hostnossl replication {roles} fd00::3/128 reject\n"
        ));
        let ssl = at("hostssl replication \"rep:l\\ica\" 127.0.0.1/32 scram-sha-256\n");
        at("hostssl all \"postgres\" fd00::3/128 scram-sha-256\n");
        assert!(refused < at(initdb) && at(initdb) < ssl, "the order: {on}");
        let host_lines = on.lines().filter(|l| l.starts_with("host ")).count();
        assert_eq!(host_lines, 1, "only initdb's own: {on}");
    }

    #[tokio::test]
    async fn member_names_resolve_and_repeats_go() {
        let own: Vec<IpAddr> = vec!["127.0.0.1".parse().unwrap()];
        let hosts = vec!["localhost:7000".to_string(), "127.0.0.1:7001".to_string()];
        let found = member_addresses(&hosts, &own).await.unwrap();
        assert!(found.contains(&"127.0.0.1".parse().unwrap()), "{found:?}");
        assert_eq!(found.iter().filter(|a| a.is_ipv4()).count(), 1, "{found:?}");
        let bad = member_addresses(&["no-such-host.invalid:1".into()], &own).await;
        assert!(bad.is_err());
    }
}
