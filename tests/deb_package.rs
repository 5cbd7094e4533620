//! The Debian package of README.md's "Install": `packaging/build-deb.sh` builds it from
//! the binary under test with dpkg-deb alone; its fields, file list and sample config
//! are checked. As root, with no bully on the machine, it is installed (user, group,
//! modes, units, a node run as the `bully` user), removed (the operator's edit of the
//! conffile and enabled units stay) and purged (the conffile, /var/lib/bully and the
//! enablement links go); the package is
//! purged again whatever happens, so nothing is left installed. With PostgreSQL 15 and
//! a `postgres` user, the install also runs the PostgreSQL recipe on this host
//! (`deb_package/postgres.rs`: the drop-in, the units as they then run, a primary kept).

mod common;
#[path = "deb_package/postgres.rs"]
mod postgres;
#[path = "common/postgres_cluster.rs"]
mod postgres_cluster;
#[path = "common/units.rs"]
mod units;

use common::{binary, installed, wait_until};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// What the package puts on the system, besides directories.
const FILES: [&str; 10] = [
    "/usr/bin/bully",
    "/usr/share/man/man1/bully.1.gz",
    "/usr/share/bash-completion/completions/bully",
    "/usr/share/zsh/vendor-completions/_bully",
    "/usr/share/fish/vendor_completions.d/bully.fish",
    "/usr/lib/systemd/system/bully.service",
    "/usr/lib/systemd/system/bully@.service",
    "/usr/lib/systemd/system/bully-run.service",
    "/usr/share/bully/systemd/postgres.conf",
    "/etc/bully/node.toml",
];
const CONFFILE: &str = "/etc/bully/node.toml";
const STATE: &str = "/var/lib/bully";
const CERTS: &str = "/etc/bully/certs";
const UNITS: &str = "/usr/lib/systemd/system";
/// What `systemctl enable bully.service bully@node1.service` makes.
const LINKS: [&str; 2] = [
    "/etc/systemd/system/multi-user.target.wants/bully.service",
    "/etc/systemd/system/multi-user.target.wants/bully@node1.service",
];

/// Cargo's version as build-deb.sh writes it: a pre-release `-` becomes `~`.
fn deb_version() -> String {
    env!("CARGO_PKG_VERSION").replacen('-', "~", 1)
}

/// Runs `command` to its end; its stdout, or a panic with its stderr.
fn ok(command: &mut Command) -> String {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(
        out.status.success(),
        "{command:?}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Why this machine cannot build the package, if it cannot.
fn cannot_build() -> Option<&'static str> {
    if !installed("dpkg-deb") || !installed("dpkg") {
        return Some("dpkg-deb or dpkg is not installed");
    }
    None
}

/// Builds the package from the test's binary into `out` (gzip -1: the debug binary is
/// large and xz would take most of the test's time); its path.
fn build(out: &Path) -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/build-deb.sh");
    let printed = ok(Command::new(script)
        .arg("--binary")
        .arg(binary())
        .arg("--out")
        .arg(out)
        .env("DPKG_DEB_COMPRESSOR_TYPE", "gzip")
        .env("DPKG_DEB_COMPRESSOR_LEVEL", "1"));
    let arch = ok(Command::new("dpkg").arg("--print-architecture"));
    let deb = out.join(format!("bully_{}_{}.deb", deb_version(), arch.trim()));
    assert_eq!(printed.trim(), deb.display().to_string());
    assert!(deb.is_file(), "{} not written", deb.display());
    deb
}

