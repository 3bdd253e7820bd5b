//! End-to-end harness: the real `egressgate` binary on loopback listeners, loopback origins
//! (plain HTTP and TLS with rcgen certificates), a raw proxy client that controls every byte,
//! and a JSON client for the control API. No fixed ports, no external hosts, no sleeps for
//! readiness: the harness waits for the binary's own "listening" log lines.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod ca;
pub mod examples;
pub mod held;
pub mod inspect;
pub mod pg;
pub mod registry;
pub mod relay;
pub mod sse;
pub mod tls_front;

use std::collections::HashMap;
use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

/// Known test tokens (≥ 16 characters).
pub const ADMIN: &str = "test-admin-token-0123456789";
/// Known runtime token.
pub const RUNTIME: &str = "test-runtime-token-0123456789";

/// A running `egressgate` process.
pub struct Gate {
    child: Child,
    pub proxy: Option<SocketAddr>,
    pub control: Option<SocketAddr>,
    pub data_dir: tempfile::TempDir,
    pub log: Arc<Mutex<Vec<String>>>,
}

/// Builder for a gate process.
pub struct GateBuilder {
    sub: &'static str,
    args: Vec<String>,
    env: Vec<(String, String)>,
    data_dir: Option<tempfile::TempDir>,
    database: Option<String>,
    signals_blocked: bool,
}

pub fn gate() -> GateBuilder {
    GateBuilder {
        sub: "serve",
        args: Vec::new(),
        env: Vec::new(),
        data_dir: None,
        database: None,
        signals_blocked: false,
    }
}

impl GateBuilder {
    pub fn subcommand(mut self, sub: &'static str) -> Self {
        self.sub = sub;
        self
    }
    pub fn resolve(mut self, host: &str, ip: &str) -> Self {
        self.args.push("--resolve".into());
        self.args.push(format!("{host}={ip}"));
        self
    }
    pub fn arg(mut self, a: &str) -> Self {
        self.args.push(a.into());
        self
    }
    pub fn args(mut self, a: &[&str]) -> Self {
        self.args.extend(a.iter().map(|s| s.to_string()));
        self
    }
    pub fn env(mut self, k: &str, v: &str) -> Self {
        self.env.push((k.into(), v.into()));
        self
    }
    /// Use this database URL (instead of SQLite or the CI PostgreSQL).
    pub fn database(mut self, url: &str) -> Self {
        self.database = Some(url.into());
        self
    }
    /// Reuse a data directory (restart tests).
    pub fn data_dir(mut self, d: tempfile::TempDir) -> Self {
        self.data_dir = Some(d);
        self
    }
    /// Start the binary with SIGTERM and SIGINT blocked, as a supervisor or CI runner may
    /// (the mask survives exec): a Python shim blocks them and execs the binary in place, so
    /// [`Gate::pid`] is still the binary's.
    pub fn shutdown_signals_blocked(mut self) -> Self {
        self.signals_blocked = true;
        self
    }
    pub fn start(self) -> Gate {
        self.start_on("127.0.0.1:0", "127.0.0.1:0")
    }
}

/// When CI provides a PostgreSQL server (`EGRESSGATE_TEST_POSTGRES_URL`), each data directory
/// gets its own database there (created once, reused on restart), so the end-to-end suite
/// runs on both stores.
pub fn postgres_database_for(data_dir: &std::path::Path) -> Option<String> {
    let base = std::env::var("EGRESSGATE_TEST_POSTGRES_URL").ok()?;
    let tag: String = data_dir
        .file_name()?
        .to_string_lossy()
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect::<String>()
        .to_ascii_lowercase();
    let name = format!("eg_e2e_{tag}");
    // Fails harmlessly when the database exists (a restart on the same data directory).
    let _ = Command::new("psql")
        .arg(&base)
        .args(["-q", "-c", &format!("CREATE DATABASE {name}")])
        .stderr(Stdio::null())
        .status();
    let (prefix, _) = base.rsplit_once('/').unwrap();
    Some(format!("{prefix}/{name}"))
}

