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
