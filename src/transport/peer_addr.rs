//! Where to dial a peer: an IP address or a host name, and a port. A name is resolved
//! at every dial, not once at start-up, so a host that moved (a new IP behind the same
//! DNS name, a Kubernetes pod that was rescheduled) is followed without a restart.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;
use thiserror::Error;

/// Why text is not a `host:port` (the text is quoted in each message).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PeerAddrError {
    #[error("`{0}` has no port; write HOST:PORT, e.g. db-1.example.com:7001")]
    NoPort(String),
    #[error("`{port}` in `{text}` is not a port number")]
    BadPort { port: String, text: String },
    #[error("`{0}` is not a valid IPv6 address")]
    BadIpv6(String),
    #[error("`{0}` is neither an IP address nor a valid host name")]
    BadHost(String),
}

/// Why a host name gave no address to dial.
#[derive(Debug, Error)]
pub enum ResolveError {
    #[error("cannot resolve host name `{host}`: {source}")]
    Lookup {
        host: String,
        source: std::io::Error,
    },
    #[error(
        "host name `{host}` resolves to no {family} address (found {found:?}); this node \
         listens on {local}"
    )]
    NoAddressOfFamily {
        host: String,
        family: &'static str,
        found: Vec<SocketAddr>,
        local: SocketAddr,
    },
    #[error("host name `{0}` has no address")]
    NoAddress(String),
}

/// `host:port` with `host` an IPv4 address, a bracketed IPv6 address or a DNS name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PeerAddr {
    host: String,
    port: u16,
}

impl PeerAddr {
    /// The host part as written (a name, or an IP without brackets).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The UDP port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The address when the host is an IP literal (no resolution needed).
    pub fn ip(&self) -> Option<SocketAddr> {
        self.host
            .parse::<IpAddr>()
            .ok()
            .map(|ip| SocketAddr::new(ip, self.port))
    }

    /// Resolves the host now (the system resolver: /etc/hosts, DNS) and picks the
    /// first address of the family our endpoint is bound to (`local`): a socket bound
    /// to IPv4 cannot send to IPv6. Errors say which name failed and why.
    pub async fn resolve(&self, local: SocketAddr) -> Result<SocketAddr, ResolveError> {
        let found = self.lookup().await?;
        found
            .iter()
            .find(|a| a.is_ipv4() == local.is_ipv4())
            .copied()
            .ok_or_else(|| ResolveError::NoAddressOfFamily {
                host: self.host.clone(),
                family: if local.is_ipv4() { "IPv4" } else { "IPv6" },
                found,
                local,
            })
    }

    /// Resolves the host now and takes its first address, for a client that has no
    /// endpoint of its own to match a family against.
    pub async fn resolve_any(&self) -> Result<SocketAddr, ResolveError> {
        self.lookup()
            .await?
            .first()
            .copied()
            .ok_or_else(|| ResolveError::NoAddress(self.host.clone()))
    }

    /// Every address the host stands for now (itself, for an IP literal).
    async fn lookup(&self) -> Result<Vec<SocketAddr>, ResolveError> {
        if let Some(addr) = self.ip() {
            return Ok(vec![addr]);
        }
        let found = tokio::net::lookup_host((self.host.as_str(), self.port))
            .await
            .map_err(|source| ResolveError::Lookup {
                host: self.host.clone(),
                source,
            })?;
        Ok(found.collect())
    }
}

impl From<SocketAddr> for PeerAddr {
    fn from(addr: SocketAddr) -> Self {
        PeerAddr {
            host: addr.ip().to_string(),
            port: addr.port(),
        }
    }
}

impl fmt::Display for PeerAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

impl FromStr for PeerAddr {
    type Err = PeerAddrError;

    /// Accepts `1.2.3.4:7001`, `[::1]:7001` and `db-1.example.com:7001`.
    fn from_str(text: &str) -> Result<Self, PeerAddrError> {
        if let Ok(addr) = text.parse::<SocketAddr>() {
            return Ok(addr.into());
        }
        let (host, port) = text
            .rsplit_once(':')
            .ok_or_else(|| PeerAddrError::NoPort(text.to_string()))?;
        let port: u16 = port.parse().map_err(|_| PeerAddrError::BadPort {
            port: port.to_string(),
            text: text.to_string(),
        })?;
        if host.starts_with('[') || host.contains(':') {
            return Err(PeerAddrError::BadIpv6(host.to_string()));
        }
        let valid_name = !host.is_empty()
            && host.len() <= 253
            && host.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && !label.starts_with('-')
                    && !label.ends_with('-')
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            });
        if !valid_name {
            return Err(PeerAddrError::BadHost(host.to_string()));
        }
        Ok(PeerAddr {
            host: host.to_ascii_lowercase(),
            port,
        })
    }
}

impl Serialize for PeerAddr {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PeerAddr {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_names_parse_and_print_back() {
        for text in [
            "127.0.0.1:7001",
            "[::1]:7001",
            "db-1.example.com:7001",
            "localhost:1",
        ] {
            let addr: PeerAddr = text.parse().unwrap();
            assert_eq!(addr.to_string(), text);
        }
        let named: PeerAddr = "Node-A:7001".parse().unwrap();
        assert_eq!(
            (named.host(), named.port(), named.ip()),
            ("node-a", 7001, None)
        );
        assert_eq!(
            "[::1]:7".parse::<PeerAddr>().unwrap().ip(),
            Some("[::1]:7".parse().unwrap())
        );
        for bad in [
            "localhost",
            "host:port",
            "host:70000",
            ":7001",
            "a..b:1",
            "-a:1",
            "a b:1",
            "[::1:7001",
            "::1:7001x",
        ] {
            assert!(bad.parse::<PeerAddr>().is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn localhost_resolves_to_the_endpoint_family() {
        let name: PeerAddr = "localhost:7001".parse().unwrap();
        let v4 = name.resolve("127.0.0.1:0".parse().unwrap()).await.unwrap();
        assert_eq!(v4, "127.0.0.1:7001".parse().unwrap());
        let missing: PeerAddr = "no-such-host.invalid:7001".parse().unwrap();
        let err = missing
            .resolve("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("cannot resolve host name `no-such-host.invalid`"),
            "{err}"
        );
    }
}
