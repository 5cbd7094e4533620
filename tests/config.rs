//! The config layer: the shipped examples load, every invalid config gives one error
//! naming the file and the field, defaults are applied, and rendered configs load back.
//!
//! TLS files are empty placeholders: the config layer only checks that they exist and
//! are readable; their contents are the transport's business.

use bully::config::{
    self, ConfigError, CoordinatorReady, ElectedHookFailure, HealthConfig, HttpConfig, NodeConfig,
};
use bully::protocol::{Mode, Preempt, Timing, MAX_NODE_ID};
use std::fs;
use std::path::{Path, PathBuf};
use tempfile::TempDir;

/// A valid config for node 1 of a 3-node cluster, with paths relative to its file.
const BASE: &str = r#"id = 1
listen = "127.0.0.1:7001"
data_dir = "data/node1"

[tls]
ca = "certs/ca.pem"
cert = "certs/node-1.pem"
key = "certs/node-1.key"

[[peers]]
id = 2
addr = "127.0.0.1:7002"

[[peers]]
id = 3
addr = "127.0.0.1:7003"
"#;

/// A temp directory holding `certs/` with placeholder files for nodes 1 to 3; configs
/// are parsed as if they were `node1.toml` in it.
struct Fixture {
    dir: TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().expect("temp dir");
        let certs = dir.path().join("certs");
        fs::create_dir(&certs).expect("certs dir");
        let mut names = vec!["ca.pem".to_string()];
        for id in 1..=3 {
            names.push(format!("node-{id}.pem"));
            names.push(format!("node-{id}.key"));
        }
        for name in names {
            fs::write(certs.join(name), "placeholder\n").expect("placeholder file");
        }
        Fixture { dir }
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    fn origin(&self) -> PathBuf {
        self.path("node1.toml")
    }

    fn parse(&self, text: &str) -> Result<NodeConfig, ConfigError> {
        config::parse(text, &self.origin())
    }

    /// Parses `text`, which must fail on `field`; checks that the message names the
    /// file and the field and contains `expected`. Returns the message.
    fn expect_error(&self, text: &str, field: &str, expected: &str) -> String {
        let err = match self.parse(text) {
            Ok(config) => panic!("expected an error on {field}, got {config:?}\n{text}"),
            Err(err) => err,
        };
        let shown = err.to_string();
        assert_eq!(err.file(), self.origin(), "{shown}");
        assert_eq!(err.field(), Some(field), "{shown}");
        assert!(
            shown.starts_with(&self.origin().display().to_string()),
            "file missing from: {shown}"
        );
        assert!(shown.contains(field), "field missing from: {shown}");
        assert!(
            shown.contains(expected),
            "{expected:?} missing from: {shown}"
        );
        assert!(!shown.contains('\n'), "not one line: {shown}");
        shown
    }
}

/// `BASE` with `from` replaced by `to`; panics if `from` is absent, so a test cannot
/// silently check the unchanged config.
fn edit(from: &str, to: &str) -> String {
    assert!(BASE.contains(from), "{from:?} not in BASE");
    BASE.replacen(from, to, 1)
}

/// `BASE` with `extra` added at the end (new tables).
fn with(extra: &str) -> String {
    format!("{BASE}\n{extra}")
}

#[test]
fn base_config_gets_defaults_and_resolved_paths() {
    let fx = Fixture::new();
    let config = fx.parse(BASE).expect("valid");
    assert_eq!(config.id, 1);
    assert_eq!(config.listen, "127.0.0.1:7001".parse().unwrap());
    assert_eq!(config.data_dir, fx.path("data/node1"));
    assert_eq!(config.tls.ca, fx.path("certs/ca.pem"));
    assert_eq!(config.tls.cert, fx.path("certs/node-1.pem"));
    assert_eq!(config.tls.key, fx.path("certs/node-1.key"));
    assert_eq!(config.preempt, Preempt::Always);
    assert_eq!(config.mode, Mode::Quorum);
    assert!(!config.witness);
    assert!(config.peers.iter().all(|p| !p.witness));
    assert_eq!(config.timing, Timing::default());
    assert_eq!(config.hooks.timeout_ms, 5000);
    assert_eq!(config.hooks.on_elected, None);
    assert_eq!(config.hooks.on_demoted, None);
    assert_eq!(config.hooks.on_change, None);
    assert_eq!(config.health, None);
    assert_eq!(config.http, None);
    assert_eq!(config.members(), vec![1, 2, 3]);
    let peers: Vec<_> = config.peers.iter().map(|p| (p.id, p.addr.port())).collect();
    assert_eq!(peers, vec![(2, 7002), (3, 7003)]);
}

#[test]
fn optional_sections_get_their_defaults() {
    let fx = Fixture::new();
    let text = with("[health]\ncommand = \"true\"\n\n[http]\nlisten = \"127.0.0.1:8001\"\n\n[hooks]\non_elected = \"echo hi\"\n\n[timing]\nheartbeat_ms = 50\n");
    let config = fx.parse(&text).expect("valid");
    assert_eq!(config.health, Some(HealthConfig::new("true")));
    let health = config.health.unwrap();
    assert_eq!(
        (
            health.interval_ms,
            health.timeout_ms,
            health.rise,
            health.fall
        ),
        (1000, 500, 2, 3)
    );
    assert_eq!(
        config.http,
        Some(HttpConfig::on("127.0.0.1:8001".parse().unwrap()))
    );
    assert_eq!(config.hooks.on_elected.as_deref(), Some("echo hi"));
    assert_eq!(config.hooks.timeout_ms, 5000);
    assert_eq!(
        config.timing,
        Timing {
            heartbeat_ms: 50,
            ..Timing::default()
        }
    );
}

