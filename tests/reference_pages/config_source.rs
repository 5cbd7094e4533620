//! The config types as they are written in src/: structs and enums found by name in
//! the files that define them, with their serde attributes and doc comments read by syn.

use std::collections::BTreeMap;
use syn::{Attribute, Expr, Item, Lit, Meta};

/// The files the config types live in. A type a config field names that none of these
/// defines (and that is no plain value, see `config_model`) fails the test, naming it.
pub const CONFIG_SOURCES: &[&str] = &[
    "src/config/types.rs",
    "src/config/watchdog.rs",
    "src/config/postgres.rs",
    "src/certs/files.rs",
    "src/protocol/timing.rs",
    "src/protocol/mode.rs",
    "src/postgres_rules.rs",
    "src/postgres_rules/tags.rs",
    "src/protocol/settings.rs",
];

/// One type definition and the file it is in.
pub enum Definition {
    Struct(syn::ItemStruct, &'static str),
    Enum(syn::ItemEnum, &'static str),
}

/// Every struct and enum of [`CONFIG_SOURCES`], by name.
pub struct Sources {
    types: BTreeMap<String, Definition>,
}

impl Sources {
    /// Reads and parses [`CONFIG_SOURCES`]; a name defined twice fails (it would be
    /// ambiguous which one a field means).
    pub fn read() -> Sources {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut types = BTreeMap::new();
        for &file in CONFIG_SOURCES {
            let text = std::fs::read_to_string(root.join(file))
                .unwrap_or_else(|e| panic!("cannot read {file}: {e}"));
            let parsed = syn::parse_file(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
            for item in parsed.items {
                let (name, definition) = match item {
                    Item::Struct(s) => (s.ident.to_string(), Definition::Struct(s, file)),
                    Item::Enum(e) => (e.ident.to_string(), Definition::Enum(e, file)),
                    _ => continue,
                };
                if types.insert(name.clone(), definition).is_some() {
                    panic!("{name} is defined twice in {CONFIG_SOURCES:?}");
                }
            }
        }
        Sources { types }
    }

    /// The definition named `name`, if one of the sources has it.
    pub fn get(&self, name: &str) -> Option<&Definition> {
        self.types.get(name)
    }
}

/// A doc comment as text: its lines joined, blank lines kept as paragraph breaks.
pub fn doc_of(attrs: &[Attribute]) -> String {
    let lines: Vec<String> = attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .filter_map(|a| match &a.meta {
            Meta::NameValue(nv) => match &nv.value {
                Expr::Lit(lit) => match &lit.lit {
                    Lit::Str(s) => Some(s.value().trim().to_string()),
                    _ => None,
                },
                _ => None,
            },
            _ => None,
        })
        .collect();
    lines
        .split(|line| line.is_empty())
        .filter(|paragraph| !paragraph.is_empty())
        .map(|paragraph| paragraph.join(" "))
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// The serde attributes of a container, field or variant that change what a config
/// file may say.
#[derive(Debug, Default)]
pub struct Serde {
    pub rename_all: Option<String>,
    pub rename: Option<String>,
    /// `default` alone (`Some(None)`) or `default = "path"` (`Some(Some(path))`).
    pub default: Option<Option<String>>,
    pub deny_unknown_fields: bool,
    /// `skip` or `skip_deserializing`: the file cannot set it.
    pub skip: bool,
    pub flatten: bool,
    pub deserialize_with: Option<String>,
    pub skip_serializing_if: Option<String>,
    /// Attributes this reader does not know: a page that ignored them could lie.
    pub unknown: Vec<String>,
}

/// Reads the `#[serde(...)]` attributes of `attrs`.
pub fn serde_of(attrs: &[Attribute]) -> Serde {
    let mut serde = Serde::default();
    for attr in attrs.iter().filter(|a| a.path().is_ident("serde")) {
        attr.parse_nested_meta(|meta| {
            let name = meta
                .path
                .get_ident()
                .map(|i| i.to_string())
                .unwrap_or_default();
            let text = |meta: &syn::meta::ParseNestedMeta| -> syn::Result<String> {
                Ok(meta.value()?.parse::<syn::LitStr>()?.value())
            };
            match name.as_str() {
                "rename_all" => serde.rename_all = Some(text(&meta)?),
                "rename" => serde.rename = Some(text(&meta)?),
                "default" if meta.input.peek(syn::Token![=]) => {
                    serde.default = Some(Some(text(&meta)?))
                }
                "default" => serde.default = Some(None),
                "deny_unknown_fields" => serde.deny_unknown_fields = true,
                "skip" | "skip_deserializing" => serde.skip = true,
                "flatten" => serde.flatten = true,
                "deserialize_with" => serde.deserialize_with = Some(text(&meta)?),
                "skip_serializing_if" => serde.skip_serializing_if = Some(text(&meta)?),
                // Serializing only: what a file may say is unchanged.
                "serialize_with" | "skip_serializing" => {
                    text(&meta)?;
                }
                other => {
                    serde.unknown.push(other.to_string());
                    if meta.input.peek(syn::Token![=]) {
                        meta.value()?.parse::<Expr>()?;
                    } else if !meta.input.is_empty() && !meta.input.peek(syn::Token![,]) {
                        meta.parse_nested_meta(|_| Ok(()))?;
                    }
                }
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("cannot read a #[serde] attribute: {e}"));
    }
    serde
}

/// A field's or variant's name in the file: its own `rename`, else `rust_name` as the
/// container's `rename_all` spells it.
pub fn spelled(rename: Option<String>, rust_name: &str, container: &Serde) -> String {
    rename.unwrap_or_else(|| renamed(rust_name, container.rename_all.as_deref()))
}

/// `name` (a Rust field or variant name) as `rename_all = rule` spells it in a file.
pub fn renamed(name: &str, rule: Option<&str>) -> String {
    let words = words_of(name);
    match rule {
        None => name.to_string(),
        Some("lowercase") => name.to_lowercase(),
        Some("UPPERCASE") => name.to_uppercase(),
        Some("snake_case") => words.join("_"),
        Some("kebab-case") => words.join("-"),
        Some("SCREAMING_SNAKE_CASE") => words.join("_").to_uppercase(),
        Some(other) => panic!("rename_all = {other:?} is not known to the reference page"),
    }
}

/// The lowercase words of a `snake_case` or `PascalCase` name.
fn words_of(name: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for part in name.split('_').filter(|p| !p.is_empty()) {
        let mut word = String::new();
        for c in part.chars() {
            if c.is_uppercase() && !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
            word.extend(c.to_lowercase());
        }
        words.push(word);
    }
    words
}

#[test]
fn rename_rules_spell_names_as_serde_does() {
    assert_eq!(renamed("HookOk", Some("snake_case")), "hook_ok");
    assert_eq!(renamed("HookOk", Some("lowercase")), "hookok");
    assert_eq!(renamed("timeout_ms", Some("kebab-case")), "timeout-ms");
    assert_eq!(renamed("timeout_ms", None), "timeout_ms");
}
