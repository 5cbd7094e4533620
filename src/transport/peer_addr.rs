//! Where to dial a peer: an IP address or a host name, and a port. A name is resolved
//! at every dial, not once at start-up, so a host that moved (a new IP behind the same
//! DNS name, a Kubernetes pod that was rescheduled) is followed without a restart.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

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
    pub async fn resolve(&self, local: SocketAddr) -> Result<SocketAddr, String> {
        if let Some(addr) = self.ip() {
            return Ok(addr);
        }
        let found: Vec<SocketAddr> = tokio::net::lookup_host((self.host.as_str(), self.port))
            .await
            .map_err(|e| format!("cannot resolve host name `{}`: {e}", self.host))?
            .collect();
        found
            .iter()
            .find(|a| a.is_ipv4() == local.is_ipv4())
            .copied()
            .ok_or_else(|| {
                let family = if local.is_ipv4() { "IPv4" } else { "IPv6" };
                format!(
                    "host name `{}` resolves to no {family} address (found {found:?}); this \
                     node listens on {local}",
                    self.host
                )
            })
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
    type Err = String;

    /// Accepts `1.2.3.4:7001`, `[::1]:7001` and `db-1.example.com:7001`.
    fn from_str(text: &str) -> Result<Self, String> {
        if let Ok(addr) = text.parse::<SocketAddr>() {
            return Ok(addr.into());
        }
        let (host, port) = text.rsplit_once(':').ok_or_else(|| {
            format!("`{text}` has no port; write HOST:PORT, e.g. db-1.example.com:7001")
        })?;
        let port: u16 = port
            .parse()
            .map_err(|_| format!("`{port}` in `{text}` is not a port number"))?;
        if host.starts_with('[') || host.contains(':') {
            return Err(format!("`{host}` is not a valid IPv6 address"));
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
            return Err(format!(
                "`{host}` is neither an IP address nor a valid host name"
            ));
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
            .unwrap_err();
        assert!(
            err.contains("cannot resolve host name `no-such-host.invalid`"),
            "{err}"
        );
    }
}
