//! Clients of the two listeners: the control API as JSON over HTTP/1.1, and raw proxy
//! requests (forwarded and CONNECT) that control every byte, with the response reader both use.
//! Just past a room's ~400 lines: it is the one place every suite's raw requests come from
//! (request text, the reader, the cut and timeout helpers); a split is due when it grows again.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use base64::Engine as _;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::TcpStream;

use super::RUNTIME;

/// A control-API client.
#[derive(Clone, Copy)]
pub struct Api {
    pub addr: SocketAddr,
}

/// A parsed HTTP response.
#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    pub fn header(&self, h: &str) -> Option<&str> {
        self.headers
            .get(&h.to_ascii_lowercase())
            .map(String::as_str)
    }
}

impl Api {
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        user: Option<&str>,
        body: Option<&str>,
    ) -> Resp {
        let bearer = token.map(|t| format!("Bearer {t}"));
        let mut headers = Vec::new();
        if let Some(b) = &bearer {
            headers.push(("authorization", b.as_str()));
        }
        if let Some(u) = user {
            headers.push(("x-egressgate-user", u));
        }
        let body = body.unwrap_or("");
        let typed = !body.is_empty() || method == "POST" || method == "PUT";
        let req = request_text(self.addr, (method, path), &headers, (body, typed));
        send_raw(self.addr, &req).await
    }

    pub async fn post(&self, path: &str, token: &str, body: serde_json::Value) -> Resp {
        self.call("POST", path, Some(token), None, Some(&body.to_string()))
            .await
    }
    pub async fn get(&self, path: &str, token: &str) -> Resp {
        self.call("GET", path, Some(token), None, None).await
    }

    /// `method path` without a body as the runtime speaking for `user`: how a person's own
    /// calls (their cards, their approvals, their chats) reach the API.
    pub async fn as_user(&self, method: &str, path: &str, user: &str) -> Resp {
        self.call(method, path, Some(RUNTIME), Some(user), None)
            .await
    }

    /// Opens a turn and returns (turn_id, user:pass credential).
    pub async fn turn(&self, user: &str, chat: &str, sites: &[&str]) -> Turn {
        let r = self
            .post("/v1/turns", RUNTIME, serde_json::json!({"user_id": user, "chat_id": chat, "can_ask_human": true, "sites": sites}))
            .await;
        assert_eq!(r.status, 201, "open turn: {}", r.text());
        let v = r.json();
        let url = url::Url::parse(v["proxy_url"].as_str().unwrap()).unwrap();
        Turn {
            id: v["turn_id"].as_str().unwrap().to_owned(),
            credential: format!("{}:{}", url.username(), url.password().unwrap()),
        }
    }

    pub async fn admin_site(&self, pattern: &str) {
        self.admin_add("sites", serde_json::json!({"pattern": pattern}))
            .await;
    }

    pub async fn refusals(&self, turn: &Turn) -> serde_json::Value {
        let r = self
            .get(&format!("/v1/turns/{}/refusals", turn.id), RUNTIME)
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()
    }

    /// `GET /v1/chats/{chat}/approvals` for `user`, as the runtime sees it.
    pub async fn chat_approvals(&self, user: &str, chat: &str) -> serde_json::Value {
        let path = format!("/v1/chats/{chat}/approvals");
        let r = self.as_user("GET", &path, user).await;
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()
    }
}

/// A turn's id and proxy credential.
#[derive(Clone, Debug)]
pub struct Turn {
    pub id: String,
    pub credential: String,
}

impl Turn {
    pub fn auth_header(&self) -> String {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(&self.credential)
        )
    }
}

/// Status (0 when unparsable) and lower-cased headers of a response head.
pub fn parse_head(buf: &[u8]) -> (u16, HashMap<String, String>) {
    let head = String::from_utf8_lossy(buf);
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    (status, headers)
}

/// Reads one HTTP/1.1 response (content-length, chunked, or until close).
pub async fn read_response<S: AsyncRead + Unpin>(s: &mut S) -> std::io::Result<Resp> {
    let buf = whole_head(s).await?;
    let (status, headers) = parse_head(&buf);
    let mut body = Vec::new();
    let mut byte = [0u8; 1];
    if let Some(n) = content_length(&headers) {
        body.resize(n, 0);
        s.read_exact(&mut body).await?;
    } else if headers
        .get("transfer-encoding")
        .is_some_and(|v| v.contains("chunked"))
    {
        loop {
            let mut line = Vec::new();
            while !line.ends_with(b"\r\n") {
                s.read_exact(&mut byte).await?;
                line.push(byte[0]);
            }
            let n = usize::from_str_radix(String::from_utf8_lossy(&line).trim(), 16).unwrap();
            let mut chunk = vec![0u8; n + 2];
            s.read_exact(&mut chunk).await?;
            body.extend_from_slice(&chunk[..n]);
            if n == 0 {
                break;
            }
        }
    } else if status != 204 && status != 304 {
        // No length: the body runs until the server closes.
        let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut body)).await;
    }
    Ok(Resp {
        status,
        headers,
        body,
    })
}

