//! Where a node's log goes and how it looks: plain text without colour codes when
//! stderr is not a terminal (the journal, a file), JSON lines for log shippers.

use clap::ValueEnum;
use std::io::IsTerminal;

/// `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines; coloured only on a terminal.
    Text,
    /// One JSON object per line (timestamp, level, target, fields).
    Json,
}

/// Installs the global subscriber: level filter from `BULLY_LOG` (default
/// `info,quinn=warn,rustls=warn`), output to stderr in `format`.
pub fn init(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("BULLY_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,quinn=warn,rustls=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => builder.json().with_ansi(false).init(),
    }
}

/// Lets the process die quietly of SIGPIPE when its stdout reader goes away
/// (`bully status | head -1`), like other Unix tools, instead of panicking in
/// `println!`. Only for commands that own no children and no sockets to other
/// processes' streams: a node (which writes to HTTP clients) keeps Rust's default of
/// ignoring SIGPIPE so a vanished client is an error, not a death.
pub fn die_quietly_on_sigpipe() {
    // SAFETY: signal(2) with SIG_DFL for SIGPIPE, before any thread is started.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
