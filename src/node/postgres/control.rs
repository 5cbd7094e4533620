//! A stopped server's state, from `pg_controldata`: whether it was a primary when it
//! stopped (or crashed), whether it stopped cleanly (as `pg_rewind` requires), and its
//! timeline; and any server's system identifier, from its control file.

use std::io::Read;
use std::path::Path;

/// The system identifier of the cluster in `data_dir`: the first field of
/// `global/pg_control` (`ControlFileData.system_identifier`, a u64 in the machine's
/// byte order), read directly so a look costs no `pg_controldata` run. `None` when the
/// file cannot be read.
pub fn system_id(data_dir: &Path) -> Option<u64> {
    let mut file = std::fs::File::open(data_dir.join("global").join("pg_control")).ok()?;
    let mut first = [0u8; 8];
    file.read_exact(&mut first).ok()?;
    Some(u64::from_ne_bytes(first)).filter(|&id| id != 0)
}

/// What the control file says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Control {
    pub was_primary: bool,
    pub clean: bool,
    pub timeline: Option<u32>,
}

/// Reads `pg_controldata`'s output; `None` when it has no cluster state line.
pub fn parse(output: &str) -> Option<Control> {
    let field = |name: &str| {
        output
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .map(|rest| rest.trim_start_matches(':').trim().to_string())
    };
    let state = field("Database cluster state")?;
    let (was_primary, clean) = match state.as_str() {
        "shut down" => (true, true),
        "shut down in recovery" => (false, true),
        "in production" | "shutting down" => (true, false),
        // starting up, in crash recovery, in archive recovery: not cleanly stopped;
        // a standby's crash leaves "in archive recovery".
        _ => (false, false),
    };
    let timeline = field("Latest checkpoint's TimeLineID").and_then(|t| t.parse().ok());
    Some(Control {
        was_primary,
        clean,
        timeline,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_identifier_is_the_control_file_s_first_field() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(system_id(dir.path()), None);
        std::fs::create_dir(dir.path().join("global")).unwrap();
        let mut bytes = 7_318_471_230_412_345_678u64.to_ne_bytes().to_vec();
        bytes.extend_from_slice(&[0; 100]);
        std::fs::write(dir.path().join("global/pg_control"), bytes).unwrap();
        assert_eq!(system_id(dir.path()), Some(7_318_471_230_412_345_678));
    }

    #[test]
    fn states_map_to_primary_and_clean() {
        let out = |state: &str| {
            format!("pg_control version number:            1300\nDatabase cluster state:               {state}\nLatest checkpoint's TimeLineID:       3\n")
        };
        let c = parse(&out("shut down")).unwrap();
        assert_eq!((c.was_primary, c.clean, c.timeline), (true, true, Some(3)));
        let c = parse(&out("shut down in recovery")).unwrap();
        assert_eq!((c.was_primary, c.clean), (false, true));
        let c = parse(&out("in production")).unwrap();
        assert_eq!((c.was_primary, c.clean), (true, false));
        let c = parse(&out("in archive recovery")).unwrap();
        assert_eq!((c.was_primary, c.clean), (false, false));
        assert_eq!(parse("garbage"), None);
    }
}