#[test]
fn absolute_paths_are_kept_and_no_peers_is_a_one_node_cluster() {
    let fx = Fixture::new();
    let ca = fx.path("certs/ca.pem");
    let text = format!(
        "id = 7\nlisten = \"127.0.0.1:7001\"\ndata_dir = \"/var/lib/bully\"\npreempt = \"never\"\n[tls]\nca = {ca:?}\ncert = \"certs/node-1.pem\"\nkey = \"certs/node-1.key\"\n"
    );
    let config = fx.parse(&text).expect("valid");
    assert_eq!(config.data_dir, Path::new("/var/lib/bully"));
    assert_eq!(config.tls.ca, ca);
    assert!(config.peers.is_empty());
    assert_eq!(config.members(), vec![7]);
    assert_eq!(config.preempt, Preempt::Never);
}

#[test]
fn relative_config_path_gives_relative_paths_and_a_certs_hint() {
    let text = BASE.replace("certs/", "no-such-certs/");
    let err = config::parse(&text, Path::new("config/node1.toml")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "config/node1.toml: tls.ca: file config/no-such-certs/ca.pem does not exist \
         (make certs with: bully certs init --dir config/no-such-certs --nodes 1,2,3)"
    );
    assert_eq!(err.field(), Some("tls.ca"));
    assert_eq!(err.file(), Path::new("config/node1.toml"));
}

#[test]
fn missing_tls_files_are_named_with_a_hint() {
    for (field, file) in [
        ("tls.ca", "ca.pem"),
        ("tls.cert", "node-1.pem"),
        ("tls.key", "node-1.key"),
    ] {
        let fx = Fixture::new();
        let missing = fx.path("certs").join(file);
        fs::remove_file(&missing).unwrap();
        let hint = format!(
            "file {} does not exist (make certs with: bully certs init --dir {} --nodes 1,2,3)",
            missing.display(),
            fx.path("certs").display()
        );
        fx.expect_error(BASE, field, &hint);
    }
}

#[test]
fn tls_path_that_is_a_directory_is_refused() {
    let fx = Fixture::new();
    fx.expect_error(
        &edit("\"certs/node-1.key\"", "\"certs\""),
        "tls.key",
        "is not a file",
    );
}

#[test]
fn unreadable_tls_file_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let fx = Fixture::new();
    let key = fx.path("certs/node-1.key");
    fs::set_permissions(&key, fs::Permissions::from_mode(0o000)).unwrap();
    if fs::File::open(&key).is_ok() {
        eprintln!("skipped: this user (root?) can read a mode-000 file");
        return;
    }
    fx.expect_error(BASE, "tls.key", "is not readable");
}

#[test]
fn unknown_keys_are_refused_in_every_table() {
    let fx = Fixture::new();
    let cases = [
        (format!("colour = \"blue\"\n{BASE}"), "colour"),
        (edit("[tls]\n", "[tls]\nchain = \"x\"\n"), "tls.chain"),
        (with("[timing]\nheartbeat = 50\n"), "timing.heartbeat"),
        (edit("id = 3\n", "id = 3\nport = 7003\n"), "peers[1].port"),
        (with("[hooks]\non_elect = \"x\"\n"), "hooks.on_elect"),
        (
            with("[health]\ncommand = \"true\"\nretries = 3\n"),
            "health.retries",
        ),
        (
            with("[http]\nlisten = \"127.0.0.1:8001\"\nport = 1\n"),
            "http.port",
        ),
    ];
    for (text, field) in cases {
        let shown = fx.expect_error(&text, field, "unknown field");
        // toml's position is kept: the error points at a line.
        assert!(shown.contains(".toml:"), "no line:column in {shown}");
    }
}

#[test]
fn unknown_key_points_at_its_line_and_column() {
    let fx = Fixture::new();
    let err = fx
        .parse(&edit("[tls]\n", "[tls]\nchain = \"x\"\n"))
        .unwrap_err();
    assert_eq!(err.position(), Some((6, 1)));
    assert_eq!(
        err.to_string(),
        format!(
            "{}:6:1: tls.chain: unknown field `chain`, expected one of `ca`, `cert`, `key`",
            fx.origin().display()
        )
    );
}

#[test]
fn missing_required_keys_are_named() {
    let fx = Fixture::new();
    let cases = [
        (edit("id = 1\n", ""), "id"),
        (edit("listen = \"127.0.0.1:7001\"\n", ""), "listen"),
        (edit("data_dir = \"data/node1\"\n", ""), "data_dir"),
        (edit("key = \"certs/node-1.key\"\n", ""), "tls.key"),
        (edit("addr = \"127.0.0.1:7003\"\n", ""), "peers[1].addr"),
        (with("[health]\ninterval_ms = 100\n"), "health.command"),
        (with("[http]\n"), "http.listen"),
    ];
    for (text, field) in cases {
        fx.expect_error(&text, field, "required key is missing");
    }
    let no_tls = BASE.split("[tls]").next().unwrap().to_string();
    fx.expect_error(&no_tls, "tls", "required key is missing");
}

