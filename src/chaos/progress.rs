//! The progress display of a run, on stderr: on a terminal one status line redrawn in
//! place with step lines scrolling above it; otherwise (a CI log, a pipe) plain lines,
//! a status line every few seconds so logs stay short.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// How often a plain (non-terminal) status line is printed.
const PLAIN_EVERY: Duration = Duration::from_secs(5);

/// Where progress goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Redraw one line in place (stderr is a terminal).
    Tty,
    /// Plain lines.
    Lines,
    /// Nothing (tests, `--json -`).
    Off,
}

impl Mode {
    /// `Tty` when stderr is a terminal, else `Lines`.
    pub fn detect() -> Mode {
        if std::io::stderr().is_terminal() {
            Mode::Tty
        } else {
            Mode::Lines
        }
    }
}

/// The progress printer.
#[derive(Debug)]
pub struct Progress {
    mode: Mode,
    started: Instant,
    last_plain: Option<Instant>,
    status_shown: bool,
}

impl Progress {
    /// Starts the clock for the `[  12.3s]` prefixes.
    pub fn new(mode: Mode) -> Progress {
        Progress {
            mode,
            started: Instant::now(),
            last_plain: None,
            status_shown: false,
        }
    }

    /// Prints an event line (a step, a phase), keeping the status line below it.
    pub fn event(&mut self, text: &str) {
        let line = format!("[{:>7.2}s] {text}", self.started.elapsed().as_secs_f64());
        let mut err = std::io::stderr().lock();
        match self.mode {
            Mode::Off => {}
            Mode::Lines => {
                let _ = writeln!(err, "{line}");
            }
            Mode::Tty => {
                let _ = write!(err, "\r\x1b[2K{line}\n");
                self.status_shown = false;
            }
        }
    }

    /// Shows the status line: redrawn in place on a terminal, every few seconds else.
    pub fn status(&mut self, text: &str) {
        let mut err = std::io::stderr().lock();
        match self.mode {
            Mode::Off => {}
            Mode::Tty => {
                let _ = write!(err, "\r\x1b[2K{text}");
                let _ = err.flush();
                self.status_shown = true;
            }
            Mode::Lines => {
                if self.last_plain.map_or(true, |t| t.elapsed() >= PLAIN_EVERY) {
                    self.last_plain = Some(Instant::now());
                    let _ = writeln!(
                        err,
                        "[{:>7.2}s] {text}",
                        self.started.elapsed().as_secs_f64()
                    );
                }
            }
        }
    }

    /// Ends the status line so the report starts on a fresh line.
    pub fn finish(&mut self) {
        if self.mode == Mode::Tty && self.status_shown {
            let _ = writeln!(std::io::stderr());
            self.status_shown = false;
        }
    }
}
