//! One connection of the HTTP endpoint, served by hyper (HTTP/1.1 and 1.0, one
//! request per connection) and bounded so a slow or stalled client costs little and
//! ends soon: the request head must arrive within [`READ_TIMEOUT`] (hyper's
//! `header_read_timeout`, then a 408) and be at most [`MAX_HEAD`] bytes (else a 431);
//! the whole exchange ends within [`DEADLINE`], so a client that never reads its
//! answer cannot hold the connection either. hyper answers what it cannot parse (400,
//! 431); the rest is `http_answer`'s decision. How many connections are open at once is
//! the accept loop's bound (`http`, `http_slots`). The stream is plain TCP or HTTPS
//! (`http_tls`); a caller whose client certificate was verified may take up to
//! [`WRITE_DEADLINE`], as a switchover through a write route takes its time.

use super::http_answer;
use super::http_reply::Reply;
use super::http_routes;
use super::http_tls::Caller;
use super::http_write;
use http_body_util::Full;
use http_body_util::{BodyExt, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ALLOW, AUTHORIZATION, CACHE_CONTROL, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

pub use super::http_answer::HttpState;

/// Longest request head accepted (request line plus headers); hyper's smallest buffer,
/// so with one head per connection it bounds a connection's memory.
pub const MAX_HEAD: usize = 8 * 1024;
/// How long a client may take to send its request head.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a connection may last in all: head, answer, and the lingering close.
pub const DEADLINE: Duration = Duration::from_secs(10);
/// The same for a caller with a verified client certificate, the only one a write
/// route serves: a switchover's answer waits for the new coordinator (at most
/// `crate::client::STEP_DOWN_TIMEOUT`).
pub const WRITE_DEADLINE: Duration = Duration::from_secs(45);
/// The lingering close reads at most this long ...
const LINGER: Duration = Duration::from_secs(1);
/// ... and at most this much.
const LINGER_BYTES: usize = 64 * 1024;

/// A connection's byte stream: TCP, or HTTPS over it.
pub trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<S: AsyncRead + AsyncWrite + Unpin + Send> Stream for S {}

/// Serves one connection of `caller` to its end, within [`DEADLINE`] (or
/// [`WRITE_DEADLINE`] for a verified client certificate); an error says why it ended
/// early (the caller logs it).
pub async fn serve<S: Stream>(
    mut stream: S,
    state: &HttpState,
    caller: Caller,
) -> std::io::Result<()> {
    let deadline = match caller.certificate {
        Some(crate::certs::Identity::Client) => WRITE_DEADLINE,
        _ => DEADLINE,
    };
    match tokio::time::timeout(deadline, exchange(&mut stream, state, caller)).await {
        Ok(done) => done,
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("connection not done within {deadline:?}"),
        )),
    }
}

/// One request and its answer. hyper borrows the stream, so that once it is done the
/// connection can still get a 408 and a lingering close.
async fn exchange<S: Stream>(
    stream: &mut S,
    state: &HttpState,
    caller: Caller,
) -> std::io::Result<()> {
    let service = service_fn(|request: Request<Incoming>| async move {
        Ok::<_, Infallible>(respond(request, state, caller).await)
    });
    let served = builder()
        .serve_connection(TokioIo::new(&mut *stream), service)
        .await;
    let result = match served {
        Ok(()) => Ok(()),
        Err(e) if e.is_timeout() => {
            // hyper closes silently when the head is late; say why, as a 408.
            stream.write_all(&timeout_reply()).await
        }
        Err(e) => Err(std::io::Error::other(e)),
    };
    linger(stream).await;
    result
}

/// hyper's HTTP/1 server with this endpoint's bounds.
fn builder() -> http1::Builder {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(READ_TIMEOUT)
        .max_buf_size(MAX_HEAD)
        .max_header_size(MAX_HEAD)
        .keep_alive(false)
        // A client that sends its request and then shuts its side (`nc -N`) still
        // gets the answer.
        .half_close(true);
    builder
}

/// The answer to one parsed request.
async fn respond(
    request: Request<Incoming>,
    state: &HttpState,
    caller: Caller,
) -> Response<Full<Bytes>> {
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let reply = if http_routes::allowed(method.as_str()) {
        http_answer::get(&path, request.uri().query(), state).await
    } else if http_write::is_write(method.as_str(), &path) {
        let authorization = request
            .headers()
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        // Who calls is checked before any body is read.
        match http_answer::admit(&caller, authorization.as_deref(), state) {
            Err(refused) => refused,
            Ok(()) => {
                let limited = Limited::new(request.into_body(), http_write::MAX_BODY);
                match limited.collect().await {
                    Ok(body) => {
                        let body = body.to_bytes();
                        http_answer::write(method.as_str(), &path, &body, state).await
                    }
                    Err(e) => Reply::text(413, format!("request body refused: {e}\n")),
                }
            }
        }
    } else {
        http_routes::method_not_allowed(method.as_str())
    };
    response(reply, &method)
}

/// `reply` as hyper's response. HEAD and OPTIONS get no body (hyper drops HEAD's
/// itself and keeps its length; OPTIONS is sent empty, as Patroni's has none).
fn response(reply: Reply, method: &Method) -> Response<Full<Bytes>> {
    let body = if method == Method::OPTIONS {
        Bytes::new()
    } else {
        Bytes::from(reply.body)
    };
    let mut response = Response::new(Full::new(body));
    *response.status_mut() =
        StatusCode::from_u16(reply.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(reply.content_type));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if reply.code == 405 {
        headers.insert(ALLOW, HeaderValue::from_static(http_routes::ALLOWED));
    }
    response
}

/// The 408 for a head not received within [`READ_TIMEOUT`], written after hyper gave up.
fn timeout_reply() -> Vec<u8> {
    let body = "request head not received in time\n";
    format!(
        "HTTP/1.1 408 Request Timeout\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Lingering close: closing with unread request bytes (an oversized head, a pipelined
/// request) makes the kernel send a reset, which can destroy the answer in flight. So
/// shut our side, then read what the client still sends, briefly and boundedly, until
/// it closes.
async fn linger<S: Stream>(stream: &mut S) {
    let _ = stream.shutdown().await;
    let drain = async {
        let mut buf = [0u8; 4096];
        let mut left = LINGER_BYTES;
        while left > 0 {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    };
    let _ = tokio::time::timeout(LINGER, drain).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::body::Body;

    #[test]
    fn options_and_head_answer_the_status_without_a_body() {
        let reply = || Reply::text(503, "no\n");
        let get = response(reply(), &Method::GET);
        assert_eq!(get.status(), 503);
        assert_eq!(get.headers()[CACHE_CONTROL], "no-store");
        let options = response(reply(), &Method::OPTIONS);
        assert_eq!(options.status(), 503);
        assert_eq!(options.body().size_hint().exact(), Some(0));
        let refused = response(http_routes::method_not_allowed("POST"), &Method::POST);
        assert_eq!(refused.headers()[ALLOW], http_routes::ALLOWED);
        let odd = response(Reply::text(1000, ""), &Method::GET);
        assert_eq!(odd.status(), 500, "a code HTTP has not is a 500");
    }

    #[test]
    fn the_timeout_reply_is_a_whole_408() {
        let text = String::from_utf8(timeout_reply()).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 408 "), "{head}");
        assert!(
            head.contains(&format!("Content-Length: {}", body.len())),
            "{head}"
        );
    }
}
