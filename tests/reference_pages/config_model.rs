//! What a node's config file may say, walked from `NodeConfig` through the types its
//! fields reach: one [`Section`] per TOML table, one [`Key`] per value, each with the
//! doc comment of its field. Serde's attributes decide names (`rename`,
//! `rename_all`), what may be left out (`default`, `Option`) and what the file cannot
//! set (`skip`); `flatten` merges a struct's keys into the table that holds it.

use crate::config_source::{doc_of, serde_of, spelled, Definition, Serde, Sources};
use syn::{Fields, GenericArgument, PathArguments, Type};

/// The type every walk starts at: the whole file.
pub const ROOT: &str = "NodeConfig";

/// Types a config value may have that are no config type of their own, in plain words.
const PLAIN_TYPES: &[(&str, &str)] = &[
    ("u8", "integer"),
    ("u16", "integer"),
    ("u32", "integer"),
    ("u64", "integer"),
    ("i64", "integer"),
    ("NodeId", "integer"),
    ("bool", "boolean"),
    ("String", "string"),
    ("PathBuf", "path"),
    ("SocketAddr", "`IP:port`"),
    ("PeerAddr", "`IP:port` or `host:port`"),
];

/// How a `deserialize_with` function reads its value, in plain words.
const READERS: &[(&str, &str)] = &[
    (
        "duration::millis",
        "milliseconds, or a duration string such as `\"5s\"`",
    ),
    (
        "bytes::deserialize",
        "byte size: a number of bytes, or a string such as `\"16MB\"`",
    ),
    (
        "bytes::deserialize_or_unlimited",
        "byte size: a number of bytes, or a string such as `\"8GB\"`; -1: no limit",
    ),
];

/// One TOML table of the file.
pub struct Section {
    /// The key path of the table (`postgres.superuser`); empty for the top level.
    pub path: Vec<String>,
    /// How the file opens it: `[hooks]`, `[[peers]]`; empty for the top level.
    pub header: String,
    /// The doc comment of the field that holds it, then its type's.
    pub doc: Vec<String>,
    pub presence: SectionPresence,
    /// The holding field has a default: a table left out is that default, which may
    /// give keys that are required once the table is written.
    pub defaulted: bool,
    /// Whether the table refuses keys it does not know (`deny_unknown_fields`).
    pub denies_unknown: bool,
    pub keys: Vec<Key>,
}

/// Whether a file must have a table.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum SectionPresence {
    /// The top level.
    Root,
    Required,
    /// Left out: its defaults, or off (an `Option`).
    Optional,
    /// An array of tables, none by default.
    Array,
}

/// One value in a table.
pub struct Key {
    /// The key path (`hooks.timeout_ms`).
    pub path: String,
    pub name: String,
    /// What the value is, in plain words.
    pub kind: String,
    /// The values an enum takes, as the file spells them, with each variant's doc.
    pub values: Vec<(String, String)>,
    /// Neither a default nor an `Option`: the table must give it.
    pub required: bool,
    /// An `Option`: left out, it is unset.
    pub is_option: bool,
    /// The field's doc comment.
    pub doc: String,
    /// The field's `skip_serializing_if`, which says what a value left out when the
    /// config is written back (`Option::is_none`, `std::ops::Not::not`) was.
    pub skip_serializing_if: Option<String>,
    /// Whether the value is a number of milliseconds, or a byte size (for showing
    /// defaults).
    pub unit: Unit,
}

/// The unit a default is shown in as well as its number.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    None,
    Millis,
    Bytes,
}

/// The walk's result: every table, and every field or variant without a doc comment.
pub struct Model {
    pub sections: Vec<Section>,
    pub undocumented: Vec<String>,
}

/// Walks the config from [`ROOT`].
pub fn model(sources: &Sources) -> Model {
    let mut walk = Walk {
        sources,
        model: Model {
            sections: Vec::new(),
            undocumented: Vec::new(),
        },
    };
    let root = Section {
        path: Vec::new(),
        header: String::new(),
        doc: Vec::new(),
        presence: SectionPresence::Root,
        defaulted: false,
        denies_unknown: false,
        keys: Vec::new(),
    };
    walk.table(ROOT, root);
    // A type reached twice (`Credentials`) is named once.
    walk.model.undocumented.sort();
    walk.model.undocumented.dedup();
    walk.model
}

struct Walk<'a> {
    sources: &'a Sources,
    model: Model,
}

/// What a field's type is, once `Option` is unwrapped.
enum Shape {
    Plain(String),
    Enum(String),
    Table(String),
    Tables(String),
    Map(Box<Shape>),
    /// A list of plain values (`initdb_options = ["--locale=C"]`).
    List(Box<Shape>),
}

