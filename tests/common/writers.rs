//! Steady writers for the Redis tests, and what their records prove.
//!
//! Each writer runs in its own thread at a fixed pace, one key per write, and records
//! every attempt. A write is `MULTI; SET key seq; GET bully:epoch; EXEC`: the reply says
//! which primary's epoch (the fencing token the example's `on-elected.sh` stores next
//! to the data)
//! accepted it, atomically with the write. `Waiting` writers follow each write with
//! `WAIT 1 100`, the way a client that must not lose a write uses Redis.
//!
//! From the records: the longest write gap, the writes lost (checked against the final
//! primary's data), and the time with two writable primaries: a write accepted by an
//! older epoch's primary after a newer epoch's primary had already accepted one.
//! Included with `#[path = "common/writers.rs"]` next to `resp.rs`.
#![allow(dead_code)]

use super::resp::{Conn, Reply};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Time between two writes of one writer (100 writes/s each).
pub const PACE: Duration = Duration::from_millis(10);
/// How long a write may block (a paused primary) before the writer gives up on the
/// connection and reconnects.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(1);

/// How a writer writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// The write alone (acknowledged by the primary only).
    Plain,
    /// The write, then `WAIT 1 100`: acknowledged once a replica has it.
    Waiting,
}

/// One write attempt.
#[derive(Debug, Clone)]
pub struct Attempt {
    pub writer: &'static str,
    pub style: Style,
    pub key: String,
    pub value: String,
    /// The Redis port the connection reached (through HAProxy: the backend's).
    pub port: u16,
    pub start: Instant,
    pub end: Instant,
    /// The epoch of the primary that accepted it; `None` if it was not accepted.
    pub epoch: Option<u64>,
    /// Waiting writers: whether a replica acknowledged it (`WAIT` answered at least 1).
    pub replicated: bool,
    /// Why it failed, if it did.
    pub error: Option<String>,
}

/// Whether every writer's `records` hold a write that `port`'s server accepted (under a
/// known epoch) and that started after `since`: the failover is over for all of them.
pub fn each_wrote_on(records: &[Vec<Attempt>], port: u16, since: Instant) -> bool {
    records.iter().all(|mine| {
        mine.iter()
            .any(|a| a.port == port && a.start > since && a.epoch.is_some())
    })
}

/// A running writer; stopped (and joined) with [`Writer::stop`] or on drop.
pub struct Writer {
    stop: Arc<AtomicBool>,
    records: Arc<Mutex<Vec<Attempt>>>,
    thread: Option<JoinHandle<()>>,
}

impl Writer {
    /// Starts writing keys `name:1`, `name:2`, ... to `addr`.
    pub fn start(name: &'static str, addr: SocketAddr, password: &str, style: Style) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let records = Arc::new(Mutex::new(Vec::new()));
        let (s, r, password) = (
            Arc::clone(&stop),
            Arc::clone(&records),
            password.to_string(),
        );
        let thread = std::thread::spawn(move || write_loop(name, addr, &password, style, &s, &r));
        Writer {
            stop,
            records,
            thread: Some(thread),
        }
    }

    /// Every attempt so far.
    pub fn records(&self) -> Vec<Attempt> {
        self.records.lock().unwrap().clone()
    }

    /// Stops the thread and returns every attempt.
    pub fn stop(mut self) -> Vec<Attempt> {
        self.halt();
        self.records()
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.halt();
    }
}

/// A connection and the Redis port it reached.
fn connect(addr: SocketAddr, password: &str) -> Option<(Conn, u16)> {
    let mut conn = Conn::open(addr, Some(password), WRITE_TIMEOUT).ok()?;
    let port = match conn.call(&["CONFIG", "GET", "port"]).ok()? {
        Reply::Array(items) => match items.get(1) {
            Some(Reply::Bulk(Some(port))) => port.parse().ok()?,
            _ => return None,
        },
        _ => return None,
    };
    Some((conn, port))
}

fn write_loop(
    name: &'static str,
    addr: SocketAddr,
    password: &str,
    style: Style,
    stop: &AtomicBool,
    records: &Mutex<Vec<Attempt>>,
) {
    let mut conn: Option<(Conn, u16)> = None;
    let mut seq: u64 = 0;
    let mut next = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now < next {
            std::thread::sleep(next - now);
        }
        next += PACE;
        if Instant::now() > next + PACE * 10 {
            next = Instant::now(); // a long stall: do not burst to catch up
        }
        let Some((c, port)) = conn.as_mut() else {
            conn = connect(addr, password);
            continue;
        };
        seq += 1;
        let key = format!("{name}:{seq}");
        let value = seq.to_string();
        let start = Instant::now();
        let (epoch, replicated, error) = match write_once(c, &key, &value, style) {
            Ok((epoch, replicated)) => (Some(epoch), replicated, None),
            Err(e) => (None, false, Some(e)),
        };
        let attempt = Attempt {
            writer: name,
            style,
            key,
            value,
            port: *port,
            start,
            end: Instant::now(),
            epoch,
            replicated,
            error,
        };
        if attempt.error.is_some() {
            conn = None; // errors and timeouts: reconnect (HAProxy may route elsewhere)
        }
        records.lock().unwrap().push(attempt);
    }
}

