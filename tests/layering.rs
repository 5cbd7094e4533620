//! The pure layers stay pure. `src/protocol` is the state machine both the simulator
//! and the model checker drive, so it may not reach the clock, the network, the disk, a
//! random source or the layers above it. `src/node/policy` holds the node's decisions
//! (eligibility, step-down, readiness, transitions), tested without tokio, so it may not
//! reach a task, socket, file or clock either, nor the node's other wings. Only
//! convention kept them so; these tests make a stray `use tokio::...`,
//! `std::time::Instant::now()` or an import from the runtime fail the build.

use std::path::{Path, PathBuf};

/// Paths neither pure layer may name, and why.
const IO: &[(&str, &str)] = &[
    ("tokio", "async runtime"),
    ("quinn", "network"),
    ("sled", "disk"),
    ("rand", "random source (the driver passes decisions in)"),
    ("std::net", "network"),
    ("std::fs", "disk"),
    ("std::io", "I/O"),
    ("std::thread", "threads and sleeping"),
    ("std::process", "processes"),
    ("std::env", "the environment"),
];

/// One pure layer: its folder, what it may not name beyond [`IO`], and the crate paths
/// it may use (every other `crate::` path is a layer it may not reach).
struct Layer {
    dir: &'static str,
    also_forbidden: &'static [(&'static str, &'static str)],
    allowed_crate_paths: &'static [&'static str],
    /// Whether its unit tests (after `#[cfg(test)]`) are held to the rule too.
    tests_too: bool,
}

/// The state machine: no clock at all (the driver passes `now` in), nothing above it.
const PROTOCOL: Layer = Layer {
    dir: "src/protocol",
    also_forbidden: &[("std::time", "clock (the driver passes `now` in)")],
    allowed_crate_paths: &["protocol"],
    tests_too: true,
};

/// The PostgreSQL manager's decisions: below the simulator that drives them, as pure
/// as the protocol; their crate paths are the protocol's IDs, its majority and the
/// synchronous mode, a cluster setting the protocol carries (its unit tests too).
const POSTGRES_RULES: Layer = Layer {
    dir: "src/postgres_rules.rs",
    also_forbidden: &[("std::time", "clock (the runtime passes what it saw in)")],
    allowed_crate_paths: &[
        "protocol::NodeId",
        "protocol::membership::majority_of",
        "protocol::settings::Synchronous",
    ],
    tests_too: true,
};

/// The node's decisions: durations and instants as values, never read from a clock
/// (the runtime passes `now` in); the shared types, the config's values, the
/// transport's config-mismatch report, the mailbox's hook result and the boot clock's
/// instant type (a value; reading the clock stays forbidden), nothing that runs.
const POLICY: Layer = Layer {
    dir: "src/node/policy",
    also_forbidden: &[
        ("Instant::now", "clock (the runtime passes `now` in)"),
        ("SystemTime", "wall clock"),
        (
            "as_of_now",
            "clock (`Status::as_of_now` reads it; take `now` in)",
        ),
        (
            "super::super",
            "another wing of the node (name what it may use)",
        ),
    ],
    allowed_crate_paths: &[
        "protocol",
        "api",
        "config",
        "boot_clock::BootInstant",
        "transport::MismatchKind",
        "transport::ConfigMismatch",
        "node::policy",
        "node::shared::mailbox",
    ],
    tests_too: false,
};

/// The source with comments and string literals blanked, so prose that mentions
/// `tokio` or `std::time` is not an import.
fn code_only(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut chars = source.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '"' => {
                let mut escaped = false;
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                    }
                    if !escaped && c == '"' {
                        break;
                    }
                    escaped = !escaped && c == '\\';
                }
                out.push_str("\"\"");
            }
            _ => out.push(c),
        }
    }
    out
}

/// Every forbidden path `source` names under `layer`'s rule, as `line: path (why)`.
fn forbidden_uses(source: &str, layer: &Layer) -> Vec<String> {
    let mut code = code_only(source);
    if !layer.tests_too {
        if let Some(at) = code.find("#[cfg(test)]") {
            code.truncate(at);
        }
    }
    // (path, why, whether it counts anywhere: a layer's own extra names count even
    // inside a longer path, like `std::time::Instant::now`).
    let crate_rule = (
        "crate",
        "a layer this one may not reach (see the layer's allowed paths)",
        false,
    );
    let rules: Vec<(&str, &str, bool)> = IO
        .iter()
        .map(|&(path, why)| (path, why, false))
        .chain(
            layer
                .also_forbidden
                .iter()
                .map(|&(path, why)| (path, why, true)),
        )
        .chain([crate_rule])
        .collect();
    let mut found = Vec::new();
    for (number, line) in code.lines().enumerate() {
        for &(path, why, anywhere) in &rules {
            let mut from = 0;
            while let Some(at) = line[from..].find(path) {
                let start = from + at;
                let end = start + path.len();
                from = end;
                let before = line[..start].chars().next_back();
                let after = &line[end..];
                let in_a_word = before.is_some_and(|c| c.is_alphanumeric() || c == '_');
                let starts_a_path = !in_a_word && (anywhere || before != Some(':'));
                let allowed = path == "crate" && allowed_crate_path(after, layer);
                if starts_a_path && (anywhere || after.starts_with("::")) && !allowed {
                    found.push(format!("{}: {path} ({why})", number + 1));
                }
            }
        }
    }
    found
}

