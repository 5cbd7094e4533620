//! `docs/reference/metrics.md`: every metric family `/metrics` serves, read from the
//! exposition text itself (src/node/publish/exposition.rs, reached through the HTTP
//! routes, src/node/serve/http_routes.rs): names as exposed, type, labels and help.

use crate::fresh::generated_notice;
use crate::markdown::{cell, table};
use bully::api::postgres::{PgRole, PgState};
use bully::api::{Estimate, Status};
use bully::node::serve::http_routes::route;
use bully::node::Metrics;
use bully::postgres_rules::Synchronous;
use bully::protocol::{Cells, Mode, Role, View};

/// The page, from the repository root.
pub const PAGE: &str = "docs/reference/metrics.md";

/// The node's own families are named with this prefix; the rest are the process's.
const NODE_PREFIX: &str = "bully_";

/// The text of one scrape of node 2, with an estimate (so `bully_estimate` shows), a
/// PostgreSQL replica (so the `bully_postgres_*` families show) and one peer: every labelled family has samples, and those whose values are a fixed
/// set (health states, hooks, message types, refusal reasons) show them all, while
/// `peer` and `version`, which depend on the cluster and the build, have one.
fn scrape() -> String {
    let view = View::new(2, Role::Coordinator);
    let mut status = Status::initial(view, Mode::Quorum, Cells::default(), &[1], 0);
    status.estimate = Some(Estimate {
        value: 1,
        fresh: true,
    });
    // A replica's server, so the PostgreSQL families show with every figure.
    status.postgres = Some(PgState {
        timeline: Some(2),
        wal_position: Some(1),
        lag_bytes: Some(0),
        synchronous: Some(Synchronous::Quorum),
        ..PgState::bare(
            "127.0.0.1:5432".parse().unwrap(),
            PgRole::Replica,
            String::new(),
            0,
        )
    });
    let metrics = Metrics::new(2);
    let reply = route("/metrics", None, &status, &metrics, 0);
    assert_eq!(reply.code, 200, "/metrics: {}", reply.body);
    reply.body
}

/// One family: its `# TYPE` and `# HELP` lines and what its samples show.
#[derive(Default)]
struct Family {
    name: String,
    kind: String,
    help: String,
    /// Sample names as exposed (`bully_declarations_total`), in order.
    samples: Vec<String>,
    /// Label names, in order, each with the values its samples carry.
    labels: Vec<(String, Vec<String>)>,
}

/// The families of an OpenMetrics text, in order.
fn families(text: &str) -> Vec<Family> {
    let mut families: Vec<Family> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("# TYPE name type");
            family_named(&mut families, name).kind = kind.to_string();
        } else if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            family_named(&mut families, name).help = unescape(help);
        } else if !line.starts_with('#') && !line.is_empty() {
            let family = families.last_mut().expect("a sample after a # TYPE");
            add_sample(family, line);
        }
    }
    families
}

/// The family a `# TYPE` or `# HELP` line names: the last one if it is that, else a
/// new one (each family's metadata lines come together, before its samples).
fn family_named<'a>(families: &'a mut Vec<Family>, name: &str) -> &'a mut Family {
    if !matches!(families.last(), Some(f) if f.name == name) {
        families.push(Family {
            name: name.to_string(),
            ..Family::default()
        });
    }
    families.last_mut().expect("just pushed")
}

fn add_sample(family: &mut Family, line: &str) {
    let end = line.find(['{', ' ']).unwrap_or(line.len());
    let name = &line[..end];
    if !family.samples.iter().any(|s| s == name) {
        family.samples.push(name.to_string());
    }
    let Some(labels) = line[end..]
        .strip_prefix('{')
        .and_then(|rest| rest.split_once('}'))
        .map(|(labels, _)| labels)
    else {
        return;
    };
    for pair in labels.split(',').filter(|p| !p.is_empty()) {
        let (label, value) = pair.split_once('=').expect("label=\"value\"");
        let value = value.trim_matches('"').to_string();
        let index = match family.labels.iter().position(|(l, _)| l == label) {
            Some(index) => index,
            None => {
                family.labels.push((label.to_string(), Vec::new()));
                family.labels.len() - 1
            }
        };
        let values = &mut family.labels[index].1;
        if !values.contains(&value) {
            values.push(value);
        }
    }
}

/// OpenMetrics escapes in a help text: `\\`, `\n`, `\"`.
fn unescape(text: &str) -> String {
    text.replace("\\n", "\n")
        .replace("\\\"", "\"")
        .replace("\\\\", "\\")
}

/// The page's text.
pub fn page() -> String {
    let families = families(&scrape());
    let (node, process): (Vec<&Family>, Vec<&Family>) = families
        .iter()
        .partition(|f| f.name.starts_with(NODE_PREFIX));
    assert!(!node.is_empty(), "no bully_* family in /metrics");
    format!(
        "{}\n\n# Metrics reference\n\n\
         *Generated from what `/metrics` serves (`src/node/publish/exposition.rs`).*\n\n\
         With an `[http]` table in its config, a node serves `/metrics` in the OpenMetrics \
         text format. A counter family `x` is exposed as the sample `x_total`, a histogram \
         `x` as `x_bucket` (label `le`, upper bounds in seconds), `x_sum` and `x_count`. \
         No series carries a node label: Prometheus adds `instance`. A label's values are \
         listed where they are a fixed set.\n\n\
         ## The node's families\n\n\
         `bully_estimate` and `bully_estimate_fresh` are there only while the node has an \
         estimate (see `[health] estimate` in the configuration reference).\n\n{}\n\
         ## The process's families\n\n\
         Read from `/proc/self` when a scrape comes, named as the Prometheus Go client names \
         them; a figure `/proc` cannot give is left out.\n\n{}",
        generated_notice("what /metrics serves (src/node/publish/exposition.rs)"),
        family_table(&node),
        family_table(&process),
    )
}

fn family_table(families: &[&Family]) -> String {
    let rows: Vec<Vec<String>> = families
        .iter()
        .map(|family| {
            let samples: Vec<String> = family.samples.iter().map(|s| format!("`{s}`")).collect();
            vec![
                samples.join("<br>"),
                family.kind.clone(),
                labels_text(family),
                cell(&family.help),
            ]
        })
        .collect();
    table(&["Name", "Type", "Labels", "Help"], &rows)
}

/// `state` (`unchecked`, `pending`, ...): a label with its values when they are
/// several; histograms' `le` bounds are left to the reader's scrape.
fn labels_text(family: &Family) -> String {
    let labels: Vec<String> = family
        .labels
        .iter()
        .map(|(label, values)| {
            if values.len() > 1 && label != "le" {
                let values: Vec<String> = values.iter().map(|v| format!("`{v}`")).collect();
                format!("`{label}`: {}", values.join(", "))
            } else {
                format!("`{label}`")
            }
        })
        .collect();
    if labels.is_empty() {
        "—".to_string()
    } else {
        labels.join("<br>")
    }
}
