//! The manual (`docs/`, an mdBook) holds together: every page `docs/SUMMARY.md` names
//! exists and every Markdown file in `docs/` is a page of it; every `{{#include}}`
//! finds its file and anchor; no link between pages, or from README.md into the manual,
//! is broken (file and `#anchor`, with mdBook's heading ids); no page links out of the
//! book (such links break in the built HTML); and every cited section (`docs/` page and anchor) that a code
//! comment cites names a heading that exists. `mdbook build docs` in `.ci/run` renders it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `a/b/../c` as `a/c`, without touching the disk.
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Every Markdown file under `dir`, as paths relative to it.
fn markdown_files(dir: &Path, under: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir.join(under))
        .unwrap_or_else(|e| panic!("{}: {e}", dir.join(under).display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        let name = under.join(path.file_name().expect("a file name"));
        if path.is_dir() {
            markdown_files(dir, &name, out);
        } else if name.extension().is_some_and(|e| e == "md") {
            out.push(name);
        }
    }
}

/// The text of `page` with its fenced code blocks blanked out (links and headings in
/// code are not links and headings), line numbers kept.
fn prose_lines(text: &str) -> Vec<String> {
    let mut fenced = false;
    text.lines()
        .map(|line| {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                return String::new();
            }
            if fenced {
                String::new()
            } else {
                without_code_spans(line)
            }
        })
        .collect()
}

/// A line with its inline code spans removed.
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for ch in line.chars() {
        if ch == '`' {
            in_code = !in_code;
        } else if !in_code {
            out.push(ch);
        }
    }
    out
}

/// mdBook's heading id: alphanumerics, `_` and `-` kept (lowercased), whitespace made
/// `-`, everything else dropped; a repeated id gets `-1`, `-2`, ...
fn heading_ids(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut ids = BTreeSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let Some(title) = heading_text(line).filter(|_| !fenced) else {
            continue;
        };
        let id: String = link_texts(&title)
            .chars()
            .filter_map(|ch| {
                if ch.is_alphanumeric() || ch == '_' || ch == '-' {
                    Some(ch.to_ascii_lowercase())
                } else if ch.is_whitespace() {
                    Some('-')
                } else {
                    None
                }
            })
            .collect();
        let count = seen.entry(id.clone()).or_insert(0);
        ids.insert(if *count == 0 {
            id
        } else {
            format!("{id}-{count}")
        });
        *count += 1;
    }
    ids
}

/// The text of an ATX heading line (`## Title`), if it is one.
fn heading_text(line: &str) -> Option<String> {
    let hashes = line.chars().take_while(|&c| c == '#').count();
    let rest = line.get(hashes..)?;
    ((1..=6).contains(&hashes) && rest.starts_with(' ')).then(|| rest.trim().to_string())
}

/// `[text](target)` replaced by `text`, as a rendered heading shows it.
fn link_texts(title: &str) -> String {
    links(title)
        .into_iter()
        .fold(title.to_string(), |acc, (text, target)| {
            acc.replace(&format!("[{text}]({target})"), &text)
        })
}

/// Every `[text](target)` of a line.
fn links(line: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(open) = rest.find("](") {
        let before = &rest[..open];
        let after = &rest[open + 2..];
        let Some(close) = after.find(')') else { break };
        let text = before.rfind('[').map_or("", |start| &before[start + 1..]);
        out.push((text.to_string(), after[..close].to_string()));
        rest = &after[close + 1..];
    }
    out
}

/// `{{#include FILE:ANCHOR}}` directives of a page: (file, anchor).
fn includes(text: &str) -> Vec<(String, Option<String>)> {
    text.lines()
        .filter_map(|line| {
            let inner = line
                .trim()
                .strip_prefix("{{#include ")?
                .strip_suffix("}}")?;
            Some(match inner.split_once(':') {
                Some((file, anchor)) => (file.to_string(), Some(anchor.to_string())),
                None => (inner.to_string(), None),
            })
        })
        .collect()
}

/// The part of `text` between `ANCHOR: name` and `ANCHOR_END: name`, as mdBook includes it.
fn anchored(text: &str, name: &str) -> Option<String> {
    let start = format!("ANCHOR: {name} ");
    let end = format!("ANCHOR_END: {name} ");
    let mut lines = text.lines();
    lines.find(|l| l.contains(&start))?;
    let body: Vec<&str> = lines.by_ref().take_while(|l| !l.contains(&end)).collect();
    Some(body.join("\n"))
}

/// A page's text as mdBook renders it: its includes expanded (one level, as used here).
fn expanded(page: &Path) -> Result<String, String> {
    let text = read(page);
    let dir = page.parent().expect("a page has a folder");
    let mut out = text.clone();
    for (file, anchor) in includes(&text) {
        let source = dir.join(&file);
        if !source.exists() {
            return Err(format!("includes {file}, which does not exist"));
        }
        let whole = read(&source);
        let part = match &anchor {
            Some(name) => anchored(&whole, name)
                .ok_or_else(|| format!("includes {file}:{name}, but {file} has no such anchor"))?,
            None => whole,
        };
        let directive = match &anchor {
            Some(name) => format!("{{{{#include {file}:{name}}}}}"),
            None => format!("{{{{#include {file}}}}}"),
        };
        out = out.replace(&directive, &part);
    }
    Ok(out)
}

/// The pages SUMMARY.md lists, in order.
fn summary_pages(docs: &Path) -> Vec<PathBuf> {
    let summary = read(&docs.join("SUMMARY.md"));
    prose_lines(&summary)
        .iter()
        .flat_map(|line| links(line))
        .map(|(_, target)| PathBuf::from(target))
        .collect()
}

