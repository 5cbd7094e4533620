//! The protocol layer stays pure: `src/protocol` is the state machine both the
//! simulator and the model checker drive, so it may not reach the clock, the network,
//! the disk, a random source or the layers above it. Only convention kept it so; this
//! test makes a stray `use tokio::...` or `std::time::Instant::now()` fail the build.

use std::path::{Path, PathBuf};

/// Paths the protocol may not name, and why.
const FORBIDDEN: &[(&str, &str)] = &[
    ("tokio", "async runtime"),
    ("quinn", "network"),
    ("sled", "disk"),
    ("rand", "random source (the driver passes decisions in)"),
    ("std::net", "network"),
    ("std::fs", "disk"),
    ("std::io", "I/O"),
    ("std::time", "clock (the driver passes `now` in)"),
    ("std::thread", "threads and sleeping"),
    ("std::process", "processes"),
    ("std::env", "the environment"),
    (
        "crate",
        "a layer above the protocol (only `crate::protocol` is allowed)",
    ),
];

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

/// Every forbidden path `source` names, as `line: path (why)`.
fn forbidden_uses(source: &str) -> Vec<String> {
    let code = code_only(source);
    let mut found = Vec::new();
    for (number, line) in code.lines().enumerate() {
        for (path, why) in FORBIDDEN {
            let mut from = 0;
            while let Some(at) = line[from..].find(path) {
                let start = from + at;
                let end = start + path.len();
                from = end;
                let before = line[..start].chars().next_back();
                let after = &line[end..];
                let starts_a_path =
                    !before.is_some_and(|c| c.is_alphanumeric() || c == '_') && before != Some(':');
                let allowed = *path == "crate" && after.starts_with("::protocol");
                if starts_a_path && after.starts_with("::") && !allowed {
                    found.push(format!("{}: {path} ({why})", number + 1));
                }
            }
        }
    }
    found
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read src/protocol") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

#[test]
fn the_protocol_imports_no_io_clock_randomness_or_upper_layer() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/protocol");
    let files = rust_files(&dir);
    assert!(files.len() >= 3, "expected the protocol's files in {dir:?}");
    let mut problems = Vec::new();
    for file in files {
        let source = std::fs::read_to_string(&file).expect("read a protocol file");
        for found in forbidden_uses(&source) {
            problems.push(format!("{}:{found}", file.display()));
        }
    }
    assert!(
        problems.is_empty(),
        "src/protocol must stay free of I/O, clocks, randomness and upper layers:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_scanner_finds_what_it_looks_for_and_ignores_prose() {
    let bad =
        "use tokio::sync::mpsc;\nlet t = std::time::Instant::now();\nuse crate::node::Status;\n";
    assert_eq!(forbidden_uses(bad).len(), 3, "{:?}", forbidden_uses(bad));
    let fine = "// tokio::spawn in a comment\nlet s = \"std::fs::read\";\nuse crate::protocol::Epoch;\nuse std::collections::BTreeMap;\nlet my_tokio::x = 1;\n";
    assert_eq!(forbidden_uses(fine), Vec::<String>::new());
    assert_eq!(forbidden_uses("use rand::Rng;").len(), 1);
    assert!(forbidden_uses("let operand::x = 1; use brand::Y;").is_empty());
}