#[test]
fn wrong_types_and_values_are_named() {
    let fx = Fixture::new();
    fx.expect_error(
        &edit("127.0.0.1:7001\"", "localhost:7001\""),
        "listen",
        "invalid socket address",
    );
    fx.expect_error(
        &edit("id = 2\n", "id = \"two\"\n"),
        "peers[0].id",
        "invalid type",
    );
    fx.expect_error(
        &format!("preempt = \"sometimes\"\n{BASE}"),
        "preempt",
        "expected `always` or `never`",
    );
    fx.expect_error(
        &format!("mode = \"raft\"\n{BASE}"),
        "mode",
        "expected `quorum` or `classic`",
    );
    fx.expect_error(
        &format!("witness = \"yes\"\n{BASE}"),
        "witness",
        "invalid type",
    );
    fx.expect_error(
        &with("[timing]\nheartbeat_ms = -5\n"),
        "timing.heartbeat_ms",
        "invalid value",
    );
}

#[test]
fn syntax_errors_keep_line_and_column() {
    let fx = Fixture::new();
    let err = fx.parse(&edit("id = 1", "id = = 1")).unwrap_err();
    assert_eq!(err.position(), Some((1, 6)), "{err}");
    let shown = err.to_string();
    assert!(
        shown.starts_with(&format!("{}:1:6: ", fx.origin().display())),
        "{shown}"
    );
    assert!(!shown.contains('\n'), "{shown}");
}

#[test]
fn peer_ids_must_be_distinct_and_not_our_own() {
    let fx = Fixture::new();
    let shown = fx.expect_error(
        &edit("id = 3\n", "id = 2\n"),
        "peers[1].id",
        "duplicate peer id 2 (also peers[0].id)",
    );
    assert_eq!(
        shown,
        format!(
            "{}: peers[1].id: duplicate peer id 2 (also peers[0].id)",
            fx.origin().display()
        )
    );
    fx.expect_error(
        &edit("id = 2\n", "id = 1\n"),
        "peers[0].id",
        "1 is this node's own id",
    );
}

#[test]
fn id_zero_is_reserved() {
    let fx = Fixture::new();
    fx.expect_error(&edit("id = 1\n", "id = 0\n"), "id", "0 is reserved");
    fx.expect_error(
        &edit("id = 3\n", "id = 0\n"),
        "peers[1].id",
        "0 is reserved",
    );
}

#[test]
fn ids_above_the_token_limit_are_refused() {
    let fx = Fixture::new();
    let too_high = MAX_NODE_ID + 1;
    let shown = fx.expect_error(
        &edit("id = 1\n", &format!("id = {too_high}\n")),
        "id",
        &format!("{too_high} is above the highest node ID {MAX_NODE_ID}"),
    );
    assert!(shown.contains("20 bits"), "{shown}");
    fx.expect_error(
        &edit("id = 3\n", &format!("id = {too_high}\n")),
        "peers[1].id",
        &format!("{too_high} is above the highest node ID {MAX_NODE_ID}"),
    );
    // The limit itself is a valid ID.
    let config = fx
        .parse(&edit("id = 3\n", &format!("id = {MAX_NODE_ID}\n")))
        .expect("MAX_NODE_ID is allowed");
    assert_eq!(config.members(), vec![1, 2, MAX_NODE_ID]);
}

/// `BASE` as a witness: `witness = true` at the top, before the first table.
fn witness(text: &str) -> String {
    format!("witness = true\n{text}")
}

#[test]
fn mode_and_witness_flags_are_read() {
    let fx = Fixture::new();
    let text = witness(&format!(
        "mode = \"classic\"\n{}",
        edit(
            "addr = \"127.0.0.1:7003\"\n",
            "addr = \"127.0.0.1:7003\"\nwitness = true\n"
        )
    ));
    let config = fx.parse(&text).expect("valid");
    assert_eq!(config.mode, Mode::Classic);
    assert!(config.witness);
    let witnesses: Vec<bool> = config.peers.iter().map(|p| p.witness).collect();
    assert_eq!(witnesses, vec![false, true]);
    // Two data nodes and a witness: the smallest safe quorum setup.
    let config = fx.parse(&witness(BASE)).expect("valid");
    assert_eq!((config.mode, config.witness), (Mode::Quorum, true));
}

#[test]
fn a_witness_has_no_hooks_and_no_health_check() {
    let fx = Fixture::new();
    for hook in ["on_elected", "on_demoted", "on_change"] {
        let shown = fx.expect_error(
            &witness(&with(&format!("[hooks]\n{hook} = \"echo hi\"\n"))),
            &format!("hooks.{hook}"),
            "a witness never leads, so its hooks would never run",
        );
        assert!(shown.contains("witness = false"), "{shown}");
        // The same hook on a data node is fine.
        fx.parse(&with(&format!("[hooks]\n{hook} = \"echo hi\"\n")))
            .expect("a data node may have hooks");
    }
    // A hook timeout alone runs nothing: allowed.
    fx.parse(&witness(&with("[hooks]\ntimeout_ms = 100\n")))
        .expect("timeout_ms alone is harmless");
    fx.expect_error(
        &witness(&with("[health]\ncommand = \"true\"\n")),
        "health",
        "a witness never leads, so a health check would gate nothing",
    );
}

