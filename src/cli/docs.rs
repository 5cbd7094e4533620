//! `bully completions SHELL` and `bully man`: generated from the same clap definition
//! as `--help`, so they cannot drift from the real options.

use clap::CommandFactory;
use clap_complete::Shell;
use std::io::Write;
use std::process::ExitCode;

/// Writes the completion script for `shell` to stdout.
pub fn completions(shell: Shell) -> ExitCode {
    let mut command = super::Cli::command();
    clap_complete::generate(shell, &mut command, "bully", &mut std::io::stdout());
    ExitCode::SUCCESS
}

/// Writes the man page (roff) for `bully` and every subcommand to stdout.
pub fn man() -> ExitCode {
    let command = super::Cli::command();
    let mut page = Vec::new();
    if let Err(e) = render(&command, &mut page) {
        eprintln!("error: cannot render the man page: {e}");
        return ExitCode::from(2);
    }
    match std::io::stdout().write_all(&page) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// The top page, then a section per subcommand, so one `bully.1` documents it all.
fn render(command: &clap::Command, out: &mut Vec<u8>) -> std::io::Result<()> {
    clap_mangen::Man::new(command.clone()).render(out)?;
    for sub in command.get_subcommands() {
        let name = format!("bully {}", sub.get_name());
        writeln!(out, ".SH \"{}\"", name.to_uppercase())?;
        let sub = sub.clone().bin_name(name);
        let man = clap_mangen::Man::new(sub);
        man.render_synopsis_section(out)?;
        man.render_description_section(out)?;
        man.render_options_section(out)?;
    }
    Ok(())
}
