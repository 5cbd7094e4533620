//! The HTML timeline (`--html`), as a user gets it:
//! - a seeded classic and a seeded quorum partition run of the real binary draw a lane
//!   per node, one marker per step taken and overlap regions exactly when (and as long
//!   as) the report counts time with two coordinators: the classic run has some, the
//!   quorum run none;
//! - `bully local --html` draws an interactive session on quit;
//! - a history as dense as a 10-minute 9-node chaos run renders under 2 MB;
//! - each page opens in real headless Chromium without a console message (a page with
//!   a script error is caught, so silence means something) and is screenshotted.
//!   Without chromium the browser part is skipped, saying why.
//!
//! `BULLY_EXAMPLES=dir` also copies the two partition runs' HTML and PNG there.

#[path = "common/browser.rs"]
mod browser;
mod common;
#[path = "common/synthetic.rs"]
mod synthetic;

use browser::{Browser, Group};
use bully::chaos::picture;
use bully::chaos::plan::{plan, FaultKind, PlanSpec, Step};
use bully::protocol::{Mode, Timing};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// One cluster at a time: two 5-node clusters at once starve each other on 2 cores.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn turn() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

const SEED: u64 = 7;
const DURATION_MS: u64 = 8_000;
const SLACK_MS: u64 = 1_500;

/// Runs `bully chaos` with partitions only; returns the JSON report and the HTML.
fn partition_run(mode: Mode, dir: &Path) -> (Value, String) {
    let _turn = turn();
    let (json, html) = (dir.join("report.json"), dir.join("run.html"));
    let (mode_arg, seed, duration, slack) = (
        mode.to_string(),
        SEED.to_string(),
        format!("{DURATION_MS}ms"),
        format!("{SLACK_MS}ms"),
    );
    let mut command = bully(
        &[
            "chaos",
            "--nodes",
            "5",
            "--faults",
            "partition",
            "--timing",
            "fast",
            "--mode",
            &mode_arg,
            "--seed",
            &seed,
            "--duration",
            &duration,
            "--slack",
            &slack,
        ],
        &dir.join("run"),
        &html,
    );
    command.arg("--json").arg(&json);
    let mut run = Group(command.spawn().expect("run bully chaos"));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = run.0.try_wait().expect("wait for bully chaos") {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "bully chaos did not finish"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        matches!(status.code(), Some(0 | 1)),
        "bully chaos exited {status}"
    );
    let report = std::fs::read_to_string(&json).expect("a JSON report");
    let page = std::fs::read_to_string(&html).expect("an HTML file");
    (serde_json::from_str(&report).expect("JSON"), page)
}

/// `bully <args> --dir <dir> --html <html>` in its own process group, output dropped.
fn bully(args: &[&str], dir: &Path, html: &Path) -> Command {
    let mut command = Command::new(common::binary());
    command
        .args(args)
        .arg("--dir")
        .arg(dir)
        .arg("--html")
        .arg(html)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    command
}

/// The values of `attribute` in every tag of `page` that starts with `head`.
fn attribute_values(page: &str, head: &str, attribute: &str) -> Vec<String> {
    let key = format!("{attribute}=\"");
    page.match_indices(head)
        .filter_map(|(at, _)| {
            let tag = &page[at..at + page[at..].find('>')?];
            let from = tag.find(&key)? + key.len();
            Some(tag[from..from + tag[from..].find('"')?].to_string())
        })
        .collect()
}