#[test]
fn quorum_mode_needs_a_member_that_can_lead() {
    let fx = Fixture::new();
    let all_witnesses = witness(
        &BASE
            .replace(
                "addr = \"127.0.0.1:7002\"\n",
                "addr = \"127.0.0.1:7002\"\nwitness = true\n",
            )
            .replace(
                "addr = \"127.0.0.1:7003\"\n",
                "addr = \"127.0.0.1:7003\"\nwitness = true\n",
            ),
    );
    let shown = fx.expect_error(
        &all_witnesses,
        "witness",
        "every member (3: this node and all its peers) is a witness",
    );
    assert!(shown.contains("can never elect a coordinator"), "{shown}");
    // A lone witness with no peers is a cluster of witnesses too.
    let alone = witness(BASE.split("[[peers]]").next().unwrap());
    fx.expect_error(&alone, "witness", "every member (1: ");
    // One data node among them is enough.
    let one_data_node = all_witnesses.replacen(
        "addr = \"127.0.0.1:7002\"\nwitness = true\n",
        "addr = \"127.0.0.1:7002\"\n",
        1,
    );
    assert_ne!(one_data_node, all_witnesses);
    fx.parse(&one_data_node).expect("peer 2 can lead");
}

#[test]
fn peer_addresses_must_be_distinct_dialable_and_not_our_own() {
    let fx = Fixture::new();
    fx.expect_error(
        &edit("127.0.0.1:7002", "127.0.0.1:7001"),
        "peers[0].addr",
        "127.0.0.1:7001 is this node's own listen address",
    );
    fx.expect_error(
        &edit("127.0.0.1:7001", "0.0.0.0:7001").replace("127.0.0.1:7003", "127.0.0.1:7001"),
        "peers[1].addr",
        "127.0.0.1:7001 reaches this node's own listen address 0.0.0.0:7001",
    );
    fx.expect_error(
        &edit("127.0.0.1:7003", "127.0.0.1:7002"),
        "peers[1].addr",
        "duplicate address 127.0.0.1:7002 (also peers[0].addr)",
    );
    fx.expect_error(
        &edit("127.0.0.1:7002", "0.0.0.0:7002"),
        "peers[0].addr",
        "cannot be dialed",
    );
    fx.expect_error(
        &edit("127.0.0.1:7002", "127.0.0.1:0"),
        "peers[0].addr",
        "cannot be dialed",
    );
    fx.expect_error(
        &edit("127.0.0.1:7002", "db_1 .example:7002"),
        "peers[0].addr",
        "neither an IP address nor a valid host name",
    );
    fx.expect_error(
        &edit("127.0.0.1:7002", "db-2.example"),
        "peers[0].addr",
        "has no port; write HOST:PORT",
    );
    fx.expect_error(
        &edit("127.0.0.1:7003", "DB-2.example:7002").replace("127.0.0.1:7002", "db-2.example:7002"),
        "peers[1].addr",
        "duplicate address db-2.example:7002 (also peers[0].addr)",
    );
}

#[test]
fn peers_may_be_named_by_host_name() {
    let fx = Fixture::new();
    let text =
        edit("127.0.0.1:7002", "localhost:7002").replace("127.0.0.1:7003", "db-3.example.com:7003");
    let config = fx.parse(&text).expect("host names are accepted");
    let addrs: Vec<String> = config.peers.iter().map(|p| p.addr.to_string()).collect();
    assert_eq!(addrs, ["localhost:7002", "db-3.example.com:7003"]);
    // Not resolved while loading: a name that does not resolve yet is not an error here.
    assert_eq!(config.peers[1].addr.ip(), None);
}

#[test]
fn invalid_timing_is_refused_with_the_field() {
    let fx = Fixture::new();
    let shown = fx.expect_error(
        &with("[timing]\nheartbeat_ms = 100\nsuspect_after_ms = 250\n"),
        "timing.suspect_after_ms",
        "must be at least 3 x timing.heartbeat_ms (100)",
    );
    assert!(
        shown.starts_with(&format!(
            "{}: timing.suspect_after_ms (250) must be at least 3 x timing.heartbeat_ms (100): \
             the coordinator's lease lasts D less a drift margin of 100 ms",
            fx.origin().display()
        )),
        "{shown}"
    );
    fx.expect_error(
        &with("[timing]\nheartbeat_ms = 0\n"),
        "timing.heartbeat_ms",
        "at least 1",
    );
}

#[test]
fn hook_and_health_limits_are_checked() {
    let fx = Fixture::new();
    fx.expect_error(
        &with("[hooks]\ntimeout_ms = 0\n"),
        "hooks.timeout_ms",
        "must be at least 1",
    );
    fx.expect_error(
        &with("[hooks]\non_demoted = \"  \"\n"),
        "hooks.on_demoted",
        "is blank",
    );
    fx.expect_error(
        &with("[health]\ncommand = \"\"\n"),
        "health.command",
        "must not be blank",
    );
    for key in ["interval_ms", "timeout_ms", "rise", "fall"] {
        fx.expect_error(
            &with(&format!("[health]\ncommand = \"true\"\n{key} = 0\n")),
            &format!("health.{key}"),
            "must be at least 1",
        );
    }
}

