//! Who may use the HTTP endpoint's write routes (`http_write`): only a caller over
//! HTTPS (`[http] tls`) whose client certificate the handshake verified against the
//! cluster CA and that names a client (`client.bully`: what `bully certs client`
//! issues for the command line), not a member: a node's key sits on a database host,
//! beside the server's files under `[postgres] tls`; with `[http] username` and `password_file`, also HTTP basic authentication
//! as that user (Patroni's `restapi.authentication`). There is no unauthenticated
//! write path: plain HTTP refuses every write (403). Reads stay open, as Patroni's.

use super::http_reply::Reply;
use super::http_tls::{self, Caller};
use crate::certs::{Identity, TlsFiles};
use crate::config::HttpConfig;
use base64::Engine;
use subtle::ConstantTimeEq;
use tokio_rustls::TlsAcceptor;

/// What the endpoint secures itself with, loaded from `[http]` and the node's
/// certificate files at start and at every reload.
#[derive(Clone, Default)]
pub struct Security {
    /// HTTPS, with `[http] tls`.
    pub acceptor: Option<TlsAcceptor>,
    /// The basic-auth credentials the write routes also need, if set.
    pub basic: Option<BasicAuth>,
}

/// A user and password the write routes require.
#[derive(Clone, PartialEq, Eq)]
pub struct BasicAuth {
    user: String,
    password: String,
}

impl std::fmt::Debug for BasicAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BasicAuth({}, <password>)", self.user)
    }
}

impl Security {
    /// The endpoint's security as `http` asks for it, with the node's certificate
    /// `files`; `Err` names the key or file at fault (the start or reload fails).
    pub fn load(http: &HttpConfig, files: &TlsFiles) -> Result<Security, String> {
        let acceptor = match http.tls {
            true => Some(http_tls::acceptor(files)?),
            false => None,
        };
        let basic = match (&http.username, &http.password_file) {
            (Some(user), Some(file)) => {
                let text = std::fs::read_to_string(file)
                    .map_err(|e| format!("[http] password_file {}: {e}", file.display()))?;
                let password = text.lines().next().unwrap_or("").to_string();
                if password.is_empty() {
                    return Err(format!(
                        "[http] password_file {}: the first line (the password) is empty",
                        file.display()
                    ));
                }
                Some(BasicAuth {
                    user: user.clone(),
                    password,
                })
            }
            _ => None,
        };
        Ok(Security { acceptor, basic })
    }
}

/// Whether `caller`, with the `authorization` header it sent, may use a write route;
/// `Err` is the answer (403 without a verified client certificate, 401 without the
/// basic credentials when they are required).
pub fn authorize(
    caller: &Caller,
    authorization: Option<&str>,
    basic: Option<&BasicAuth>,
) -> Result<(), Reply> {
    if !caller.tls {
        return Err(Reply::text(
            403,
            "write routes need HTTPS ([http] tls = true) and a client certificate from the \
             cluster CA (`bully certs client`)\n",
        ));
    }
    match caller.certificate {
        Some(Identity::Client) => {}
        Some(Identity::Node(id)) => {
            return Err(Reply::text(
                403,
                format!(
                    "write routes take a client certificate (`bully certs client`), not \
                     node {id}'s\n"
                ),
            ))
        }
        None => {
            return Err(Reply::text(
                403,
                "write routes need a client certificate from the cluster CA (`bully certs \
                 client`); this connection sent none\n",
            ))
        }
    }
    let Some(basic) = basic else {
        return Ok(());
    };
    match authorization.and_then(decode_basic) {
        Some((user, password)) if same(&user, &basic.user) & same(&password, &basic.password) => {
            Ok(())
        }
        Some(_) => Err(Reply::text(401, "wrong user or password\n")),
        None => Err(Reply::text(
            401,
            "write routes need HTTP basic authentication ([http] username)\n",
        )),
    }
}

/// Compares in constant time, so the answer's timing does not leak the password.
fn same(given: &str, wanted: &str) -> bool {
    given.as_bytes().ct_eq(wanted.as_bytes()).into()
}

/// `Basic <base64 of user:password>` as `(user, password)`; `None` when it is not one.
fn decode_basic(header: &str) -> Option<(String, String)> {
    let (scheme, token) = header.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(token.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(user_password: &str) -> String {
        let token = base64::engine::general_purpose::STANDARD.encode(user_password);
        format!("Basic {token}")
    }

    const CLIENT: Caller = Caller {
        tls: true,
        certificate: Some(Identity::Client),
    };

    #[test]
    fn no_write_without_https_and_a_client_certificate() {
        let plain = Caller::default();
        assert_eq!(authorize(&plain, None, None).unwrap_err().code, 403);
        let anonymous = Caller {
            tls: true,
            certificate: None,
        };
        let refused = authorize(&anonymous, None, None).unwrap_err();
        assert_eq!(refused.code, 403);
        assert!(refused.body.contains("sent none"), "{}", refused.body);
        assert_eq!(authorize(&CLIENT, None, None), Ok(()));
        let node = Caller {
            tls: true,
            certificate: Some(Identity::Node(2)),
        };
        let refused = authorize(&node, None, None).unwrap_err();
        assert_eq!(
            refused.code, 403,
            "a member's certificate is not a client's"
        );
        assert!(refused.body.contains("node 2"), "{}", refused.body);
    }

    #[test]
    fn basic_auth_on_top_when_configured() {
        let basic = BasicAuth {
            user: "admin".into(),
            password: "s3cret:with:colons".into(),
        };
        let ok = header("admin:s3cret:with:colons");
        assert_eq!(authorize(&CLIENT, Some(&ok), Some(&basic)), Ok(()));
        for wrong in [header("admin:nope"), header("root:s3cret:with:colons")] {
            let refused = authorize(&CLIENT, Some(&wrong), Some(&basic)).unwrap_err();
            assert_eq!(refused.code, 401, "{wrong}");
        }
        for missing in [None, Some("Bearer abc"), Some("Basic !!!")] {
            let refused = authorize(&CLIENT, missing, Some(&basic)).unwrap_err();
            assert_eq!(refused.code, 401, "{missing:?}");
        }
        let plain = Caller::default();
        assert_eq!(
            authorize(&plain, Some(&ok), Some(&basic)).unwrap_err().code,
            403,
            "a password never opens plain HTTP"
        );
    }

    #[test]
    fn a_password_file_is_read_and_an_empty_one_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pw");
        std::fs::write(&file, "hunter2\nignored\n").unwrap();
        let mut http = HttpConfig::on("127.0.0.1:0".parse().unwrap());
        http.username = Some("admin".into());
        http.password_file = Some(file.clone());
        let files = TlsFiles::for_node(dir.path(), 1);
        let security = Security::load(&http, &files).unwrap();
        assert_eq!(
            security.basic,
            Some(BasicAuth {
                user: "admin".into(),
                password: "hunter2".into()
            })
        );
        std::fs::write(&file, "\n").unwrap();
        let empty = Security::load(&http, &files).err().unwrap();
        assert!(empty.contains("empty"), "{empty}");
        http.tls = true;
        let no_certs = Security::load(&http, &files).err().unwrap();
        assert!(no_certs.starts_with("[http] tls"), "{no_certs}");
    }
}
