//! The sample configs (config/node*.toml, and through config/node1.toml the package's
//! /etc/bully/node.toml, packaging/build-deb.sh) say in comments what the binary checks:
//! the `[timing]` defaults they show are `Timing::default()`, and the relation their
//! `suspect_after_ms` comment states between D and the heartbeat is the one
//! `Timing::validate` enforces (it accepts D = N x heartbeat and refuses one ms less).

use bully::protocol::Timing;
use std::path::PathBuf;

/// The sample configs of the repository.
fn samples() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("config/ is readable")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.starts_with("node") && name.ends_with(".toml")
        })
        .collect();
    files.sort();
    assert!(files.len() >= 3, "no sample configs in {}", dir.display());
    files
}

/// The commented-out `# key = value   # comment` line of `key`: its value and comment.
fn commented_key<'a>(text: &'a str, key: &str) -> Option<(u64, &'a str)> {
    text.lines().find_map(|line| {
        let rest = line.trim_start().strip_prefix('#')?.trim_start();
        let rest = rest.strip_prefix(key)?.trim_start().strip_prefix('=')?;
        let (value, comment) = rest.split_once('#').unwrap_or((rest, ""));
        Some((value.trim().parse().ok()?, comment.trim()))
    })
}

/// `N` in "at least N x heartbeat_ms".
fn stated_multiple(comment: &str) -> Option<u64> {
    let after = comment.split("at least ").nth(1)?;
    let (n, rest) = after.split_once(" x ")?;
    rest.starts_with("heartbeat_ms").then_some(())?;
    n.trim().parse().ok()
}

#[test]
fn the_timing_defaults_the_samples_show_are_the_binarys() {
    let defaults = Timing::default();
    for file in samples() {
        let text = std::fs::read_to_string(&file).unwrap();
        for (key, want) in [
            ("heartbeat_ms", defaults.heartbeat_ms),
            ("suspect_after_ms", defaults.suspect_after_ms),
            ("answer_timeout_ms", defaults.answer_timeout_ms),
            ("coordinator_timeout_ms", defaults.coordinator_timeout_ms),
            ("preempt_delay_ms", defaults.preempt_delay_ms),
        ] {
            let (shown, _) = commented_key(&text, key)
                .unwrap_or_else(|| panic!("{}: no `# {key} = ...` line", file.display()));
            assert_eq!(shown, want, "{}: {key}", file.display());
        }
    }
}

#[test]
fn the_stated_relation_of_d_and_the_heartbeat_is_the_one_validated() {
    for file in samples() {
        let text = std::fs::read_to_string(&file).unwrap();
        let (_, comment) = commented_key(&text, "suspect_after_ms").expect("a D line");
        let n = stated_multiple(comment).unwrap_or_else(|| {
            panic!(
                "{}: the suspect_after_ms comment states no \"at least N x heartbeat_ms\": {comment}",
                file.display()
            )
        });
        // Heartbeats for which the stated bound is the binding one (D up to 50
        // heartbeats, where the lease margin is one heartbeat).
        for heartbeat_ms in [1, 10, 50, 100, 1_000] {
            let timing = |suspect_after_ms| Timing {
                heartbeat_ms,
                suspect_after_ms,
                ..Timing::default()
            };
            let at = timing(n * heartbeat_ms);
            assert_eq!(
                at.validate(),
                Ok(()),
                "{}: D = {n} x {heartbeat_ms}",
                file.display()
            );
            let below = timing(n * heartbeat_ms - 1);
            assert!(
                below.validate().is_err(),
                "{}: D = {n} x {heartbeat_ms} - 1 ms is accepted, so the comment says too much",
                file.display()
            );
        }
    }
}
