//! The HTTP endpoint over HTTPS (`[http] tls`) and Patroni's write routes, on three
//! real nodes without `[postgres]` (issue 50):
//!
//! - Reads stay open over HTTPS, with or without a client certificate; the server's
//!   certificate is the node's (`node-<id>.bully`, from the cluster CA), and `/cluster`
//!   gives `https://` API URLs.
//! - No unauthenticated write path: `POST /switchover` is 403 without a client
//!   certificate, 401 with one but without (or with the wrong) basic credentials; on a
//!   plain-HTTP node every write route is 403.
//! - With both, a switchover through a follower (Patroni's body: `leader`, `candidate`)
//!   hands the office to the candidate, `leader` naming another node is a 412, and
//!   `POST /restart` on a node without a server is a 503 saying why.
//! - The invariants hold on the merged event logs.

mod common;
#[path = "common/primary.rs"]
mod primary;

use base64::Engine;
use bully::certs::{self, TlsFiles};
use bully::config::HttpConfig;
use bully::protocol::{NodeId, Preempt, Timing};
use common::{stop_all_and_assert_invariants, wait_until, TestCluster};
use primary::{http_addrs, http_get, http_raw, parse_answer, phase};
use rustls::pki_types::ServerName;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const AGREE: Duration = Duration::from_secs(20);
const PASSWORD: &str = "correct horse";

/// An HTTPS request to node `id` at `addr`, trusting the cluster CA of `tls`, sending
/// its client certificate when `with_cert`: the status code and body.
async fn https(
    addr: SocketAddr,
    id: NodeId,
    tls: &TlsFiles,
    with_cert: bool,
    request: &str,
) -> std::io::Result<(u16, String)> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(certs::load_roots(&tls.ca).unwrap());
    let config = match with_cert {
        true => builder
            .with_client_auth_cert(
                certs::load_certs(&tls.cert).unwrap(),
                certs::load_key(&tls.key).unwrap(),
            )
            .unwrap(),
        false => builder.with_no_client_auth(),
    };
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let name = ServerName::try_from(format!("node-{id}.bully")).unwrap();
    let exchange = async {
        let tcp = tokio::net::TcpStream::connect(addr).await?;
        let mut stream = connector.connect(name, tcp).await?;
        stream.write_all(request.as_bytes()).await?;
        let mut answer = Vec::new();
        // The server closes after one answer (a TLS close_notify, or a bare close).
        let _ = stream.read_to_end(&mut answer).await;
        Ok(parse_answer(&answer))
    };
    tokio::time::timeout(Duration::from_secs(40), exchange)
        .await
        .map_err(|_| std::io::Error::other("https timeout"))?
}

/// A POST of `body` to `path`, with basic credentials when given.
fn post(path: &str, body: &str, credentials: Option<&str>) -> String {
    let auth = credentials
        .map(|c| {
            let token = base64::engine::general_purpose::STANDARD.encode(c);
            format!("Authorization: Basic {token}\r\n")
        })
        .unwrap_or_default();
    format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_reads_are_open_and_writes_need_a_certificate_and_the_password() {
    let mut t = TestCluster::new(3, Timing::default(), Preempt::Always);
    let ids = t.cluster.ids();
    let http = http_addrs(&ids);
    let password_file = t.dir.path().join("http.password");
    std::fs::write(&password_file, format!("{PASSWORD}\n")).unwrap();
    for (&id, &listen) in &http {
        // Node 2 stays on plain HTTP: its write routes are all refused.
        let secured = id != 2;
        let file = password_file.clone();
        t.cluster
            .edit_config(id, |c| {
                c.http = Some(HttpConfig {
                    tls: secured,
                    username: secured.then(|| "admin".to_string()),
                    password_file: secured.then_some(file),
                    ..HttpConfig::on(listen)
                })
            })
            .unwrap();
    }
    t.start_all();
    t.wait_for_leader(&ids, 3, AGREE).await;
    let client = t.cluster.client_tls().clone();
    let credentials = format!("admin:{PASSWORD}");

    phase("reads over HTTPS, with and without a client certificate");
    for with_cert in [false, true] {
        let get = "GET /patroni HTTP/1.1\r\nHost: x\r\n\r\n";
        let (code, body) = https(http[&1], 1, &client, with_cert, get).await.unwrap();
        assert_eq!(code, 200, "with_cert {with_cert}: {body}");
        let json: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(json["patroni"]["name"], "1", "{json}");
    }
    let get = "GET /cluster HTTP/1.1\r\nHost: x\r\n\r\n";
    let (code, body) = https(http[&3], 3, &client, false, get).await.unwrap();
    assert_eq!(code, 200, "{body}");
    let cluster: serde_json::Value = serde_json::from_str(&body).unwrap();
    let urls: Vec<&str> = cluster["members"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["api_url"].as_str())
        .collect();
    assert_eq!(urls.len(), 3, "{cluster}");
    assert_eq!(
        urls.iter().filter(|u| u.starts_with("https://")).count(),
        2,
        "nodes 1 and 3 serve HTTPS: {urls:?}"
    );

    phase("no unauthenticated write path");
    let to_one = r#"{"leader": "3", "candidate": "1"}"#;
    let cases = [
        (false, None, 403, "client certificate"),
        (true, None, 401, "basic authentication"),
        (true, Some("admin:wrong"), 401, "wrong user or password"),
    ];
    for (with_cert, creds, expected, says) in cases {
        let request = post("/switchover", to_one, creds);
        let (code, body) = https(http[&1], 1, &client, with_cert, &request)
            .await
            .unwrap();
        assert_eq!(code, expected, "cert {with_cert}, {creds:?}: {body}");
        assert!(body.contains(says), "{body}");
    }
    let plain = post("/switchover", to_one, Some(&credentials));
    let (code, body) = http_raw(http[&2], plain.as_bytes()).await.unwrap();
    assert_eq!(code, 403, "plain HTTP: {body}");
    assert!(body.contains("HTTPS"), "{body}");
    let (code, _) = http_get(http[&3], "/patroni")
        .await
        .unwrap_or((0, String::new()));
    assert_ne!(code, 200, "an HTTPS port does not answer plain HTTP");
    let views = t.views(&ids).await;
    assert!(
        views.values().flatten().all(|s| s.coordinator() == Some(3)),
        "nothing changed: {views:?}"
    );

    phase("a switchover through follower 1 with Patroni's body");
    let wrong_leader = post(
        "/switchover",
        r#"{"leader": "2", "candidate": "1"}"#,
        Some(&credentials),
    );
    let (code, body) = https(http[&1], 1, &client, true, &wrong_leader)
        .await
        .unwrap();
    assert_eq!(code, 412, "{body}");
    let request = post("/switchover", to_one, Some(&credentials));
    let (code, body) = https(http[&1], 1, &client, true, &request).await.unwrap();
    assert_eq!(code, 200, "{body}");
    wait_until("node 1 leads, agreed by all", AGREE, || async {
        let views = t.views(&ids).await;
        views
            .values()
            .all(|s| s.as_ref().is_some_and(|s| s.coordinator() == Some(1)))
            .then_some(())
    })
    .await;

    phase("POST /restart on a node without a server: 503, saying why");
    let restart = post("/restart", "", Some(&credentials));
    let (code, body) = https(http[&3], 3, &client, true, &restart).await.unwrap();
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("keeps no PostgreSQL server"), "{body}");

    stop_all_and_assert_invariants(&mut t);
}
