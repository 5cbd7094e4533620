//! Comparing a generated page with its file, or rewriting the file under `BLESS=1`.

use std::path::PathBuf;

/// The command that rewrites every page, named in each page's first line and in
/// every failure.
pub const BLESS_COMMAND: &str = "BLESS=1 cargo test --test reference_pages";

/// Fails, naming `page` (a path from the repository root) and [`BLESS_COMMAND`], when
/// the file's text is not `generated`; with `BLESS` set, writes `generated` instead.
pub fn check(page: &str, generated: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(page);
    if std::env::var_os("BLESS").is_some() {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("create the page's folder");
        }
        std::fs::write(&path, generated).unwrap_or_else(|e| panic!("cannot write {page}: {e}"));
        return;
    }
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    if current != generated {
        panic!(
            "{page} is stale: it differs from what the code generates. Run \
             `{BLESS_COMMAND}` to rewrite it, and commit the result.\n{}",
            first_difference(&current, generated)
        );
    }
}

/// Where the two texts part, for the failure message: the first differing line of each.
fn first_difference(current: &str, generated: &str) -> String {
    let mut current_lines = current.lines();
    let mut generated_lines = generated.lines();
    for number in 1.. {
        match (current_lines.next(), generated_lines.next()) {
            (None, None) => break,
            (a, b) if a == b => continue,
            (a, b) => {
                return format!(
                    "First difference, line {number}:\n  file:      {}\n  generated: {}",
                    a.unwrap_or("(end of file)"),
                    b.unwrap_or("(end of text)")
                )
            }
        }
    }
    "The lines agree; the line endings differ.".to_string()
}

/// The first line of every page: that it is generated, by what, and how to regenerate.
pub fn generated_notice(from: &str) -> String {
    format!(
        "<!-- Generated from {from} by tests/reference_pages.rs; do not edit. \
         Regenerate with `{BLESS_COMMAND}`. -->"
    )
}
