//! A server's config read from outside its data dir (Debian's
//! `/etc/postgresql/<version>/<name>/`), brought into the data dir for `bully pg adopt`
//! (src/node/postgres/adopt.rs): bully starts the server as `postgres -D <data_dir>`, so
//! the main config file, the `hba_file` and `ident_file` it names, and what it includes
//! by a relative path (a `conf.d` dir) are copied in, the settings that point outside
//! commented out. Copies rather than absolute includes: the data dir then holds the
//! whole config, and the standbys bully clones from it get it too. The source is left
//! as it was.

use super::owned;
use super::programs::Programs;
use crate::postmaster;
use std::collections::{BTreeSet, VecDeque};
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

/// How long `postgres -C` may take to read a config.
const SETTING_TIMEOUT: Duration = Duration::from_secs(120);

/// The file a server of `dir` reads as setting `name` (`hba_file`, `ident_file`,
/// `data_directory`), as `postgres -C` says it: PostgreSQL's own reading of its config,
/// includes and all. With `outside`, from that config file and the running server's
/// command line; a relative path is the data dir's.
pub(super) async fn file_setting(
    programs: &Programs,
    dir: &Path,
    outside: Option<&Outside>,
    name: &str,
) -> Result<PathBuf, String> {
    let mut args = vec!["-D".to_string(), dir.display().to_string()];
    if let Some(outside) = outside {
        args.push(format!("--config-file={}", outside.file.display()));
        for (setting, value) in &outside.overrides {
            args.extend(["-c".to_string(), format!("{setting}={value}")]);
        }
    }
    args.extend(["-C".to_string(), name.to_string()]);
    let env = [("LC_ALL".to_string(), "C".to_string())];
    let ran = programs
        .run("postgres", &args, &env, SETTING_TIMEOUT)
        .await?;
    let path = PathBuf::from(ran.stdout.trim());
    Ok(match path.is_absolute() {
        true => path,
        false => dir.join(path),
    })
}

/// The main config file's name in the data dir: what `postgres -D` reads.
const MAIN: &str = "postgresql.conf";
/// The names the `hba_file` and `ident_file` copies get (PostgreSQL's defaults there).
pub(super) const HBA: &str = "pg_hba.conf";
const IDENT: &str = "pg_ident.conf";
/// Settings that point a server at files outside its data dir: commented out in the
/// copies, so the server bully starts reads the data dir's.
const MOVED: [&str; 4] = [
    "data_directory",
    "hba_file",
    "ident_file",
    "external_pid_file",
];
/// What starts a line [`commented_out`] disabled.
const DISABLED: &str = "#bully: ";

/// A config file outside the data dir that a server of it reads (Debian's
/// `/etc/postgresql/<version>/<name>/postgresql.conf`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Outside {
    /// Canonical.
    pub(super) file: PathBuf,
    /// The running server's command-line settings among [`MOVED`]: they override the
    /// file's, so `postgres -C` is asked with them.
    pub(super) overrides: Vec<(String, String)>,
}

/// The config file outside `dir` its server reads, or `None` when it is the data dir's
/// own `postgresql.conf`. The running postmaster's command line says which
/// (`config_file`, by default the data dir's); `flag` (`--config-file`) says it when
/// none runs, and must agree with a running one.
pub(super) fn outside_config(dir: &Path, flag: Option<&Path>) -> Result<Option<Outside>, String> {
    let running = running_settings(dir)?;
    let read_by_server = running
        .as_deref()
        .map(|settings| config_file_of(settings, dir))
        .transpose()?;
    let own = dir.join(MAIN);
    let file = match (read_by_server, flag) {
        (Some(server), Some(flag)) if !same_file(&server, flag) => {
            return Err(format!(
                "the server running on {} reads {}, not {} (--config-file): leave \
                 --config-file out, or name the file it reads",
                dir.display(),
                server.display(),
                flag.display()
            ))
        }
        (Some(server), _) => server,
        (None, Some(flag)) => flag.to_path_buf(),
        (None, None) => own.clone(),
    };
    if same_file(&file, &own) {
        return match own.is_file() {
            true => Ok(None),
            false => Err(no_config(dir)),
        };
    }
    let file = std::fs::canonicalize(&file)
        .map_err(|e| format!("cannot read the config file {}: {e}", file.display()))?;
    let overrides = running
        .unwrap_or_default()
        .into_iter()
        .filter(|(name, _)| MOVED.contains(&name.as_str()))
        .collect();
    Ok(Some(Outside { file, overrides }))
}