impl Walk<'_> {
    /// The doc comment in `attrs`; an empty one records `what` as undocumented.
    fn documented(&mut self, attrs: &[syn::Attribute], what: String) -> String {
        let doc = doc_of(attrs);
        if doc.is_empty() {
            self.model.undocumented.push(what);
        }
        doc
    }

    /// Adds the section for struct `name` (and, after it, the tables its fields open).
    fn table(&mut self, name: &str, mut section: Section) {
        let Some(Definition::Struct(item, _)) = self.sources.get(name) else {
            panic!(
                "{name} is not a struct in {:?}",
                crate::config_source::CONFIG_SOURCES
            )
        };
        let container = serde_of(&item.attrs);
        self.refuse_unknown(&container, name);
        section.doc.push(doc_of(&item.attrs));
        section.doc.retain(|paragraph| !paragraph.is_empty());
        section.denies_unknown = container.deny_unknown_fields;
        let mut children = Vec::new();
        self.fields(name, &mut section, &mut children);
        self.model.sections.push(section);
        for (child, type_name) in children {
            self.table(&type_name, child);
        }
    }

    /// The keys of struct `name` into `section`; tables its fields open into
    /// `children`, walked once the section is done.
    fn fields(&mut self, name: &str, section: &mut Section, children: &mut Vec<(Section, String)>) {
        let Some(Definition::Struct(item, file)) = self.sources.get(name) else {
            panic!(
                "{name} is not a struct in {:?}",
                crate::config_source::CONFIG_SOURCES
            )
        };
        let container = serde_of(&item.attrs);
        let Fields::Named(fields) = &item.fields else {
            panic!("{name} ({file}) has no named fields; a config table needs them");
        };
        for field in &fields.named {
            let serde = serde_of(&field.attrs);
            let rust_name = field.ident.as_ref().expect("named").to_string();
            self.refuse_unknown(&serde, &format!("{name}.{rust_name}"));
            if serde.skip {
                continue;
            }
            let doc = self.documented(&field.attrs, format!("{name}.{rust_name} ({file})"));
            let key = spelled(serde.rename.clone(), &rust_name, &container);
            let (optional, ty) = match unwrap_generic(&field.ty, "Option") {
                Some(inner) => (true, inner),
                None => (false, &field.ty),
            };
            let has_default = container.default.is_some() || serde.default.is_some();
            let where_ = format!("{name}.{rust_name} ({file})");
            if serde.flatten {
                let Shape::Table(inner) = self.shape(ty, &where_) else {
                    panic!("{where_}: only a struct can be flattened");
                };
                self.fields(&inner, section, children);
                continue;
            }
            let mut path = section.path.clone();
            path.push(key.clone());
            match self.shape(ty, &where_) {
                shape @ (Shape::Table(_) | Shape::Tables(_)) => {
                    let (array, type_name) = match shape {
                        Shape::Tables(type_name) => (true, type_name),
                        Shape::Table(type_name) => (false, type_name),
                        _ => unreachable!(),
                    };
                    let dotted = path.join(".");
                    let (header, presence) = if array {
                        (format!("[[{dotted}]]"), SectionPresence::Array)
                    } else if optional || has_default {
                        (format!("[{dotted}]"), SectionPresence::Optional)
                    } else {
                        (format!("[{dotted}]"), SectionPresence::Required)
                    };
                    let child_defaulted = has_default && !optional && !array;
                    let child = Section {
                        path,
                        header,
                        doc: vec![doc],
                        presence,
                        defaulted: child_defaulted,
                        denies_unknown: false,
                        keys: Vec::new(),
                    };
                    children.push((child, type_name));
                }
                shape => {
                    let (kind, values, unit) = self.describe(&shape, &serde, &key, &where_);
                    section.keys.push(Key {
                        path: path.join("."),
                        name: key,
                        kind,
                        values,
                        required: !has_default && !optional,
                        is_option: optional,
                        doc,
                        skip_serializing_if: serde.skip_serializing_if.clone(),
                        unit,
                    });
                }
            }
        }
    }

    /// The plain words for a value, the values of an enum, and its unit.
    fn describe(
        &mut self,
        shape: &Shape,
        serde: &Serde,
        key: &str,
        where_: &str,
    ) -> (String, Vec<(String, String)>, Unit) {
        if let Some(reader) = &serde.deserialize_with {
            let Some((_, words)) = READERS.iter().find(|(name, _)| reader.ends_with(name)) else {
                panic!("{where_}: say in READERS how `{reader}` reads a value");
            };
            let unit = if reader.ends_with("millis") {
                Unit::Millis
            } else {
                Unit::Bytes
            };
            return (words.to_string(), Vec::new(), unit);
        }
        match shape {
            Shape::Plain(words) if key.ends_with("_ms") && words == "integer" => (
                "integer, milliseconds".to_string(),
                Vec::new(),
                Unit::Millis,
            ),
            Shape::Plain(words) => (words.clone(), Vec::new(), Unit::None),
            Shape::Enum(name) => {
                let values = self.variants(name);
                let names: Vec<String> = values.iter().map(|(v, _)| format!("`\"{v}\"`")).collect();
                (format!("one of {}", names.join(", ")), values, Unit::None)
            }
            Shape::Map(value) => {
                let (words, _, _) = self.describe(value, &Serde::default(), "", where_);
                (
                    format!("table of names to {words}s"),
                    Vec::new(),
                    Unit::None,
                )
            }
            Shape::List(value) => {
                let (words, _, _) = self.describe(value, &Serde::default(), "", where_);
                (format!("list of {words}s"), Vec::new(), Unit::None)
            }
            Shape::Table(_) | Shape::Tables(_) => unreachable!("tables are sections"),
        }
    }

    /// The values enum `name` accepts, as spelled in a file, each with its doc.
    fn variants(&mut self, name: &str) -> Vec<(String, String)> {
        let Some(Definition::Enum(item, file)) = self.sources.get(name) else {
            unreachable!("shape() found the enum")
        };
        let container = serde_of(&item.attrs);
        self.refuse_unknown(&container, name);
        let mut values = Vec::new();
        for variant in &item.variants {
            let rust_name = variant.ident.to_string();
            let serde = serde_of(&variant.attrs);
            self.refuse_unknown(&serde, &format!("{name}::{rust_name}"));
            if serde.skip {
                continue;
            }
            if !matches!(variant.fields, Fields::Unit) {
                panic!(
                    "{name}::{rust_name} ({file}) carries data; the page lists unit variants only"
                );
            }
            let doc = self.documented(&variant.attrs, format!("{name}::{rust_name} ({file})"));
            values.push((spelled(serde.rename, &rust_name, &container), doc));
        }
        values
    }

    fn shape(&self, ty: &Type, where_: &str) -> Shape {
        if let Some(inner) = unwrap_generic(ty, "Vec") {
            return match self.shape(inner, where_) {
                Shape::Table(name) => Shape::Tables(name),
                Shape::Plain(words) => Shape::List(Box::new(Shape::Plain(words))),
                _ => panic!("{where_}: a list of these; teach the page to show one"),
            };
        }
        for map in ["BTreeMap", "HashMap"] {
            if let Some(args) = generic_args(ty, map) {
                let [key, value] = args.as_slice() else {
                    panic!("{where_}: a map takes two types");
                };
                assert!(
                    matches!(self.shape(key, where_), Shape::Plain(ref w) if w == "string"),
                    "{where_}: map keys must be strings in TOML"
                );
                return Shape::Map(Box::new(self.shape(value, where_)));
            }
        }
        let name = last_segment(ty).unwrap_or_else(|| panic!("{where_}: an unusual type"));
        if let Some((_, words)) = PLAIN_TYPES.iter().find(|(plain, _)| *plain == name) {
            return Shape::Plain(words.to_string());
        }
        match self.sources.get(&name) {
            Some(Definition::Struct(..)) => Shape::Table(name),
            Some(Definition::Enum(..)) => Shape::Enum(name),
            None => panic!(
                "{where_}: type `{name}` is neither in PLAIN_TYPES (config_model.rs) nor \
                 defined in CONFIG_SOURCES (config_source.rs); add it to one of them"
            ),
        }
    }

    fn refuse_unknown(&self, serde: &Serde, what: &str) {
        assert!(
            serde.unknown.is_empty(),
            "{what}: serde attributes {:?} are not known to the reference page \
             (tests/reference_pages/config_source.rs); teach it what they mean",
            serde.unknown
        );
    }
}

/// The last path segment's name (`PathBuf` of `std::path::PathBuf`).
fn last_segment(ty: &Type) -> Option<String> {
    match ty {
        Type::Path(path) => path.path.segments.last().map(|s| s.ident.to_string()),
        _ => None,
    }
}

/// The type arguments of `ty` when its last segment is `wrapper`.
fn generic_args<'a>(ty: &'a Type, wrapper: &str) -> Option<Vec<&'a Type>> {
    let Type::Path(path) = ty else { return None };
    let segment = path.path.segments.last()?;
    if segment.ident != wrapper {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &segment.arguments else {
        return None;
    };
    Some(
        args.args
            .iter()
            .filter_map(|a| match a {
                GenericArgument::Type(t) => Some(t),
                _ => None,
            })
            .collect(),
    )
}

/// `T` of `wrapper<T>`.
fn unwrap_generic<'a>(ty: &'a Type, wrapper: &str) -> Option<&'a Type> {
    generic_args(ty, wrapper).and_then(|args| args.first().copied())
}