#[test]
fn package_fields_files_and_sample_config() {
    if let Some(why) = cannot_build() {
        eprintln!("SKIPPED: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let deb = build(dir.path());

    let fields = ok(Command::new("dpkg-deb")
        .arg("--field")
        .arg(&deb)
        .args(["Package", "Version", "Depends"]));
    assert!(fields.contains("Package: bully\n"), "{fields}");
    assert!(
        fields.contains(&format!("Version: {}\n", deb_version())),
        "{fields}"
    );
    assert!(fields.contains("libc6 (>= 2."), "{fields}");
    let conffiles = ok(Command::new("dpkg-deb")
        .arg("--info")
        .arg(&deb)
        .arg("conffiles"));
    assert_eq!(conffiles, format!("{CONFFILE}\n"));
    let description = ok(Command::new("dpkg-deb")
        .arg("--field")
        .arg(&deb)
        .arg("Description"));
    assert!(description.contains("enables and starts"), "{description}");

    let contents = ok(Command::new("dpkg-deb").arg("--contents").arg(&deb));
    for file in FILES {
        let line = contents
            .lines()
            .find(|l| l.ends_with(&format!(" .{file}")))
            .unwrap_or_else(|| panic!("{file} not in the package:\n{contents}"));
        let mode = if file == "/usr/bin/bully" {
            "-rwxr-xr-x root/root "
        } else {
            "-rw-r--r-- root/root "
        };
        assert!(line.starts_with(mode), "{line}");
    }

    // The files as they would land, read from an extracted copy.
    let tree = dir.path().join("tree");
    ok(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&tree));
    let at = |file: &str| tree.join(file.trim_start_matches('/'));
    let man = std::fs::read(at("/usr/share/man/man1/bully.1.gz")).unwrap();
    assert_eq!(&man[..2], [0x1f, 0x8b], "the man page is not gzip'd");
    for unit in ["bully.service", "bully@.service", "bully-run.service"] {
        let text = std::fs::read_to_string(at(&format!("{UNITS}/{unit}"))).unwrap();
        let exec: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("ExecStart="))
            .collect();
        assert!(
            exec.len() == 1 && exec[0].starts_with("ExecStart=/usr/bin/bully "),
            "{unit}: {exec:?}"
        );
    }

    // The sample is a valid config once its TLS files exist: point its absolute paths
    // into the temp dir and load it as `bully node` would.
    let sample = std::fs::read_to_string(at(CONFFILE)).unwrap();
    for line in [
        "data_dir = \"/var/lib/bully\"",
        "key = \"/etc/bully/certs/node-1.key\"",
    ] {
        assert!(sample.lines().any(|l| l.starts_with(line)), "{sample}");
    }
    let certs = dir.path().join("certs");
    std::fs::create_dir(&certs).unwrap();
    for file in ["ca.pem", "node-1.pem", "node-1.key"] {
        std::fs::write(certs.join(file), "").unwrap();
    }
    let moved = sample
        .replace(CERTS, &certs.display().to_string())
        .replace(STATE, &dir.path().join("data").display().to_string());
    let config = dir.path().join("node.toml");
    std::fs::write(&config, moved).unwrap();
    let loaded = bully::config::load(&config).unwrap_or_else(|e| panic!("{e}\n{sample}"));
    assert_eq!(loaded.id, 1);
    assert_eq!(loaded.peers.len(), 2);
}

/// The machine's state before the install test, and what it put back when it ends:
/// the package purged, /etc/bully, /var/lib/bully, the enablement links and the `bully` user and group
/// removed if the test made them, a node it started killed by its PID. Runs on panic too.
struct Installation {
    had_user: bool,
    had_group: bool,
    node: Option<Child>,
    /// What the PostgreSQL recipe put on the machine.
    recipe: postgres::Recipe,
}

impl Installation {
    /// Why the package must not be installed here, if so: not root, or something of a
    /// bully install already present (the purge would take an operator's files along).
    fn refused() -> Option<String> {
        if std::fs::metadata("/proc/self").map(|m| m.uid()).ok() != Some(0) {
            return Some("not root".into());
        }
        let status = package_status();
        if !status.is_empty() && !status.contains("not-installed") {
            return Some(format!("a bully package is on this machine ({status})"));
        }
        ["/usr/bin/bully", "/etc/bully", STATE]
            .into_iter()
            .chain(LINKS)
            .find(|p| Path::new(p).symlink_metadata().is_ok())
            .map(|p| format!("{p} exists (a bully installed from source?)"))
    }

    /// Notes whether the user and group were there before the test.
    fn new() -> Installation {
        Installation {
            had_user: getent("passwd").is_some(),
            had_group: getent("group").is_some(),
            node: None,
            recipe: Default::default(),
        }
    }
}

impl Drop for Installation {
    fn drop(&mut self) {
        drop(std::mem::take(&mut self.recipe));
        if let Some(mut node) = self.node.take() {
            let _ = node.kill();
            let _ = node.wait();
        }
        let _ = Command::new("dpkg").args(["--purge", "bully"]).output();
        // Both absent before the test (refused); gone after a purge that worked.
        let _ = std::fs::remove_dir_all("/etc/bully");
        let _ = std::fs::remove_dir_all(STATE);
        for link in LINKS {
            let _ = std::fs::remove_file(link);
        }
        if !self.had_user && getent("passwd").is_some() {
            let _ = Command::new("userdel").arg("bully").output();
        }
        if !self.had_group && getent("group").is_some() {
            let _ = Command::new("groupdel").arg("bully").output();
        }
    }
}

/// The `bully` entry of the `passwd` or `group` database, split at `:`.
fn getent(database: &str) -> Option<Vec<String>> {
    let out = Command::new("getent")
        .args([database, "bully"])
        .output()
        .ok()?;
    let line = String::from_utf8_lossy(&out.stdout);
    let line = line.trim();
    (out.status.success() && !line.is_empty()).then(|| line.split(':').map(String::from).collect())
}

/// dpkg's status of the bully package ("install ok installed", ...), empty when dpkg
/// has never heard of it.
fn package_status() -> String {
    Command::new("dpkg-query")
        .args(["--show", "--showformat=${Status}", "bully"])
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
        .unwrap_or_default()
}