impl Gate {
    pub fn proxy(&self) -> SocketAddr {
        self.proxy.unwrap()
    }
    pub fn api(&self) -> Api {
        Api {
            addr: self.control.unwrap(),
        }
    }
    /// Lines logged so far containing `needle`.
    pub fn log_lines(&self, needle: &str) -> Vec<String> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains(needle))
            .cloned()
            .collect()
    }

    /// Waits (bounded, 5 s) for a log line containing every needle: the gate's stderr is read
    /// by another thread, so a line written just before a response may not be here yet.
    pub async fn log_line(&self, needles: &[&str]) -> Option<String> {
        for _ in 0..100 {
            if let Some(l) = self
                .log_lines(needles[0])
                .into_iter()
                .find(|l| needles.iter().all(|n| l.contains(n)))
            {
                return Some(l);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    }
    /// SIGKILL and keep the data directory.
    pub fn kill(mut self) -> tempfile::TempDir {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::mem::replace(&mut self.data_dir, tempfile::tempdir().unwrap())
    }
    /// The process id (for signals).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
    /// Waits for the process to exit (after a signal) and returns its status.
    pub fn wait(mut self) -> std::process::ExitStatus {
        self.child.wait().unwrap()
    }
    /// SIGTERM and wait for the exit status.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        self.child.wait().unwrap()
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

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
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nhost: {}\r\nconnection: close\r\n",
            self.addr
        );
        if let Some(t) = token {
            req.push_str(&format!("authorization: Bearer {t}\r\n"));
        }
        if let Some(u) = user {
            req.push_str(&format!("x-egressgate-user: {u}\r\n"));
        }
        let body = body.unwrap_or("");
        if !body.is_empty() || method == "POST" || method == "PUT" {
            req.push_str(&format!(
                "content-type: application/json\r\ncontent-length: {}\r\n",
                body.len()
            ));
        }
        req.push_str("\r\n");
        req.push_str(body);
        let mut s = TcpStream::connect(self.addr).await.unwrap();
        s.write_all(req.as_bytes()).await.unwrap();
        read_response(&mut s).await.unwrap()
    }

    pub async fn post(&self, path: &str, token: &str, body: serde_json::Value) -> Resp {
        self.call("POST", path, Some(token), None, Some(&body.to_string()))
            .await
    }
    pub async fn get(&self, path: &str, token: &str) -> Resp {
        self.call("GET", path, Some(token), None, None).await
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
        let r = self
            .post(
                "/v1/admin/sites",
                ADMIN,
                serde_json::json!({"pattern": pattern}),
            )
            .await;
        assert!(r.status == 201 || r.status == 200, "{}", r.text());
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
        let r = self
            .call("GET", &path, Some(RUNTIME), Some(user), None)
            .await;
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
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        if s.read(&mut byte).await? == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("eof in head: {:?}", String::from_utf8_lossy(&buf)),
            ));
        }
        buf.push(byte[0]);
    }
    let (status, headers) = parse_head(&buf);
    let mut body = Vec::new();
    if let Some(n) = headers
        .get("content-length")
        .and_then(|v| v.parse::<usize>().ok())
    {
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

/// Sends raw bytes to the proxy and reads one response.
pub async fn proxy_raw(proxy: SocketAddr, raw: &str) -> Resp {
    let mut s = TcpStream::connect(proxy).await.unwrap();
    s.write_all(raw.as_bytes()).await.unwrap();
    read_response(&mut s).await.unwrap()
}

/// `GET url` through the proxy (absolute form) with the turn's credential.
pub async fn proxy_get(proxy: SocketAddr, turn: &Turn, url: &str) -> Resp {
    let u = url::Url::parse(url).unwrap();
    let host = match u.port() {
        Some(p) => format!("{}:{p}", u.host_str().unwrap()),
        None => u.host_str().unwrap().to_owned(),
    };
    proxy_raw(
        proxy,
        &format!("GET {url} HTTP/1.1\r\nhost: {host}\r\nproxy-authorization: {}\r\nconnection: close\r\n\r\n", turn.auth_header()),
    )
    .await
}

/// `CONNECT authority` with the turn's credential; returns the response head and the stream.
pub async fn connect(proxy: SocketAddr, turn: &Turn, authority: &str) -> (Resp, TcpStream) {
    let mut s = TcpStream::connect(proxy).await.unwrap();
    s.write_all(
        format!(
            "CONNECT {authority} HTTP/1.1\r\nhost: {authority}\r\nproxy-authorization: {}\r\n\r\n",
            turn.auth_header()
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let r = read_head_only(&mut s).await;
    (r, s)
}

async fn read_head_only(s: &mut TcpStream) -> Resp {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        if s.read(&mut byte).await.unwrap() == 0 {
            break;
        }
        buf.push(byte[0]);
    }
    let (status, headers) = parse_head(&buf);
    let mut body = Vec::new();
    if let Some(n) = headers
        .get("content-length")
        .and_then(|v| v.parse::<usize>().ok())
    {
        body.resize(n, 0);
        let _ = s.read_exact(&mut body).await;
    }
    Resp {
        status,
        headers,
        body,
    }
}

/// A loopback origin that answers every request with 200 and records what it saw.
pub struct Origin {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<Vec<String>>>,
    pub connections: Arc<std::sync::atomic::AtomicUsize>,
}

impl Origin {
    /// Requests seen (request heads, lower-cased header names kept as sent).
    pub fn requests(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
    pub fn connection_count(&self) -> usize {
        self.connections.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Starts a plain HTTP origin on 127.0.0.1:0 that answers `origin says hi` to every request.
pub async fn origin() -> Origin {
    origin_at("127.0.0.1:0").await
}

async fn serve_origin<S: AsyncRead + AsyncWrite + Unpin>(mut s: S, seen: Arc<Mutex<Vec<String>>>) {
    loop {
        let mut buf = Vec::new();
        let mut byte = [0u8; 1];
        while !buf.ends_with(b"\r\n\r\n") {
            match s.read(&mut byte).await {
                Ok(1) => buf.push(byte[0]),
                _ => return,
            }
        }
        let head = String::from_utf8_lossy(&buf).into_owned();
        let len = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length:")
                    .map(|v| v.trim().parse::<usize>().unwrap_or(0))
            })
            .unwrap_or(0);
        let mut body = vec![0u8; len];
        if s.read_exact(&mut body).await.is_err() {
            return;
        }
        seen.lock().unwrap().push(head);
        let reply = b"HTTP/1.1 200 OK\r\ncontent-length: 14\r\ncontent-type: text/plain\r\n\r\norigin says hi";
        if s.write_all(reply).await.is_err() {
            return;
        }
    }
}

/// TLS material: a CA and a leaf for the given names.
pub struct Pki {
    pub ca_der: rustls::pki_types::CertificateDer<'static>,
    pub server: Arc<rustls::ServerConfig>,
}

pub fn pki(names: &[&str]) -> Pki {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "egressgate test CA");
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).unwrap();
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf_params =
        rcgen::CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .unwrap();
    let leaf = leaf_params.signed_by(&leaf_key, &ca).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![leaf.der().clone()], key)
        .unwrap();
    Pki {
        ca_der: ca.der().clone(),
        server: Arc::new(server),
    }
}