#[test]
fn millisecond_keys_take_duration_strings_too() {
    let fx = Fixture::new();
    let text = with(
        "[hooks]\ntimeout_ms = \"1m30s\"\nresign_for_ms = \"250ms\"\n\n\
         [health]\ncommand = \"true\"\ninterval_ms = \"2s\"\ntimeout_ms = \"1.5s\"\n",
    );
    let config = fx.parse(&text).expect("valid");
    assert_eq!(
        (config.hooks.timeout_ms, config.hooks.resign_for_ms),
        (90_000, 250)
    );
    let health = config.health.as_ref().unwrap();
    assert_eq!((health.interval_ms, health.timeout_ms), (2000, 1500));
    // Rendered back as plain milliseconds, as before.
    let rendered = config::render(&config).unwrap();
    assert!(rendered.contains("timeout_ms = 90000"), "{rendered}");
    // A bare number in a string is milliseconds too.
    let bare = fx.parse(&with("[hooks]\ntimeout_ms = \"750\"\n")).unwrap();
    assert_eq!(bare.hooks.timeout_ms, 750);
}

#[test]
fn bad_durations_name_the_key_and_what_was_read() {
    let fx = Fixture::new();
    let cases = [
        (
            "[hooks]\ntimeout_ms = \"5x\"\n",
            "hooks.timeout_ms",
            "unknown duration unit `x` in `5x`",
        ),
        (
            "[health]\ncommand = \"true\"\ninterval_ms = \"soon\"\n",
            "health.interval_ms",
            "`soon` is not a duration (try 500ms, 2s, 1m30s or 1h)",
        ),
        (
            "[hooks]\nresign_for_ms = -5\n",
            "hooks.resign_for_ms",
            "invalid value: integer `-5`",
        ),
    ];
    for (extra, field, expected) in cases {
        let shown = fx.expect_error(&with(extra), field, expected);
        // toml's position is kept: the error points at a line.
        assert!(shown.contains(".toml:"), "no line:column in {shown}");
    }
    // A duration that parses is checked like a number: zero is refused.
    fx.expect_error(
        &with("[hooks]\ntimeout_ms = \"0s\"\n"),
        "hooks.timeout_ms",
        "must be at least 1",
    );
}

#[test]
fn empty_paths_are_refused() {
    let fx = Fixture::new();
    // Resolved against the config dir, "" would silently mean the config dir itself.
    fx.expect_error(
        &edit("\"data/node1\"", "\"\""),
        "data_dir",
        "must not be empty",
    );
    fx.expect_error(
        &edit("\"certs/ca.pem\"", "\"\""),
        "tls.ca",
        "must not be empty",
    );
}

/// Issue 38: `data_dir = " "` was accepted (resolved to a directory named " " beside
/// the config). Every path-valued key refuses a blank path or one padded with
/// whitespace, naming the key and showing the path as written.
#[test]
fn blank_or_padded_paths_are_refused_for_every_path_key() {
    let fx = Fixture::new();
    let keys = [
        ("data_dir", "\"data/node1\""),
        ("tls.ca", "\"certs/ca.pem\""),
        ("tls.cert", "\"certs/node-1.pem\""),
        ("tls.key", "\"certs/node-1.key\""),
    ];
    for (key, value) in keys {
        let blank = fx.expect_error(&edit(value, "\" \""), key, "must not be empty");
        assert!(blank.contains("whitespace"), "{blank}");
        fx.expect_error(&edit(value, "\"\t\""), key, "must not be empty");
        let trailing = format!("{}  \"", value.trim_end_matches('"'));
        let shown = fx.expect_error(
            &edit(value, &trailing),
            key,
            "starts or ends with whitespace",
        );
        assert!(
            shown.contains(&trailing[1..trailing.len() - 1]),
            "shown as written: {shown}"
        );
        let leading = format!("\" {}", &value[1..]);
        fx.expect_error(
            &edit(value, &leading),
            key,
            "starts or ends with whitespace",
        );
    }
    for device in ["\" \"", "\" /dev/watchdog\"", "\"/dev/watchdog \""] {
        fx.expect_error(
            &with(&format!("[watchdog]\ndevice = {device}\n")),
            "watchdog.device",
            "whitespace",
        );
    }
    // Spaces inside a name are a name.
    let spaced = fx.path("my data");
    let text = edit(
        "\"data/node1\"",
        &format!("{:?}", spaced.display().to_string()),
    );
    assert_eq!(fx.parse(&text).expect("valid").data_dir, spaced);
}

#[test]
fn load_reads_the_file_and_names_it_when_it_cannot() {
    let fx = Fixture::new();
    fs::write(fx.origin(), BASE).unwrap();
    let config = config::load(&fx.origin()).expect("valid");
    assert_eq!(config.data_dir, fx.path("data/node1"));

    let missing = fx.path("nope.toml");
    let err = config::load(&missing).unwrap_err();
    assert_eq!(err.file(), missing);
    assert_eq!(err.field(), None);
    assert!(
        err.to_string()
            .starts_with(&format!("{}: cannot read config file: ", missing.display())),
        "{err}"
    );
}

#[test]
fn rendered_configs_load_back_unchanged() {
    let fx = Fixture::new();
    let plain = fx.parse(BASE).expect("valid");
    let full = fx
        .parse(BASE)
        .map(|mut c| {
            c.preempt = Preempt::Never;
            c.mode = Mode::Classic;
            c.peers[1].witness = true;
            c.timing = Timing::fast();
            c.hooks.on_change = Some("echo \"$BULLY_COORDINATOR\"".into());
            c.hooks.timeout_ms = 750;
            c.health = Some(HealthConfig {
                fall: 5,
                ..HealthConfig::new("test -f /tmp/ok")
            });
            c.http = Some(HttpConfig::on("127.0.0.1:8001".parse().unwrap()));
            c
        })
        .expect("valid");
    for original in [plain, full] {
        let text = config::render(&original).expect("render");
        // Paths in `original` are absolute, so any origin gives the same config back.
        let back = config::parse(&text, Path::new("elsewhere/node.toml"))
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(back, original, "{text}");
    }
    let text = config::render(&fx.parse(BASE).unwrap()).unwrap();
    assert!(!text.contains("health") && !text.contains("http"), "{text}");
}