/// Why adopt cannot go on without being told where the config is.
fn no_config(dir: &Path) -> String {
    format!(
        "{} has no postgresql.conf and no server runs on it to say which config file it \
         reads: bully starts the server from its data dir (`postgres -D`). Name the \
         server's config file with --config-file (Debian: \
         /etc/postgresql/<version>/<name>/postgresql.conf), and adopt brings it into the \
         data dir with the files it names; or start the server as it ran, then adopt",
        dir.display()
    )
}

/// Whether `a` and `b` name one file (compared as given when either does not exist).
fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// The config file a postmaster with command-line `settings` reads: its `config_file`
/// (the last one given), or `dir`'s own.
fn config_file_of(settings: &[(String, String)], dir: &Path) -> Result<PathBuf, String> {
    let given = settings
        .iter()
        .rev()
        .find(|(name, _)| name == "config_file");
    match given {
        None => Ok(dir.join(MAIN)),
        Some((_, file)) if Path::new(file).is_absolute() => Ok(PathBuf::from(file)),
        Some((_, file)) => Err(format!(
            "the server running on {} was started with a relative config_file ({file}): \
             stop it, then adopt with --config-file naming that file's full path",
            dir.display()
        )),
    }
}

/// The settings on the command line of the postmaster running on `dir` (found and
/// verified as a stop finds it: src/postmaster.rs); `None` when none runs.
fn running_settings(dir: &Path) -> Result<Option<Vec<(String, String)>>, String> {
    let Some(postmaster) = postmaster::running(dir) else {
        return Ok(None);
    };
    let pid = postmaster.pid();
    let args = procfs::process::Process::new(pid)
        .and_then(|p| p.cmdline())
        .map_err(|e| format!("cannot read the command line of the server (PID {pid}): {e}"))?;
    // Verified again: the line read was that postmaster's, not a later holder's of its
    // PID.
    match postmaster.verify()? {
        true => Ok(Some(command_line_settings(&args))),
        false => Ok(None),
    }
}

/// The settings a postmaster's command line (`/proc/<pid>/cmdline`, the program
/// first) gives: `-c name=value`, `-cname=value`, `--name=value`; names as PostgreSQL
/// reads them (`-` as `_`, any case).
fn command_line_settings(args: &[String]) -> Vec<(String, String)> {
    let mut settings = Vec::new();
    let mut args = args.iter().skip(1);
    while let Some(arg) = args.next() {
        let pair = match arg.as_str() {
            "-c" => args.next().map(String::as_str),
            arg => arg.strip_prefix("--").or_else(|| arg.strip_prefix("-c")),
        };
        if let Some((name, value)) = pair.and_then(|p| p.split_once('=')) {
            let name = name.replace('-', "_").to_ascii_lowercase();
            settings.push((name, value.to_string()));
        }
    }
    settings
}

/// One file to write into the data dir.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Copy {
    /// Where, relative to the data dir.
    to: PathBuf,
    text: String,
}

/// A config outside the data dir, brought into it: its main file as `postgresql.conf`
/// (first line [`header`]), the files it includes by relative paths at the same paths
/// (a `conf.d` dir: copied rather than rewritten to absolute paths, so the data dir
/// holds the whole config, and the standbys bully clones from it with
/// `pg_basebackup` get it too), each with its [`MOVED`] settings commented out, and
/// the `hba_file` and `ident_file` it names as `pg_hba.conf` and `pg_ident.conf`.
/// Includes by absolute paths stay as they are. Read whole and checked before the
/// server stops; nothing in the data dir is overwritten unless it is the same.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct BringIn {
    /// The config file it came from (canonical).
    pub(super) source: PathBuf,
    /// `postgresql.conf` last: once it is there, the rest is.
    copies: Vec<Copy>,
}

impl BringIn {
    /// Reads what `outside` brings into `dir`: the files the server takes from it, as
    /// `postgres -C` names them, which must include this data dir. `None` when an
    /// earlier adopt brought it in already.
    pub(super) async fn plan(
        programs: &Programs,
        dir: &Path,
        outside: &Outside,
    ) -> Result<Option<BringIn>, String> {
        let data = file_setting(programs, dir, Some(outside), "data_directory").await?;
        if !same_file(&data, dir) {
            return Err(format!(
                "{} is the config of the data dir {}, not of {}: name this data dir's config",
                outside.file.display(),
                data.display(),
                dir.display()
            ));
        }
        let hba = file_setting(programs, dir, Some(outside), "hba_file").await?;
        let ident = file_setting(programs, dir, Some(outside), "ident_file").await?;
        BringIn::read(dir, &outside.file, &hba, &ident)
    }

