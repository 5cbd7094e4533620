//! Patroni's `/history`: the server's timeline switches, oldest first, each
//! `[timeline, lsn, reason]` as PostgreSQL's history file for the current timeline
//! (`pg_wal/<timeline>.history`) lists them, the newest one with the file's time and
//! the member that promoted appended, as Patroni does (`[timeline, lsn, reason, time,
//! name]`). Patroni keeps that list in its DCS; bully reads it from the answering
//! member's own data dir, which a standby has too (PostgreSQL fetches the history files
//! of the timelines it follows). An empty list on timeline 1, or with no server.

use crate::api::postgres::{parse_lsn, PgRole, PgState};
use crate::protocol::NodeId;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// One line of a history file: the timeline left, where, and PostgreSQL's reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Switch {
    pub timeline: u32,
    pub lsn: u64,
    pub reason: String,
}

/// The lines of a history file (`1\t0/3000148\tno recovery target specified`);
/// comments, blank lines and lines that are not one are skipped, as PostgreSQL does.
pub fn parse(text: &str) -> Vec<Switch> {
    text.lines()
        .filter(|line| !line.trim_start().starts_with('#'))
        .filter_map(|line| {
            let mut fields = line.splitn(3, '\t');
            let timeline = fields.next()?.trim().parse().ok()?;
            let lsn = parse_lsn(fields.next()?)?;
            let reason = fields.next().unwrap_or("").trim().to_string();
            Some(Switch {
                timeline,
                lsn,
                reason,
            })
        })
        .collect()
}

/// The history file of `timeline` in `data_dir`.
pub fn file(data_dir: &Path, timeline: u32) -> PathBuf {
    data_dir
        .join("pg_wal")
        .join(format!("{timeline:08X}.history"))
}

/// Patroni's `/history` body for the server `pg` of node `id` whose data dir is
/// `data_dir`: read off the runtime's threads. `Err` says why the file could not be read.
pub async fn read(data_dir: PathBuf, id: NodeId, pg: Option<PgState>) -> Result<Value, String> {
    let Some(pg) = pg else {
        return Ok(json!([]));
    };
    let timeline = match pg.timeline {
        Some(timeline) if timeline > 1 => timeline,
        _ => return Ok(json!([])),
    };
    let path = file(&data_dir, timeline);
    let read = tokio::task::spawn_blocking(move || {
        let text = std::fs::read_to_string(&path)?;
        let modified = std::fs::metadata(&path)?.modified()?;
        Ok::<_, std::io::Error>((text, modified, path))
    });
    let (text, modified, path) = match read.await {
        Ok(Ok(read)) => read,
        Ok(Err(e)) => return Err(format!("cannot read timeline {timeline}'s history: {e}")),
        Err(e) => return Err(format!("reading the history failed: {e}")),
    };
    let promoted_by = match pg.role {
        PgRole::Primary => Some(id),
        _ => pg.streaming_from,
    };
    let switches = parse(&text);
    if switches.is_empty() {
        return Err(format!("{} lists no timeline switch", path.display()));
    }
    Ok(as_patroni(&switches, timeline, modified, promoted_by))
}

/// Patroni's list: each switch as `[timeline, lsn, reason]`; the one into `timeline`
/// also with the file's time and the node that promoted, when known.
pub fn as_patroni(
    switches: &[Switch],
    timeline: u32,
    written: SystemTime,
    promoted_by: Option<NodeId>,
) -> Value {
    let last = switches.len() - 1;
    let lines = switches.iter().enumerate().map(|(i, s)| {
        let mut line = json!([s.timeline, s.lsn, s.reason]);
        let into_current = i == last && s.timeline + 1 == timeline;
        // A file time before 1970 (a clock far off) is left out rather than shown.
        let sane = written >= std::time::UNIX_EPOCH;
        if let (true, true, Some(node)) = (into_current, sane, promoted_by) {
            let at = humantime::format_rfc3339_millis(written).to_string();
            line.as_array_mut()
                .expect("built as an array")
                .extend([at.into(), node.to_string().into()]);
        }
        line
    });
    Value::Array(lines.collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    const FILE: &str = "1\t0/3000148\tno recovery target specified\n\n\
                        # a comment\n2\t0/5000060\tno recovery target specified\nbroken\n";

    #[test]
    fn postgresqls_lines_are_read_and_the_rest_skipped() {
        let switches = parse(FILE);
        assert_eq!(
            switches,
            vec![
                Switch {
                    timeline: 1,
                    lsn: 0x3000148,
                    reason: "no recovery target specified".into()
                },
                Switch {
                    timeline: 2,
                    lsn: 0x5000060,
                    reason: "no recovery target specified".into()
                },
            ]
        );
    }

    #[test]
    fn the_newest_switch_carries_the_time_and_the_promoter() {
        let at = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let body = as_patroni(&parse(FILE), 3, at, Some(2));
        assert_eq!(
            body,
            json!([
                [1, 0x3000148, "no recovery target specified"],
                [
                    2,
                    0x5000060,
                    "no recovery target specified",
                    "2027-01-15T08:00:00.000Z",
                    "2"
                ],
            ])
        );
        let unknown = as_patroni(&parse(FILE), 3, at, None);
        assert_eq!(unknown[1].as_array().unwrap().len(), 3, "{unknown}");
    }

    #[test]
    fn the_file_is_named_as_postgresql_names_it() {
        assert_eq!(
            file(Path::new("/d"), 26),
            Path::new("/d/pg_wal/0000001A.history")
        );
    }

    #[tokio::test]
    async fn timeline_one_and_no_server_have_no_history_and_a_missing_file_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let mut pg = PgState::bare(
            "127.0.0.1:5432".parse().unwrap(),
            PgRole::Primary,
            String::new(),
            0,
        );
        let path = dir.path().to_path_buf();
        assert_eq!(read(path.clone(), 1, None).await, Ok(json!([])));
        pg.timeline = Some(1);
        assert_eq!(read(path.clone(), 1, Some(pg.clone())).await, Ok(json!([])));
        pg.timeline = Some(3);
        let missing = read(path.clone(), 1, Some(pg.clone())).await.unwrap_err();
        assert!(missing.contains("timeline 3"), "{missing}");
        std::fs::create_dir(dir.path().join("pg_wal")).unwrap();
        std::fs::write(file(dir.path(), 3), FILE).unwrap();
        let body = read(path, 1, Some(pg)).await.unwrap();
        assert_eq!(body[1][4], "1", "the primary promoted itself: {body}");
    }
}
