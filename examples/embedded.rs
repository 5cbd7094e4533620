//! Embedding a bully node in your own program: start it from a config, react to
//! leadership changes through the watch channel, shut it down cleanly.
//!
//! ```sh
//! cargo run --release -- certs init --dir config/certs --nodes 1,2,3
//! cargo run --example embedded -- config/node1.toml
//! ```
//! Start the other two with `bully node --config config/node2.toml` (and node3) to see
//! the coordinator change; Ctrl-C stops the embedded node.

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "config/node1.toml".into());
    let config = match bully::config::load(path.as_ref()) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let node = match bully::node::start(config).await {
        Ok(node) => node,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let mut changes = node.subscribe();
    let mut last = None;
    loop {
        let status = changes.borrow_and_update().clone();
        if last != Some((status.coordinator(), status.epoch)) {
            last = Some((status.coordinator(), status.epoch));
            match (status.coordinator(), status.epoch) {
                (Some(c), Some(epoch)) if c == status.id => {
                    println!("I lead; fence writes with epoch term {}", epoch.term)
                }
                (Some(c), Some(epoch)) => println!("node {c} leads (epoch {epoch})"),
                _ => println!("election in progress"),
            }
        }
        tokio::select! {
            changed = changes.changed() => if changed.is_err() { break },
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    match node.shutdown().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
