//! `docs/reference/configuration.md`: every key of a node's config file, its type in
//! plain words, whether it is required or its default, and its field's doc comment —
//! the one place each description is written.

use crate::config_defaults::{defaults, lookup};
use crate::config_model::{model, Key, Section, SectionPresence, Unit};
use crate::config_source::Sources;
use crate::fresh::generated_notice;
use crate::markdown::{cell, prose, table};
use std::time::Duration;

/// The page, from the repository root.
pub const PAGE: &str = "docs/reference/configuration.md";

/// What the page says of a key with no default.
const REQUIRED: &str = "required";

/// The page's text. Fails when a field or variant has no doc comment, naming each.
pub fn page() -> String {
    let model = model(&Sources::read());
    assert!(
        model.undocumented.is_empty(),
        "config fields and enum values without a doc comment (its doc comment is the \
         key's description in {PAGE}; add one):\n  {}",
        model.undocumented.join("\n  ")
    );
    let defaults = defaults();
    let mut page = format!(
        "{}\n\n# Configuration reference\n\n\
         *Generated from the config types in `src/` (`NodeConfig` and the types its fields \
         reach); each description is the doc comment of its field.*\n\n\
         A node reads one TOML file, `bully node --config FILE`. The tables below are in \
         the order the file's types declare them; a key is required only where it says \
         so, and a table's keys are required only when the table is there.\n",
        generated_notice("the config types in src/ (NodeConfig)")
    );
    for section in &model.sections {
        page.push('\n');
        page.push_str(&render_section(section, &defaults));
    }
    page
}

fn render_section(section: &Section, defaults: &toml::Table) -> String {
    let title = match section.presence {
        SectionPresence::Root => "Top-level keys".to_string(),
        _ => format!("`{}`", section.header),
    };
    let mut out = format!("## {title}\n\n");
    for paragraph in &section.doc {
        out.push_str(&format!("{}\n\n", prose(paragraph)));
    }
    let presence = match section.presence {
        SectionPresence::Root => "",
        SectionPresence::Required => "Required table. ",
        SectionPresence::Optional if section.defaulted => {
            "Optional table; left out, it takes the defaults below. "
        }
        SectionPresence::Optional => "Optional table; left out, it is off. ",
        SectionPresence::Array => "Optional; one such table per entry, none by default. ",
    };
    let unknown = if section.denies_unknown {
        "Keys not listed here are refused."
    } else {
        ""
    };
    let sentence = format!("{presence}{unknown}");
    if !sentence.trim().is_empty() {
        out.push_str(&format!("{}\n\n", sentence.trim()));
    }
    if section.keys.is_empty() {
        return out;
    }
    let rows: Vec<Vec<String>> = section
        .keys
        .iter()
        .map(|key| {
            vec![
                format!("`{}`", key.name),
                cell(&key.kind),
                cell(&default_text(key, section, defaults)),
            ]
        })
        .collect();
    out.push_str(&table(&["Key", "Type", "Default"], &rows));
    for key in &section.keys {
        out.push('\n');
        out.push_str(&render_key(key, section, defaults));
    }
    out
}

fn render_key(key: &Key, section: &Section, defaults: &toml::Table) -> String {
    let default = match default_text(key, section, defaults) {
        text if text == REQUIRED => "**Required.**".to_string(),
        text => format!("**Default:** {}.", prose(&text)),
    };
    let mut out = format!(
        "### `{}`\n\n**Type:** {}. {default}\n\n{}\n",
        key.path,
        prose(&key.kind),
        prose(&key.doc)
    );
    if !key.values.is_empty() {
        out.push('\n');
        let default_value = default_value(key, defaults).map(|v| v.to_string());
        for (value, doc) in &key.values {
            let quoted = format!("\"{value}\"");
            let mark = if default_value.as_deref() == Some(quoted.as_str()) {
                " (default)"
            } else {
                ""
            };
            out.push_str(&format!("- `{quoted}`{mark}: {}\n", prose(doc)));
        }
    }
    out
}

fn default_value<'a>(key: &Key, defaults: &'a toml::Table) -> Option<&'a toml::Value> {
    let path: Vec<&str> = key.path.split('.').collect();
    lookup(defaults, &path)
}

/// "required", or the value a key left out takes, from the loaded minimal configs.
fn default_text(key: &Key, section: &Section, defaults: &toml::Table) -> String {
    let value = default_value(key, defaults);
    if key.required {
        return match value {
            Some(value) if section.defaulted => format!(
                "required in the table; {} when the table is left out",
                shown(value, key.unit)
            ),
            _ => REQUIRED.to_string(),
        };
    }
    match value {
        Some(value) => shown(value, key.unit),
        None if key.is_option => "unset".to_string(),
        // Written back only when true (`skip_serializing_if = "std::ops::Not::not"`).
        None if key.skip_serializing_if.as_deref() == Some("std::ops::Not::not") => {
            "`false`".to_string()
        }
        None => panic!(
            "`{}` has a default, but the loaded minimal config does not show it; see \
             tests/reference_pages/config_defaults.rs",
            key.path
        ),
    }
}

/// A default as a reader wants it: TOML, with milliseconds and bytes also in words.
fn shown(value: &toml::Value, unit: Unit) -> String {
    match (value, unit) {
        (toml::Value::Integer(n), Unit::Millis) if *n > 0 => {
            let words = humantime::format_duration(Duration::from_millis(*n as u64));
            format!("`{n}` ({words})")
        }
        (toml::Value::Integer(n), Unit::Bytes) => format!("`{n}` ({})", byte_size(*n)),
        (toml::Value::Table(t), _) if t.is_empty() => "empty".to_string(),
        (toml::Value::Table(t), _) => {
            let pairs: Vec<String> = t.iter().map(|(k, v)| format!("{k} = {v}")).collect();
            format!("`{{ {} }}`", pairs.join(", "))
        }
        (toml::Value::Array(a), _) if a.is_empty() => "none".to_string(),
        _ => format!("`{value}`"),
    }
}

/// The largest of PostgreSQL's units (src/config/bytes.rs) that divides `n`.
fn byte_size(n: i64) -> String {
    for (unit, size) in [
        ("TB", 1i64 << 40),
        ("GB", 1 << 30),
        ("MB", 1 << 20),
        ("kB", 1 << 10),
    ] {
        if n >= size && n % size == 0 {
            return format!("{}{unit}", n / size);
        }
    }
    format!("{n}B")
}
