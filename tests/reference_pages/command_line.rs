//! `docs/reference/command-line.md`: `bully` and every subcommand, recursively, from the
//! clap definition (`bully::cli::Cli`, src/cli/mod.rs) that `--help`, `bully man` and
//! the completions come from too (src/cli/docs.rs): each one's description, then its
//! usage and options as `--help` prints them.

use crate::fresh::generated_notice;
use crate::markdown::prose;
use bully::cli::Cli;
use clap::{ColorChoice, Command, CommandFactory};

/// The page, from the repository root.
pub const PAGE: &str = "docs/reference/command-line.md";

/// The width the help text is wrapped at, whatever the terminal running the test.
const WIDTH: usize = 100;

/// The page's text.
pub fn page() -> String {
    let mut root = Cli::command()
        .color(ColorChoice::Never)
        .term_width(WIDTH)
        // The value of BULLY_CERTS or BULLY_ENDPOINTS in the test's environment is no
        // part of the reference.
        .mut_args(|arg| arg.hide_env_values(true));
    // Building propagates the global options and the full names (`bully member add`).
    root.build();
    let mut page = format!(
        "{}\n\n# Command-line reference\n\n\
         *Generated from the clap definition in `src/cli/`, the same one `bully --help`, \
         `bully man` and the shell completions come from.*\n\n\
         Exit codes: 0 success, 1 \"no\" (e.g. no leader known), 2 bad input or \
         unreachable, unless a command says otherwise.\n",
        generated_notice("the clap definition in src/cli/ (bully::cli::Cli)")
    );
    add_command(&mut page, &root);
    page
}

/// Adds `command`'s section, then its visible subcommands' in order.
fn add_command(page: &mut String, command: &Command) {
    let mut command = command
        .clone()
        .term_width(WIDTH)
        .mut_args(|arg| arg.hide_env_values(true))
        .help_template("{usage-heading} {usage}\n\n{all-args}{after-help}");
    let name = command
        .get_bin_name()
        .unwrap_or(command.get_name())
        .to_string();
    page.push_str(&format!("\n## {name}\n\n"));
    let about = command
        .get_long_about()
        .or(command.get_about())
        .map(|text| text.to_string())
        .unwrap_or_default();
    if !about.is_empty() {
        page.push_str(&format!("{}\n\n", prose(&about)));
    }
    let help = command.render_long_help().to_string();
    page.push_str(&format!("```text\n{}\n```\n", tidy(&help)));
    for sub in command.get_subcommands() {
        // clap's own `help` subcommand only says what --help says.
        if sub.is_hide_set() || sub.get_name() == "help" {
            continue;
        }
        add_command(page, sub);
    }
}

/// Help text without trailing spaces or runs of blank lines (an argument without help
/// leaves two).
fn tidy(help: &str) -> String {
    let mut lines: Vec<&str> = Vec::new();
    for line in help.lines().map(str::trim_end) {
        if !(line.is_empty() && lines.last().is_some_and(|last| last.is_empty())) {
            lines.push(line);
        }
    }
    lines.join("\n").trim().to_string()
}