    /// Reads the files from `source` (the main config file), `hba` and `ident`, and
    /// checks that the data dir `dir` can take them.
    fn read(dir: &Path, source: &Path, hba: &Path, ident: &Path) -> Result<Option<Self>, String> {
        if brought_in_before(dir, source)? {
            return Ok(None);
        }
        let mut copies = config_tree(source)?;
        let main = copies.remove(0);
        copies.push(Copy {
            to: HBA.into(),
            text: read_text(hba)?,
        });
        copies.push(Copy {
            to: IDENT.into(),
            text: read_text(ident)?,
        });
        for copy in &copies {
            fits(dir, copy)?;
        }
        copies.push(main);
        Ok(Some(BringIn {
            source: source.to_path_buf(),
            copies,
        }))
    }

    /// The `pg_hba.conf` text it brings in.
    pub(super) fn hba(&self) -> &str {
        let copy = self.copies.iter().find(|c| c.to == Path::new(HBA));
        copy.map_or("", |c| c.text.as_str())
    }

    /// Writes the copies into `dir`, owned by `owner`, mode 0600 (directories 0700),
    /// `postgresql.conf` last.
    pub(super) fn write(
        &self,
        dir: &Path,
        owner: Option<(nix::unistd::Uid, nix::unistd::Gid)>,
    ) -> Result<(), String> {
        for copy in &self.copies {
            let mut at = dir.to_path_buf();
            for part in copy.to.parent().into_iter().flat_map(Path::components) {
                at.push(part);
                make_dir(&at, owner)?;
            }
            owned::replace_private(&dir.join(&copy.to), &copy.text, owner)?;
        }
        Ok(())
    }
}

/// Makes directory `path` (mode 0700, handed to `owner`) unless it exists.
fn make_dir(
    path: &Path,
    owner: Option<(nix::unistd::Uid, nix::unistd::Gid)>,
) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    if path.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(path)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    owned::give(path, owner)
}

/// The first line of a `postgresql.conf` brought in from `source`: how a later adopt
/// knows it (bully appends its include line at the node's start, so the rest differs).
fn header(source: &Path) -> String {
    format!(
        "# Brought into the data dir by `bully pg adopt` from {} (left as it was).",
        source.display()
    )
}

/// The lines [`header`] begins a brought-in `postgresql.conf` with.
fn header_lines(source: &Path) -> String {
    format!(
        "{}\n# Lines starting `{}` set data_directory, hba_file, ident_file or \
         external_pid_file there (here and in the files it includes):\n# the server runs \
         from the data dir, with pg_hba.conf and pg_ident.conf beside this file.\n",
        header(source),
        DISABLED.trim_end()
    )
}

/// Whether `dir`'s `postgresql.conf` was brought in from `source` by an earlier adopt;
/// an error when it holds another (it is never overwritten).
fn brought_in_before(dir: &Path, source: &Path) -> Result<bool, String> {
    let path = dir.join(MAIN);
    if !path.exists() {
        return Ok(false);
    }
    let text = read_text(&path)?;
    match text.lines().next() == Some(header(source).as_str()) {
        true => Ok(true),
        false => Err(format!(
            "{} exists, and the server reads {}: adopt does not overwrite it. Move it \
             aside (or remove it), then adopt again",
            path.display(),
            source.display()
        )),
    }
}

/// The config file `source` and those it includes by relative paths, through every
/// level, as copies relative to the data dir: `source` first (as `postgresql.conf`,
/// after [`header_lines`]), each with [`commented_out`] applied.
fn config_tree(source: &Path) -> Result<Vec<Copy>, String> {
    let root = source.parent().unwrap_or(Path::new("/"));
    let mut queue = VecDeque::from([(source.to_path_buf(), PathBuf::from(MAIN))]);
    let mut seen = BTreeSet::new();
    let mut copies = Vec::new();
    while let Some((from, to)) = queue.pop_front() {
        if !seen.insert(to.clone()) {
            continue;
        }
        let text = read_text(&from)?;
        let base = to.parent().unwrap_or(Path::new(""));
        for (kind, target) in includes_in(&text) {
            let Some(rel) = relative_target(base, &target, &from)? else {
                continue;
            };
            queue.extend(included(root, &rel, &kind)?);
        }
        let text = match copies.is_empty() {
            true => header_lines(source) + &commented_out(&text),
            false => commented_out(&text),
        };
        copies.push(Copy { to, text });
    }
    Ok(copies)
}

