//! Tunnel relay fixtures: a gate with one approved host and one that is not (both on
//! loopback; the fronting rows of `tests/security_review_tunnels.rs` use it too), tunnels opened to it, raw origins that answer what a test scripts, and real
//! HTTP servers (Node's llhttp, Python's http.server) run as child processes, each logging the
//! requests it served, for the tests that show what a strict or lenient origin would make of
//! what the relay passed on.

use std::io::BufRead as _;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

use super::*;

/// The host no list names ([`FILES`], the approved one, is the harness's).
pub const OTHER: &str = "unapproved.example.com";

/// `files.example.com` approved, `unapproved.example.com` not, both on loopback (two virtual
/// hosts of one server), with `ports` allowed.
pub async fn relay_gate(ports: &[u16]) -> (Gate, Api, Turn) {
    let g = gate()
        .names(&[FILES, OTHER])
        .loopback()
        .ports(ports)
        .sites(&[FILES])
        .ready()
        .await;
    let api = g.api();
    let turn = api.turn("rita", "c1", &[]).await;
    (g, api, turn)
}

/// A loopback [`origin`] and a [`relay_gate`] for its port: (gate, API, turn, origin), where
/// the tests whose origin serves ordinary requests start.
pub async fn origin_relay() -> (Gate, Api, Turn, Origin) {
    let o = origin().await;
    let (g, api, turn) = relay_gate(&[o.port()]).await;
    (g, api, turn, o)
}

/// A [`raw_origin`] scripted with `until` and `reply`, and a [`relay_gate`] for its port:
/// (gate, API, turn, the origin's port, every byte it was sent), where the tests whose origin
/// answers what they script start.
pub async fn raw_relay(
    until: &'static [u8],
    reply: &'static [u8],
) -> (Gate, Api, Turn, u16, Arc<Mutex<Vec<u8>>>) {
    let (addr, seen) = raw_origin(until, reply).await;
    let (g, api, turn) = relay_gate(&[addr.port()]).await;
    (g, api, turn, addr.port(), seen)
}