/// PEM text of a DER certificate (for `--upstream-ca`, `--cert` and CA bundle files).
pub fn pem_of(der: &[u8]) -> String {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let lines: Vec<&str> = b64
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    format!(
        "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
        lines.join("\n")
    )
}

impl Pki {
    /// This CA's certificate as PEM.
    pub fn ca_pem(&self) -> String {
        pem_of(&self.ca_der)
    }

    /// A client config trusting this CA.
    pub fn client(&self) -> Arc<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca_der.clone()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        Arc::new(
            rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth(),
        )
    }

    /// Writes the leaf cert and key as PEM files (for the proxy's own TLS listener).
    pub fn write_pem(
        names: &[&str],
        dir: &std::path::Path,
    ) -> (
        std::path::PathBuf,
        std::path::PathBuf,
        rustls::pki_types::CertificateDer<'static>,
    ) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert =
            rcgen::CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .unwrap()
                .self_signed(&key)
                .unwrap();
        let c = dir.join("proxy.crt");
        let k = dir.join("proxy.key");
        std::fs::write(&c, cert.pem()).unwrap();
        std::fs::write(&k, key.serialize_pem()).unwrap();
        (c, k, cert.der().clone())
    }
}

/// Starts a TLS origin; it answers like [`origin`] inside TLS.
pub async fn tls_origin(pki: &Pki) -> Origin {
    tls_origin_at(pki, "127.0.0.1:0").await
}

/// TLS handshake through an open tunnel with the given SNI, then `GET /`.
pub async fn tls_get(
    stream: TcpStream,
    client: Arc<rustls::ClientConfig>,
    sni: &str,
) -> std::io::Result<Resp> {
    let connector = tokio_rustls::TlsConnector::from(client);
    let name =
        rustls::pki_types::ServerName::try_from(sni.to_owned()).map_err(std::io::Error::other)?;
    let mut tls = tokio::time::timeout(Duration::from_secs(10), connector.connect(name, stream))
        .await
        .map_err(std::io::Error::other)??;
    tls.write_all(format!("GET / HTTP/1.1\r\nhost: {sni}\r\n\r\n").as_bytes())
        .await?;
    read_response(&mut tls).await
}

