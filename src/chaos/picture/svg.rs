//! The timeline as inline SVG. Time runs left to right in percent of the run's length,
//! so the page zooms by widening the drawing while text keeps its size. Rows, top to
//! bottom: the time axis, whom the cluster agreed on, two coordinators at once, the
//! faults, then one lane per node, the highest ID (the one that should lead) on top.
//! Shades for "no agreed coordinator" and "two coordinators" run over every lane.

use super::markup::{esc, secs};
use crate::chaos::plan::Step;
use crate::chaos::report::picture::{Band, Picture, State};
use crate::chaos::verdict::Explained;
use crate::protocol::{Millis, NodeId, Role, View};
use std::fmt::Write as _;

/// Row tops and heights, px.
const AGREED_Y: u32 = 24;
const ROW_H: u32 = 14;
const OVERLAP_Y: u32 = 42;
const FAULTS_Y: u32 = 60;
const LANES_Y: u32 = 84;
/// Lane pitch, the band's height within it, and the term-of-office strip below it.
const PITCH: u32 = 30;
const BAND_H: u32 = 20;
const OFFICE_H: u32 = 4;

/// Tick spacings, each a multiple of the one before, so showing every level from one
/// up shows exactly the multiples of that one (the page's script picks the level).
const TICKS: [Millis; 11] = [
    100, 500, 1_000, 5_000, 10_000, 30_000, 60_000, 300_000, 600_000, 1_800_000, 3_600_000,
];
/// At most this many ticks in the finest level drawn (keeps long runs small).
const MAX_TICKS: Millis = 1_500;

/// Where things go: x in percent of the run, y by row and lane.
struct Geometry {
    span: Millis,
    /// Node IDs, top lane first.
    order: Vec<NodeId>,
}

impl Geometry {
    fn new(picture: &Picture) -> Geometry {
        Geometry {
            span: picture.span_ms.max(1),
            order: picture.lanes.iter().rev().map(|l| l.node).collect(),
        }
    }

    /// `t` as a percentage of the run, four decimals at most.
    fn x(&self, t: Millis) -> String {
        let mut s = format!("{:.4}", t.min(self.span) as f64 * 100.0 / self.span as f64);
        while s.ends_with('0') {
            s.pop();
        }
        if s.ends_with('.') {
            s.pop();
        }
        s.push('%');
        s
    }

    fn lane_top(&self, node: NodeId) -> Option<u32> {
        let index = self.order.iter().position(|&n| n == node)?;
        Some(LANES_Y + index as u32 * PITCH)
    }

    /// Where a marker for `node` sits: the middle of its band, else the faults row.
    fn marker_y(&self, node: Option<NodeId>) -> u32 {
        node.and_then(|n| self.lane_top(n))
            .map_or(FAULTS_Y + ROW_H / 2, |top| top + BAND_H / 2)
    }

    fn bottom(&self) -> u32 {
        LANES_Y + self.order.len() as u32 * PITCH
    }

    /// A rectangle over `[from, until)` with a tooltip (none when `title` is empty).
    fn rect(
        &self,
        out: &mut String,
        class: &str,
        (from, until): (Millis, Millis),
        (y, h): (u32, u32),
        title: &str,
    ) {
        let _ = write!(
            out,
            r#"<rect class="{class}" x="{}" y="{y}" width="{}" height="{h}""#,
            self.x(from),
            self.x(until.saturating_sub(from))
        );
        if title.is_empty() {
            out.push_str("/>");
        } else {
            let _ = write!(out, "><title>{}</title></rect>", esc(title));
        }
    }

    /// A bar over `stretch` in the row at `y`, labelled when wide enough.
    fn bar(
        &self,
        out: &mut String,
        class: &str,
        stretch: (Millis, Millis),
        y: u32,
        title: &str,
        label: &str,
    ) {
        self.rect(out, class, stretch, (y, ROW_H), title);
        self.label(out, stretch.0, stretch.1 - stretch.0, y + 11, label);
    }

    /// A text label starting at `from` that the page hides when its stretch
    /// (`width_ms`) is too narrow for it.
    fn label(&self, out: &mut String, from: Millis, width_ms: Millis, y: u32, text: &str) {
        let _ = write!(
            out,
            r#"<text class="bl" x="{}" dx="4" y="{y}" data-w="{width_ms}">{}</text>"#,
            self.x(from),
            esc(text)
        );
    }
}