/// The shipped examples, copied beside placeholder certs, with every commented-out
/// `key = value` line and `[table]` header enabled when `uncomment` is set.
fn load_examples(uncomment: bool) -> Vec<NodeConfig> {
    let fx = Fixture::new();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
    (1..=3)
        .map(|n| {
            let name = format!("node{n}.toml");
            let mut text = fs::read_to_string(examples.join(&name)).expect("example config");
            if uncomment {
                text = text.lines().map(uncommented).collect::<Vec<_>>().join("\n");
            }
            let path = fx.path(&name);
            fs::write(&path, &text).unwrap();
            let config = config::load(&path).unwrap_or_else(|e| panic!("{e}\n{text}"));
            assert_eq!(config.data_dir, fx.path(&format!("data/node{n}")));
            assert_eq!(config.tls.cert, fx.path(&format!("certs/node-{n}.pem")));
            config
        })
        .collect()
}

/// `# key = value` becomes `key = value` and `# [table]` becomes `[table]`; prose
/// comments stay.
fn uncommented(line: &str) -> String {
    if let Some(rest) = line.strip_prefix("# ") {
        let is_key = rest.split_once(" = ").is_some_and(|(k, _)| {
            !k.is_empty() && k.chars().all(|c| c.is_ascii_lowercase() || c == '_')
        });
        if is_key || rest.starts_with('[') {
            return rest.to_string();
        }
    }
    line.to_string()
}

#[test]
fn example_cluster_is_consistent() {
    let configs = load_examples(false);
    for (i, config) in configs.iter().enumerate() {
        let n = i as u64 + 1;
        assert_eq!(config.id, n);
        assert_eq!(config.members(), vec![1, 2, 3]);
        assert_eq!(config.listen.port(), 7000 + n as u16);
        assert!(config.listen.ip().is_loopback());
        assert_eq!(config.timing, Timing::default());
        assert_eq!(config.mode, Mode::Quorum);
        assert!(!config.witness && config.peers.iter().all(|p| !p.witness));
        assert!(config.health.is_none() && config.http.is_none());
        // Every node dials the others at the addresses they listen on.
        for peer in &config.peers {
            assert_eq!(peer.addr, configs[peer.id as usize - 1].listen.into());
        }
    }
}

#[test]
fn example_commented_sections_are_valid_and_show_the_defaults() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
    for n in 1..=3 {
        let text = fs::read_to_string(examples.join(format!("node{n}.toml"))).unwrap();
        assert!(
            text.lines().any(|l| l.starts_with("# mode = \"quorum\"")),
            "node{n}.toml shows no `# mode = \"quorum\"` line"
        );
    }
    for (i, config) in load_examples(true).iter().enumerate() {
        let n = i as u16 + 1;
        // The commented timing values are the defaults the code applies.
        assert_eq!(config.timing, Timing::default());
        assert_eq!(config.preempt, Preempt::Always);
        assert_eq!(config.mode, Mode::Quorum);
        assert!(config.hooks.on_elected.is_some());
        assert!(config.hooks.on_demoted.is_some());
        assert!(config.hooks.on_change.is_some());
        assert_eq!(
            (config.hooks.timeout_ms, config.hooks.resign_for_ms),
            (5000, 5000)
        );
        assert_eq!(config.hooks.on_elected_failure, ElectedHookFailure::Resign);
        let health = config.health.as_ref().expect("[health] example");
        assert!(health.estimate.is_some(), "the example shows `estimate`");
        assert_eq!(
            HealthConfig {
                command: String::new(),
                estimate: None,
                ..health.clone()
            },
            HealthConfig::new("")
        );
        let http = config.http.clone().expect("[http] example");
        assert_eq!(http.coordinator_ready, CoordinatorReady::HookOk);
        assert_eq!(
            http.listen,
            format!("127.0.0.1:{}", 8000 + n).parse().unwrap()
        );
    }
}

