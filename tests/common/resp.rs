//! A minimal blocking Redis client (RESP2) for the Redis tests: enough to SET, WAIT,
//! MULTI/EXEC and read INFO, with timeouts on every read and write so a paused or
//! killed server never hangs a test. Included with `#[path = "common/resp.rs"]`.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A RESP reply, as much of it as the tests need.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<String>),
    Array(Vec<Reply>),
}

impl Reply {
    /// `+OK`.
    pub fn is_ok(&self) -> bool {
        matches!(self, Reply::Simple(s) if s == "OK")
    }
}

/// One connection. WAIT counts the writes of its own connection, so writes and their
/// WAIT must share one.
pub struct Conn {
    reader: BufReader<TcpStream>,
}

impl Conn {
    /// Connects (1 s), authenticates with `password` if given; reads time out after
    /// `read_timeout`.
    pub fn open(
        addr: SocketAddr,
        password: Option<&str>,
        read_timeout: Duration,
    ) -> std::io::Result<Conn> {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
        stream.set_read_timeout(Some(read_timeout))?;
        stream.set_write_timeout(Some(Duration::from_secs(2)))?;
        stream.set_nodelay(true)?;
        let mut conn = Conn {
            reader: BufReader::new(stream),
        };
        if let Some(password) = password {
            let reply = conn.call(&["AUTH", password])?;
            if !reply.is_ok() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    format!("AUTH refused: {reply:?}"),
                ));
            }
        }
        Ok(conn)
    }

    /// Sends one command and reads its reply.
    pub fn call(&mut self, args: &[&str]) -> std::io::Result<Reply> {
        self.send(args)?;
        read_reply(&mut self.reader)
    }

    /// Sends several commands at once (a pipeline) and reads every reply, in order.
    pub fn pipeline(&mut self, commands: &[&[&str]]) -> std::io::Result<Vec<Reply>> {
        let mut request = Vec::new();
        for args in commands {
            request.extend_from_slice(&encode(args));
        }
        self.reader.get_mut().write_all(&request)?;
        commands
            .iter()
            .map(|_| read_reply(&mut self.reader))
            .collect()
    }

    fn send(&mut self, args: &[&str]) -> std::io::Result<()> {
        self.reader.get_mut().write_all(&encode(args))
    }
}

fn encode(args: &[&str]) -> Vec<u8> {
    let mut request = format!("*{}\r\n", args.len());
    for arg in args {
        request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
    }
    request.into_bytes()
}

/// One command on a fresh connection (robust against killed servers).
pub fn redis(addr: SocketAddr, password: Option<&str>, args: &[&str]) -> std::io::Result<Reply> {
    Conn::open(addr, password, Duration::from_secs(5))?.call(args)
}

fn read_reply(reader: &mut impl BufRead) -> std::io::Result<Reply> {
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "connection closed",
        ));
    }
    let line = line.trim_end_matches("\r\n");
    let (kind, rest) = line.split_at(line.len().min(1));
    Ok(match kind {
        "+" => Reply::Simple(rest.into()),
        "-" => Reply::Error(rest.into()),
        ":" => Reply::Int(rest.parse().map_err(|_| bad(line))?),
        "$" => {
            let len: i64 = rest.parse().map_err(|_| bad(line))?;
            if len < 0 {
                Reply::Bulk(None)
            } else {
                let mut buf = vec![0; len as usize + 2];
                reader.read_exact(&mut buf)?;
                buf.truncate(len as usize);
                Reply::Bulk(Some(String::from_utf8_lossy(&buf).into()))
            }
        }
        "*" => {
            let n: i64 = rest.parse().map_err(|_| bad(line))?;
            let mut items = Vec::new();
            for _ in 0..n.max(0) {
                items.push(read_reply(reader)?);
            }
            Reply::Array(items)
        }
        _ => return Err(bad(line)),
    })
}

/// `INFO replication` of one Redis as a map (None if it does not answer).
pub fn replication(addr: SocketAddr, password: Option<&str>) -> Option<BTreeMap<String, String>> {
    match redis(addr, password, &["INFO", "replication"]).ok()? {
        Reply::Bulk(Some(text)) => Some(
            text.lines()
                .filter_map(|l| l.split_once(':'))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        _ => None,
    }
}

/// Whether the Redis at `addr` is a primary.
pub fn is_primary(addr: SocketAddr, password: Option<&str>) -> bool {
    replication(addr, password).is_some_and(|r| r["role"] == "master")
}

/// Whether `replica` replicates from `primary` with the link up.
pub fn follows(replica: SocketAddr, primary: SocketAddr, password: Option<&str>) -> bool {
    replication(replica, password).is_some_and(|r| {
        r["role"] == "slave"
            && r.get("master_port") == Some(&primary.port().to_string())
            && r.get("master_link_status").map(String::as_str) == Some("up")
    })
}
