//! The `bully` binary: parse the command line, set up logging, run the command.

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = bully::cli::Cli::parse();
    if cli.command.only_prints() {
        bully::signals::die_quietly_on_sigpipe();
    }
    bully::cli::logging::init(cli.log_format);
    bully::cli::run(cli)
}