#[test]
fn every_page_of_the_summary_exists_and_every_page_is_in_it() {
    let docs = root().join("docs");
    let listed = summary_pages(&docs);
    assert!(listed.len() >= 10, "SUMMARY.md lists only {listed:?}");
    let missing: Vec<_> = listed.iter().filter(|p| !docs.join(p).exists()).collect();
    assert!(
        missing.is_empty(),
        "SUMMARY.md lists pages that do not exist: {missing:?}"
    );
    let mut files = Vec::new();
    markdown_files(&docs, Path::new(""), &mut files);
    let listed: BTreeSet<_> = listed.into_iter().collect();
    let orphans: Vec<_> = files
        .iter()
        .filter(|f| f.as_path() != Path::new("SUMMARY.md") && !listed.contains(*f))
        .collect();
    assert!(
        orphans.is_empty(),
        "pages in docs/ that SUMMARY.md does not list (the book would not show them): {orphans:?}"
    );
}

/// Checks every link of `page` (inside the repository at `root`): broken ones are
/// added to `broken` as `page:line: why`.
fn check_links(page: &Path, book: Option<&Path>, anchors: &Anchors, broken: &mut Vec<String>) {
    let text = read(page);
    let dir = page.parent().expect("a page has a folder");
    let shown = page
        .strip_prefix(root())
        .unwrap_or(page)
        .display()
        .to_string();
    for (n, line) in prose_lines(&text).iter().enumerate() {
        for (_, target) in links(line) {
            let at = format!("{shown}:{}", n + 1);
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = match target.split_once('#') {
                Some((file, anchor)) => (file, Some(anchor)),
                None => (target.as_str(), None),
            };
            let destination = if file.is_empty() {
                page.to_path_buf()
            } else {
                normalise(&dir.join(file))
            };
            if let Some(book) = book {
                if !destination.starts_with(book) {
                    broken.push(format!(
                        "{at}: {target} leaves the book (broken in the built HTML); \
                         write the path as code instead"
                    ));
                    continue;
                }
            }
            if !destination.exists() {
                broken.push(format!("{at}: {target}: no such file"));
                continue;
            }
            if let Some(anchor) = anchor {
                match anchors.of(&destination) {
                    Ok(ids) if ids.contains(anchor) => {}
                    Ok(_) => broken.push(format!("{at}: {target}: no heading with that id")),
                    Err(e) => broken.push(format!("{at}: {target}: {e}")),
                }
            }
        }
    }
}

/// The heading ids of each Markdown file, includes expanded.
struct Anchors;

impl Anchors {
    fn of(&self, file: &Path) -> Result<BTreeSet<String>, String> {
        if file.extension().map_or(true, |e| e != "md") {
            return Err("an anchor into a file that is not Markdown".into());
        }
        expanded(file).map(|text| heading_ids(&text))
    }
}

#[test]
fn no_link_in_the_manual_or_the_readme_is_broken() {
    let docs = root().join("docs");
    let mut files = Vec::new();
    markdown_files(&docs, Path::new(""), &mut files);
    let mut broken = Vec::new();
    for file in &files {
        let page = docs.join(file);
        if let Err(e) = expanded(&page) {
            broken.push(format!("docs/{}: {e}", file.display()));
        }
        check_links(&page, Some(&docs), &Anchors, &mut broken);
    }
    check_links(&root().join("README.md"), None, &Anchors, &mut broken);
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// Every cited `docs/` page and anchor in the files under `dir` (code and tests cite sections so).
fn cited_sections(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
    for entry in std::fs::read_dir(dir).expect("a source folder") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            cited_sections(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = read(&path);
            let mut rest = text.as_str();
            while let Some(at) = rest.find("docs/") {
                let tail = &rest[at..];
                let end = tail
                    .find(|c: char| !(c.is_alphanumeric() || "/._#-".contains(c)))
                    .unwrap_or(tail.len());
                let cited = tail[..end].trim_end_matches('.');
                if cited.contains(".md") {
                    out.push((path.clone(), cited.to_string()));
                }
                rest = &tail[end.max(1)..];
            }
        }
    }
}

#[test]
fn every_section_the_code_cites_exists() {
    let mut cited = Vec::new();
    for dir in ["src", "tests", "benches", "examples"] {
        cited_sections(&root().join(dir), &mut cited);
    }
    assert!(cited.len() > 20, "found only {} citations", cited.len());
    let mut broken = Vec::new();
    for (file, citation) in &cited {
        let (page, anchor) = match citation.split_once('#') {
            Some((page, anchor)) => (page, Some(anchor)),
            None => (citation.as_str(), None),
        };
        let target = root().join(page);
        let shown = file.strip_prefix(root()).unwrap_or(file).display();
        if !target.exists() {
            broken.push(format!("{shown}: {citation}: no such page"));
        } else if let Some(anchor) = anchor {
            match Anchors.of(&target) {
                Ok(ids) if ids.contains(anchor) => {}
                _ => broken.push(format!("{shown}: {citation}: no such heading")),
            }
        }
    }
    assert!(
        broken.is_empty(),
        "citations of missing sections:\n{}",
        broken.join("\n")
    );
}

#[test]
fn the_readme_stays_short() {
    let lines = read(&root().join("README.md")).lines().count();
    assert!(
        lines < 250,
        "README.md has {lines} lines; the manual in docs/ is where details go"
    );
}

#[test]
fn heading_ids_follow_mdbook() {
    let ids = heading_ids(
        "# Fencing outside the node: `bully run`\n## Timing (`[timing]`, milliseconds)\n\
         ```\n# not a heading\n```\n## Switchover\n## Switchover\n",
    );
    let expected: BTreeSet<String> = [
        "fencing-outside-the-node-bully-run",
        "timing-timing-milliseconds",
        "switchover",
        "switchover-1",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(ids, expected);
}