/// Whether `after` (the text after `crate`) names one of `layer`'s allowed paths.
fn allowed_crate_path(after: &str, layer: &Layer) -> bool {
    let Some(rest) = after.strip_prefix("::") else {
        return false;
    };
    layer.allowed_crate_paths.iter().any(|allowed| {
        rest.strip_prefix(allowed)
            .is_some_and(|tail| !tail.starts_with(|c: char| c.is_alphanumeric() || c == '_'))
    })
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read a layer's folder") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

/// Fails, naming every forbidden use as `file:line: path (why)`, unless `layer`'s files
/// keep its rule; `keeps` says what the rule keeps the layer free of.
fn assert_layer_keeps_its_rule(layer: &Layer, keeps: &str) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(layer.dir);
    let files = match dir.is_file() {
        true => vec![dir.clone()],
        false => rust_files(&dir),
    };
    assert!(!files.is_empty(), "expected the layer's files in {dir:?}");
    let mut problems = Vec::new();
    for file in files {
        let source = std::fs::read_to_string(&file).expect("read a source file");
        for found in forbidden_uses(&source, layer) {
            problems.push(format!("{}:{found}", file.display()));
        }
    }
    assert!(
        problems.is_empty(),
        "{} must stay free of {keeps}:\n{}",
        layer.dir,
        problems.join("\n")
    );
}

#[test]
fn the_protocol_imports_no_io_clock_randomness_or_upper_layer() {
    assert_layer_keeps_its_rule(&PROTOCOL, "I/O, clocks, randomness and upper layers");
}

#[test]
fn the_postgres_rules_import_no_io_clock_or_upper_layer() {
    assert_layer_keeps_its_rule(&POSTGRES_RULES, "I/O, clocks, randomness and upper layers");
}

#[test]
fn the_node_policies_import_no_io_clock_or_runtime() {
    assert_layer_keeps_its_rule(&POLICY, "I/O, clock reads and the node's running parts");
}

#[test]
fn the_scanner_finds_what_it_looks_for_and_ignores_prose() {
    let uses = |source: &str| forbidden_uses(source, &PROTOCOL);
    let bad =
        "use tokio::sync::mpsc;\nlet t = std::time::Instant::now();\nuse crate::node::Status;\n";
    assert_eq!(uses(bad).len(), 3, "{:?}", uses(bad));
    let fine = "// tokio::spawn in a comment\nlet s = \"std::fs::read\";\nuse crate::protocol::Epoch;\nuse std::collections::BTreeMap;\nlet my_tokio::x = 1;\n";
    assert_eq!(uses(fine), Vec::<String>::new());
    assert_eq!(uses("use rand::Rng;").len(), 1);
    assert!(uses("let operand::x = 1; use brand::Y;").is_empty());
    assert_eq!(
        uses("use crate::protocolish::X;").len(),
        1,
        "a prefix is no path"
    );
}

#[test]
fn the_policy_rule_allows_values_of_time_but_no_clock_or_runtime() {
    let uses = |source: &str| forbidden_uses(source, &POLICY);
    let fine = "use std::time::{Duration, Instant};\nuse crate::api::Status;\nuse crate::transport::MismatchKind;\nuse crate::node::shared::mailbox::ElectedHookDone;\n#[cfg(test)]\nmod tests { fn t() { let _ = std::time::Instant::now(); } }\n";
    assert_eq!(uses(fine), Vec::<String>::new());
    let bad = "let now = std::time::Instant::now();\nuse crate::node::shared::tasks::NodeTasks;\nuse super::super::drive::runtime;\nuse crate::transport::Transport;\nuse tokio::sync::watch;\n";
    assert_eq!(uses(bad).len(), 5, "{:?}", uses(bad));
    assert_eq!(uses("let s = status.as_of_now();").len(), 1);
}