// ---------------------------------------------------------------------------------------------
// Helpers for the security battery (tests/security_battery.rs) and the limits tests
// (tests/limits.rs).
// ---------------------------------------------------------------------------------------------

impl GateBuilder {
    /// Like [`GateBuilder::start`], but with the proxy and control listeners on the given
    /// addresses, for tests that must know the gate's own ports before it starts (to allow
    /// them with `--allow-port` and prove the gate still never dials itself).
    pub fn start_on(self, proxy_listen: &str, control_listen: &str) -> Gate {
        let data_dir = self
            .data_dir
            .unwrap_or_else(|| tempfile::tempdir().unwrap());
        let binary = env!("CARGO_BIN_EXE_egressgate");
        let mut cmd = if self.signals_blocked {
            let mut shim = Command::new("python3");
            shim.args([
                "-c",
                "import os, signal, sys\n\
                 signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})\n\
                 os.execv(sys.argv[1], sys.argv[1:])",
                binary,
            ]);
            shim
        } else {
            Command::new(binary)
        };
        cmd.arg(self.sub)
            .arg("--data-dir")
            .arg(data_dir.path().join("data"));
        if self.sub != "control" {
            cmd.args(["--proxy-listen", proxy_listen]);
        }
        if self.sub != "proxy" {
            cmd.args(["--control-listen", control_listen]);
        }
        let url = match self.database.as_deref() {
            Some("sqlite-default") => None,
            Some(url) => Some(url.to_owned()),
            None => postgres_database_for(data_dir.path()),
        };
        if let Some(url) = url {
            cmd.arg("--database-url").arg(&url);
            // On PostgreSQL the CA's key is kept only sealed (a test may override or unset it).
            if url.starts_with("postgres") {
                cmd.env("EGRESSGATE_CA_SEAL_KEY", ca::SEAL_KEY);
            }
        }
        cmd.args(&self.args)
            .env("EGRESSGATE_ADMIN_TOKEN", ADMIN)
            .env("EGRESSGATE_RUNTIME_TOKEN", RUNTIME)
            .env("EGRESSGATE_LOG", "info,egressgate_proxy=debug")
            .env_remove("DATABASE_URL")
            .envs(self.env)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn egressgate");
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let log2 = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line.clone());
                log2.lock().unwrap().push(line);
            }
        });
        let (mut proxy, mut control) = (None, None);
        let want_proxy = self.sub != "control";
        let want_control = self.sub != "proxy";
        while (want_proxy && proxy.is_none()) || (want_control && control.is_none()) {
            let line = rx
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("gate did not start; log: {:?}", log.lock().unwrap()));
            let addr = match serde_json::from_str::<serde_json::Value>(&line) {
                // `--log-format json`: one object a line, the event's fields flattened.
                Ok(v) => v["addr"].as_str().and_then(|a| a.parse().ok()),
                Err(_) => line
                    .split("addr=")
                    .nth(1)
                    .and_then(|a| a.split_whitespace().next())
                    .and_then(|a| a.parse().ok()),
            };
            if line.contains("proxy listening") {
                proxy = addr;
            } else if line.contains("control plane listening") {
                control = addr;
            }
        }
        Gate {
            child,
            proxy,
            control,
            data_dir,
            log,
        }
    }
}

/// A port that was free a moment ago on 127.0.0.1 (for `start_on`; tests inside a private
/// network namespace make the race harmless).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts a plain HTTP origin like [`origin`] on a given address (e.g. `127.0.0.1:443`).
pub async fn origin_at(addr: &str) -> Origin {
    let listener = TcpListener::bind(addr)
        .await
        .unwrap_or_else(|e| panic!("bind origin {addr}: {e}"));
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let connections = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (seen2, conns2) = (seen.clone(), connections.clone());
    tokio::spawn(async move {
        loop {
            let Ok((s, _)) = listener.accept().await else {
                return;
            };
            conns2.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            tokio::spawn(serve_origin(s, seen2.clone()));
        }
    });
    Origin {
        addr,
        seen,
        connections,
    }
}

