//! The HTML document: the run's parameters and verdict, the figures the text report
//! gives, a legend, the timeline with zoom buttons, the takeover histograms, then the
//! violations (with their history), anomalies, advisory warnings and steps as lists.
//! Everything inline: it opens from disk with the network off.

use super::markup::{esc, secs};
use super::{histogram, svg};
use crate::chaos::report::picture::Picture;
use crate::chaos::report::Report;
use crate::chaos::timeline::SampleKind;
use crate::chaos::verdict::Explained;
use crate::protocol::Millis;
use std::fmt::Write as _;

/// The whole page for `report` (its picture, figures and findings).
pub fn render(report: &Report) -> String {
    let picture = &report.picture;
    let p = &report.params;
    let mut heading = format!("bully {}: {} mode, {} nodes", p.command, p.mode, p.nodes);
    if p.command != "local" {
        // An interactive session has no schedule, so no seed worth showing.
        let _ = write!(heading, ", seed {}", p.seed);
    }
    let mut out = String::with_capacity(64 * 1024);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{} — {}</title><style>{STYLE}</style></head><body>",
        esc(&heading),
        report.verdict.to_uppercase()
    );
    let _ = write!(
        out,
        r#"<h1>{} <span class="verdict {}">{}</span></h1><p class="sub">{}</p><p class="figs">{}</p>"#,
        esc(&heading),
        esc(report.verdict),
        esc(&report.verdict.to_uppercase()),
        esc(&subtitle(report)),
        figures(report)
    );
    out.push_str(LEGEND);
    let _ = write!(
        out,
        r#"<div class="tl">{}<div id="scroll">{}</div></div>"#,
        svg::names(picture),
        svg::plot(picture, &report.violations)
    );
    let _ = write!(
        out,
        r#"<div class="hists">{}{}</div>"#,
        histogram::svg(
            "failover",
            "fault → every available node follows the new leader, ms",
            &totals(picture, SampleKind::Failover),
            &report.failover.total
        ),
        histogram::svg(
            "reclaim",
            "the highest node back → every available node follows it, ms",
            &totals(picture, SampleKind::Reclaim),
            &report.reclaim.total
        )
    );
    findings(&mut out, report);
    let _ = writeln!(out, "<script>{SCRIPT}</script></body></html>");
    out
}

/// Duration, timing and where the files are.
fn subtitle(report: &Report) -> String {
    let p = &report.params;
    let length = match p.runs {
        Some(runs) => format!("{runs} runs"),
        None => format!("{:.0} s", p.duration_s),
    };
    let mut line = format!(
        "{length}, timing {} (heartbeat {} ms, D {} ms, T {} ms, T' {} ms); times below are seconds since the nodes were started",
        p.timing_profile,
        p.timing.heartbeat_ms,
        p.timing.suspect_after_ms,
        p.timing.answer_timeout_ms,
        p.timing.coordinator_timeout_ms
    );
    if let Some(dir) = &p.dir {
        let _ = write!(line, "; files kept in {dir}");
    }
    line
}

/// The text report's headline figures, as one line of HTML.
fn figures(report: &Report) -> String {
    let steps: Vec<String> = report
        .faults
        .iter()
        .map(|(kind, n)| format!("{kind} {n}"))
        .collect();
    let two = report.offices.two_coordinators_ms;
    let parts = [
        format!(
            "steps: {}",
            if steps.is_empty() {
                "none".to_string()
            } else {
                esc(&steps.join(", "))
            }
        ),
        format!("elections: {}", report.elections),
        format!(
            "no agreed coordinator: {} s after the first agreement (longest {} s)",
            secs(report.no_agreement_ms),
            secs(report.longest_no_agreement_ms)
        ),
        format!(
            r#"<b class="{}">two coordinators: {} s</b>"#,
            if two > 0 { "red" } else { "ok" },
            secs(two)
        ),
        format!(
            "majority side without a coordinator: {} s",
            secs(report.offices.majority_side_leaderless_ms)
        ),
        format!("violations: {}", report.violations.len()),
    ];
    parts.join(" · ")
}

