//! `postmaster.pid`, the lock file a postmaster writes into its data dir: line 1 its PID,
//! line 2 its data dir, line 3 its start time (seconds since the Unix epoch). What the
//! file says is a claim to check against /proc (`identity.rs`), never a licence to
//! signal: a file left by a crash may name a PID that another process reuses.

use std::path::{Path, PathBuf};

/// The file's name inside a data dir.
pub const NAME: &str = "postmaster.pid";

/// What `postmaster.pid` claims: who the postmaster is and when it started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PidFile {
    /// Line 1.
    pub pid: i32,
    /// Line 2, as the postmaster spelled it (not canonicalised).
    pub data_dir: PathBuf,
    /// Line 3: the postmaster's start, in seconds since the Unix epoch.
    pub started: i64,
}

impl PidFile {
    /// Reads the file in `data_dir`: `Ok(None)` when there is none, an error when it
    /// cannot be read or says less than its first three lines (a postmaster writes them
    /// at once, so a short file is one being written or a damaged one).
    pub fn read(data_dir: &Path) -> Result<Option<PidFile>, String> {
        let path = data_dir.join(NAME);
        match std::fs::read_to_string(&path) {
            Ok(text) => PidFile::parse(&text)
                .map(Some)
                .map_err(|why| format!("{}: {why}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("cannot read {}: {e}", path.display())),
        }
    }

    /// Parses the file's text (its first three lines; the rest is PostgreSQL's).
    pub fn parse(text: &str) -> Result<PidFile, String> {
        let mut lines = text.lines().map(str::trim);
        let pid = lines.next().filter(|l| !l.is_empty()).ok_or("empty")?;
        let pid: i32 = pid
            .parse()
            .ok()
            .filter(|&p| p > 0)
            .ok_or_else(|| format!("line 1 is not a PID: {pid:?}"))?;
        let data_dir = lines
            .next()
            .filter(|l| !l.is_empty())
            .ok_or("no line 2 (the data dir)")?;
        let started = lines
            .next()
            .filter(|l| !l.is_empty())
            .ok_or("no line 3 (the start time)")?;
        let started: i64 = started
            .parse()
            .map_err(|_| format!("line 3 is not a start time: {started:?}"))?;
        Ok(PidFile {
            pid,
            data_dir: PathBuf::from(data_dir),
            started,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_first_three_lines_of_postgresqls_file() {
        let text =
            "4242\n/var/lib/pg/data\n1700000000\n5432\n/run/postgresql\n*\n  1234  5\nready   \n";
        assert_eq!(
            PidFile::parse(text),
            Ok(PidFile {
                pid: 4242,
                data_dir: PathBuf::from("/var/lib/pg/data"),
                started: 1_700_000_000,
            })
        );
    }

    #[test]
    fn a_short_or_garbled_file_is_an_error_not_a_pid() {
        for (text, says) in [
            ("", "empty"),
            ("4242\n", "line 2"),
            ("4242\n/data\n", "line 3"),
            ("0\n/data\n1\n", "not a PID"),
            ("-1\n/data\n1\n", "not a PID"),
            ("x\n/data\n1\n", "not a PID"),
            ("4242\n/data\nsoon\n", "not a start time"),
        ] {
            let why = PidFile::parse(text).expect_err(text);
            assert!(why.contains(says), "{text:?}: {why}");
        }
    }

    #[test]
    fn no_file_is_none_and_an_unreadable_one_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(PidFile::read(dir.path()), Ok(None));
        std::fs::create_dir(dir.path().join(NAME)).unwrap();
        assert!(PidFile::read(dir.path()).is_err());
    }
}
