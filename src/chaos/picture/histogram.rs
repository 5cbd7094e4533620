//! A histogram of takeover times (failover or reclaim) as inline SVG, with the
//! report's p50, p90 and p99 marked: the shape tells a slow tail from a slow median.

use super::markup::esc;
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
    let scale = Scale::for_max(max);
    let tallest = bars(&mut out, values, &scale);
    axes(&mut out, &scale, tallest);
    percentile_marks(&mut out, summary, &scale);
    out.push_str("</svg>");
    out
}

/// The bin width chosen for the values and where a value lands on the x axis.
struct Scale {
    bin: Millis,
    bins: usize,
    /// The axis spans 0..range ms.
    range: Millis,
}

impl Scale {
    fn for_max(max: Millis) -> Scale {
        let bin = BINS
            .iter()
            .copied()
            .find(|&b| max / b < MAX_BINS)
            .unwrap_or(BINS[BINS.len() - 1]);
        let bins = (max / bin + 1) as usize;
        Scale {
            bin,
            bins,
            range: bins as Millis * bin,
        }
    }

    fn x(&self, v: Millis) -> f64 {
        LEFT as f64 + v.min(self.range) as f64 * (RIGHT - LEFT) as f64 / self.range as f64
    }
}

/// One bar per non-empty bin; returns the tallest bin's count.
fn bars(out: &mut String, values: &[Millis], scale: &Scale) -> u32 {
    let mut counts = vec![0u32; scale.bins];
    for &v in values {
        counts[(v / scale.bin) as usize] += 1;
    }
    let tallest = counts.iter().copied().max().unwrap_or(1).max(1);
    let height = (BASE - TOP) as f64;
    for (i, &count) in counts.iter().enumerate().filter(|(_, &c)| c > 0) {
        let (lo, hi) = (i as Millis * scale.bin, (i as Millis + 1) * scale.bin);
        let h = height * count as f64 / tallest as f64;
        let _ = write!(
            out,
            r#"<rect class="bar" x="{:.1}" y="{:.1}" width="{:.1}" height="{h:.1}"><title>{lo}–{hi} ms: {count}</title></rect>"#,
            scale.x(lo) + 0.5,
            BASE as f64 - h,
            (scale.x(hi) - scale.x(lo) - 1.0).max(1.0),
        );
    }
    tallest
}

/// The base line, the count scale and about six ms labels.
fn axes(out: &mut String, scale: &Scale, tallest: u32) {
    let _ = write!(
        out,
        r#"<line class="axis" x1="{LEFT}" x2="{RIGHT}" y1="{BASE}" y2="{BASE}"/><text class="num" x="{}" y="{}" text-anchor="end">{tallest}</text><text class="num" x="{}" y="{}" text-anchor="end">0</text>"#,
        LEFT - 4,
        TOP + 4,
        LEFT - 4,
        BASE,
    );
    let every = scale.bins.div_ceil(6).max(1) as Millis * scale.bin;
    for v in (0..=scale.range).step_by(every as usize) {
        let _ = write!(
            out,
            r#"<text class="num" x="{:.1}" y="{}" text-anchor="middle">{v}</text>"#,
            scale.x(v),
            BASE + 14
        );
    }
    let _ = write!(
        out,
        r#"<text class="num" x="{RIGHT}" y="{}" text-anchor="end">ms</text>"#,
        HEIGHT - 1
    );
}

/// A line at p50, p90 and p99, and one label per distinct value (`p90 = p99 412`),
/// each on its own line.
fn percentile_marks(out: &mut String, summary: &Summary, scale: &Scale) {
    let marks = [
        ("p50", summary.p50),
        ("p90", summary.p90),
        ("p99", summary.p99),
    ];
    let mut row = 0;
    for (i, &(name, value)) in marks.iter().enumerate() {
        let px = scale.x(value);
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