/// The text of one `connection: close` request to `addr` with `headers`; a JSON
/// `content-type` and `content-length` when `typed`, then `body`.
pub fn request_text(
    addr: SocketAddr,
    (method, path): (&str, &str),
    headers: &[(&str, &str)],
    (body, typed): (&str, bool),
) -> String {
    let mut req = format!("{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if typed {
        let len = body.len();
        req.push_str(&format!(
            "content-type: application/json\r\ncontent-length: {len}\r\n"
        ));
    }
    req.push_str("\r\n");
    req.push_str(body);
    req
}

/// Sends a whole request to `addr` on a new connection and reads the response.
pub async fn send_raw(addr: SocketAddr, req: &str) -> Resp {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(req.as_bytes()).await.unwrap();
    read_response(&mut s).await.unwrap()
}

/// Sends raw bytes to the proxy and reads one response.
pub async fn proxy_raw(proxy: SocketAddr, raw: &str) -> Resp {
    let mut s = TcpStream::connect(proxy).await.unwrap();
    s.write_all(raw.as_bytes()).await.unwrap();
    read_response(&mut s).await.unwrap()
}

/// `GET url` through the proxy (absolute form) with the turn's credential.
pub async fn proxy_get(proxy: SocketAddr, turn: &Turn, url: &str) -> Resp {
    proxy_raw(proxy, &proxy_get_head(turn, url)).await
}

/// [`proxy_get`] that tolerates a proxy closing the connection without an answer (`Err`),
/// within 10 seconds: what a request admitted just before a revocation meets when the proxy
/// cuts the revoked grant's connections once the origin's head is through.
pub async fn try_proxy_get(proxy: SocketAddr, turn: &Turn, url: &str) -> std::io::Result<Resp> {
    try_proxy_raw(proxy, proxy_get_head(turn, url).as_bytes(), 10).await
}

/// The absolute-form `GET url` head with the turn's credential, closing after the answer.
fn proxy_get_head(turn: &Turn, url: &str) -> String {
    let u = url::Url::parse(url).unwrap();
    let host = match u.port() {
        Some(p) => format!("{}:{p}", u.host_str().unwrap()),
        None => u.host_str().unwrap().to_owned(),
    };
    format!(
        "GET {url} HTTP/1.1\r\nhost: {host}\r\nproxy-authorization: {}\r\nconnection: close\r\n\r\n",
        turn.auth_header()
    )
}

/// One absolute-form `GET http://{authority}{path}` on an open proxy connection, which stays
/// open, with the turn's credential; `rest` ends the head (`"\r\n"`, or more header lines
/// and a body). Answered within 10 seconds.
pub async fn get_on(
    s: &mut TcpStream,
    turn: &Turn,
    authority: &str,
    path: &str,
    rest: &str,
) -> Resp {
    let auth = turn.auth_header();
    let req = format!(
        "GET http://{authority}{path} HTTP/1.1\r\nhost: {authority}\r\nproxy-authorization: {auth}\r\n{rest}"
    );
    s.write_all(req.as_bytes()).await.unwrap();
    within(10, "answer from the proxy", read_response(s))
        .await
        .unwrap()
}

/// `CONNECT authority` with the turn's credential; returns the response head and the stream.
pub async fn connect(proxy: SocketAddr, turn: &Turn, authority: &str) -> (Resp, TcpStream) {
    let mut s = TcpStream::connect(proxy).await.unwrap();
    s.write_all(connect_head(turn, authority).as_bytes())
        .await
        .unwrap();
    let r = read_head_only(&mut s).await;
    (r, s)
}

/// The head of `CONNECT authority` with the turn's credential.
pub fn connect_head(turn: &Turn, authority: &str) -> String {
    let auth = turn.auth_header();
    format!(
        "CONNECT {authority} HTTP/1.1\r\nhost: {authority}\r\nproxy-authorization: {auth}\r\n\r\n"
    )
}

