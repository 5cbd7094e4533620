//! `bully certs ...`: make a cluster CA, grow it (nodes, clients), and show what a
//! directory holds. Every command that signs needs `ca.key`, so they run on the
//! machine that keeps it, never on a node.

use crate::certs;
use crate::protocol::NodeId;
use clap::Subcommand;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `bully certs ...`
#[derive(Debug, Subcommand)]
pub enum CertsCommand {
    /// Write ca.pem/ca.key, node-<id>.pem/.key and client.pem/.key into a directory.
    /// Refuses if a CA is already there (use `add` or `client` to grow a cluster).
    Init {
        /// Where to write the files (created if missing).
        #[arg(long, default_value = "certs")]
        dir: PathBuf,
        /// Node IDs, comma separated, e.g. 1,2,3.
        #[arg(long, value_delimiter = ',', required = true)]
        nodes: Vec<NodeId>,
    },
    /// Issue node certificates with the CA already in the directory (ca.pem + ca.key),
    /// e.g. for a node 4 joining; the other nodes keep theirs.
    Add {
        /// The directory holding ca.pem and ca.key.
        #[arg(long, default_value = "certs")]
        dir: PathBuf,
        /// Node IDs, comma separated, e.g. 4,5.
        #[arg(long, value_delimiter = ',', required = true)]
        nodes: Vec<NodeId>,
        /// Re-issue existing node certificates with new keys (rotation).
        #[arg(long)]
        replace: bool,
    },
    /// Issue a client certificate for queries (`leader`, `status`, ...) with the CA in
    /// the directory: client-<name>.pem/.key (`--name client`: client.pem/.key).
    Client {
        /// The directory holding ca.pem and ca.key.
        #[arg(long, default_value = "certs")]
        dir: PathBuf,
        /// Who holds it (its common name), e.g. `monitoring`; letters, digits, . _ -
        #[arg(long)]
        name: String,
        /// Re-issue an existing client certificate with a new key (rotation).
        #[arg(long)]
        replace: bool,
    },
    /// List each certificate in a directory: identity, name, expiry, whether ca.pem
    /// signed it, and whether its key is there (with its mode) and matches.
    Show {
        /// The directory to inspect (needs ca.pem).
        #[arg(long, default_value = "certs")]
        dir: PathBuf,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// Runs one `certs` command; exit 0 on success, 2 on any error (nothing is written
/// when a command refuses).
pub fn run(command: &CertsCommand) -> ExitCode {
    let written = match command {
        CertsCommand::Init { dir, nodes } => certs::init(dir, nodes),
        CertsCommand::Add {
            dir,
            nodes,
            replace,
        } => certs::add_nodes_with(dir, nodes, *replace),
        CertsCommand::Client { dir, name, replace } => certs::issue_client(dir, name, *replace),
        CertsCommand::Show { dir, json } => return show(dir, *json),
    };
    match written {
        Ok(files) => {
            for file in files {
                println!("wrote {}", file.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn show(dir: &Path, json: bool) -> ExitCode {
    let rows = match certs::show(dir) {
        Ok(rows) => rows,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if json {
        super::print_json(&rows);
        return ExitCode::SUCCESS;
    }
    let mut table = vec![[
        "FILE", "IDENTITY", "NAME", "EXPIRES", "DAYS", "SIGNED", "KEY",
    ]
    .map(String::from)];
    for row in &rows {
        table.push([
            row.file
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            row.identity.clone(),
            row.common_name.clone(),
            row.expires.clone(),
            row.days_left.to_string(),
            if row.signed_by_ca { "yes" } else { "NO" }.to_string(),
            row.key.to_string(),
        ]);
    }
    print!("{}", super::table::render(&table));
    ExitCode::SUCCESS
}
