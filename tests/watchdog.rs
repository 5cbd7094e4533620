//! The two watchdogs on real processes. The `[watchdog]` device, faked by a FIFO the
//! test reads: the coordinator's device gets keepalives while it leads and the magic
//! `V` when it steps down or stops, the followers' devices get nothing; with
//! `mode = "required"` and no device the node never leads, says why, and the others
//! elect. systemd's service watchdog: `bully node` under `$WATCHDOG_USEC` sends
//! `WATCHDOG=1` from its runtime loop, and stops while the process is stopped.

mod common;
#[path = "common/primary.rs"]
mod primary;

use bully::config::{WatchdogConfig, WatchdogMode};
use bully::protocol::{NodeId, Preempt, Timing};
use bully::signals::Signal;
use common::{binary, wait_until, TestCluster};
use primary::{ever_led, phase, status};
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const AGREE: Duration = Duration::from_secs(20);

/// A fake watchdog device: a FIFO the test holds open for reading and writing, so a
/// node can always open it and the test never sees end-of-file.
struct FakeDevice {
    path: PathBuf,
    reader: File,
    received: Vec<u8>,
}

impl FakeDevice {
    fn new(dir: &Path, id: NodeId) -> FakeDevice {
        let path = dir.join(format!("watchdog-{id}"));
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
        let reader = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(nix::libc::O_NONBLOCK)
            .open(&path)
            .expect("open the FIFO");
        FakeDevice {
            path,
            reader,
            received: Vec::new(),
        }
    }

    /// Everything the node wrote so far.
    fn received(&mut self) -> &[u8] {
        let mut buf = [0u8; 4096];
        loop {
            match self.reader.read(&mut buf) {
                Ok(n) if n > 0 => self.received.extend_from_slice(&buf[..n]),
                Ok(_) => break,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("reading {}: {e}", self.path.display()),
            }
        }
        &self.received
    }

    fn keepalives(&mut self) -> usize {
        self.received().iter().filter(|&&b| b == b'1').count()
    }
}

