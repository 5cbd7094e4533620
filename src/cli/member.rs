//! `bully member`: the member list as the cluster holds it, and changes to it
//! (docs/design.md#membership). A change goes to the first node that answers, which
//! passes it to the coordinator; the answer comes once the list is committed.

use super::query::{connect_first, leader_status, print_answer};
use super::{print_json, QueryArgs};
use crate::protocol::{Change, NodeId, Role, Seat};
use clap::Subcommand;
use std::process::ExitCode;

/// What `bully member` does.
#[derive(Debug, Subcommand, Clone)]
pub enum MemberAction {
    /// The member list the node holds (the coordinator's, if it answers): each member,
    /// its seat, whether it is still a learner, and whether the list is committed.
    List(QueryArgs),
    /// Add node ID listening at ADDR (host:port). It joins as a learner and takes its
    /// seat once it has caught up; start it first, with a certificate from
    /// `bully certs add --nodes ID` and a config listing the members.
    Add {
        #[command(flatten)]
        query: QueryArgs,
        /// The new member's node ID (its certificate is issued for it).
        id: NodeId,
        /// Where the members dial it: `IP:port` or `host:port`.
        addr: String,
        /// Add it as a witness: it votes and acks, never leads.
        #[arg(long)]
        witness: bool,
    },
    /// Remove node ID from the cluster. The coordinator never removes itself: step it
    /// down first (`bully step-down`), then ask again.
    Remove {
        #[command(flatten)]
        query: QueryArgs,
        /// The member to remove.
        id: NodeId,
    },
    /// Node ID lost its disk: it loses its vote and becomes a learner, and takes its seat
    /// again once it has caught up on its new, empty store.
    Replace {
        #[command(flatten)]
        query: QueryArgs,
        /// The member whose disk was lost.
        id: NodeId,
    },
}

/// Runs `bully member ...`.
pub async fn run(action: MemberAction) -> ExitCode {
    let (query, change) = match action {
        MemberAction::List(query) => return list(&query).await,
        MemberAction::Add {
            query,
            id,
            addr,
            witness,
        } => {
            let seat = if witness { Seat::Witness } else { Seat::Voter };
            (query, Change::Add { id, addr, seat })
        }
        MemberAction::Remove { query, id } => (query, Change::Remove { id }),
        MemberAction::Replace { query, id } => (query, Change::Replace { id }),
    };
    if let Change::Add { addr, .. } = &change {
        if let Err(e) = addr.parse::<crate::transport::PeerAddr>() {
            eprintln!("error: ADDR `{addr}`: {e}");
            return ExitCode::from(2);
        }
    }
    let client = match connect_first(&query, |s| s.role == Role::Coordinator).await {
        Ok(client) => client,
        Err(code) => return code,
    };
    print_answer(client.change_members(change).await)
}

/// `bully member list`.
async fn list(query: &QueryArgs) -> ExitCode {
    let status = match leader_status(query).await {
        Ok(status) => status,
        Err(code) => return code,
    };
    let Some(list) = &status.members else {
        eprintln!(
            "error: node {} does not report a member list (an older version?)",
            status.id
        );
        return ExitCode::from(2);
    };
    if query.json {
        print_json(&serde_json::json!({
            "asked": status.id,
            "coordinator": status.coordinator(),
            "committed": status.members_committed,
            "list": list,
        }));
        return ExitCode::SUCCESS;
    }
    let committed = match (status.role, status.members_committed) {
        (Role::Coordinator, true) => "committed",
        (Role::Coordinator, false) => "change in progress",
        _ => "as held by this follower",
    };
    println!(
        "member list {} from node {} ({committed})",
        list.id, status.id
    );
    for member in &list.members {
        let seat = match member.seat {
            Seat::Voter => "voter",
            Seat::Witness => "witness",
        };
        let learner = if member.learner { " (learner)" } else { "" };
        let leads = if status.coordinator() == Some(member.id) {
            "  coordinator"
        } else {
            ""
        };
        let addr = if member.addr.is_empty() {
            "-"
        } else {
            &member.addr
        };
        println!("  {:>4}  {seat}{learner}  {addr}{leads}", member.id);
    }
    ExitCode::SUCCESS
}