/// The structure every page must have for the report it was made from.
fn check_structure(page: &str, report: &Value, nodes: u64) {
    let lanes = attribute_values(page, r#"<g class="lane""#, "data-node");
    let expected: Vec<String> = (1..=nodes).rev().map(|n| n.to_string()).collect();
    assert_eq!(lanes, expected, "one lane per node, highest on top");

    let steps = report["steps"].as_array().expect("steps").len();
    let kinds = attribute_values(page, r#"<g class="fault""#, "data-kind");
    assert_eq!(kinds.len(), steps, "one marker per step taken");
    let mut by_kind: BTreeMap<String, u64> = BTreeMap::new();
    for kind in kinds {
        *by_kind.entry(kind).or_default() += 1;
    }
    let counted: BTreeMap<String, u64> = report["faults"]
        .as_object()
        .expect("faults")
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
        .collect();
    assert_eq!(
        by_kind, counted,
        "markers by kind = the report's steps by kind"
    );

    let overlap: u64 = attribute_values(page, r#"<g class="overlap""#, "data-ms")
        .iter()
        .map(|ms| ms.parse::<u64>().expect("ms"))
        .sum();
    assert_eq!(
        overlap,
        report["two_coordinators_ms"].as_u64().expect("figure"),
        "the red regions add up to the report's time with two coordinators"
    );
    let violations = report["violations"].as_array().map_or(0, Vec::len);
    assert_eq!(page.matches(r#"<a class="pin""#).count(), violations);
    for (kind, figure) in [("failover", "p50"), ("failover", "p99"), ("reclaim", "p50")] {
        let summary = &report[kind]["total"];
        if summary["count"].as_u64().unwrap_or(0) > 0 {
            let mark = format!(r#"data-p="{figure}" data-ms="{}""#, summary[figure]);
            assert!(page.contains(&mark), "{kind} {figure} marked as {mark}");
        }
    }
    for external in ["http://", "https://", " src=", "<link", "@import"] {
        assert!(
            !page.contains(external),
            "{external} in a self-contained page"
        );
    }
}

/// Opens `page` in the browser (when there is one): no console message, the script ran
/// to its end, and a screenshot. Returns the screenshot's path.
fn open_in_browser(page: &Path) -> Option<std::path::PathBuf> {
    let browser = Browser::find()?;
    let dom = browser.dump_dom(page);
    assert!(dom.console.is_empty(), "console: {:#?}", dom.console);
    assert!(
        dom.stdout.contains(r#"data-ready="1""#),
        "the page's script did not run to its end"
    );
    let png = page.with_extension("png");
    let shot = browser.screenshot(page, &png);
    assert!(shot.console.is_empty(), "console: {:#?}", shot.console);
    let bytes = std::fs::read(&png).expect("screenshot");
    assert!(
        bytes.starts_with(b"\x89PNG") && bytes.len() > 10_000,
        "a real picture"
    );
    Some(png)
}

/// Copies a run's page and screenshot to `$BULLY_EXAMPLES` (to refresh `examples/`).
fn keep_example(name: &str, page: &Path, png: Option<&Path>) {
    let Some(dir) = std::env::var_os("BULLY_EXAMPLES") else {
        return;
    };
    let dir = Path::new(&dir);
    std::fs::copy(page, dir.join(format!("{name}.html"))).expect("copy the page");
    if let Some(png) = png {
        std::fs::copy(png, dir.join(format!("{name}.png"))).expect("copy the picture");
    }
}

fn partition_run_is_drawn(mode: Mode) -> u64 {
    let schedule = plan(&PlanSpec {
        nodes: 5,
        duration_ms: DURATION_MS,
        faults: vec![FaultKind::Partition],
        timing: Timing::fast(),
        mode,
        slack_ms: SLACK_MS,
        seed: SEED,
    });
    assert!(
        schedule
            .iter()
            .any(|p| matches!(p.step, Step::Partition(_))),
        "seed {SEED} plans no partition in {mode} mode"
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let (report, page) = partition_run(mode, dir.path());
    assert_eq!(
        report["steps"].as_array().map(Vec::len),
        Some(schedule.len())
    );
    check_structure(&page, &report, 5);
    let partitions = schedule
        .iter()
        .filter(|p| matches!(p.step, Step::Partition(_)))
        .count();
    assert_eq!(page.matches(r#"<rect class="part""#).count(), partitions);
    let file = dir.path().join("run.html");
    let png = open_in_browser(&file);
    keep_example(&format!("{mode}-partition"), &file, png.as_deref());
    report["two_coordinators_ms"].as_u64().unwrap_or(0)
}

#[test]
fn a_classic_partition_run_shows_its_two_coordinators() {
    // Whichever side a partition cuts off, classic mode elects one leader per side.
    assert!(partition_run_is_drawn(Mode::Classic) > 0);
}

#[test]
fn a_quorum_partition_run_shows_none() {
    assert_eq!(partition_run_is_drawn(Mode::Quorum), 0);
}

/// `bully local --html`: three nodes, kill the coordinator, wait for node 2, quit.
#[test]
fn a_local_session_is_drawn_on_quit() {
    let _turn = turn();
    let dir = tempfile::tempdir().expect("temp dir");
    let html = dir.path().join("session.html");
    let mut command = bully(
        &[
            "local", "--nodes", "3", "--timing", "fast", "--mode", "classic",
        ],
        &dir.path().join("cluster"),
        &html,
    );
    command.stdin(Stdio::piped()).stdout(Stdio::piped());
    let mut session = Group(command.spawn().expect("run bully local"));
    let mut stdin = session.0.stdin.take().expect("stdin");
    let (lines_tx, lines) = mpsc::channel::<String>();
    let stdout = session.0.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines_tx.send(line).is_err() {
                return;
            }
        }
    });
    let wait_for = |what: &str| {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match lines.recv_timeout(left) {
                Ok(line) if line.contains(what) => return,
                Ok(_) => {}
                Err(_) => panic!("bully local never printed `{what}`"),
            }
        }
    };
    wait_for("coordinator 3 (3 of 3 reachable agree)");
    writeln!(stdin, "kill 3").expect("type");
    wait_for("coordinator 2 (2 of 2 reachable agree, 1 down)");
    writeln!(stdin, "quit").expect("type");
    wait_for("wrote the session's timeline");
    let page = std::fs::read_to_string(&html).expect("the session's page");
    // The kill is recorded: node 3's term of office ends there, before node 2's begins.
    let report = serde_json::json!({
        "steps": [{}],
        "faults": {"kill": 1},
        "two_coordinators_ms": 0,
    });
    check_structure(&page, &report, 3);
    assert!(page.contains("bully local: classic mode, 3 nodes"));
    drop(session);
    open_in_browser(&html);
}

/// A page whose script fails is caught: the console check is not silent by accident.
#[test]
fn a_console_error_is_caught() {
    let Some(browser) = Browser::find() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let page = dir.path().join("broken.html");
    std::fs::write(
        &page,
        "<!DOCTYPE html><p>x</p><script>notDefined();</script>",
    )
    .unwrap();
    let run = browser.dump_dom(&page);
    assert!(
        run.console.iter().any(|l| l.contains("notDefined")),
        "{:#?}",
        run.console
    );
}

/// A 10-minute, 9-node history with a real chaos run's density stays under 2 MB and
/// opens cleanly.
#[test]
fn a_ten_minute_nine_node_run_stays_small() {
    let nodes = 9;
    let report = synthetic::report(nodes, 600_000);
    let page = picture::html(&report);
    let steps: Vec<Value> = report.steps.iter().map(|_| Value::Null).collect();
    let json = serde_json::json!({
        "steps": steps,
        "faults": report.faults,
        "two_coordinators_ms": report.offices.two_coordinators_ms,
        "failover": report.failover,
        "reclaim": report.reclaim,
    });
    check_structure(&page, &json, nodes);
    let bands = page.matches("<rect class=\"b-").count();
    eprintln!(
        "10-minute 9-node page: {} bytes, {} steps, {bands} bands",
        page.len(),
        report.steps.len()
    );
    // The seeded plan spaces its faults by the I5 bound (148 steps with default timing
    // since the start-up wait joined the bound; 235 before).
    assert!(report.steps.len() > 120, "a real schedule's density");
    assert!(page.len() < 2_000_000, "{} bytes", page.len());
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("long.html");
    std::fs::write(&file, &page).expect("write the page");
    let png = open_in_browser(&file);
    keep_example("ten-minutes-nine-nodes", &file, png.as_deref());
}