/// The fixed column left of the timeline: the rows' and lanes' names.
pub fn names(picture: &Picture) -> String {
    let g = Geometry::new(picture);
    let mut out = format!(
        r#"<svg class="names" width="88" height="{}">"#,
        g.bottom() + 4
    );
    for (y, name) in [
        (13, "time"),
        (AGREED_Y + 11, "agreed"),
        (OVERLAP_Y + 11, "2 leaders"),
        (FAULTS_Y + 11, "faults"),
    ] {
        let _ = write!(out, r#"<text x="8" y="{y}">{name}</text>"#);
    }
    for &node in &g.order {
        let top = g.lane_top(node).unwrap_or(LANES_Y);
        let _ = write!(
            out,
            r#"<text class="node" x="8" y="{}">node {node}</text>"#,
            top + 15
        );
    }
    out.push_str("</svg>");
    out
}

/// The timeline itself; `violations` are pinned at their time on their node's lane.
pub fn plot(picture: &Picture, violations: &[Explained]) -> String {
    let g = Geometry::new(picture);
    let mut out = format!(
        r#"<svg id="tl" width="100%" height="{}" data-span="{}">{DEFS}"#,
        g.bottom() + 4,
        g.span
    );
    ticks(&mut out, &g);
    agreement(&mut out, &g, picture);
    for lane in picture.lanes.iter().rev() {
        let top = g.lane_top(lane.node).unwrap_or(LANES_Y);
        let _ = write!(out, r#"<g class="lane" data-node="{}">"#, lane.node);
        for band in &lane.bands {
            draw_band(&mut out, &g, lane.node, top, band);
        }
        for o in picture.offices.iter().filter(|o| o.node == lane.node) {
            let title = format!(
                "node {} in office for epoch {}, {}–{} s (the term of office the checker reads)",
                o.node,
                o.epoch,
                secs(o.from_ms),
                secs(o.until_ms)
            );
            g.rect(
                &mut out,
                "office",
                (o.from_ms, o.until_ms),
                (top + BAND_H + 1, OFFICE_H),
                &title,
            );
        }
        out.push_str("</g>");
    }
    partitions(&mut out, &g, picture);
    overlaps(&mut out, &g, picture);
    for step in &picture.steps {
        fault(&mut out, &g, picture, step.at_ms, &step.step);
    }
    for (index, v) in violations.iter().enumerate() {
        pin(&mut out, &g, index, v);
    }
    out.push_str("</svg>");
    out
}

/// Patterns and marker glyphs, drawn once and used by reference.
const DEFS: &str = concat!(
    "<defs>",
    r##"<pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="2.5" height="6" fill="#6b7280"/></pattern>"##,
    r##"<pattern id="cut" width="8" height="8" patternUnits="userSpaceOnUse" patternTransform="rotate(-45)"><rect width="2" height="8" fill="#fff"/><rect x="2" width="2" height="8" fill="#0b3b37"/></pattern>"##,
    r##"<g id="g-kill"><circle r="7" fill="#111"/><path d="M-3,-3L3,3M3,-3L-3,3" stroke="#fff" stroke-width="1.8"/></g>"##,
    r##"<g id="g-restart"><circle r="7" fill="#7f1d1d"/><path d="M3,-1.5A3.4,3.4 0 1 0 2.6,2.4M3,-4.2V-1.2H0" fill="none" stroke="#fff" stroke-width="1.5"/></g>"##,
    r##"<g id="g-pause"><circle r="7" fill="#6d46b8"/><path d="M-2.2,-3.5V3.5M2.2,-3.5V3.5" stroke="#fff" stroke-width="1.8"/></g>"##,
    r##"<g id="g-resume"><circle r="7" fill="#a58be0"/><path d="M-2.5,-3.8L3.8,0L-2.5,3.8Z" fill="#fff"/></g>"##,
    r##"<g id="g-start"><circle r="7" fill="#2f7d4f"/><path d="M-2.5,-3.8L3.8,0L-2.5,3.8Z" fill="#fff"/></g>"##,
    r##"<g id="g-partition"><circle r="7" fill="#0f766e"/><path d="M-1,-4.5L-3,4.5M3,-4.5L1,4.5" stroke="#fff" stroke-width="1.8"/></g>"##,
    r##"<g id="g-one-way"><circle r="7" fill="#0f766e"/><path d="M-4,0H3M1,-3L4,0L1,3" stroke="#fff" stroke-width="1.8" fill="none"/></g>"##,
    r##"<g id="g-heal"><circle r="7" fill="#2b6cb0"/><path d="M0,-4V4M-4,0H4" stroke="#fff" stroke-width="1.8"/></g>"##,
    r##"<g id="g-viol"><path d="M0,-8L7,0L0,8L-7,0Z" fill="#c81e1e" stroke="#fff"/><path d="M0,-4V1.5M0,3V4.5" stroke="#fff" stroke-width="1.8"/></g>"##,
    "</defs>"
);

/// Grid lines and time labels, one group per spacing; the script shows the levels
/// that fit the zoom (without it, those that fit a 1400 px wide drawing).
fn ticks(out: &mut String, g: &Geometry) {
    let finest = TICKS
        .iter()
        .position(|&step| g.span / step <= MAX_TICKS)
        .unwrap_or(TICKS.len() - 1);
    let levels = &TICKS[finest..];
    let fit_ms_per_px = g.span as f64 / 1400.0;
    let shown = levels
        .iter()
        .position(|&step| step as f64 / fit_ms_per_px >= 70.0)
        .unwrap_or(levels.len() - 1);
    let long = g.span >= 120_000;
    for (i, &step) in levels.iter().enumerate() {
        let hidden = if i < shown {
            r#" style="display:none""#
        } else {
            ""
        };
        let _ = write!(out, r#"<g class="tk" data-tick="{step}"{hidden}>"#);
        let coarser = &levels[i + 1..];
        for t in (0..=g.span).step_by(step as usize) {
            if coarser.iter().any(|&c| t % c == 0) {
                continue;
            }
            let x = g.x(t);
            let _ = write!(
                out,
                r#"<line x1="{x}" x2="{x}" y1="17" y2="{}"/><text x="{x}" y="13">{}</text>"#,
                g.bottom(),
                tick_label(t, step, long)
            );
        }
        out.push_str("</g>");
    }
}

/// `1.5 s`, `12 s`, or `2:05` (and `2:05.5`) for runs of two minutes or more.
fn tick_label(t: Millis, step: Millis, long: bool) -> String {
    let fraction = step < 1_000;
    match (long, fraction) {
        (false, false) => format!("{} s", t / 1_000),
        (false, true) => format!("{:.1} s", t as f64 / 1_000.0),
        (true, false) => format!("{}:{:02}", t / 60_000, t / 1_000 % 60),
        (true, true) => format!("{}:{:02}.{}", t / 60_000, t / 1_000 % 60, t % 1_000 / 100),
    }
}

/// The agreed row, and a shade over every lane while nobody is agreed on.
fn agreement(out: &mut String, g: &Geometry, picture: &Picture) {
    for a in &picture.agreement {
        let when = format!("{}–{} s", secs(a.from_ms), secs(a.until_ms));
        let stretch = (a.from_ms, a.until_ms);
        match a.leader {
            Some(leader) => {
                let title = format!("every available node follows node {leader}, {when}");
                g.bar(
                    out,
                    "agreed",
                    stretch,
                    AGREED_Y,
                    &title,
                    &format!("n{leader}"),
                );
            }
            None => {
                let title = format!(
                    "no coordinator all available nodes agree on, {when} ({} s)",
                    secs(a.until_ms - a.from_ms)
                );
                g.rect(out, "nolead", stretch, (AGREED_Y, ROW_H), &title);
                let below = AGREED_Y + ROW_H;
                g.rect(out, "nl-shade", stretch, (below, g.bottom() - below), "");
            }
        }
    }
}

/// One band of a lane, with the epoch written on coordinator bands.
fn draw_band(out: &mut String, g: &Geometry, node: NodeId, top: u32, band: &Band) {
    let (class, text) = match band.state {
        // Not a member then: the lane stays empty (it appears and leaves).
        State::Absent => return,
        State::Down => ("b-d", "down".to_string()),
        State::Starting => ("b-s", "started, no view published yet".to_string()),
        State::Paused(view) => (
            "b-p",
            match view {
                Some(v) => format!("paused (SIGSTOP), still {}", believes(&v)),
                None => "paused (SIGSTOP)".to_string(),
            },
        ),
        State::Believes(view) => (
            match view.role {
                Role::Coordinator => "b-k",
                Role::Follower => "b-f",
                Role::Candidate => "b-c",
            },
            believes(&view),
        ),
    };
    let title = format!(
        "node {node}: {text}, {}–{} s",
        secs(band.from_ms),
        secs(band.until_ms)
    );
    g.rect(
        out,
        class,
        (band.from_ms, band.until_ms),
        (top, BAND_H),
        &title,
    );
    if let State::Believes(View {
        role: Role::Coordinator,
        epoch: Some(epoch),
        ..
    }) = band.state
    {
        let width = band.until_ms - band.from_ms;
        g.label(out, band.from_ms, width, top + 14, &epoch.to_string());
    }
}

/// A view in words: `coordinator of 3@5`, `follower of 3@5`, `candidate`.
fn believes(view: &View) -> String {
    let role = match (view.role, view.epoch) {
        (Role::Candidate, _) | (_, None) => view.role.to_string(),
        (role, Some(epoch)) => format!("{role} of {epoch}"),
    };
    if view.eligible {
        role
    } else {
        format!("{role} (ineligible)")
    }
}

/// `{4, 5}`.
fn side(nodes: &[NodeId]) -> String {
    let names: Vec<String> = nodes.iter().map(NodeId::to_string).collect();
    format!("{{{}}}", names.join(", "))
}

/// Each partition: a bar in the faults row naming its sides, and a hatch over the
/// lanes cut off from the majority side.
fn partitions(out: &mut String, g: &Geometry, picture: &Picture) {
    let members: Vec<NodeId> = picture.lanes.iter().map(|l| l.node).collect();
    for p in &picture.partitions {
        let stretch = (p.from_ms, p.until_ms);
        let when = format!("{}–{} s", secs(p.from_ms), secs(p.until_ms));
        let (title, label) = match &p.majority_side {
            Some(majority) => {
                let minority: Vec<NodeId> = members
                    .iter()
                    .copied()
                    .filter(|n| !majority.contains(n))
                    .collect();
                for &node in &minority {
                    if let Some(top) = g.lane_top(node) {
                        g.rect(out, "cut", stretch, (top, BAND_H), "");
                    }
                }
                (
                    format!(
                        "partition {when}: {} cut off from the majority side {}",
                        side(&minority),
                        side(majority)
                    ),
                    format!("{} | {}", side(&minority), side(majority)),
                )
            }
            None => (
                format!("partition {when}: no side holds a majority"),
                "no majority".to_string(),
            ),
        };
        g.bar(out, "part", stretch, FAULTS_Y, &title, &label);
    }
}

/// The two-coordinator row and shade, naming who was in office.
fn overlaps(out: &mut String, g: &Geometry, picture: &Picture) {
    for &(from, until) in &picture.overlaps {
        let who: Vec<String> = picture
            .offices
            .iter()
            .filter(|o| o.from_ms < until && o.until_ms > from)
            .map(|o| format!("node {} ({})", o.node, o.epoch))
            .collect();
        let title = format!(
            "two coordinators, {}–{} s ({} s): {}",
            secs(from),
            secs(until),
            secs(until - from),
            who.join(", ")
        );
        let _ = write!(out, r#"<g class="overlap" data-ms="{}">"#, until - from);
        g.rect(out, "ov", (from, until), (OVERLAP_Y, ROW_H), &title);
        g.rect(
            out,
            "ov-shade",
            (from, until),
            (LANES_Y, g.bottom() - LANES_Y),
            "",
        );
        out.push_str("</g>");
    }
}

/// One step: a line across the lanes and a glyph on the node it hit (partitions and
/// heals in the faults row).
fn fault(out: &mut String, g: &Geometry, picture: &Picture, at: Millis, step: &Step) {
    let node = crate::chaos::report::picture::step_node(step);
    let mut title = format!("{} s: {step}", secs(at));
    if let Step::Partition(cut) = step {
        let rest: Vec<NodeId> = picture
            .lanes
            .iter()
            .map(|l| l.node)
            .filter(|n| !cut.contains(n))
            .collect();
        let _ = write!(title, " (the other side: {})", side(&rest));
    }
    let x = g.x(at);
    let _ = write!(
        out,
        r##"<g class="fault" data-kind="{kind}"><title>{}</title><line class="fl" x1="{x}" x2="{x}" y1="{FAULTS_Y}" y2="{}"/><use href="#g-{kind}" x="{x}" y="{}"/></g>"##,
        esc(&title),
        g.bottom(),
        g.marker_y(node),
        kind = step.name(),
    );
}

/// A violation's pin: a red diamond on its node's lane at its time, linking to its
/// entry in the list below, with the invariant and the history around it on hover.
fn pin(out: &mut String, g: &Geometry, index: usize, v: &Explained) {
    let at = (v.at_s.max(0.0) * 1000.0).round() as Millis;
    let mut title = format!(
        "{} at {} s on node {}: {}",
        v.invariant,
        secs(at),
        v.node,
        v.explanation
    );
    for line in &v.history {
        title.push('\n');
        title.push_str(line);
    }
    let x = g.x(at);
    let _ = write!(
        out,
        r##"<a class="pin" href="#v{index}"><title>{}</title><line x1="{x}" x2="{x}" y1="{AGREED_Y}" y2="{}"/><use href="#g-viol" x="{x}" y="{}"/></a>"##,
        esc(&title),
        g.bottom(),
        g.marker_y(Some(v.node)),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chaos::report::picture::tests::picture;
    use crate::protocol::Mode;

    #[test]
    fn percent_coordinates_and_tick_labels() {
        let g = Geometry {
            span: 3000,
            order: vec![3, 2, 1],
        };
        assert_eq!(g.x(0), "0%");
        assert_eq!(g.x(1000), "33.3333%");
        assert_eq!(g.x(3000), "100%");
        assert_eq!(g.x(9999), "100%", "clipped to the run");
        assert_eq!(g.lane_top(3), Some(LANES_Y));
        assert_eq!(g.lane_top(1), Some(LANES_Y + 2 * PITCH));
        assert_eq!(g.lane_top(4), None);
        assert_eq!(tick_label(12_000, 1_000, false), "12 s");
        assert_eq!(tick_label(1_500, 500, false), "1.5 s");
        assert_eq!(tick_label(125_000, 5_000, true), "2:05");
        assert_eq!(tick_label(125_500, 500, true), "2:05.5");
    }

    #[test]
    fn every_tick_level_is_a_multiple_of_the_one_before() {
        assert!(TICKS.windows(2).all(|w| w[1] % w[0] == 0));
    }

    #[test]
    fn one_lane_per_node_one_marker_per_step_one_overlap_per_stretch() {
        let p = picture(Mode::Classic);
        let svg = plot(&p, &[]);
        assert_eq!(svg.matches(r#"<g class="lane""#).count(), 3);
        assert_eq!(svg.matches(r#"<g class="fault""#).count(), p.steps.len());
        assert_eq!(svg.matches(r#"<g class="overlap""#).count(), 1);
        assert!(svg.contains(r#"data-ms="700""#), "{svg}");
        assert!(svg.contains(">1@3</text>"), "epoch on the coordinator band");
        assert!(svg.contains(r#"data-kind="partition""#));
        assert!(svg.contains("{3} cut off from the majority side {1, 2}"));
        assert_eq!(svg.matches(r#"class="cut""#).count(), 1, "node 3's lane");
        assert!(!svg.contains(r#"class="pin""#));
    }

    #[test]
    fn violations_are_pinned_with_their_history_escaped() {
        let p = picture(Mode::Classic);
        let v = Explained {
            invariant: "I5 convergence".into(),
            node: 2,
            at_s: 1.5,
            explanation: "view is <follower> & \"odd\"".into(),
            history: vec!["    1500 ms  n2   view follower 1@3".into()],
        };
        let svg = plot(&p, &[v]);
        assert_eq!(svg.matches(r#"class="pin""#).count(), 1);
        assert!(svg.contains("view is &lt;follower&gt; &amp; &quot;odd&quot;"));
        assert!(svg.contains("1500 ms  n2   view follower 1@3"));
        assert!(svg.contains(r##"href="#v0""##));
    }
}
