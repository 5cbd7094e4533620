//! `bully leader`, `status`, `watch` and `step-down`: find the node, authenticate with
//! the client certificate, ask, print.

use super::{print_json, QueryArgs};
use crate::certs::TlsFiles;
use crate::client::Client;
use crate::node::Status;
use crate::protocol::NodeId;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

/// Where to connect and how to prove who we are.
struct Target {
    addr: SocketAddr,
    tls: TlsFiles,
    expect: Option<NodeId>,
}

fn resolve(args: &QueryArgs) -> Result<Target, String> {
    let (addr, default_dir, expect) = match (&args.config, &args.endpoint) {
        (Some(path), _) => {
            let config = crate::config::load(path).map_err(|e| e.to_string())?;
            let mut addr = config.listen;
            if addr.ip().is_unspecified() {
                addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
            }
            let dir = config
                .tls
                .ca
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_default();
            (addr, dir, Some(config.id))
        }
        (None, Some(endpoint)) => {
            let addr = endpoint
                .to_socket_addrs()
                .map_err(|e| format!("--endpoint {endpoint}: {e}"))?
                .next()
                .ok_or_else(|| format!("--endpoint {endpoint}: no address"))?;
            (addr, args.certs.clone(), None)
        }
        (None, None) => {
            return Err("say which node to ask: --config FILE or --endpoint HOST:PORT".into())
        }
    };
    let tls = TlsFiles {
        ca: args
            .ca
            .clone()
            .unwrap_or_else(|| default_dir.join("ca.pem")),
        cert: args
            .cert
            .clone()
            .unwrap_or_else(|| default_dir.join("client.pem")),
        key: args
            .key
            .clone()
            .unwrap_or_else(|| default_dir.join("client.key")),
    };
    for (flag, file) in [
        ("--ca", &tls.ca),
        ("--cert", &tls.cert),
        ("--key", &tls.key),
    ] {
        if !file.is_file() {
            return Err(format!(
                "{flag}: {} does not exist (make certs with `bully certs init`, or pass {flag})",
                file.display()
            ));
        }
    }
    Ok(Target { addr, tls, expect })
}

async fn connect(args: &QueryArgs) -> Result<Client, ExitCode> {
    let target = resolve(args).map_err(|e| {
        eprintln!("error: {e}");
        ExitCode::from(2)
    })?;
    Client::connect(target.addr, &target.tls, target.expect, args.timeout)
        .await
        .map_err(|e| {
            eprintln!("error: {e}");
            ExitCode::from(2)
        })
}

async fn fetch_status(args: &QueryArgs) -> Result<Status, ExitCode> {
    let client = connect(args).await?;
    client.status().await.map_err(|e| {
        eprintln!("error: {e}");
        ExitCode::from(2)
    })
}

/// `bully leader`: exit 0 with the coordinator, 1 when none is known, 2 unreachable.
pub async fn leader(args: &QueryArgs) -> ExitCode {
    let status = match fetch_status(args).await {
        Ok(status) => status,
        Err(code) => return code,
    };
    if args.json {
        print_json(&serde_json::json!({
            "node": status.id,
            "role": status.role,
            "coordinator": status.coordinator,
            "epoch": status.epoch,
            "mode": status.mode,
            "token": status.token(),
        }));
    } else {
        match (status.coordinator, status.epoch, status.token()) {
            (Some(c), Some(e), Some(token)) => println!(
                "{c} (epoch {e}, fencing token {token}, {} mode, asked node {})",
                status.mode, status.id
            ),
            _ => println!(
                "no coordinator known (node {} is a {})",
                status.id, status.role
            ),
        }
    }
    if status.coordinator.is_some() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// `bully status`: everything the node knows about itself and its peers.
pub async fn status(args: &QueryArgs) -> ExitCode {
    let status = match fetch_status(args).await {
        Ok(status) => status,
        Err(code) => return code,
    };
    if args.json {
        print_json(&status);
        return ExitCode::SUCCESS;
    }
    println!("{}", status.line());
    println!(
        "  incarnation {}  durable term {}  accepted {}",
        status.incarnation,
        status.term,
        status
            .accepted
            .map(|e| e.to_string())
            .unwrap_or_else(|| "-".into())
    );
    let peers: Vec<String> = status
        .peers
        .iter()
        .map(|p| format!("{}:{}", p.id, if p.connected { "up" } else { "down" }))
        .collect();
    println!("  peers {}", peers.join(" "));
    let health = match status.health {
        crate::node::metrics::HealthState::Unchecked => "none configured",
        crate::node::metrics::HealthState::Pending => "no result yet",
        crate::node::metrics::HealthState::Passing => "passing",
        crate::node::metrics::HealthState::Failing => "failing",
    };
    let stepped_down = match status.stepped_down_until_ms {
        Some(until) => format!(
            "  stepped down for {} more ms",
            until.saturating_sub(crate::node::status::wall_ms())
        ),
        None => String::new(),
    };
    println!(
        "  eligible {}  health check {health}{stepped_down}",
        if status.eligible { "yes" } else { "no" }
    );
    ExitCode::SUCCESS
}

/// `bully watch`: one line per coordinator change until the node goes away.
pub async fn watch(args: &QueryArgs) -> ExitCode {
    let client = match connect(args).await {
        Ok(client) => client,
        Err(code) => return code,
    };
    let mut stream = match client.watch().await {
        Ok(stream) => stream,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let mut last = None;
    loop {
        let next = tokio::select! {
            next = stream.next() => next,
            _ = super::shutdown_signal() => return ExitCode::SUCCESS,
        };
        match next {
            Ok(Some(status)) => {
                let key = (status.coordinator, status.epoch);
                if last == Some(key) {
                    continue;
                }
                last = Some(key);
                if args.json {
                    print_json(&status);
                } else {
                    println!("{}", status.line());
                }
            }
            Ok(None) => {
                eprintln!("the node closed the watch (it shut down)");
                return ExitCode::from(2);
            }
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        }
    }
}

/// `bully step-down`: ask the coordinator to hand over for a while.
pub async fn step_down(args: &QueryArgs, for_: Duration) -> ExitCode {
    let client = match connect(args).await {
        Ok(client) => client,
        Err(code) => return code,
    };
    match client.step_down(for_.as_millis() as u64).await {
        Ok(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
