//! Real processes: wrong peers and bad bytes are kept out, and the cluster's view does
//! not change while it happens.

mod common;

use bully::certs::{self, TlsFiles};
use bully::client::Client;
use bully::protocol::{NodeId, Preempt, Timing};
use bully::transport::{ALPN_API, ALPN_PEER};
use common::{raw_client, raw_connect, TestCluster};
use std::time::Duration;

const AGREE: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intruders_and_garbage_do_not_change_the_view() {
    let mut t = TestCluster::new(3, Timing::default(), Preempt::Always);
    let all: Vec<NodeId> = t.cluster.ids();
    t.start_all();
    let term = t.wait_for_leader(&all, 3, AGREE).await;
    let cert_dir = t.dir.path().join("certs");
    let ca = cert_dir.join("ca.pem");

    eprintln!("=== garbage datagrams to every node");
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    for id in &all {
        for i in 0..300u32 {
            let junk: Vec<u8> = (0..(i % 1200 + 1)).map(|j| (j * 31 + i) as u8).collect();
            let _ = socket.send_to(&junk, t.cluster.addr(*id));
        }
    }

    eprintln!("=== a client with no certificate is refused");
    let conn = raw_connect(
        raw_client(&ca, None, ALPN_API),
        t.cluster.addr(1),
        "node-1.bully",
    )
    .await;
    if let Ok(conn) = conn {
        let answered = async {
            let (mut send, mut recv) = conn.open_bi().await.ok()?;
            bully::transport::write_frame(&mut send, &bully::api::Request::Status)
                .await
                .ok()?;
            bully::transport::read_frame::<bully::api::Response>(&mut recv)
                .await
                .ok()?
        };
        let answer = tokio::time::timeout(Duration::from_secs(5), answered).await;
        assert!(
            matches!(answer, Ok(None)),
            "a client without a certificate got an answer: {answer:?}"
        );
    }

    eprintln!("=== a client from another CA is refused");
    let other = tempfile::tempdir().unwrap();
    certs::init(other.path(), &[1, 2, 3]).unwrap();
    let foreign = TlsFiles::for_client(other.path());
    let refused =
        match Client::connect(t.cluster.addr(1), &foreign, Some(1), Duration::from_secs(3)).await {
            Ok(client) => client.status().await.is_err(),
            Err(_) => true,
        };
    assert!(refused, "a client from another CA got a status");

    eprintln!("=== a process configured as node 3 with node 2's certificate does not start");
    let config = std::fs::read_to_string(t.cluster.config_path(3)).unwrap();
    let impostor_dir = t.dir.path().join("impostor");
    std::fs::create_dir_all(&impostor_dir).unwrap();
    let impostor = config
        .replace("node-3.pem", "node-2.pem")
        .replace("node-3.key", "node-2.key")
        .replace(
            &t.cluster.data_dir(3).display().to_string(),
            &impostor_dir.display().to_string(),
        )
        .replace(
            &t.cluster.addr(3).to_string(),
            &bully::ports::free_udp_addr().unwrap().to_string(),
        );
    let impostor_path = t.dir.path().join("impostor.toml");
    std::fs::write(&impostor_path, impostor).unwrap();
    let out = std::process::Command::new(common::binary())
        .args(["node", "--config"])
        .arg(&impostor_path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "impostor exit status; stderr: {stderr}"
    );
    assert!(
        stderr.contains("node-2") && stderr.contains("3"),
        "the error names the certificate's and the configured ID: {stderr}"
    );

    eprintln!("=== an authenticated peer sending an oversized frame is dropped");
    let node1 = (cert_dir.join("node-1.pem"), cert_dir.join("node-1.key"));
    let conn = raw_connect(
        raw_client(&ca, Some((&node1.0, &node1.1)), ALPN_PEER),
        t.cluster.addr(3),
        "node-3.bully",
    )
    .await
    .expect("node 1's certificate is accepted by node 3");
    let mut stream = conn.open_uni().await.unwrap();
    let mut frame = vec![bully::codec::WIRE_VERSION];
    frame.extend_from_slice(&u32::MAX.to_be_bytes());
    stream.write_all(&frame).await.unwrap();
    let closed = tokio::time::timeout(Duration::from_secs(10), conn.closed()).await;
    assert!(
        closed.is_ok(),
        "node 3 did not drop a peer sending an oversized frame"
    );
    let log = std::fs::read_to_string(t.cluster.log_path(3)).unwrap();
    assert!(
        log.contains("bad frame"),
        "node 3 logs the bad frame:\n{log}"
    );

    eprintln!("=== the view is unchanged: everyone still follows 3 at the same epoch");
    let views = t.views(&all).await;
    assert_eq!(
        common::agreed(&views, 3),
        Some(term),
        "the view changed under attack: {views:#?}"
    );
    for id in &all {
        assert!(t.cluster.is_running(*id), "node {id} died under attack");
    }
}