fn auto_on(device: &Path) -> WatchdogConfig {
    WatchdogConfig {
        mode: WatchdogMode::Auto,
        device: device.to_path_buf(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_coordinators_device_is_kept_alive_and_disarmed_when_it_leaves_office() {
    let mut t = TestCluster::new(3, Timing::default(), Preempt::Always);
    let mut devices: Vec<FakeDevice> = (1..=3)
        .map(|id| FakeDevice::new(t.dir.path(), id))
        .collect();
    for (id, device) in (1..=3).zip(&devices) {
        let watchdog = auto_on(&device.path);
        t.cluster
            .edit_config(id, |c| c.watchdog = watchdog)
            .unwrap();
    }
    t.start_all();
    t.wait_for_leader(&[1, 2, 3], 3, AGREE).await;

    phase("node 3 leads: its device gets keepalives, the others' nothing");
    wait_until("keepalives on node 3's device", AGREE, || {
        let n = devices[2].keepalives();
        async move { (n >= 5).then_some(()) }
    })
    .await;
    assert_eq!(devices[0].received(), b"", "node 1 follows");
    assert_eq!(devices[1].received(), b"", "node 2 follows");
    let log3 = std::fs::read_to_string(t.cluster.log_path(3)).unwrap();
    assert!(log3.contains("driving it by writes only"), "{log3}");

    phase("node 3 steps down: its device gets the magic V, node 2's keepalives");
    let out = Command::new(binary())
        .args(["step-down", "--for", "60s", "--config"])
        .arg(t.cluster.config_path(3))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    t.wait_for_leader(&[1, 2, 3], 2, AGREE).await;
    wait_until("the magic close on node 3's device", AGREE, || {
        let last = devices[2].received().last().copied();
        async move { (last == Some(b'V')).then_some(()) }
    })
    .await;
    let written = devices[2].received().to_vec();
    let (keepalives, close) = written.split_at(written.len() - 1);
    assert!(keepalives.iter().all(|&b| b == b'1'), "{written:?}");
    assert_eq!(close, b"V");
    wait_until("keepalives on node 2's device", AGREE, || {
        let n = devices[1].keepalives();
        async move { (n >= 5).then_some(()) }
    })
    .await;

    phase("node 2 stops cleanly: it leaves office and disarms too");
    t.cluster.stop(2, Duration::from_secs(5)).unwrap();
    assert_eq!(devices[1].received().last(), Some(&b'V'));
    assert_eq!(
        devices[2].received(),
        written.as_slice(),
        "node 3 stays stepped down"
    );
    for id in [1, 3] {
        t.cluster.stop(id, Duration::from_secs(5)).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_required_device_that_is_missing_keeps_the_node_from_leading() {
    let mut t = TestCluster::new(3, Timing::default(), Preempt::Always);
    let missing = t.dir.path().join("no-such-watchdog");
    let required = WatchdogConfig {
        mode: WatchdogMode::Required,
        device: missing.clone(),
    };
    t.cluster.edit_config(3, |c| c.watchdog = required).unwrap();
    t.start_all();

    phase("nodes 1 and 2 elect node 2; node 3 follows and says why it does not lead");
    t.wait_for_leader(&[1, 2, 3], 2, AGREE).await;
    let s3 = status(&t, 3).await.expect("node 3 answers");
    assert!(!s3.eligible, "{s3:?}");
    let why = s3.watchdog_unavailable.clone().expect("a reason");
    assert!(why.starts_with("watchdog unavailable"), "{why}");
    assert!(why.contains(&missing.display().to_string()), "{why}");
    assert!(
        s3.line().contains("(ineligible: watchdog unavailable"),
        "{}",
        s3.line()
    );
    for id in [1, 2, 3] {
        t.cluster.stop(id, Duration::from_secs(5)).unwrap();
    }
    assert!(!ever_led(&t, 3), "node 3 led without its required watchdog");
}

/// A node process started by the test itself; killed by its PID when dropped (on
/// every exit path, a panic included).
struct Spawned(Child);

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Whether process `pid` is stopped (state `T` in `/proc/<pid>/stat`).
fn stopped(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The state follows the command name, which is in parentheses.
    let state = stat
        .rsplit_once(") ")
        .and_then(|(_, rest)| rest.chars().next());
    state == Some('T')
}

/// Counts `WATCHDOG=1` datagrams on `socket` until `count` arrived; panics after
/// `timeout`.
fn expect_pings(socket: &UnixDatagram, count: usize, timeout: Duration) {
    let started = Instant::now();
    let mut seen = 0;
    let mut buf = [0u8; 256];
    while seen < count {
        let left = timeout.checked_sub(started.elapsed()).unwrap_or_else(|| {
            panic!("{seen} of {count} WATCHDOG=1 within {timeout:?}");
        });
        socket
            .set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .unwrap();
        match socket.recv(&mut buf) {
            Ok(n) => {
                let message = String::from_utf8_lossy(&buf[..n]);
                seen += message.lines().filter(|l| *l == "WATCHDOG=1").count();
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("recv: {e}"),
        }
    }
}

#[test]
fn the_runtime_pings_systemds_watchdog_and_stops_while_it_is_stopped() {
    let t = TestCluster::new(3, Timing::default(), Preempt::Always);
    let socket_path = t.dir.path().join("notify.sock");
    let socket = UnixDatagram::bind(&socket_path).unwrap();
    let log = File::create(t.dir.path().join("node-3-watchdog.log")).unwrap();
    let node = Spawned(
        Command::new(binary())
            .arg("node")
            .arg("--config")
            .arg(t.cluster.config_path(3))
            .env("NOTIFY_SOCKET", &socket_path)
            .env("WATCHDOG_USEC", "200000")
            .env_remove("WATCHDOG_PID")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let pid = node.0.id();

    phase("every 100 ms a WATCHDOG=1, even alone with no coordinator");
    expect_pings(&socket, 5, Duration::from_secs(10));

    phase("SIGSTOP: the pings stop");
    bully::signals::send(pid, Signal::SIGSTOP).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !stopped(pid) {
        assert!(Instant::now() < deadline, "node 3 did not stop");
        std::thread::sleep(Duration::from_millis(10));
    }
    // Drain what was sent before the stop took effect.
    socket.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 256];
    while socket.recv(&mut buf).is_ok() {}
    socket.set_nonblocking(false).unwrap();
    // Ten ping intervals of silence.
    socket
        .set_read_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    let during = socket.recv(&mut buf);
    assert!(
        during.is_err(),
        "a ping from a stopped process: {:?}",
        during.map(|n| String::from_utf8_lossy(&buf[..n]).into_owned())
    );

    phase("SIGCONT: the pings resume");
    bully::signals::send(pid, Signal::SIGCONT).unwrap();
    expect_pings(&socket, 3, Duration::from_secs(10));
}
