//! The defaults, as the node gets them: minimal configs (the required keys, and every
//! optional table switched on with only its own required keys) read by the crate's
//! config loader, `bully::config::parse`, and written back as TOML. Whatever a key
//! left out becomes is then in the written table.

use bully::config::NodeConfig;

/// The required keys every node config has; `{dir}` is a folder with the TLS files.
const REQUIRED: &str = r#"
id = 1
listen = "127.0.0.1:7001"
data_dir = "{dir}/node"
[tls]
ca = "{dir}/ca.pem"
cert = "{dir}/node-1.pem"
key = "{dir}/node-1.key"
"#;

/// The optional tables with only their required keys. `[postgres]` stands alone
/// because a node with it may not have a `[health]` (src/config/validate.rs).
const OPTIONAL_TABLES: [&str; 2] = [
    r#"
[[peers]]
id = 2
addr = "127.0.0.1:7002"
[health]
command = "true"
[http]
listen = "127.0.0.1:8008"
"#,
    r#"
[postgres]
data_dir = "{dir}/pg"
listen = "127.0.0.1:5432"
"#,
];

/// Every table and key the minimal configs hold once loaded, merged into one table.
pub fn defaults() -> toml::Table {
    let dir = tempfile::tempdir().expect("a temp folder");
    for file in ["ca.pem", "node-1.pem", "node-1.key"] {
        std::fs::write(dir.path().join(file), "").expect("a TLS file");
    }
    let mut merged = toml::Table::new();
    for tables in OPTIONAL_TABLES {
        let text = format!("{REQUIRED}{tables}").replace("{dir}", &dir.path().to_string_lossy());
        let origin = dir.path().join("node1.toml");
        let config = bully::config::parse(&text, &origin)
            .unwrap_or_else(|e| panic!("the minimal config does not load: {e}\n{text}"));
        let written = bully::config::render(&config).expect("the config renders");
        let mut table: toml::Table = written.parse().expect("rendered TOML parses");
        for (name, value) in tables_left_out(&config) {
            table.entry(name).or_insert(value);
        }
        merged.extend(table);
    }
    merged
}

/// Tables `config::render` leaves out while they hold their defaults (their fields'
/// `skip_serializing_if` in src/config/types.rs), written on their own. Another such
/// table shows up as a key without a default, which fails the page, naming it.
fn tables_left_out(config: &NodeConfig) -> [(String, toml::Value); 2] {
    let value = |v: Result<toml::Value, _>| v.expect("a table serializes");
    [
        ("fence".into(), value(toml::Value::try_from(&config.fence))),
        (
            "watchdog".into(),
            value(toml::Value::try_from(&config.watchdog)),
        ),
    ]
}

/// The value at `path` (`postgres.superuser.user`); the first entry of an array of
/// tables stands for every entry.
pub fn lookup<'a>(table: &'a toml::Table, path: &[&str]) -> Option<&'a toml::Value> {
    let (first, rest) = path.split_first()?;
    let mut value = table.get(*first)?;
    for part in rest {
        if let toml::Value::Array(entries) = value {
            value = entries.first()?;
        }
        value = value.as_table()?.get(*part)?;
    }
    Some(value)
}