/// Starts a TLS origin like [`tls_origin`] on a given address (e.g. `127.0.0.1:443`).
pub async fn tls_origin_at(pki: &Pki, addr: &str) -> Origin {
    let listener = TcpListener::bind(addr)
        .await
        .unwrap_or_else(|e| panic!("bind TLS origin {addr}: {e}"));
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let connections = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let acceptor = tokio_rustls::TlsAcceptor::from(pki.server.clone());
    let (seen2, conns2) = (seen.clone(), connections.clone());
    tokio::spawn(async move {
        loop {
            let Ok((s, _)) = listener.accept().await else {
                return;
            };
            conns2.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let acceptor = acceptor.clone();
            let seen = seen2.clone();
            tokio::spawn(async move {
                if let Ok(tls) = acceptor.accept(s).await {
                    serve_origin(tls, seen).await;
                }
            });
        }
    });
    Origin {
        addr,
        seen,
        connections,
    }
}

/// Sends raw bytes to the proxy and reads one response, tolerating a proxy that closes
/// without answering (`Err`), all within `secs` seconds.
pub async fn try_proxy_raw(proxy: SocketAddr, raw: &[u8], secs: u64) -> std::io::Result<Resp> {
    let attempt = async {
        let mut s = TcpStream::connect(proxy).await?;
        s.write_all(raw).await?;
        read_response(&mut s).await
    };
    tokio::time::timeout(Duration::from_secs(secs), attempt)
        .await
        .map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "no answer from the proxy in time",
            )
        })?
}

/// Opens a turn with extra fields in the body (e.g. `ttl_seconds`).
pub async fn turn_with(api: &Api, body: serde_json::Value) -> Turn {
    let r = api.post("/v1/turns", RUNTIME, body).await;
    assert_eq!(r.status, 201, "open turn: {}", r.text());
    let url = url::Url::parse(r.json()["proxy_url"].as_str().unwrap()).unwrap();
    Turn {
        id: url.username().to_owned(),
        credential: format!("{}:{}", url.username(), url.password().unwrap()),
    }
}

/// Polls the turn's refusal record until a row with `reason` appears (bounded by `secs`).
pub async fn wait_for_refusal(
    api: &Api,
    turn: &Turn,
    reason: &str,
    secs: u64,
) -> Option<serde_json::Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        let rec = api.refusals(turn).await;
        if let Some(row) = rec["refusals"]
            .as_array()
            .and_then(|rows| rows.iter().find(|r| r["reason"] == reason))
        {
            return Some(row.clone());
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
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
    tokio::time::timeout(Duration::from_secs(5), attempt)
        .await
        .map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "no answer through the tunnel in time",
            )
        })?
}

/// Runs the approval tool for `urls` (plus what the turn was refused) and registers the
/// interrupt; returns (interrupt id, resume secret).
pub async fn ask(api: &Api, turn: &Turn, urls: &[&str]) -> (String, String) {
    let body = serde_json::json!({"reason": "the analysis needs the data file", "urls": urls});
    let (_, id, secret) = ask_with(api, turn, body).await;
    (id, secret)
}

/// Runs the approval tool with `body`, expecting a card, and registers the interrupt;
/// returns (the card, interrupt id, resume secret).
pub async fn ask_with(
    api: &Api,
    turn: &Turn,
    body: serde_json::Value,
) -> (serde_json::Value, String, String) {
    let r = api
        .post(
            &format!("/v1/turns/{}/approval-requests", turn.id),
            RUNTIME,
            body,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["outcome"], "ask", "{v}");
    let card = v["card"].clone();
    let r = api
        .post(
            "/v1/interrupts",
            RUNTIME,
            serde_json::json!({"draft_id": v["draft_id"]}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let v = r.json();
    (
        card,
        v["interrupt"]["id"].as_str().unwrap().to_owned(),
        v["resume_secret"].as_str().unwrap().to_owned(),
    )
}

/// Resumes interrupt `id` with one decision, with the card's secret.
pub async fn resume(
    api: &Api,
    id: &str,
    secret: &str,
    status: &str,
    payload: serde_json::Value,
) -> Resp {
    api.call(
        "POST",
        &format!("/v1/interrupts/{id}/resume"),
        None,
        None,
        Some(&resume_body(id, secret, status, payload)),
    )
    .await
}

/// The body of a resume with one entry for card `id`.
pub fn resume_body(id: &str, secret: &str, status: &str, payload: serde_json::Value) -> String {
    serde_json::json!({"secret": secret, "resume": [{"interruptId": id, "status": status, "payload": payload}]})
        .to_string()
}

/// Answers card `id` with `{"approved": true}` (which claims it and extends its turn) and
/// asserts the claim.
pub async fn approve_card(api: &Api, id: &str, secret: &str) {
    let r = resume(
        api,
        id,
        secret,
        "resolved",
        serde_json::json!({"approved": true}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["state"], "claimed", "{}", r.text());
}