/// A response head and its `content-length` body, tolerating a proxy that closes early (the
/// head then has what arrived: status 0 when nothing did).
async fn read_head_only(s: &mut TcpStream) -> Resp {
    let (buf, _) = head_bytes(s).await.unwrap();
    let (status, headers) = parse_head(&buf);
    let mut body = vec![0; content_length(&headers).unwrap_or(0)];
    let _ = s.read_exact(&mut body).await;
    Resp {
        status,
        headers,
        body,
    }
}

/// Reads a response head and its `content-length` body, and nothing after them (the stream
/// may be a tunnel): `Err` at EOF before either ends.
pub async fn read_head<S: AsyncRead + Unpin>(s: &mut S) -> std::io::Result<Resp> {
    let buf = whole_head(s).await?;
    let (status, headers) = parse_head(&buf);
    let mut body = vec![0; content_length(&headers).unwrap_or(0)];
    s.read_exact(&mut body).await?;
    Ok(Resp {
        status,
        headers,
        body,
    })
}

/// The head's bytes, read one at a time so nothing after it is consumed, and whether its
/// blank line arrived before EOF.
async fn head_bytes<S: AsyncRead + Unpin>(s: &mut S) -> std::io::Result<(Vec<u8>, bool)> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        if s.read(&mut byte).await? == 0 {
            return Ok((buf, false));
        }
        buf.push(byte[0]);
    }
    Ok((buf, true))
}

/// The head's bytes; `UnexpectedEof` when the peer closed before its end.
async fn whole_head<S: AsyncRead + Unpin>(s: &mut S) -> std::io::Result<Vec<u8>> {
    match head_bytes(s).await? {
        (buf, true) => Ok(buf),
        (buf, false) => Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!(
                "connection closed before a full response head: {:?}",
                String::from_utf8_lossy(&buf)
            ),
        )),
    }
}

/// The `content-length` of a head, when it has a valid one.
fn content_length(headers: &HashMap<String, String>) -> Option<usize> {
    headers.get("content-length").and_then(|v| v.parse().ok())
}

/// Sends raw bytes to the proxy and reads one response, tolerating a proxy that closes
/// without answering (`Err`), all within `secs` seconds.
pub async fn try_proxy_raw(proxy: SocketAddr, raw: &[u8], secs: u64) -> std::io::Result<Resp> {
    let attempt = async {
        let mut s = TcpStream::connect(proxy).await?;
        s.write_all(raw).await?;
        read_response(&mut s).await
    };
    within(secs, "answer from the proxy", attempt).await
}

/// Whether `e` is the peer closing the connection before a whole answer (EOF or a reset),
/// as opposed to a timeout or a failed connect.
pub fn is_cut(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset, UnexpectedEof};
    matches!(
        e.kind(),
        UnexpectedEof | ConnectionReset | ConnectionAborted | BrokenPipe
    )
}

/// `attempt` within `secs` seconds; `TimedOut` ("no {what} in time") otherwise.
pub async fn within<T>(
    secs: u64,
    what: &str,
    attempt: impl std::future::Future<Output = std::io::Result<T>>,
) -> std::io::Result<T> {
    tokio::time::timeout(Duration::from_secs(secs), attempt)
        .await
        .map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::TimedOut, format!("no {what} in time"))
        })?
}

/// Waits (bounded by `secs`) until the peer closes the stream: `Ok(elapsed)` on EOF or a
/// reset, `Err(bytes)` if data arrived instead, `Err(empty)` on timeout.
pub async fn wait_closed<S: AsyncRead + Unpin>(s: &mut S, secs: u64) -> Result<Duration, Vec<u8>> {
    let started = std::time::Instant::now();
    let mut buf = [0u8; 4096];
    match tokio::time::timeout(Duration::from_secs(secs), s.read(&mut buf)).await {
        Ok(Ok(0)) | Ok(Err(_)) => Ok(started.elapsed()),
        Ok(Ok(n)) => Err(buf[..n].to_vec()),
        Err(_) => Err(Vec::new()),
    }
}

/// One plain HTTP/1.1 `GET /` over an already open stream (a tunnel), bounded by 5 seconds.
pub async fn get_over<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    host: &str,
) -> std::io::Result<Resp> {
    let attempt = async {
        s.write_all(format!("GET / HTTP/1.1\r\nhost: {host}\r\n\r\n").as_bytes())
            .await?;
        read_response(s).await
    };
    within(5, "answer through the tunnel", attempt).await
}