/// Owner, group and permission bits of `path`, as `uid:gid mode` with the mode in octal.
fn owner_and_mode(path: &str) -> String {
    let m = std::fs::metadata(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    format!("{}:{} {:o}", m.uid(), m.gid(), m.mode() & 0o7777)
}

/// dpkg for the test: never a question on the terminal.
fn dpkg(args: &[&str]) -> String {
    ok(Command::new("dpkg")
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_remove_and_purge_on_this_machine() {
    if let Some(why) = cannot_build() {
        eprintln!("SKIPPED: {why}");
        return;
    }
    if let Some(why) = Installation::refused() {
        eprintln!("SKIPPED: package not installed: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let deb = build(dir.path());
    let mut installation = Installation::new();
    dpkg(&["-i", &deb.display().to_string()]);

    for file in FILES {
        assert!(Path::new(file).is_file(), "{file} not installed");
    }
    let user = getent("passwd").expect("the bully user");
    let group = getent("group").expect("the bully group");
    assert_eq!(
        (user[5].as_str(), user[6].as_str()),
        (STATE, "/usr/sbin/nologin")
    );
    assert_eq!(user[3], group[2], "bully's primary group is not bully");
    let (uid, gid): (u32, u32) = (user[2].parse().unwrap(), group[2].parse().unwrap());
    assert_eq!(owner_and_mode(STATE), format!("{uid}:{gid} 750"));
    assert_eq!(owner_and_mode(CERTS), format!("0:{gid} 750"));
    let version = ok(Command::new("/usr/bin/bully").arg("--version"));
    assert_eq!(
        version.trim(),
        format!("bully {}", env!("CARGO_PKG_VERSION"))
    );
    if installed("systemd-analyze") {
        units::verify(Path::new(UNITS), None).unwrap();
    } else {
        eprintln!("SKIPPED (one check): systemd-analyze not installed; units not verified");
    }

    // The operator's part (README "Install"): certificates made elsewhere, the node's
    // pair copied in with the key for root and the bully group only; the packaged
    // config as it is. Then the node runs as the bully user, as the unit runs it.
    let admin = dir.path().join("admin");
    ok(Command::new("/usr/bin/bully")
        .args(["certs", "init", "--nodes", "1,2,3", "--dir"])
        .arg(&admin));
    for (file, mode) in [
        ("ca.pem", 0o644),
        ("node-1.pem", 0o644),
        ("node-1.key", 0o640),
    ] {
        let to = Path::new(CERTS).join(file);
        std::fs::copy(admin.join(file), &to).unwrap();
        std::os::unix::fs::chown(&to, Some(0), Some(gid)).unwrap();
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let log = dir.path().join("node.log");
    let out = std::fs::File::create(&log).unwrap();
    let node = installation.node.insert(
        Command::new("/usr/bin/bully")
            .args(["node", "--config", CONFFILE])
            .uid(uid)
            .gid(gid)
            .current_dir("/")
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap(),
    );
    // The keeper socket is made once the config, certificates and store are loaded.
    let socket = Path::new(STATE).join("keeper.sock");
    wait_until(
        "the node, as user bully, to open its store",
        Duration::from_secs(30),
        || {
            let exited = node.try_wait().unwrap();
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            assert!(exited.is_none(), "the node exited: {exited:?}\n{log}");
            let opened = socket.exists();
            async move { opened.then_some(()) }
        },
    )
    .await;
    node.kill().unwrap();
    node.wait().unwrap();
    installation.node = None;

    // The PostgreSQL recipe on this host, as the node's user postgres (the drop-in).
    match postgres::skipped() {
        Some(why) => eprintln!("SKIPPED (one part): the PostgreSQL recipe: {why}"),
        None => postgres::run(dir.path(), &mut installation.recipe).await,
    }
    installation.recipe = Default::default();

    // The operator enables the units (this works without systemd running): remove
    // keeps the links, as it keeps the config; purge takes them.
    let enabled = installed("systemctl");
    if enabled {
        ok(Command::new("systemctl").args(["enable", "bully.service", "bully@node1.service"]));
        for link in LINKS {
            assert!(
                Path::new(link).is_symlink(),
                "systemctl enable made no {link}"
            );
        }
    } else {
        eprintln!(
            "SKIPPED (one check): systemctl not installed; purge of enabled units not checked"
        );
    }

    // The operator edits the conffile: remove keeps it, purge takes it and the state.
    let edited = format!(
        "{}# edited by the operator\n",
        std::fs::read_to_string(CONFFILE).unwrap()
    );
    std::fs::write(CONFFILE, &edited).unwrap();
    dpkg(&["-r", "bully"]);
    assert!(
        !Path::new("/usr/bin/bully").exists(),
        "remove left the binary"
    );
    assert_eq!(std::fs::read_to_string(CONFFILE).unwrap(), edited);
    assert!(Path::new(STATE).is_dir(), "remove took /var/lib/bully");
    if enabled {
        assert!(Path::new(LINKS[0]).is_symlink(), "remove disabled the unit");
    }
    dpkg(&["--purge", "bully"]);
    assert!(!Path::new(CONFFILE).exists(), "purge left the conffile");
    assert!(!Path::new(STATE).exists(), "purge left /var/lib/bully");
    for link in LINKS {
        assert!(!Path::new(link).is_symlink(), "purge left {link}");
    }
    assert!(
        Path::new(CERTS).join("node-1.key").is_file(),
        "purge took the operator's key"
    );
    let status = package_status();
    assert!(
        status.is_empty() || status.contains("not-installed"),
        "{status}"
    );
    drop(installation);
    assert!(!Path::new("/etc/bully").exists());
}
