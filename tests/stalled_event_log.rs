//! Issue 49: a node must not block its runtime on a disk write that safety does not
//! need. Node 3, the coordinator, has its event log on a FIFO whose pipe is full, so
//! every write to it blocks, as a write does on a disk flooded by a checkpoint or a
//! bulk load. Node 3 is paused and resumed and node 1 is killed, so node 3 has records
//! to write; it must go on answering, see all of it, and keep its office (no new
//! epoch). Once the pipe is read again, the records it queued arrive in order, and the
//! merged history passes I1–I7.

mod common;

use bully::api::event_log::EVENT_LOG;
use bully::protocol::{Preempt, Timing};
use common::{bully, stop_all_and_assert_invariants, wait_until, TestCluster};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const SOON: Duration = Duration::from_secs(30);

/// Reads the FIFO until `stop`, keeping every byte (bounded by the test's runtime).
fn drain(mut reader: File, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let mut chunk = vec![0u8; 1 << 16];
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        while !stop.load(Ordering::Relaxed) && std::time::Instant::now() < deadline {
            match reader.read(&mut chunk) {
                Ok(n) if n > 0 => bytes.extend_from_slice(&chunk[..n]),
                _ => std::thread::sleep(Duration::from_millis(5)),
            }
        }
        bytes
    })
}

fn pause_through_node_3(t: &TestCluster, verb: &str) {
    let config = t.cluster.config_path(3);
    let out = bully(&[verb, "--config", config.to_str().unwrap()]);
    assert!(out.status.success(), "bully {verb}: {}", common::text(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinator_whose_event_log_blocks_keeps_its_office() {
    let mut t = TestCluster::new(3, Timing::default(), Preempt::Always);
    let dir = t.cluster.data_dir(3);
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join(EVENT_LOG);
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    let nonblocking = nix::fcntl::OFlag::O_NONBLOCK.bits();
    let open = |read: bool| {
        OpenOptions::new()
            .read(read)
            .write(!read)
            .custom_flags(nonblocking)
            .open(&fifo)
            .expect("open the FIFO")
    };
    let reader = open(true);
    let mut filler = open(false);

    t.start_all();
    let term = t.wait_for_leader(&[1, 2, 3], 3, SOON).await;
    // From here on every write to node 3's event log blocks.
    while filler.write(&[b'\n'; 4096]).is_ok() {}

    pause_through_node_3(&t, "pause");
    wait_until("node 3 to show the pause", SOON, || async {
        let status = t.cluster.status(3, Duration::from_secs(2)).await.ok()?;
        status.pause.paused.then_some(())
    })
    .await;
    pause_through_node_3(&t, "resume");
    t.cluster.kill(1).expect("kill node 1");
    wait_until("node 3 to resume and see node 1 gone", SOON, || async {
        let status = t.cluster.status(3, Duration::from_secs(2)).await.ok()?;
        let one = status.peers.iter().find(|p| p.id == 1)?;
        (!status.pause.paused && !one.connected).then_some(())
    })
    .await;
    assert_eq!(
        t.wait_for_leader(&[2, 3], 3, SOON).await,
        term,
        "node 3 kept its office through the stalled log"
    );

    // The disk moves again; a node that stops writes what it queued first.
    let stop = Arc::new(AtomicBool::new(false));
    let drained = drain(reader, Arc::clone(&stop));
    for id in [2, 3] {
        let _ = t.cluster.stop(id, Duration::from_secs(5));
    }
    stop.store(true, Ordering::Relaxed);
    drop(filler);
    let bytes = drained.join().expect("drain");
    let pauses: Vec<bool> = bully::history::parse_json_lines(&bytes)
        .entries
        .into_iter()
        .filter_map(|e| match e.record {
            bully::history::Record::Maintenance { paused, .. } => Some(paused),
            _ => None,
        })
        .collect();
    assert_eq!(
        pauses,
        [true, false],
        "node 3's pause and resume were logged, in order"
    );
    // The checker reads node 3's log from a plain file again.
    std::fs::remove_file(&fifo).unwrap();
    std::fs::write(&fifo, &bytes).unwrap();
    stop_all_and_assert_invariants(&mut t);
}
