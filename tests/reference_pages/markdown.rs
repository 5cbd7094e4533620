//! Turning doc comments and help text into Markdown that mdBook renders as written.

/// Rust doc comment text as plain Markdown: intra-doc links (`` [`Timing`] ``,
/// `` [`x`](crate::y) ``) become their code text, and `<`/`>` outside code spans are
/// escaped so `<data_dir>.aside` is not read as an HTML tag.
pub fn prose(text: &str) -> String {
    escape_angles(&without_doc_links(text))
}

/// Text for one cell of a Markdown table: one line, `|` escaped.
pub fn cell(text: &str) -> String {
    prose(text).replace('\n', " ").replace('|', "\\|")
}

/// `` [`name`](path) `` and `` [`name`] `` become `` `name` ``; other brackets stay.
fn without_doc_links(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("[`") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        let Some(end) = after.find("`]") else {
            out.push_str(&rest[start..]);
            return out;
        };
        out.push_str(&after[..end + 1]);
        rest = &after[end + 2..];
        if rest.starts_with('(') {
            if let Some(close) = rest.find(')') {
                rest = &rest[close + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn escape_angles(text: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for c in text.chars() {
        match c {
            '`' => {
                in_code = !in_code;
                out.push(c);
            }
            '<' if !in_code => out.push_str("&lt;"),
            '>' if !in_code => out.push_str("&gt;"),
            _ => out.push(c),
        }
    }
    out
}

/// A Markdown table with `header` and `rows`, each cell already made with [`cell`].
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = format!("| {} |\n", header.join(" | "));
    out.push_str(&format!("|{}\n", " --- |".repeat(header.len())));
    for row in rows {
        out.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    out
}

#[test]
fn doc_links_and_angles_are_made_plain() {
    assert_eq!(
        prose("see [`Timing`] and [`check`](crate::transport::check), <dir>.aside, `a<b>`"),
        "see `Timing` and `check`, &lt;dir&gt;.aside, `a<b>`"
    );
    assert_eq!(cell("a | b\nc"), "a \\| b c");
}