#[test]
fn the_watchdog_table_is_read_checked_and_rendered_back() {
    use bully::config::{WatchdogConfig, WatchdogMode};
    let fx = Fixture::new();
    let plain = fx.parse(BASE).expect("valid");
    assert_eq!(plain.watchdog, WatchdogConfig::default());
    assert_eq!(plain.watchdog.mode, WatchdogMode::Off);
    let text = config::render(&plain).unwrap();
    assert!(
        !text.contains("watchdog"),
        "the default is left out: {text}"
    );

    let required = fx
        .parse(&with("[watchdog]\nmode = \"required\"\n"))
        .expect("valid");
    assert_eq!(required.watchdog.mode, WatchdogMode::Required);
    assert_eq!(required.watchdog.device, Path::new("/dev/watchdog"));
    let auto = fx
        .parse(&with(
            "[watchdog]\nmode = \"auto\"\ndevice = \"/dev/watchdog1\"\n",
        ))
        .expect("valid");
    let back = config::parse(&config::render(&auto).unwrap(), &fx.origin()).unwrap();
    assert_eq!(back.watchdog, auto.watchdog);
    // A device that does not exist is no config error: the mode decides at run time.
    fx.parse(&with(
        "[watchdog]\nmode = \"required\"\ndevice = \"/nonexistent/watchdog\"\n",
    ))
    .expect("checked when the node arms it");

    fx.expect_error(
        &with("[watchdog]\nmode = \"on\"\n"),
        "watchdog.mode",
        "unknown variant `on`, expected one of `off`, `auto`, `required`",
    );
    fx.expect_error(
        &with("[watchdog]\ndevice = \"watchdog\"\n"),
        "watchdog.device",
        "watchdog is not an absolute path (the default is /dev/watchdog)",
    );
    fx.expect_error(
        &with("[watchdog]\ndevice = \"\"\n"),
        "watchdog.device",
        "must not be empty",
    );
    fx.expect_error(
        &with("[watchdog]\ntimeout = 5\n"),
        "watchdog.timeout",
        "unknown field `timeout`, expected `mode` or `device`",
    );
    fx.expect_error(
        &witness(&with("[watchdog]\nmode = \"auto\"\n")),
        "watchdog.mode",
        "a witness never leads, so it would never arm the watchdog",
    );
}

/// A `[postgres]` table with `extra` lines after its two required keys.
fn with_postgres(extra: &str) -> String {
    with(&format!(
        "[postgres]\ndata_dir = \"/var/lib/postgresql/bully\"\nlisten = \"10.0.0.1:5432\"\n{extra}"
    ))
}

#[test]
fn a_postgres_section_gets_its_defaults_and_sizes_parse() {
    let f = Fixture::new();
    let config = f
        .parse(&with_postgres("maximum_lag_on_failover = \"16MB\"\n"))
        .unwrap();
    let pg = config.postgres.clone().expect("[postgres]");
    assert_eq!(pg.maximum_lag_on_failover, 16 << 20);
    assert_eq!(pg.synchronous, bully::config::postgres::Synchronous::Quorum);
    assert_eq!(pg.superuser.user, "postgres");
    assert_eq!(pg.replication.user, "replicator");
    assert!(pg.rewind && pg.reinit_on_failed_rewind);
    assert!(
        pg.data_checksums,
        "a new cluster has data checksums by default"
    );
    assert!(pg.initdb_options.is_empty());
    assert!(
        pg.replica_method.is_empty(),
        "pg_basebackup only by default"
    );
    assert_eq!(pg.reached_at(), pg.listen);
    assert!(config.checks_health(), "the manager gates eligibility");
}

#[test]
fn a_replica_method_and_the_archive_settings_are_taken_as_written() {
    let f = Fixture::new();
    let text = with_postgres(
        "replica_method = [\"/usr/bin/pgbackrest\", \"--stanza=main\", \"restore\"]\n\
         [postgres.parameters]\n\
         archive_mode = \"on\"\n\
         archive_command = \"pgbackrest --stanza=main archive-push %p\"\n\
         restore_command = \"pgbackrest --stanza=main archive-get %f \\\"%p\\\"\"\n",
    );
    let config = f.parse(&text).unwrap();
    let pg = config.postgres.expect("[postgres]");
    assert_eq!(
        pg.replica_method,
        ["/usr/bin/pgbackrest", "--stanza=main", "restore"]
    );
    assert_eq!(
        pg.parameters["restore_command"],
        "pgbackrest --stanza=main archive-get %f \"%p\""
    );
    assert_eq!(pg.parameters["archive_mode"], "on");
}

#[test]
fn bad_postgres_sections_are_named_with_their_key() {
    let f = Fixture::new();
    f.expect_error(
        &with_postgres("[postgres.parameters]\nport = \"5433\"\n"),
        "postgres.parameters",
        "`port` is set by bully itself",
    );
    f.expect_error(
        &with_postgres("[postgres.parameters]\n\"bad name\" = \"1\"\n"),
        "postgres.parameters",
        "not a PostgreSQL parameter name",
    );
    f.expect_error(
        &with_postgres("maximum_lag_on_failover = \"16 furlongs\"\n"),
        "postgres.maximum_lag_on_failover",
        "not a byte size",
    );
    f.expect_error(
        &with_postgres("initdb_options = [\"--pgdata=/elsewhere\"]\n"),
        "postgres.initdb_options",
        "set by bully itself",
    );
    f.expect_error(
        &with_postgres("initdb_options = [\"C.UTF-8\"]\n"),
        "postgres.initdb_options",
        "is not an option",
    );
    f.expect_error(
        &with_postgres("replica_method = [\"pgbackrest\", \"restore\"]\n"),
        "postgres.replica_method",
        "not an absolute path",
    );
    f.expect_error(
        &with_postgres("max_slot_wal_keep_size = \"1MB\"\n"),
        "postgres.max_slot_wal_keep_size",
        "under one WAL segment",
    );
    for (tags, why) in [
        ("nofailover = true\nfailover_priority = 3", "contradict"),
        ("failover_priority = 16", "above 15"),
    ] {
        f.expect_error(
            &with_postgres(&format!("[postgres.tags]\n{tags}\n")),
            "postgres.tags",
            why,
        );
    }
    let tagged = f
        .parse(&with_postgres(
            "[postgres.tags]\nfailover_priority = 3\nnosync = true\nnoloadbalance = true\n\
             clonefrom = true\n",
        ))
        .expect("tags bully keeps");
    let tags = tagged.postgres.unwrap().tags;
    assert_eq!(tags.failover_priority, 3);
    assert!(tags.nosync && tags.noloadbalance && tags.clonefrom);
    for never in ["nofailover = true", "failover_priority = 0"] {
        let parsed = f
            .parse(&with_postgres(&format!("[postgres.tags]\n{never}\n")))
            .expect("a member that never leads");
        assert!(parsed.postgres.unwrap().tags.never_leads(), "{never}");
    }
    let one_segment = f
        .parse(&with_postgres("max_slot_wal_keep_size = \"16MB\"\n"))
        .expect("one segment is the least a slot keeps");
    assert_eq!(
        one_segment.postgres.unwrap().max_slot_wal_keep_size,
        16 << 20
    );
    f.expect_error(
        &with("[postgres]\ndata_dir = \"/var/lib/pg\"\nlisten = \"0.0.0.0:5432\"\n"),
        "postgres.listen",
        "wildcard",
    );
    f.expect_error(
        &format!("mode = \"classic\"\n{}", with_postgres("")),
        "mode",
        "needs mode = \"quorum\"",
    );
    f.expect_error(
        &format!("{}\n[health]\ncommand = \"true\"\n", with_postgres("")),
        "health",
        "checks its server itself",
    );
    f.expect_error(
        &with("[postgres]\ndata_dir = \"data/node1/pg\"\nlisten = \"10.0.0.1:5432\"\n"),
        "postgres.data_dir",
        "must not lie inside the node's data_dir",
    );
}

