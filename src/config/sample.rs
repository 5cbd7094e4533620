//! A valid config for unit tests: node 2 of three on loopback, with TLS files that
//! exist (their content does not matter to the config checks).

use super::NodeConfig;

/// Node 2 of `[1, 2, 3]`, listening on 127.0.0.1:7002.
pub fn node_two() -> NodeConfig {
    let dir = tempfile::tempdir().unwrap();
    for file in ["ca.pem", "node-2.pem", "node-2.key"] {
        std::fs::write(dir.path().join(file), "").unwrap();
    }
    super::parse(
        r#"
id = 2
listen = "127.0.0.1:7002"
data_dir = "/tmp/bully-2"
[tls]
ca = "ca.pem"
cert = "node-2.pem"
key = "node-2.key"
[[peers]]
id = 1
addr = "127.0.0.1:7001"
[[peers]]
id = 3
addr = "127.0.0.1:7003"
"#,
        &dir.path().join("node2.toml"),
    )
    .expect("valid config")
}
