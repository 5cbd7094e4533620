//! A histogram of takeover times (failover or reclaim) as inline SVG, with the
//! report's p50, p90 and p99 marked: the shape tells a slow tail from a slow median.

use super::esc;
use crate::chaos::stats::Summary;
use crate::protocol::Millis;
use std::fmt::Write as _;

const WIDTH: u32 = 520;
const HEIGHT: u32 = 220;
/// The plot area inside the drawing.
const LEFT: u32 = 44;
const RIGHT: u32 = WIDTH - 16;
const TOP: u32 = 66;
const BASE: u32 = HEIGHT - 26;
/// Bin widths to choose from (ms): the smallest giving at most this many bins wins.
const BINS: [Millis; 16] = [
    1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1_000, 2_000, 5_000, 10_000, 30_000,
];
const MAX_BINS: Millis = 30;

/// The histogram of `values` (ms) named `name`, what is measured said in `what`;
/// `summary` is the report's summary of the same values, whose percentiles are marked.
pub fn svg(name: &str, what: &str, values: &[Millis], summary: &Summary) -> String {
    let mut out = format!(
        r#"<svg class="hist" width="{WIDTH}" height="{HEIGHT}"><text class="ht" x="{LEFT}" y="13">{}: {} measured</text><text x="{LEFT}" y="26">{}</text>"#,
        esc(name),
        values.len(),
        esc(what)
    );
    let Some(&max) = values.iter().max() else {
        let _ = write!(
            out,
            r#"<text x="{LEFT}" y="{}">none measured</text></svg>"#,
            TOP + 30
        );
        return out;
    };
    let bin = BINS
        .iter()
        .copied()
        .find(|&b| max / b < MAX_BINS)
        .unwrap_or(BINS[BINS.len() - 1]);
    let bins = (max / bin + 1) as usize;
    let mut counts = vec![0u32; bins];
    for &v in values {
        counts[(v / bin) as usize] += 1;
    }
    let tallest = counts.iter().copied().max().unwrap_or(1).max(1);
    let range = bins as Millis * bin;
    let x = |v: Millis| LEFT as f64 + v.min(range) as f64 * (RIGHT - LEFT) as f64 / range as f64;
    let height = (BASE - TOP) as f64;
    for (i, &count) in counts.iter().enumerate().filter(|(_, &c)| c > 0) {
        let (lo, hi) = (i as Millis * bin, (i as Millis + 1) * bin);
        let h = height * count as f64 / tallest as f64;
        let _ = write!(
            out,
            r#"<rect class="bar" x="{:.1}" y="{:.1}" width="{:.1}" height="{h:.1}"><title>{lo}–{hi} ms: {count}</title></rect>"#,
            x(lo) + 0.5,
            BASE as f64 - h,
            (x(hi) - x(lo) - 1.0).max(1.0),
        );
    }
    let _ = write!(
        out,
        r#"<line class="axis" x1="{LEFT}" x2="{RIGHT}" y1="{BASE}" y2="{BASE}"/><text class="num" x="{}" y="{}" text-anchor="end">{tallest}</text><text class="num" x="{}" y="{}" text-anchor="end">0</text>"#,
        LEFT - 4,
        TOP + 4,
        LEFT - 4,
        BASE,
    );
    let every = bins.div_ceil(6).max(1) as Millis * bin;
    for v in (0..=range).step_by(every as usize) {
        let _ = write!(
            out,
            r#"<text class="num" x="{:.1}" y="{}" text-anchor="middle">{v}</text>"#,
            x(v),
            BASE + 14
        );
    }
    let _ = write!(
        out,
        r#"<text class="num" x="{RIGHT}" y="{}" text-anchor="end">ms</text>"#,
        HEIGHT - 1
    );
    // One label per distinct value (`p90 = p99 412`), each on its own line.
    let marks = [
        ("p50", summary.p50),
        ("p90", summary.p90),
        ("p99", summary.p99),
    ];
    let mut row = 0;
    for (i, &(name, value)) in marks.iter().enumerate() {
        let px = x(value);
        let _ = write!(
            out,
            r#"<g class="pct" data-p="{name}" data-ms="{value}"><line x1="{px:.1}" x2="{px:.1}" y1="{}" y2="{BASE}"/>"#,
            TOP - 36
        );
        if marks[..i].iter().all(|&(_, v)| v != value) {
            let same: Vec<&str> = marks
                .iter()
                .filter(|&&(_, v)| v == value)
                .map(|&(n, _)| n)
                .collect();
            let _ = write!(
                out,
                r#"<text x="{px:.1}" y="{}" {}>{} {value} ms</text>"#,
                TOP - 28 + row * 11,
                if px > (RIGHT - 110) as f64 {
                    r#"dx="-3" text-anchor="end""#
                } else {
                    r#"dx="3""#
                },
                same.join(" = ")
            );
            row += 1;
        }
        out.push_str("</g>");
    }
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_cover_every_value_and_percentiles_are_the_reports() {
        let values: Vec<Millis> = (1..=100).map(|v| v * 7).collect();
        let summary = Summary::of(&values);
        let svg = svg("failover", "fault to agreement", &values, &summary);
        let bars: u32 = svg
            .match_indices("</title></rect>")
            .map(|(at, _)| {
                let head = &svg[..at];
                let count = &head[head.rfind(": ").unwrap() + 2..];
                count.parse::<u32>().unwrap()
            })
            .sum();
        assert_eq!(bars, 100);
        for (p, v) in [
            ("p50", summary.p50),
            ("p90", summary.p90),
            ("p99", summary.p99),
        ] {
            assert!(
                svg.contains(&format!(r#"data-p="{p}" data-ms="{v}""#)),
                "{p} {v}: {svg}"
            );
        }
        assert!(svg.contains("0–25 ms: 3"), "25 ms bins from 0: {svg}");
    }

    #[test]
    fn no_values_say_so() {
        let svg = svg("reclaim", "back to leading", &[], &Summary::default());
        assert!(svg.contains("none measured"));
        assert!(!svg.contains("<rect"));
    }
}