/// One write; `Ok((epoch, replicated))` when the primary accepted it.
fn write_once(
    conn: &mut Conn,
    key: &str,
    value: &str,
    style: Style,
) -> Result<(u64, bool), String> {
    let replies = conn
        .pipeline(&[
            &["MULTI"],
            &["SET", key, value],
            &["GET", "bully:epoch"],
            &["EXEC"],
        ])
        .map_err(|e| e.to_string())?;
    let epoch = match replies.last() {
        Some(Reply::Array(items)) if items.first().is_some_and(Reply::is_ok) => {
            match items.get(1) {
                Some(Reply::Bulk(Some(e))) => e.parse().map_err(|_| format!("bad epoch {e}"))?,
                Some(Reply::Bulk(None)) => 0,
                other => return Err(format!("unexpected GET reply {other:?}")),
            }
        }
        other => return Err(format!("{other:?} (replies {replies:?})")),
    };
    if style == Style::Plain {
        return Ok((epoch, false));
    }
    match conn.call(&["WAIT", "1", "100"]) {
        Ok(Reply::Int(n)) => Ok((epoch, n >= 1)),
        // Accepted by the primary, but not known to be replicated.
        Ok(_) | Err(_) => Ok((epoch, false)),
    }
}

/// The longest time without an accepted write among `attempts` that ended within
/// `[from, to]`, counted from the last accepted write before it: `(length, where it
/// began)`.
pub fn longest_gap(attempts: &[Attempt], from: Instant, to: Instant) -> (Duration, Instant) {
    let mut ends: Vec<Instant> = attempts
        .iter()
        .filter(|a| a.epoch.is_some())
        .map(|a| a.end)
        .collect();
    ends.sort();
    let before = ends
        .iter()
        .rev()
        .find(|&&e| e < from)
        .copied()
        .unwrap_or(from);
    let inside = ends.into_iter().filter(|&e| e >= from && e <= to);
    let mut longest = (Duration::ZERO, before);
    let mut last = before;
    for end in inside.chain(std::iter::once(to)) {
        if end - last > longest.0 {
            longest = (end - last, last);
        }
        last = end;
    }
    longest
}

/// What went wrong during `[from, to]`, one line per run of like failures (a run ends
/// after 200 ms without one):
/// `+120 ms..+480 ms: 12 x Err(...)` (times after `from`), for the test's log.
pub fn failures(attempts: &[Attempt], from: Instant, to: Instant) -> Vec<String> {
    let mut lines: Vec<(Instant, Instant, usize, String)> = Vec::new();
    for a in attempts.iter().filter(|a| a.start >= from && a.end <= to) {
        let Some(error) = &a.error else { continue };
        let kind: String = error.chars().take(60).collect();
        match lines.last_mut() {
            Some(last) if last.3 == kind && a.start - last.1 < Duration::from_millis(200) => {
                last.1 = a.end;
                last.2 += 1;
            }
            _ => lines.push((a.start, a.end, 1, kind)),
        }
    }
    let ms = |t: Instant| (t - from).as_millis();
    lines
        .into_iter()
        .map(|(s, e, n, kind)| format!("+{} ms..+{} ms: {n} x {kind}", ms(s), ms(e)))
        .collect()
}

/// Time with two writable primaries: writes an older epoch's primary accepted after a
/// newer epoch's primary had accepted one. Returns how many, and the longest span
/// from the newer write's end to the older write's start (0 when none).
pub fn stale_primary_writes(attempts: &[Attempt]) -> (usize, Duration) {
    // For each epoch, the earliest end of a write it accepted.
    let mut first_end: std::collections::BTreeMap<u64, Instant> = Default::default();
    for a in attempts {
        if let Some(epoch) = a.epoch {
            let e = first_end.entry(epoch).or_insert(a.end);
            *e = (*e).min(a.end);
        }
    }
    let mut count = 0;
    let mut longest = Duration::ZERO;
    for a in attempts {
        let Some(epoch) = a.epoch else { continue };
        let newer = first_end.range(epoch + 1..).map(|(_, &end)| end).min();
        if let Some(newer_end) = newer.filter(|&end| end < a.start) {
            count += 1;
            longest = longest.max(a.start - newer_end);
        }
    }
    (count, longest)
}

/// Accepted writes missing (or wrong) in the data set read by `read`, which maps keys
/// to values: `(acknowledged by a replica and lost, accepted and lost)`.
pub fn lost(
    attempts: &[Attempt],
    mut read: impl FnMut(&[&str]) -> Vec<Option<String>>,
) -> (Vec<String>, Vec<String>) {
    let accepted: Vec<&Attempt> = attempts.iter().filter(|a| a.epoch.is_some()).collect();
    let (mut replicated_lost, mut accepted_lost) = (Vec::new(), Vec::new());
    for chunk in accepted.chunks(500) {
        let keys: Vec<&str> = chunk.iter().map(|a| a.key.as_str()).collect();
        let values = read(&keys);
        for (a, value) in chunk.iter().zip(values) {
            if value.as_deref() != Some(a.value.as_str()) {
                accepted_lost.push(a.key.clone());
                if a.replicated {
                    replicated_lost.push(a.key.clone());
                }
            }
        }
    }
    (replicated_lost, accepted_lost)
}