/// The measured takeover times of one kind.
fn totals(picture: &Picture, kind: SampleKind) -> Vec<Millis> {
    picture
        .samples
        .iter()
        .filter(|s| s.kind == kind)
        .filter_map(|s| s.total_ms)
        .collect()
}

/// Violations (each with its history, the target of its pin), anomalies, warnings
/// and the steps taken.
fn findings(out: &mut String, report: &Report) {
    out.push_str("<h2>Violations</h2>");
    if report.violations.is_empty() {
        out.push_str("<p>None: the checker found every invariant held.</p>");
    }
    for (index, v) in report.violations.iter().enumerate() {
        explained(out, &format!("v{index}"), v, true);
    }
    if !report.anomalies.is_empty() {
        out.push_str("<h2>Anomalies</h2><ul>");
        for a in &report.anomalies {
            let _ = write!(out, "<li>{}</li>", esc(a));
        }
        out.push_str("</ul>");
    }
    if report.warnings_total > 0 {
        let _ = write!(
            out,
            "<details><summary>Advisory warnings: {} (the first {} with their history)</summary>",
            report.warnings_total,
            report.warnings.len()
        );
        for (index, w) in report.warnings.iter().enumerate() {
            explained(out, &format!("w{index}"), w, false);
        }
        out.push_str("</details>");
    }
    let _ = write!(
        out,
        "<details><summary>Steps taken: {}</summary><ol class=\"steps\">",
        report.steps.len()
    );
    for step in &report.steps {
        let _ = write!(out, "<li>{:.3} s: {}</li>", step.at_s, esc(&step.step));
    }
    out.push_str("</ol></details>");
}

/// One finding with the history around it.
fn explained(out: &mut String, id: &str, v: &Explained, open: bool) {
    let _ = write!(
        out,
        r#"<details id="{id}" class="finding"{}><summary><b>{}</b> at {:.3} s on node {}: {}</summary><pre>{}</pre></details>"#,
        if open { " open" } else { "" },
        esc(&v.invariant),
        v.at_s,
        v.node,
        esc(&v.explanation),
        esc(&v.history.join("\n"))
    );
}

const LEGEND: &str = concat!(
    r#"<div class="controls"><span class="zoom"><button id="zout" title="zoom out">−</button><button id="zin" title="zoom in">+</button><button id="zfit" title="fit the whole run">fit</button> <span id="zlabel">whole run</span><span class="hint"> · Ctrl+wheel zooms, Shift+wheel scrolls; hover anything for details</span></span></div>"#,
    r#"<div class="legend">"#,
    r#"<span><i class="sw b-k"></i>coordinator (epoch term@node)</span>"#,
    r#"<span><i class="sw b-f"></i>follower</span>"#,
    r#"<span><i class="sw b-c"></i>candidate</span>"#,
    r#"<span><i class="sw b-s"></i>started, no view yet</span>"#,
    r#"<span><i class="sw b-p"></i>paused</span>"#,
    r#"<span><i class="sw b-d"></i>down</span>"#,
    r#"<span><i class="sw office"></i>term of office</span>"#,
    r#"<span><i class="sw nl"></i>no agreed coordinator</span>"#,
    r#"<span><i class="sw ov"></i>two coordinators</span>"#,
    r#"<span><i class="sw cutsw"></i>cut off by a partition</span>"#,
    r#"<span class="glyphs">markers: <svg width="168" height="16">"#,
    r##"<use href="#g-kill" x="8" y="8"/><use href="#g-restart" x="26" y="8"/><use href="#g-pause" x="44" y="8"/><use href="#g-resume" x="62" y="8"/><use href="#g-start" x="80" y="8"/><use href="#g-partition" x="98" y="8"/><use href="#g-one-way" x="116" y="8"/><use href="#g-heal" x="134" y="8"/><use href="#g-viol" x="154" y="8"/>"##,
    r#"</svg> kill, restart, pause, resume, start, partition, one-way, heal, violation</span>"#,
    "</div>"
);

