//! A server-sent-events client for the chat event stream (`GET /v1/chats/{chat_id}/events`)
//! and the person's inbox stream (`POST /v1/inbox/events`): raw HTTP/1.0, so the stream is
//! the body without chunking, parsed block by block.

use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use super::{Api, RUNTIME};

/// A server-sent-events subscription over HTTP/1.0 (no chunking: the stream is the body).
pub struct Events {
    s: TcpStream,
    buf: String,
}

impl Events {
    pub async fn open(api: &Api, chat: &str, user: &str, last: Option<&str>) -> Self {
        let mut req = format!(
            "GET /v1/chats/{chat}/events HTTP/1.0\r\nhost: {}\r\nauthorization: Bearer {RUNTIME}\r\nx-egressgate-user: {user}\r\n",
            api.addr
        );
        if let Some(l) = last {
            req.push_str(&format!("last-event-id: {l}\r\n"));
        }
        req.push_str("\r\n");
        Self::start(api, req).await
    }

    /// The person's inbox stream (`POST /v1/inbox/events`) for the holder of `secret`.
    pub async fn inbox(api: &Api, secret: &str) -> Self {
        let body = serde_json::json!({ "secret": secret }).to_string();
        let req = format!(
            "POST /v1/inbox/events HTTP/1.0\r\nhost: {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            api.addr,
            body.len()
        );
        Self::start(api, req).await
    }

    /// Sends `req` and reads the head of a `200 text/event-stream` answer.
    async fn start(api: &Api, req: String) -> Self {
        let mut s = TcpStream::connect(api.addr).await.unwrap();
        s.write_all(req.as_bytes()).await.unwrap();
        let mut e = Self {
            s,
            buf: String::new(),
        };
        while !e.buf.contains("\r\n\r\n") {
            e.fill(5).await;
        }
        let (head, rest) = e.buf.split_once("\r\n\r\n").unwrap();
        assert!(
            head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
            "{head}"
        );
        assert!(
            head.to_ascii_lowercase().contains("text/event-stream"),
            "{head}"
        );
        e.buf = rest.to_owned();
        e
    }

    async fn fill(&mut self, secs: u64) {
        let mut chunk = [0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(secs), self.s.read(&mut chunk))
            .await
            .expect("no event in time")
            .unwrap();
        assert!(n > 0, "stream closed");
        self.buf.push_str(&String::from_utf8_lossy(&chunk[..n]));
    }

    /// Reads (and drops) whatever comes until the server ends the stream, within `secs`.
    pub async fn closes_within(&mut self, secs: u64) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
        let mut chunk = [0u8; 4096];
        loop {
            let n = tokio::time::timeout_at(deadline, self.s.read(&mut chunk))
                .await
                .expect("the stream did not end in time")
                .unwrap();
            if n == 0 {
                return;
            }
        }
    }

    /// The next block (event or comment) as its raw lines.
    pub async fn block(&mut self, secs: u64) -> String {
        loop {
            if let Some((block, rest)) = self.buf.split_once("\n\n") {
                let block = block.to_owned();
                self.buf = rest.to_owned();
                return block;
            }
            self.fill(secs).await;
        }
    }

    /// The next event (comments skipped): (id, event, data).
    pub async fn next(&mut self) -> (String, String, Value) {
        loop {
            let block = self.block(10).await;
            if block.starts_with(':') {
                continue;
            }
            let field = |name: &str| {
                block
                    .lines()
                    .find_map(|l| l.strip_prefix(&format!("{name}:")))
                    .map(|v| v.trim().to_owned())
                    .unwrap_or_default()
            };
            let data = serde_json::from_str(&field("data")).unwrap_or(Value::Null);
            return (field("id"), field("event"), data);
        }
    }
}