/// A raw origin: keeps every byte its connections send; once they contain `until`, it writes
/// `reply` once (and keeps the connection open).
pub async fn raw_origin(
    until: &'static [u8],
    reply: &'static [u8],
) -> (SocketAddr, Arc<Mutex<Vec<u8>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let seen = kept.clone();
            tokio::spawn(async move {
                let mut replied = false;
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = s.read(&mut buf).await {
                    let all = {
                        let mut seen = seen.lock().unwrap();
                        seen.extend_from_slice(&buf[..n]);
                        seen.clone()
                    };
                    if !replied && all.windows(until.len()).any(|w| w == until) {
                        replied = true;
                        if s.write_all(reply).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    (addr, seen)
}

pub async fn open(g: &Gate, turn: &Turn, port: u16) -> TcpStream {
    open_at(g.proxy(), turn, &format!("{FILES}:{port}")).await
}

/// A tunnel to `FILES:port`, as `turn`, with `raw` already written into it in one write:
/// how nearly every relay test starts what it then reads back.
pub async fn send(g: &Gate, turn: &Turn, port: u16, raw: &str) -> TcpStream {
    let mut s = open(g, turn, port).await;
    s.write_all(raw.as_bytes()).await.unwrap();
    s
}

/// Asserts that nothing the test sent left a refusal on `turn`'s record: what was relayed
/// (or cut for its framing) was never a policy refusal.
pub async fn assert_no_refusals(api: &Api, turn: &Turn) {
    let refusals = api.refusals(turn).await;
    assert_eq!(
        refusals["refusals"].as_array().map(Vec::len),
        Some(0),
        "{refusals}"
    );
}

pub async fn open_at(proxy: SocketAddr, turn: &Turn, authority: &str) -> TcpStream {
    let (r, s) = connect(proxy, turn, authority).await;
    assert_eq!(r.status, 200);
    s
}

pub async fn answer(s: &mut TcpStream) -> Resp {
    tokio::time::timeout(Duration::from_secs(5), read_response(s))
        .await
        .expect("an answer in time")
        .expect("an answer")
}

pub fn text(seen: &Arc<Mutex<Vec<u8>>>) -> String {
    String::from_utf8_lossy(&seen.lock().unwrap()).into_owned()
}

/// The data of the chunked body at the start of `s`, and what follows it; panics on anything
/// but canonical chunks (size lines without extensions, no trailers).
pub fn dechunk(mut s: &str) -> (String, &str) {
    let mut data = String::new();
    loop {
        let (size, rest) = s.split_once("\r\n").expect("a chunk-size line");
        let n = usize::from_str_radix(size, 16).expect("a bare hex chunk size");
        if n == 0 {
            return (data, rest.strip_prefix("\r\n").expect("no trailers"));
        }
        data.push_str(&rest[..n]);
        s = rest[n..]
            .strip_prefix("\r\n")
            .expect("CRLF after chunk data");
    }
}

/// Waits (bounded) until `n` tunnels have written their closing line.
pub async fn tunnels_ended(g: &Gate, n: usize) {
    for _ in 0..250 {
        if g.log_lines("end=\"closed\"").len() >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{:?}", g.log_lines("kind=\"connect\""));
}

/// A real HTTP server run as a child process on 127.0.0.1, from an inline script that prints
/// `PORT n` once listening and `REQ host method target` for every request it served.
pub struct ScriptOrigin {
    pub port: u16,
    child: Child,
    seen: Arc<Mutex<Vec<String>>>,
}

/// Node's own HTTP server (llhttp: a strict parser that reads `Content-Length` on any method).
const NODE_ORIGIN: &str = r#"
const http = require('http');
const srv = http.createServer((req, res) => {
  req.on('data', () => {});
  req.on('end', () => {
    console.log(`REQ ${req.headers.host} ${req.method} ${req.url}`);
    const body = `vhost=${req.headers.host} path=${req.url}`;
    res.writeHead(200, {'content-length': Buffer.byteLength(body)});
    res.end(body);
  });
});
srv.listen(0, '127.0.0.1', () => console.log(`PORT ${srv.address().port}`));
"#;

/// Python's `http.server` on HTTP/1.1 keep-alive: a lenient request-line parser (any
/// `str.split()` whitespace), and handlers for bodiless methods that never read a body, so
/// one sent with them is read as the next request (CL.0). POST bodies are read.
const PYTHON_ORIGIN: &str = r#"
import http.server
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def answer(self):
        if self.command == "POST":
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
        host = self.headers.get("Host")
        print(f"REQ {host} {self.command} {self.path}", flush=True)
        body = f"vhost={host} path={self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
    do_GET = do_HEAD = do_OPTIONS = do_DELETE = do_TRACE = do_POST = answer
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(f"PORT {s.server_address[1]}", flush=True)
s.serve_forever()
"#;

impl ScriptOrigin {
    /// Node's HTTP server.
    pub fn node() -> Self {
        Self::start("node", &["-e", NODE_ORIGIN])
    }

    /// Python's HTTP server.
    pub fn python() -> Self {
        Self::start("python3", &["-c", PYTHON_ORIGIN])
    }

    fn start(program: &str, args: &[&str]) -> Self {
        let mut child = Command::new(program)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("{program} is needed for this test (.ci/run installs it): {e}")
            });
        let stdout = child.stdout.take().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (port_tx, port_rx) = std::sync::mpsc::channel();
        let kept = seen.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(port) = line.strip_prefix("PORT ") {
                    let _ = port_tx.send(port.trim().parse::<u16>().unwrap());
                } else if let Some(req) = line.strip_prefix("REQ ") {
                    kept.lock().unwrap().push(req.to_owned());
                }
            }
        });
        let port = port_rx
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("{program} origin did not start"));
        Self { port, child, seen }
    }

    /// `host method target` of every request served so far.
    pub fn requests(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }

    /// Waits a moment for stragglers, then the requests served.
    pub async fn settled_requests(&self) -> Vec<String> {
        tokio::time::sleep(Duration::from_millis(200)).await;
        self.requests()
    }
}

impl Drop for ScriptOrigin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