/// The files (from, to) an include directive `kind` of `rel` (relative to the config
/// dir `root`) reads: one file, none for `include_if_exists` of a missing one, or an
/// `include_dir`'s `*.conf` files (as PostgreSQL picks them: not hidden, not in
/// subdirectories).
fn included(root: &Path, rel: &Path, kind: &str) -> Result<Vec<(PathBuf, PathBuf)>, String> {
    let from = root.join(rel);
    match kind {
        "include_if_exists" if !from.exists() => Ok(Vec::new()),
        "include_dir" => {
            let entries = std::fs::read_dir(&from)
                .map_err(|e| format!("cannot read {}: {e}", from.display()))?;
            let mut names: Vec<String> = entries
                .flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| n.ends_with(".conf") && !n.starts_with('.'))
                .filter(|n| from.join(n).is_file())
                .collect();
            names.sort();
            Ok(names
                .into_iter()
                .map(|n| (from.join(&n), rel.join(&n)))
                .collect())
        }
        _ => Ok(vec![(from, rel.to_path_buf())]),
    }
}

/// `target` of an include directive in the file `from` (at `base` relative to the
/// config dir), relative to the config dir; `None` for an absolute path (read where it
/// is). One leaving the config dir (`..`) is refused: its copy would land outside the
/// data dir.
fn relative_target(base: &Path, target: &str, from: &Path) -> Result<Option<PathBuf>, String> {
    let path = Path::new(target);
    if path.is_absolute() {
        return Ok(None);
    }
    let mut rel = base.to_path_buf();
    for part in path.components() {
        match part {
            Component::Normal(name) => rel.push(name),
            Component::CurDir => {}
            _ => {
                return Err(format!(
                    "{} includes {target}, outside its directory: adopt copies what it \
                     includes into the data dir, at the same relative path. Move the file \
                     beside it (or name it by its full path), then adopt again",
                    from.display()
                ))
            }
        }
    }
    match rel.as_os_str().is_empty() {
        true => Err(format!(
            "{} includes its own directory ({target})",
            from.display()
        )),
        false => Ok(Some(rel)),
    }
}

/// Refuses when `copy` would replace a different file in `dir`, or land where a
/// non-directory is.
fn fits(dir: &Path, copy: &Copy) -> Result<(), String> {
    let path = dir.join(&copy.to);
    let mut at = dir.to_path_buf();
    for part in copy.to.parent().into_iter().flat_map(Path::components) {
        at.push(part);
        if at.exists() && !at.is_dir() {
            return Err(format!("{} is in the way of a directory", at.display()));
        }
    }
    match std::fs::read_to_string(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Ok(text) if text == copy.text => Ok(()),
        Ok(_) => Err(format!(
            "{} exists and differs from the server's own (adopt does not overwrite it): \
             move it aside (or remove it), then adopt again",
            path.display()
        )),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// The whole text of `path`, or adopt's refusal saying why not.
pub(super) fn read_text(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// `text` (a config file) with each line setting one of [`MOVED`] disabled
/// ([`DISABLED`] before it).
fn commented_out(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let moved = directive(line).is_some_and(|(name, _)| MOVED.contains(&name.as_str()));
        if moved {
            out.push_str(DISABLED);
        }
        out.push_str(line);
    }
    out
}

/// The include directives of a config file's `text`: (`include`, `include_if_exists`
/// or `include_dir`, the path).
fn includes_in(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(directive)
        .filter(|(name, _)| {
            matches!(
                name.as_str(),
                "include" | "include_if_exists" | "include_dir"
            )
        })
        .collect()
}

/// The name (lower case: PostgreSQL compares them so) and value of a config file's
/// `line`, read as PostgreSQL's lexer does (`guc-file.l`: `name [=] value`, the value
/// a quoted string or one word, then a comment or nothing); `None` for a blank line, a
/// comment, or what it would not take.
fn directive(line: &str) -> Option<(String, String)> {
    let line = line.trim_start();
    let end = line
        .find(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '.' | '$')))
        .unwrap_or(line.len());
    let (name, rest) = line.split_at(end);
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let rest = rest.trim_start();
    let rest = rest.strip_prefix('=').unwrap_or(rest).trim_start();
    let (value, after) = match rest.strip_prefix('\'') {
        Some(quoted) => quoted_value(quoted)?,
        None => {
            let end = rest
                .find(|c: char| c.is_whitespace() || c == '#')
                .unwrap_or(rest.len());
            (rest[..end].to_string(), &rest[end..])
        }
    };
    let after = after.trim_start();
    (after.is_empty() || after.starts_with('#')).then(|| (name.to_ascii_lowercase(), value))
}

