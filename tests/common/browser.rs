//! Headless Chromium for the HTML tests: finds Debian's `chromium` (or `$CHROMIUM`),
//! runs it with a fresh profile and the flags this closed network needs, bounded by a
//! timeout, and kills its whole process group by ID when done, also on panic.
#![allow(dead_code)]

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long one headless run may take (a cold start on a busy 2-core machine).
const LIMIT: Duration = Duration::from_secs(90);

/// An installed Chromium.
pub struct Browser {
    binary: PathBuf,
}

/// What one headless run left: its stdout and the page's console messages.
pub struct Run {
    pub stdout: String,
    /// Every console message and uncaught error the page produced (Chromium logs them
    /// to stderr as `...:CONSOLE...` lines with `--enable-logging=stderr`).
    pub console: Vec<String>,
}

/// A process group started by a test, killed (by its ID) when dropped.
pub struct Group(pub Child);

impl Drop for Group {
    fn drop(&mut self) {
        // Our own child leads the group (spawned with `process_group(0)`).
        let _ = bully::signals::send_group(self.0.id(), bully::signals::Signal::SIGKILL);
        let _ = self.0.wait();
    }
}

impl Browser {
    /// The browser, or `None` after printing why the caller skips (not installed).
    pub fn find() -> Option<Browser> {
        let named = std::env::var_os("CHROMIUM").map(PathBuf::from);
        let candidates = named
            .into_iter()
            .chain(["chromium", "chromium-browser"].map(PathBuf::from));
        for binary in candidates {
            let works = Command::new(&binary)
                .arg("--version")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if works {
                return Some(Browser { binary });
            }
        }
        eprintln!(
            "SKIPPED the browser part: no chromium found (apt-get install chromium; .ci/run \
             installs it; or set CHROMIUM to a Chromium binary)"
        );
        None
    }

    /// Opens `page` in a 1600x900 window and saves a screenshot to `png`.
    pub fn screenshot(&self, page: &Path, png: &Path) -> Run {
        let shot = format!("--screenshot={}", png.display());
        let run = self.run(page, &[&shot, "--window-size=1600,900"]);
        assert!(
            png.exists(),
            "chromium wrote no screenshot of {}",
            page.display()
        );
        run
    }

    /// Opens `page` and returns the DOM after its scripts ran.
    pub fn dump_dom(&self, page: &Path) -> Run {
        self.run(page, &["--dump-dom", "--window-size=1600,900"])
    }

    fn run(&self, page: &Path, extra: &[&str]) -> Run {
        let profile = tempfile::tempdir().expect("temp profile dir");
        let page = page.canonicalize().expect("the page exists");
        let mut command = Command::new(&self.binary);
        command
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--enable-logging=stderr",
                "--v=0",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .args(extra)
            .arg(format!("file://{}", page.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut group = Group(command.spawn().expect("start chromium"));
        let stdout = drain(group.0.stdout.take());
        let stderr = drain(group.0.stderr.take());
        let started = Instant::now();
        let status = loop {
            if let Some(status) = group.0.try_wait().expect("wait for chromium") {
                break status;
            }
            assert!(
                started.elapsed() < LIMIT,
                "chromium did not finish within {LIMIT:?} on {}",
                page.display()
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        drop(group); // any helper process it left behind
        let stdout = stdout.join().unwrap_or_default();
        let stderr = stderr.join().unwrap_or_default();
        assert!(status.success(), "chromium failed ({status}):\n{stderr}");
        Run {
            stdout,
            console: stderr
                .lines()
                .filter(|l| l.contains(":CONSOLE"))
                .map(str::to_string)
                .collect(),
        }
    }
}

/// Reads a pipe to the end on its own thread (so a full pipe never blocks the child).
fn drain(pipe: Option<impl Read + Send + 'static>) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_string(&mut text);
        }
        text
    })
}
