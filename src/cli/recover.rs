//! `bully recover`: recovery from a lost majority, on a stopped survivor
//! (docs/design.md#recovery-from-a-lost-majority). Without `--force` it prints what it
//! would write and what can be lost, and changes nothing (exit 1); with it, it writes
//! (exit 0). Bad input, a running node or an unreadable store: exit 2.

use crate::node::forced_recovery::{self, RecoverError};
use crate::protocol::majority_loss::ForcedRecovery;
use crate::protocol::NodeId;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

/// `bully recover ...`
#[derive(Debug, Args, Clone)]
pub struct RecoverArgs {
    /// The survivor's TOML config (its id and data_dir); the node must be stopped.
    #[arg(long, short)]
    pub config: PathBuf,
    /// The survivors that form the new configuration, comma separated, this node
    /// among them, e.g. `--members 1` or `--members 1,4`. Every other member is lost.
    #[arg(long, required = true, value_delimiter = ',', value_name = "ID,..")]
    pub members: Vec<NodeId>,
    /// Really write it. Without it the command prints the plan and what can be lost,
    /// changes nothing, and exits 1.
    #[arg(long)]
    pub force: bool,
}

/// Runs `bully recover`.
pub fn run(args: &RecoverArgs) -> ExitCode {
    let config = match crate::config::load(&args.config) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let prepared = match forced_recovery::prepare(&config, &args.members) {
        Ok(prepared) => prepared,
        Err(e) => return refuse(&e),
    };
    print!("{}", describe(prepared.plan(), args.force));
    if !args.force {
        println!("Nothing was changed. Run again with --force to write it.");
        return ExitCode::from(1);
    }
    match prepared.apply() {
        Ok(plan) => {
            println!(
                "Recovered: node {} holds member list {} with members {}, term cell {}.",
                config.id,
                plan.list.id,
                ids(&plan.list.members),
                plan.cells.term
            );
            ExitCode::SUCCESS
        }
        Err(e) => refuse(&e),
    }
}

fn refuse(e: &RecoverError) -> ExitCode {
    eprintln!("error: {e}");
    ExitCode::from(2)
}

/// The members' IDs, comma separated.
fn ids(members: &[crate::protocol::Member]) -> String {
    let ids: Vec<String> = members.iter().map(|m| m.id.to_string()).collect();
    ids.join(",")
}

/// What every recovery gives up, and what the operator must do after it.
const WARNINGS: [&str; 15] = [
    "What can be lost:",
    "  - whatever the lost members accepted after this node last heard from them: newer",
    "    epochs (a coordinator this node never followed) and member-list changes committed",
    "    without this node. The survivors go on from what this node holds.",
    "  - safety, if a lost member is only cut off, not gone: a majority of the old list",
    "    could still elect a coordinator of its own. Make sure they are down for good.",
    "You must:",
    "  - never start a lost member again on its old data dir: wipe it, then add it back",
    "    as a new member once the survivors lead (`bully member add ID ADDR`).",
    "  - with more than one node in --members: run this same command (same --members)",
    "    on each of them before starting any, then start them all: none votes or leads",
    "    until every other one has reported its terms. A survivor left out of --members",
    "    counts as lost; one that cannot come up holds the others back: stop them and",
    "    recover again without it.",
    "  - start this node as before: `bully node --config F` (no --new-cluster).",
];

/// The plan in words: what is written, what is given up, what the operator must do.
fn describe(plan: &ForcedRecovery, forced: bool) -> String {
    let will = if forced { "Writing" } else { "Would write" };
    let accepted = plan
        .cells_before
        .accepted
        .map_or_else(|| "none".to_string(), |e| e.to_string());
    let lost: Vec<String> = plan
        .lost
        .iter()
        .map(|m| {
            let addr = if m.addr.is_empty() { "-" } else { &m.addr };
            format!("{} ({addr})", m.id)
        })
        .collect();
    let mut text = format!(
        "This node has seen: term {}, accepted epoch {accepted}, member list {} with \
         members {}.\n",
        plan.cells_before.term,
        plan.from.id,
        ids(&plan.from.members),
    );
    text += &format!(
        "{will}: member list {} with members {} only, term cell {} (above every term \
         this node has seen).\n",
        plan.list.id,
        ids(&plan.list.members),
        plan.cells.term
    );
    text += &format!("Lost members: {}.\n", lost.join(", "));
    text += &WARNINGS.join("\n");
    text.push('\n');
    text
}