/// The value of a quoted string whose opening quote is gone, and what follows its
/// closing one: `''` is a quote, a backslash escapes (`\n`, `\t`, octal, any other
/// character as itself), as PostgreSQL's `DeescapeQuotedString` reads it.
fn quoted_value(text: &str) -> Option<(String, &str)> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        match *bytes.get(i)? {
            b'\'' if bytes.get(i + 1) == Some(&b'\'') => {
                out.push(b'\'');
                i += 2;
            }
            b'\'' => break,
            b'\\' => {
                let (byte, used) = escaped(&bytes[i + 1..])?;
                out.push(byte);
                i += 1 + used;
            }
            b'\n' => return None,
            byte => {
                out.push(byte);
                i += 1;
            }
        }
    }
    Some((String::from_utf8_lossy(&out).into_owned(), &text[i + 1..]))
}

/// The byte a backslash escape (`bytes`: what follows the backslash) stands for, and
/// how many bytes it used.
fn escaped(bytes: &[u8]) -> Option<(u8, usize)> {
    let first = *bytes.first()?;
    let octal = bytes
        .iter()
        .take(3)
        .take_while(|b| (b'0'..=b'7').contains(*b))
        .count();
    if octal > 0 {
        let value = bytes[..octal]
            .iter()
            .fold(0u32, |v, b| v * 8 + u32::from(b - b'0'));
        return Some((value as u8, octal));
    }
    let byte = match first {
        b'b' => 8,
        b'f' => 12,
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        b'\n' => return None,
        other => other,
    };
    Some((byte, 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    fn pairs(settings: &[(&str, &str)]) -> Vec<(String, String)> {
        settings
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn settings_are_read_from_a_postmaster_s_command_line() {
        // Debian's pg_ctlcluster.
        let debian = strings(&[
            "/usr/lib/postgresql/15/bin/postgres",
            "-D",
            "/var/lib/postgresql/15/main",
            "-c",
            "config_file=/etc/postgresql/15/main/postgresql.conf",
        ]);
        assert_eq!(
            command_line_settings(&debian),
            pairs(&[("config_file", "/etc/postgresql/15/main/postgresql.conf")])
        );
        // Patroni's long options, and the forms getopt takes.
        let patroni = strings(&[
            "postgres",
            "-D",
            "/d",
            "--config-file=/etc/p/postgresql.conf",
            "--listen_addresses=0.0.0.0",
            "-cHBA_File=/etc/p/h=b.conf",
            "-p",
            "5432",
            "-c",
        ]);
        assert_eq!(
            command_line_settings(&patroni),
            pairs(&[
                ("config_file", "/etc/p/postgresql.conf"),
                ("listen_addresses", "0.0.0.0"),
                ("hba_file", "/etc/p/h=b.conf"),
            ])
        );
        assert!(command_line_settings(&strings(&["postgres", "-c"])).is_empty());
    }

    #[test]
    fn the_config_file_is_the_last_given_or_the_data_dir_s() {
        let dir = Path::new("/d");
        assert_eq!(
            config_file_of(&[], dir).unwrap(),
            Path::new("/d/postgresql.conf")
        );
        let given = pairs(&[("config_file", "/a.conf"), ("config_file", "/b.conf")]);
        assert_eq!(config_file_of(&given, dir).unwrap(), Path::new("/b.conf"));
        let relative = pairs(&[("config_file", "b.conf")]);
        assert!(config_file_of(&relative, dir)
            .unwrap_err()
            .contains("relative config_file"));
    }

    #[test]
    fn config_lines_are_read_as_postgresql_s_lexer_does() {
        let read = directive;
        let pair = |n: &str, v: &str| Some((n.to_string(), v.to_string()));
        assert_eq!(
            read("data_directory = '/var/lib/x'"),
            pair("data_directory", "/var/lib/x")
        );
        assert_eq!(
            read("  Include_Dir 'conf.d'  # ours"),
            pair("include_dir", "conf.d")
        );
        assert_eq!(read("port=5433#c"), pair("port", "5433"));
        assert_eq!(
            read("hba_file = 'it''s \\\\ \\101'"),
            pair("hba_file", "it's \\ A")
        );
        assert_eq!(read("x.y = on"), pair("x.y", "on"));
        for nothing in [
            "",
            "  # data_directory = '/x'",
            "a = 'open",
            "a = b c",
            "'q' = 1",
        ] {
            assert_eq!(read(nothing), None, "{nothing:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn a_quoted_value_reads_back_exactly(value in "[^\0\r\n]{0,24}") {
            let line = format!("include = {} # c", super::super::quote::conf_string(&value).unwrap());
            proptest::prop_assert_eq!(directive(&line), Some(("include".to_string(), value)));
        }
    }

    #[test]
    fn settings_pointing_outside_the_data_dir_are_commented_out() {
        let text = "data_directory = '/var/lib/postgresql/15/main'\n\
                    HBA_FILE='/etc/h'\n# ident_file = 'x'\n  ident_file '/etc/i'\n\
                    external_pid_file = '/run/x.pid'  # pid\nhba_file_x = 1\nport = 5432";
        assert_eq!(
            commented_out(text),
            "#bully: data_directory = '/var/lib/postgresql/15/main'\n\
             #bully: HBA_FILE='/etc/h'\n# ident_file = 'x'\n#bully:   ident_file '/etc/i'\n\
             #bully: external_pid_file = '/run/x.pid'  # pid\nhba_file_x = 1\nport = 5432"
        );
    }

    #[test]
    fn include_targets_resolve_against_the_including_file_s_dir() {
        let from = Path::new("/etc/pg/postgresql.conf");
        let rel = |base: &str, target: &str| relative_target(Path::new(base), target, from);
        assert_eq!(rel("", "conf.d").unwrap(), Some(PathBuf::from("conf.d")));
        assert_eq!(
            rel("conf.d", "./a/b.conf").unwrap(),
            Some(PathBuf::from("conf.d/a/b.conf"))
        );
        assert_eq!(rel("conf.d", "/etc/common.conf").unwrap(), None);
        assert!(rel("", "../common.conf")
            .unwrap_err()
            .contains("outside its directory"));
        assert!(rel("conf.d", "a/../../x").is_err());
        assert!(rel("", ".").is_err());
    }

    /// A Debian-shaped config dir in `etc`, naming data dir `data`.
    fn debian_config(etc: &Path, data: &Path) -> PathBuf {
        let write = |rel: &str, text: &str| {
            let path = etc.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write(
            "postgresql.conf",
            &format!(
                "data_directory = '{}'\nhba_file = '{}/pg_hba.conf'\nident_file = \
                 '{}/pg_ident.conf'\nexternal_pid_file = '/run/p.pid'\ninclude_dir = 'conf.d'\n\
                 include_if_exists 'missing.conf'\ninclude = 'extra/more.conf'\n\
                 include = '/elsewhere/absolute.conf'\n",
                data.display(),
                etc.display(),
                etc.display()
            ),
        );
        write("pg_hba.conf", "local all all peer\n");
        write("pg_ident.conf", "# none\n");
        write("conf.d/50-memory.conf", "work_mem = '8MB'\n");
        write("conf.d/.hidden.conf", "bad\n");
        write("conf.d/README", "bad\n");
        write("conf.d/sub/x.conf", "bad\n");
        write("extra/more.conf", "include 'deeper.conf'\n");
        write("extra/deeper.conf", "external_pid_file = '/x'\n");
        etc.join("postgresql.conf")
    }

    #[test]
    fn a_debian_config_is_brought_into_the_data_dir_once() {
        use std::os::unix::fs::PermissionsExt;
        let etc = tempfile::tempdir().unwrap();
        let data = tempfile::tempdir().unwrap();
        let source = debian_config(etc.path(), data.path());
        let (hba, ident) = (etc.path().join(HBA), etc.path().join(IDENT));
        let plan = BringIn::read(data.path(), &source, &hba, &ident)
            .unwrap()
            .unwrap();
        let to: Vec<&str> = plan.copies.iter().map(|c| c.to.to_str().unwrap()).collect();
        assert_eq!(
            to,
            [
                "conf.d/50-memory.conf",
                "extra/more.conf",
                "extra/deeper.conf",
                "pg_hba.conf",
                "pg_ident.conf",
                "postgresql.conf"
            ]
        );
        assert_eq!(plan.hba(), "local all all peer\n");
        let main = &plan.copies[5].text;
        assert!(main.starts_with(&header(&source)), "{main}");
        assert!(main.contains("\n#bully: data_directory = "), "{main}");
        assert!(main.contains("\n#bully: external_pid_file = "), "{main}");
        assert!(main.contains("\ninclude_dir = 'conf.d'\n"), "{main}");
        assert_eq!(plan.copies[2].text, "#bully: external_pid_file = '/x'\n");
        plan.write(data.path(), None).unwrap();
        for copy in &plan.copies {
            let path = data.path().join(&copy.to);
            assert_eq!(std::fs::read_to_string(&path).unwrap(), copy.text);
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "{}", path.display());
        }
        let mode = std::fs::metadata(data.path().join("conf.d"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
        // Brought in: a later adopt finds it so, also once bully appended its line.
        let main = data.path().join(MAIN);
        std::fs::write(
            &main,
            plan.copies[5].text.clone() + "include_if_exists = 'bully.conf'\n",
        )
        .unwrap();
        assert_eq!(
            BringIn::read(data.path(), &source, &hba, &ident).unwrap(),
            None
        );
    }

    #[test]
    fn what_is_in_the_way_or_unreadable_is_refused() {
        let etc = tempfile::tempdir().unwrap();
        let data = tempfile::tempdir().unwrap();
        let source = debian_config(etc.path(), data.path());
        let (hba, ident) = (etc.path().join(HBA), etc.path().join(IDENT));
        let refused = || BringIn::read(data.path(), &source, &hba, &ident).unwrap_err();
        // A postgresql.conf of the data dir's own.
        std::fs::write(data.path().join(MAIN), "port = 1\n").unwrap();
        assert!(refused().contains("does not overwrite it"), "{}", refused());
        std::fs::remove_file(data.path().join(MAIN)).unwrap();
        // A pg_hba.conf that is the same is fine; one that differs is not.
        std::fs::write(data.path().join(HBA), "local all all peer\n").unwrap();
        assert!(BringIn::read(data.path(), &source, &hba, &ident).is_ok());
        std::fs::write(data.path().join(HBA), "local all all trust\n").unwrap();
        assert!(refused().contains("differs"), "{}", refused());
        std::fs::remove_file(data.path().join(HBA)).unwrap();
        // A file where a directory goes.
        std::fs::write(data.path().join("conf.d"), "").unwrap();
        assert!(refused().contains("in the way"), "{}", refused());
        std::fs::remove_file(data.path().join("conf.d")).unwrap();
        // An include that is missing, or outside the config dir.
        std::fs::remove_file(etc.path().join("extra/deeper.conf")).unwrap();
        assert!(refused().contains("cannot read"), "{}", refused());
        std::fs::write(
            etc.path().join("extra/more.conf"),
            "include '../../x.conf'\n",
        )
        .unwrap();
        assert!(refused().contains("outside its directory"), "{}", refused());
        assert!(
            std::fs::read_dir(data.path()).unwrap().next().is_none(),
            "a refusal wrote into the data dir"
        );
    }

    #[test]
    fn with_no_server_running_the_flag_says_where_the_config_is() {
        let etc = tempfile::tempdir().unwrap();
        let data = tempfile::tempdir().unwrap();
        let source = debian_config(etc.path(), data.path());
        let err = outside_config(data.path(), None).unwrap_err();
        assert!(err.contains("--config-file"), "{err}");
        let outside = outside_config(data.path(), Some(&source)).unwrap().unwrap();
        assert_eq!(outside.file, std::fs::canonicalize(&source).unwrap());
        assert!(outside.overrides.is_empty());
        let own = data.path().join(MAIN);
        std::fs::write(&own, "").unwrap();
        assert_eq!(outside_config(data.path(), None).unwrap(), None);
        assert_eq!(outside_config(data.path(), Some(&own)).unwrap(), None);
        let missing = etc.path().join("nope.conf");
        assert!(outside_config(data.path(), Some(&missing))
            .unwrap_err()
            .contains("cannot read"));
    }
}