const STYLE: &str = r#"
body{font:13px/1.45 "DejaVu Sans","Segoe UI",Helvetica,Arial,sans-serif;margin:14px 18px;color:#1f2430;background:#fff}
h1{font-size:17px;margin:0 0 2px}h2{font-size:15px;margin:18px 0 6px}
.sub,.figs{margin:2px 0;color:#4b5262}.figs{color:#1f2430}.red{color:#b91c1c}.ok{color:#2f7d4f}
.verdict{font-size:12px;padding:1px 8px;border-radius:3px;color:#fff;vertical-align:2px}
.verdict.pass{background:#2f7d4f}.verdict.fail{background:#c81e1e}
.controls{margin:8px 0 4px}.controls button{font:inherit;min-width:30px;margin-right:3px;padding:1px 6px;border:1px solid #b8bfcc;background:#f5f6f8;border-radius:3px;cursor:pointer}
.hint,#zlabel{color:#6b7280}
.legend{display:flex;flex-wrap:wrap;gap:4px 14px;margin:0 0 6px;color:#3a4150}
.legend span{display:inline-flex;align-items:center;gap:5px}.legend svg{vertical-align:middle}
.sw{display:inline-block;width:18px;height:11px;border-radius:2px}
.sw.b-k{background:#2f7d4f}.sw.b-f{background:#c9d8ea}.sw.b-c{background:#f3b440}.sw.b-s{background:#e3e3e3}
.sw.b-p{background:#9c7ad6}.sw.b-d{background:#5b5f66}.sw.office{background:#0f3d22;height:4px}
.sw.nl{background:repeating-linear-gradient(45deg,#9aa1ad 0 2px,#fff 2px 5px)}.sw.ov{background:#d62728}
.sw.cutsw{background:repeating-linear-gradient(-45deg,#fff 0 2px,#0b3b37 2px 4px,#c9d8ea 4px 8px)}
.tl{display:flex;border:1px solid #d3d8e0;border-radius:4px;background:#fff}
.names{flex:none;background:#f6f7f9;border-right:1px solid #d3d8e0}
.names text{font-size:11px;fill:#4b5262}.names text.node{font-size:12px;font-weight:bold;fill:#1f2430}
#scroll{flex:1;overflow-x:auto;overflow-y:hidden;padding:0 14px}
#tl{display:block;overflow:visible}
#tl text{font-size:11px;fill:#4b5262}
.tk line{stroke:#eceef2}.tk text{text-anchor:middle}
.b-k{fill:#2f7d4f}.b-f{fill:#c9d8ea}.b-c{fill:#f3b440}.b-s{fill:#e3e3e3}.b-p{fill:#9c7ad6}.b-d{fill:#5b5f66}
.office{fill:#0f3d22}
#tl .bl{fill:#fff;font-weight:bold;pointer-events:none}
#tl .agreed+.bl,#tl .part+.bl{fill:#1f2430;font-weight:normal}
.agreed{fill:#a7d4b6}.nolead{fill:url(#hatch)}
.nl-shade{fill:url(#hatch);opacity:.28;pointer-events:none}
.ov{fill:#d62728;stroke:#d62728;stroke-width:1}.ov-shade{fill:#d62728;opacity:.16;pointer-events:none}
.part{fill:#d3efea;stroke:#0f766e;stroke-width:.5}.cut{fill:url(#cut);opacity:.6;pointer-events:none}
.fl{stroke:#6b7280;stroke-width:1;stroke-dasharray:2 3;opacity:.6}
.fault:hover .fl{stroke:#111;stroke-dasharray:none;opacity:1}
.pin line{stroke:#c81e1e;stroke-width:1.5}
.hists{display:flex;flex-wrap:wrap;gap:10px 28px;margin-top:12px}
.hist text{font-size:11px;fill:#4b5262}.hist .ht{font-size:12px;font-weight:bold;fill:#1f2430}
.hist .bar{fill:#6f8fb8}.hist .axis{stroke:#9aa1ad}
.pct line{stroke:#1f2430;stroke-dasharray:3 2}.pct text{font-size:10px;fill:#1f2430}
.finding summary{cursor:pointer}.finding pre{background:#f6f7f9;border:1px solid #e2e5ea;padding:6px 8px;overflow-x:auto;font-size:12px}
.steps{columns:3 320px;font-size:12px;color:#3a4150}
"#;

const SCRIPT: &str = r#"
(function () {
  var svg = document.getElementById('tl'), box = document.getElementById('scroll');
  var span = +svg.getAttribute('data-span'), zoom = 1;
  var labels = Array.prototype.slice.call(svg.querySelectorAll('text[data-w]'));
  var widths = labels.map(function (t) { return t.getComputedTextLength(); });
  var levels = Array.prototype.slice.call(svg.querySelectorAll('g[data-tick]'));
  function inner() { return Math.max(100, box.clientWidth - 28); }
  function most() { return Math.max(1, span / inner() / 2); }
  function layout() {
    var w = inner() * zoom, perMs = w / span;
    svg.style.width = w + 'px';
    labels.forEach(function (t, i) {
      t.style.display = +t.getAttribute('data-w') * perMs >= widths[i] + 8 ? '' : 'none';
    });
    var pick = null;
    levels.forEach(function (g) {
      var step = +g.getAttribute('data-tick');
      if (step * perMs >= 70 && (pick === null || step < pick)) { pick = step; }
    });
    if (pick === null && levels.length) { pick = +levels[levels.length - 1].getAttribute('data-tick'); }
    levels.forEach(function (g) {
      g.style.display = +g.getAttribute('data-tick') >= pick ? '' : 'none';
    });
    document.getElementById('zlabel').textContent =
      zoom <= 1 ? 'whole run' : 'zoom ' + zoom.toFixed(1) + '\u00d7, ' + (inner() / perMs / 1000).toFixed(1) + ' s in view';
  }
  function setZoom(z, atPx) {
    var before = inner() * zoom, frac = (box.scrollLeft + atPx) / before;
    zoom = Math.min(most(), Math.max(1, z));
    layout();
    box.scrollLeft = frac * inner() * zoom - atPx;
  }
  function centre() { return box.clientWidth / 2; }
  document.getElementById('zin').onclick = function () { setZoom(zoom * 2, centre()); };
  document.getElementById('zout').onclick = function () { setZoom(zoom / 2, centre()); };
  document.getElementById('zfit').onclick = function () { setZoom(1, 0); };
  box.addEventListener('wheel', function (e) {
    if (!e.ctrlKey) { return; }
    e.preventDefault();
    setZoom(zoom * (e.deltaY < 0 ? 1.25 : 0.8), e.clientX - box.getBoundingClientRect().left);
  }, { passive: false });
  window.addEventListener('resize', layout);
  layout();
  // A link can open the page zoomed on a moment: page.html#t=12.5&z=8 (seconds, factor).
  var z = /z=([0-9.]+)/.exec(location.hash), t = /t=([0-9.]+)/.exec(location.hash);
  if (z) { setZoom(+z[1], 0); }
  if (t) { box.scrollLeft = +t[1] * 1000 * inner() * zoom / span - box.clientWidth / 2; }
  document.body.setAttribute('data-ready', '1');
})();
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chaos::report::picture::tests::picture;
    use crate::protocol::Mode;

    fn report() -> Report {
        Report {
            verdict: "fail",
            picture: picture(Mode::Classic),
            anomalies: vec!["node 2 exited <by itself>".into()],
            ..Report::default()
        }
    }

    #[test]
    fn a_self_contained_page_with_every_part() {
        let html = render(&report());
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(html.trim_end().ends_with("</html>"));
        for external in [
            "http://", "https://", " src=", "<link", "@import", "url(http",
        ] {
            assert!(!html.contains(external), "{external} in the page");
        }
        assert!(html.contains("node 2 exited &lt;by itself&gt;"));
        assert!(html.contains(r#"<span class="verdict fail">FAIL</span>"#));
        assert_eq!(html.matches("<svg class=\"hist\"").count(), 2);
        assert!(
            html.contains("data-ready"),
            "the script marks the page ready"
        );
    }
}