#[test]
fn postgres_tls_is_off_by_default_and_its_keys_are_checked() {
    use bully::config::postgres::TlsMode;
    let f = Fixture::new();
    let off = f.parse(&with_postgres("")).unwrap().postgres.unwrap();
    assert_eq!(off.tls, TlsMode::Off, "today's behaviour by default");
    let on = f.parse(&with_postgres("tls = \"on\"\n")).unwrap();
    assert_eq!(on.postgres.unwrap().tls, TlsMode::On);
    // The user's files, relative to the config's directory like every path.
    let own = "tls = \"on\"\ntls_ca = \"certs/ca.pem\"\ntls_cert = \"certs/node-2.pem\"\n\
               tls_key = \"certs/node-2.key\"\n";
    let pg = f.parse(&with_postgres(own)).unwrap().postgres.unwrap();
    assert_eq!(
        pg.tls_key.as_deref(),
        Some(f.path("certs/node-2.key").as_path())
    );
    f.expect_error(
        &with_postgres("tls = \"yes\"\n"),
        "postgres.tls",
        "unknown variant `yes`, expected `off` or `on`",
    );
    f.expect_error(
        &with_postgres("tls_ca = \"certs/ca.pem\"\n"),
        "postgres.tls_ca",
        "is used only with tls = \"on\"",
    );
    f.expect_error(
        &with_postgres(
            "tls = \"on\"\ntls_ca = \"certs/ca.pem\"\ntls_cert = \"certs/node-2.pem\"\n",
        ),
        "postgres.tls_key",
        "tls_ca, tls_cert and tls_key go together",
    );
    f.expect_error(
        &with_postgres(&own.replace("node-2.key", "missing.key")),
        "postgres.tls_key",
        "cannot access",
    );
    f.expect_error(
        &with_postgres(&own.replace("\"certs/ca.pem\"", "\" certs/ca.pem\"")),
        "postgres.tls_ca",
        "starts or ends with whitespace",
    );
    f.expect_error(
        &with_postgres("tls = \"on\"\n[postgres.parameters]\nssl_key_file = \"/k\"\n"),
        "postgres.parameters",
        "`ssl_key_file` is set by bully itself with tls = \"on\"",
    );
    // Off, the user may still set PostgreSQL's own TLS parameters.
    f.parse(&with_postgres("[postgres.parameters]\nssl = \"on\"\n"))
        .expect("ssl is the user's with tls off");
}

#[test]
fn http_write_credentials_need_both_keys_a_readable_file_and_tls() {
    let fx = Fixture::new();
    let http = |extra: &str| with(&format!("[http]\nlisten = \"127.0.0.1:8001\"\n{extra}"));
    fx.expect_error(
        &http("username = \"admin\"\ntls = true\n"),
        "http.password_file",
        "needs a password_file",
    );
    fx.expect_error(
        &http("password_file = \"http.password\"\ntls = true\n"),
        "http.username",
        "needs the username",
    );
    fx.expect_error(
        &http("username = \"admin\"\npassword_file = \"missing.password\"\ntls = true\n"),
        "http.password_file",
        "cannot access",
    );
    fs::write(fx.path("http.password"), "hunter2\n").unwrap();
    fx.expect_error(
        &http("username = \"admin\"\npassword_file = \"http.password\"\n"),
        "http.tls",
        "never sent in clear",
    );
    fx.expect_error(
        &http("username = \"a:b\"\npassword_file = \"http.password\"\ntls = true\n"),
        "http.username",
        "has a ':'",
    );
    let config = fx
        .parse(&http(
            "username = \"admin\"\npassword_file = \"http.password\"\ntls = true\n",
        ))
        .expect("a complete [http]");
    let http = config.http.expect("[http]");
    assert!(http.tls);
    assert!(http.password_file.unwrap().is_absolute(), "resolved");
}
