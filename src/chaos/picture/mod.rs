//! `--html`: one self-contained HTML file that shows a run at a glance (who led when,
//! where each fault fell, where the cluster had no coordinator or two), for the runs
//! whose table of figures is not enough. Jepsen's `timeline.html` is the model.
//!
//! What is drawn is the report's [`Picture`](crate::chaos::report::picture::Picture),
//! read off the history the checker judged (`chaos/report/picture.rs`); this folder
//! only draws it:
//! - `svg` / `histogram`: the inline SVG of the lanes and of the takeover times;
//! - `page`: the document around them (header, legend, lists, a little CSS and JS for
//!   zooming). No network, no external script or font;
//! - `markup`: escaping and the seconds format they all write with.

mod histogram;
mod markup;
mod page;
mod svg;

use crate::chaos::report::Report;
use std::path::Path;

/// The report's picture and figures as one HTML document.
pub fn html(report: &Report) -> String {
    page::render(report)
}

/// Writes [`html`] to `path`.
pub fn write(report: &Report, path: &Path) -> std::io::Result<()> {
    std::fs::write(path, html(report))
}
