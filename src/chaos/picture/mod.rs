//! `--html`: one self-contained HTML file that shows a run at a glance (who led when,
//! where each fault fell, where the cluster had no coordinator or two), for the runs
//! whose table of figures is not enough. Jepsen's `timeline.html` is the model.
//!
//! - [`model`]: what is drawn, read off the history the checker judged with the same
//!   functions the report's figures come from, so picture and verdict cannot disagree;
//! - `svg` / `histogram`: the inline SVG of the lanes and of the takeover times;
//! - `page`: the document around them (header, legend, lists, a little CSS and JS for
//!   zooming). No network, no external script or font.

mod histogram;
pub mod model;
mod page;
mod svg;

pub use model::{Picture, Source};

use super::report::Report;
use std::path::Path;

/// The report's picture and figures as one HTML document.
pub fn html(report: &Report) -> String {
    page::render(report)
}

/// Writes [`html`] to `path`.
pub fn write(report: &Report, path: &Path) -> std::io::Result<()> {
    std::fs::write(path, html(report))
}

/// `text` with the five characters that mean something in HTML and XML escaped: every
/// string from the history (explanations, step names) goes through it.
fn esc(text: &str) -> String {
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
fn secs(ms: u64) -> String {
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
