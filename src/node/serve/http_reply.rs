//! One answer of the HTTP endpoint, apart from any socket: a status code, a content
//! type and a body. The routes (`http_routes`, `http_patroni`) build these and
//! `http_conn` hands them to hyper, so every decision is testable without a socket.

/// One answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub code: u16,
    pub content_type: &'static str,
    pub body: String,
}

impl Reply {
    /// A plain-text answer.
    pub fn text(code: u16, body: impl Into<String>) -> Reply {
        Reply {
            code,
            content_type: "text/plain; charset=utf-8",
            body: body.into(),
        }
    }

    /// A JSON answer with `code` (pretty, one value, a final newline); a value that
    /// cannot be encoded gives a 500 saying why rather than a half-written body.
    pub fn json(code: u16, value: &impl serde::Serialize) -> Reply {
        match serde_json::to_string_pretty(value) {
            Ok(mut body) => {
                body.push('\n');
                Reply {
                    code,
                    content_type: "application/json",
                    body,
                }
            }
            Err(e) => Reply::text(500, format!("cannot encode JSON: {e}\n")),
        }
    }
}
