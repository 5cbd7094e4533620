//! The two text helpers every part of the page writes with: HTML escaping and seconds
//! as the report prints them.

/// `text` with the five characters that mean something in HTML and XML escaped: every
/// string from the history (explanations, step names) goes through it.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Seconds with three decimals, as the report prints times.
pub fn secs(ms: u64) -> String {
    format!("{:.3}", ms as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        assert_eq!(
            esc(r#"<b a="x">&'</b>"#),
            "&lt;b a=&quot;x&quot;&gt;&amp;&#39;&lt;/b&gt;"
        );
        assert_eq!(secs(1234), "1.234");
    }
}
