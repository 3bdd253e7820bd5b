//! Security battery: one row per trick that attackers and confused agents use to reach what
//! the gate must refuse, each row run through forwarding (`GET http://HOST:PORT/`) and through
//! CONNECT (`CONNECT HOST:PORT`), plus a negative battery of legitimate public-looking names
//! that must pass both ways.
//!
//! Every refusal row asserts: `403`, `X-Egress-Refused: <reason>`, `X-Egress-Approvable`
//! (true only for `not_approved`), exactly one matching row in the turn's refusal record, and a
//! loopback origin whose port is allowed was never contacted.
//!
//! Traffic stays on this machine: every test that resolves a name (or names an address) outside
//! loopback runs inside a fresh network namespace with only `lo` up (see [`in_netns`]), so even
//! a wrong dial cannot leave the machine.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::future::Future;
use std::io::Read as _;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use support::*;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

const NETNS_ENV: &str = "EGRESSGATE_IN_NETNS";
const FILES: &str = "files.example.com";
const OTHER: &str = "other.example.net";

// ---------------------------------------------------------------------------------------------
// Network namespace: the whole test (gate, origins, clients) runs on a private loopback.
// ---------------------------------------------------------------------------------------------

/// Runs `body` inside a fresh network namespace whose only interface is `lo`.
///
/// Outside the namespace (no `EGRESSGATE_IN_NETNS`), re-executes this test binary for exactly
/// `test_name` under `unshare --net` and asserts the child passed exactly one test. If
/// `unshare` cannot create the namespace the test fails loudly: it never silently skips.
/// Inside, it first proves there is no way out (only `lo`, no IPv4 routes, IPv6 only on `lo`),
/// then runs `body` on a multi-threaded runtime.
fn in_netns<F, Fut>(test_name: &str, body: F)
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = ()>,
{
    if std::env::var_os(NETNS_ENV).is_some() {
        assert_sealed();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(body());
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new("unshare")
        .args([
            "--net",
            "--",
            "sh",
            "-c",
            r#"ip link set lo up && exec "$0" "$@""#,
        ])
        .arg(exe)
        .args([test_name, "--exact", "--nocapture", "--test-threads=1"])
        .env(NETNS_ENV, "1")
        // A CI PostgreSQL on the host's loopback is unreachable from the namespace: the gates
        // inside use the embedded SQLite store.
        .env_remove("EGRESSGATE_TEST_POSTGRES_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot run `unshare --net` for {test_name} (needs root or CAP_SYS_ADMIN): {e}")
        });
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = out_reader.join().unwrap();
    let stderr = err_reader.join().unwrap();
    let ran_one = stdout.contains("test result: ok. 1 passed");
    assert!(
        status.is_some_and(|s| s.success()) && ran_one,
        "{test_name} inside the network namespace: status {status:?} (None = killed after 300 s)\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}"
    );
}

/// Inside the namespace: prove no dial can leave the machine.
fn assert_sealed() {
    let dev = std::fs::read_to_string("/proc/self/net/dev").unwrap();
    let ifaces: Vec<&str> = dev
        .lines()
        .skip(2)
        .filter_map(|l| l.split(':').next())
        .map(str::trim)
        .collect();
    assert_eq!(
        ifaces,
        ["lo"],
        "the namespace must only have loopback: {dev}"
    );
    let route = std::fs::read_to_string("/proc/self/net/route").unwrap();
    assert!(
        route.lines().skip(1).all(|l| l.trim().is_empty()),
        "IPv4 routes inside the namespace: {route}"
    );
    let route6 = std::fs::read_to_string("/proc/self/net/ipv6_route").unwrap_or_default();
    assert!(
        route6
            .lines()
            .all(|l| l.trim().is_empty() || l.trim_end().ends_with("lo")),
        "IPv6 routes off loopback: {route6}"
    );
}

// ---------------------------------------------------------------------------------------------
// Raw clients.
// ---------------------------------------------------------------------------------------------

/// Reads a response head (and a content-length body) within 10 seconds.
async fn read_head(s: &mut TcpStream) -> Result<Resp, String> {
    let attempt = async {
        let mut buf = Vec::new();
        let mut byte = [0u8; 1];
        while !buf.ends_with(b"\r\n\r\n") {
            match s.read(&mut byte).await {
                Ok(1) => buf.push(byte[0]),
                Ok(_) => {
                    return Err(format!(
                        "connection closed before a full response head: {:?}",
                        String::from_utf8_lossy(&buf)
                    ));
                }
                Err(e) => return Err(format!("read error before a full response head: {e}")),
            }
        }
        let (status, headers) = parse_head(&buf);
        let mut body = Vec::new();
        if let Some(n) = headers
            .get("content-length")
            .and_then(|v| v.parse::<usize>().ok())
        {
            body.resize(n, 0);
            s.read_exact(&mut body)
                .await
                .map_err(|e| format!("body: {e}"))?;
        }
        Ok(Resp {
            status,
            headers,
            body,
        })
    };
    tokio::time::timeout(Duration::from_secs(10), attempt)
        .await
        .map_err(|_| "no response head within 10 s".to_owned())?
}

/// Sends `CONNECT authority` (any bytes) with the turn's credential.
async fn connect_raw(
    proxy: SocketAddr,
    turn: &Turn,
    authority: &str,
) -> Result<(Resp, TcpStream), String> {
    let mut s = TcpStream::connect(proxy).await.map_err(|e| e.to_string())?;
    let _ = s.set_nodelay(true);
    s.write_all(
        format!(
            "CONNECT {authority} HTTP/1.1\r\nhost: {authority}\r\nproxy-authorization: {}\r\n\r\n",
            turn.auth_header()
        )
        .as_bytes(),
    )
    .await
    .map_err(|e| e.to_string())?;
    let r = read_head(&mut s).await?;
    Ok((r, s))
}

/// Sends an absolute-form `GET` with the given Host header values (none = the authority).
async fn forward_raw(
    proxy: SocketAddr,
    turn: &Turn,
    authority: &str,
    host_headers: Option<&[String]>,
) -> Result<Resp, String> {
    let mut req = format!("GET http://{authority}/probe?token=abc HTTP/1.1\r\n");
    match host_headers {
        None => req.push_str(&format!("host: {authority}\r\n")),
        Some(hs) => {
            for h in hs {
                req.push_str(&format!("host: {h}\r\n"));
            }
        }
    }
    req.push_str(&format!(
        "proxy-authorization: {}\r\nconnection: close\r\n\r\n",
        turn.auth_header()
    ));
    let mut s = TcpStream::connect(proxy).await.map_err(|e| e.to_string())?;
    s.write_all(req.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    read_head(&mut s).await
}

// ---------------------------------------------------------------------------------------------
// Rows.
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    Forward,
    Connect,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Via {
    Both,
    ForwardOnly,
}

/// What a row must get.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Expect {
    /// `403` with this reason, recorded.
    Refused(&'static str),
    /// `200` from the origin (positive rows).
    Reached,
}

/// One trick.
#[derive(Clone, Debug)]
struct Row {
    trick: String,
    /// The host as the client writes it in the URI / CONNECT authority.
    host: String,
    /// `None`: the bench's default (the origin's) port.
    port: Option<u16>,
    /// Forwarding without a port in the URI (the http default, 80); CONNECT then uses 80.
    no_port: bool,
    /// Forwarding: these Host header values instead of the authority.
    host_headers: Option<Vec<String>>,
    expect: Expect,
    /// The normalised host the refusal record must show (when the row pins it).
    recorded: Option<String>,
    via: Via,
}

fn refused(trick: &str, host: &str, reason: &'static str) -> Row {
    Row {
        trick: trick.to_owned(),
        host: host.to_owned(),
        port: None,
        no_port: false,
        host_headers: None,
        expect: Expect::Refused(reason),
        recorded: None,
        via: Via::Both,
    }
}

fn reached(trick: &str, host: &str) -> Row {
    Row {
        expect: Expect::Reached,
        ..refused(trick, host, "")
    }
}

impl Row {
    fn port(mut self, p: u16) -> Self {
        self.port = Some(p);
        self
    }
    fn rec(mut self, host: &str) -> Self {
        self.recorded = Some(host.to_owned());
        self
    }
    fn no_port(mut self) -> Self {
        self.no_port = true;
        self
    }
    fn forward_only(mut self) -> Self {
        self.via = Via::ForwardOnly;
        self
    }
    fn host_headers(mut self, hs: &[&str]) -> Self {
        self.host_headers = Some(hs.iter().map(|s| (*s).to_owned()).collect());
        self
    }
    fn runs(&self, path: Path) -> bool {
        self.via == Via::Both || path == Path::Forward
    }
}

/// Runs every row through its paths; collects every failure and fails once with all of them.
/// Returns the number of row runs. `untouched` are origins that no refusal row may reach.
async fn run_rows(g: &Gate, untouched: &[&Origin], default_port: u16, rows: &[Row]) -> usize {
    let api = g.api();
    let mut failures = Vec::new();
    let mut runs = 0;
    for (i, row) in rows.iter().enumerate() {
        for path in [Path::Forward, Path::Connect] {
            if !row.runs(path) {
                continue;
            }
            runs += 1;
            let before: Vec<(usize, usize)> = untouched
                .iter()
                .map(|o| (o.connection_count(), o.requests().len()))
                .collect();
            let turn = api.turn("battery", &format!("row-{i}-{path:?}"), &[]).await;
            if let Err(e) = check_row(g.proxy(), &api, &turn, row, path, default_port).await {
                failures.push(format!(
                    "[{path:?}] {} — host {:?}: {e}",
                    row.trick, row.host
                ));
            }
            if matches!(row.expect, Expect::Refused(_)) {
                tokio::time::sleep(Duration::from_millis(20)).await;
                for (o, b) in untouched.iter().zip(&before) {
                    if (o.connection_count(), o.requests().len()) != *b {
                        failures.push(format!(
                            "[{path:?}] {} — host {:?}: the origin on {} was contacted",
                            row.trick, row.host, o.addr
                        ));
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {runs} row runs failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    runs
}

async fn check_row(
    proxy: SocketAddr,
    api: &Api,
    turn: &Turn,
    row: &Row,
    path: Path,
    default_port: u16,
) -> Result<(), String> {
    let port = if row.no_port {
        80
    } else {
        row.port.unwrap_or(default_port)
    };
    let authority = if row.no_port && path == Path::Forward {
        row.host.clone()
    } else {
        format!("{}:{port}", row.host)
    };
    let resp = match path {
        Path::Forward => forward_raw(proxy, turn, &authority, row.host_headers.as_deref()).await?,
        Path::Connect => {
            let (resp, mut s) = connect_raw(proxy, turn, &authority).await?;
            if row.expect == Expect::Reached && resp.status == 200 {
                let r = get_over(&mut s, &row.host)
                    .await
                    .map_err(|e| format!("GET through the tunnel: {e}"))?;
                if r.status != 200 || r.text() != "origin says hi" {
                    return Err(format!("through the tunnel: {} {:?}", r.status, r.text()));
                }
            }
            resp
        }
    };
    match row.expect {
        Expect::Reached => {
            if resp.status != 200 {
                return Err(format!(
                    "expected 200, got {} {:?} (refused: {:?})",
                    resp.status,
                    resp.text(),
                    resp.header("x-egress-refused")
                ));
            }
            if path == Path::Forward && resp.text() != "origin says hi" {
                return Err(format!("expected the origin's body, got {:?}", resp.text()));
            }
            let rec = api.refusals(turn).await;
            if rec["refusals"].as_array().is_none_or(|r| !r.is_empty()) {
                return Err(format!("an allowed request left a refusal: {rec}"));
            }
            Ok(())
        }
        Expect::Refused(reason) => {
            let approvable = reason == "not_approved";
            if resp.status != 403 {
                return Err(format!(
                    "expected 403 {reason}, got {} {:?} (x-egress-refused {:?})",
                    resp.status,
                    resp.text(),
                    resp.header("x-egress-refused")
                ));
            }
            if resp.header("x-egress-refused") != Some(reason) {
                return Err(format!(
                    "X-Egress-Refused {:?}, expected {reason}",
                    resp.header("x-egress-refused")
                ));
            }
            let want = if approvable { "true" } else { "false" };
            if resp.header("x-egress-approvable") != Some(want) {
                return Err(format!(
                    "X-Egress-Approvable {:?}, expected {want}",
                    resp.header("x-egress-approvable")
                ));
            }
            if !resp.text().contains(reason) {
                return Err(format!("body does not name the reason: {:?}", resp.text()));
            }
            let rec = api.refusals(turn).await;
            let rows = rec["refusals"].as_array().cloned().unwrap_or_default();
            if rows.len() != 1 {
                return Err(format!("expected exactly one recorded refusal, got {rec}"));
            }
            let r = &rows[0];
            if r["reason"] != reason || r["approvable"] != approvable || r["port"] != port {
                return Err(format!(
                    "recorded {r}, expected reason {reason}, approvable {approvable}, port {port}"
                ));
            }
            let host = r["host"].as_str().unwrap_or_default();
            if host.is_empty()
                || host.ends_with('.')
                || host
                    .chars()
                    .any(|c| c.is_ascii_uppercase() || !c.is_ascii())
            {
                return Err(format!("recorded host {host:?} is not in canonical form"));
            }
            if let Some(want) = &row.recorded
                && host != want
            {
                return Err(format!("recorded host {host:?}, expected {want:?}"));
            }
            Ok(())
        }
    }
}

/// A gate for name-level rows: loopback reachable (`--allow-cidr 127.0.0.0/8`) and names
/// resolved to 127.0.0.1, so a missing name rule would really reach the origin.
fn name_gate(origin_port: u16, resolve: &[&str]) -> Gate {
    let mut b = gate()
        .arg("--allow-cidr")
        .arg("127.0.0.0/8")
        .arg("--allow-port")
        .arg(&origin_port.to_string())
        .arg("--internal-suffix")
        .arg("example-corp.net");
    for h in resolve {
        b = b.resolve(h, "127.0.0.1");
    }
    b.start()
}

/// Asserts a request that the HTTP layer cannot parse is `400`, recorded nowhere, and dials
/// nothing. Used for spellings that never reach the normaliser (raw UTF-8 and `%` in a host
/// are invalid in an HTTP request-target).
async fn assert_malformed(g: &Gate, o: &Origin, trick: &str, host: &str) {
    let api = g.api();
    let before = o.connection_count();
    for path in [Path::Forward, Path::Connect] {
        let turn = api
            .turn("battery", &format!("malformed-{trick}-{path:?}"), &[])
            .await;
        let authority = format!("{host}:{}", o.addr.port());
        let status = match path {
            Path::Forward => forward_raw(g.proxy(), &turn, &authority, None)
                .await
                .map(|r| r.status),
            Path::Connect => connect_raw(g.proxy(), &turn, &authority)
                .await
                .map(|(r, _)| r.status),
        };
        // A refusal would be fine too; what matters is: not forwarded, not tunnelled.
        assert!(
            matches!(status, Ok(400) | Ok(403)),
            "[{path:?}] {trick} {host:?}: expected 400 (or a 403 refusal), got {status:?}"
        );
        if status == Ok(400) {
            let rec = api.refusals(&turn).await;
            assert_eq!(
                rec["refusals"].as_array().map(Vec::len),
                Some(0),
                "[{path:?}] {trick}: a 400 must not be recorded: {rec}"
            );
        }
    }
    assert_eq!(
        o.connection_count(),
        before,
        "{trick} {host:?}: the origin was contacted"
    );
}

// ---------------------------------------------------------------------------------------------
// Battery 1: ip_literal.
// ---------------------------------------------------------------------------------------------

fn ip_literal_rows() -> Vec<Row> {
    const R: &str = "ip_literal";
    vec![
        refused("dotted quad loopback", "127.0.0.1", R).rec("127.0.0.1"),
        refused("two-part short form (127.1)", "127.1", R),
        refused("three-part short form", "127.0.1", R),
        refused("decimal integer", "2130706433", R),
        refused("hex integer", "0x7f000001", R),
        refused("hex first part, short form", "0x7f.1", R),
        refused("upper-case hex in every octet", "0X7F.0X0.0X0.0X1", R),
        refused("hex last octet only", "127.0.0.0x1", R),
        refused("octal first octet", "0177.0.0.1", R),
        refused("octal integer", "017700000001", R),
        refused("zero-padded octets", "127.000.000.001", R),
        refused("trailing dot", "127.0.0.1.", R).rec("127.0.0.1"),
        refused(
            "out-of-range octet (still an address to some parsers)",
            "127.0.0.256",
            R,
        ),
        refused("IPv6 loopback", "[::1]", R).rec("[::1]"),
        refused("IPv6 loopback in full", "[0:0:0:0:0:0:0:1]", R).rec("[::1]"),
        refused("IPv4-mapped IPv6", "[::ffff:127.0.0.1]", R).rec("[::ffff:127.0.0.1]"),
        refused(
            "IPv4-mapped IPv6 in hex groups",
            "[0:0:0:0:0:ffff:7f00:1]",
            R,
        )
        .rec("[::ffff:127.0.0.1]"),
        refused("IPv4-mapped IPv6 upper-case", "[::FFFF:7F00:1]", R).rec("[::ffff:127.0.0.1]"),
        refused("IPv4-compatible IPv6", "[::127.0.0.1]", R),
        refused("NAT64 of the metadata address", "[64:ff9b::a9fe:a9fe]", R),
        refused("IPv6 unspecified", "[::]", R).rec("[::]"),
        refused("IPv6 link-local", "[fe80::1]", R),
        refused("IPv6 unique-local metadata (AWS)", "[fd00:ec2::254]", R),
        refused("public IPv4 literal", "1.2.3.4", R).rec("1.2.3.4"),
        refused("public IPv6 literal", "[2606:4700:4700::1111]", R),
        refused("cloud metadata address", "169.254.169.254", R),
        refused("metadata as decimal", "2852039166", R),
        refused("unspecified 0.0.0.0", "0.0.0.0", R),
        refused("bare zero", "0", R),
        refused("private 10/8", "10.0.0.1", R),
        refused("private 192.168/16", "192.168.0.1", R),
        refused("name ending in a numeric label", "example.123", R),
        refused("name ending in a hex label", "example.0x10", R),
    ]
}

#[test]
fn ip_literal_spellings_are_refused_before_dns() {
    in_netns("ip_literal_spellings_are_refused_before_dns", || async {
        let o = origin().await;
        let g = name_gate(o.addr.port(), &[FILES]);
        g.api().admin_site(FILES).await;
        let runs = run_rows(&g, &[&o], o.addr.port(), &ip_literal_rows()).await;
        assert!(runs >= 60);
        // Spellings the HTTP layer itself cannot carry: never reach the decision, never dial.
        for (trick, host) in [
            ("percent-encoded digits", "%31%32%37.0.0.1"),
            ("percent-encoded dot", "127%2e0.0.1"),
            ("full-width digits and dots", "１２７．０．０．１"),
            ("ideographic full stops", "127。0。0。1"),
            ("circled digits", "①②⑦.⓪.⓪.①"),
            ("IPv6 zone id", "[fe80::1%25lo]"),
            ("bare IPv6 without brackets", "::1"),
            ("empty host", ""),
        ] {
            assert_malformed(&g, &o, trick, host).await;
        }
        assert_eq!(o.connection_count(), 0);
    });
}

// ---------------------------------------------------------------------------------------------
// Battery 1: internal_name.
// ---------------------------------------------------------------------------------------------

fn internal_name_rows() -> Vec<Row> {
    const R: &str = "internal_name";
    vec![
        refused("localhost", "localhost", R).rec("localhost"),
        refused("upper-case with trailing dot", "LOCALHOST.", R).rec("localhost"),
        refused("mixed case", "LocalHost", R).rec("localhost"),
        refused("sub-domain of localhost", "foo.localhost", R).rec("foo.localhost"),
        refused(
            "sub-domain of localhost, mixed case, trailing dot",
            "Foo.LocalHost.",
            R,
        )
        .rec("foo.localhost"),
        refused("mDNS .local", "printer.local", R).rec("printer.local"),
        refused("mDNS .local upper-case trailing dot", "Printer.LOCAL.", R).rec("printer.local"),
        refused(".internal", "db.internal", R),
        refused("GCP metadata name", "metadata.google.internal", R).rec("metadata.google.internal"),
        refused(".lan", "nas.lan", R),
        refused(".home.arpa", "x.home.arpa", R),
        refused(".localdomain", "box.localdomain", R),
        refused("localhost.localdomain", "localhost.localdomain", R),
        refused(".corp", "git.corp", R),
        refused("Kubernetes short service name", "api.default.svc", R),
        refused("Kubernetes cluster name", "api.ns.svc.cluster.local", R),
        refused(
            "Kubernetes API server",
            "kubernetes.default.svc.cluster.local",
            R,
        ),
        refused("IPv4 reverse zone", "1.0.0.127.in-addr.arpa", R).rec("1.0.0.127.in-addr.arpa"),
        refused(
            "IPv6 reverse zone",
            "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.ip6.arpa",
            R,
        ),
        refused("single label", "intranet", R).rec("intranet"),
        refused("single label upper-case trailing dot", "INTRANET.", R).rec("intranet"),
        refused("single label that looks like a host", "fileserver", R),
        refused("single label hex-ish without 0x", "7f000001", R),
        refused("a bare public TLD", "com", R),
        refused(
            "IDN label under .local (punycode)",
            "xn--mnchen-3ya.local",
            R,
        )
        .rec("xn--mnchen-3ya.local"),
        refused("configured --internal-suffix", "wiki.example-corp.net", R)
            .rec("wiki.example-corp.net"),
        refused(
            "configured suffix, mixed case, trailing dot",
            "WIKI.Example-Corp.NET.",
            R,
        )
        .rec("wiki.example-corp.net"),
        refused("configured suffix apex", "example-corp.net", R),
    ]
}

#[test]
fn internal_names_are_refused_before_dns() {
    in_netns("internal_names_are_refused_before_dns", || async {
        let o = origin().await;
        // Every internal name resolves to the origin: a missing rule would really reach it.
        let resolve: Vec<String> = internal_name_rows()
            .iter()
            .map(|r| r.host.trim_end_matches('.').to_ascii_lowercase())
            .chain(["localhost".to_owned()])
            .collect();
        let resolve: Vec<&str> = resolve.iter().map(String::as_str).collect();
        let g = name_gate(o.addr.port(), &resolve);
        run_rows(&g, &[&o], o.addr.port(), &internal_name_rows()).await;
        for (trick, host) in [
            (
                "full-width localhost (IDN mapping to an internal name)",
                "ｌｏｃａｌｈｏｓｔ",
            ),
            (
                "soft hyphen inside localhost (IDNA ignores it)",
                "loc\u{ad}alhost",
            ),
            ("ideographic full stop before localhost", "foo。localhost"),
            ("percent-encoded localhost", "%6c%6f%63%61%6c%68%6f%73%74"),
        ] {
            assert_malformed(&g, &o, trick, host).await;
        }
        assert_eq!(o.connection_count(), 0);
    });
}

// ---------------------------------------------------------------------------------------------
// Battery 1: port_not_allowed.
// ---------------------------------------------------------------------------------------------

fn port_rows(origin_port: u16) -> Vec<Row> {
    const R: &str = "port_not_allowed";
    let other = if origin_port == 65535 {
        65534
    } else {
        origin_port + 1
    };
    vec![
        refused("ssh", FILES, R).port(22).rec(FILES),
        refused("smtp", FILES, R).port(25).rec(FILES),
        refused("alternate http", FILES, R).port(8080),
        refused("highest port", FILES, R).port(65535),
        refused("lowest port", FILES, R).port(1),
        refused("the origin's port plus one", FILES, R).port(other),
        refused("default http port, explicit", FILES, R).port(80),
        refused("default https port", FILES, R).port(443),
        refused(
            "ssh, upper-case host with trailing dot",
            "FILES.EXAMPLE.COM.",
            R,
        )
        .port(22)
        .rec(FILES),
        refused("no port in the URI (http default 80)", FILES, R).no_port(),
    ]
}

#[test]
fn ports_outside_the_allow_list_are_refused() {
    in_netns("ports_outside_the_allow_list_are_refused", || async {
        let o = origin().await;
        let g = name_gate(o.addr.port(), &[FILES]);
        g.api().admin_site(FILES).await;
        let mut runs = run_rows(&g, &[&o], o.addr.port(), &port_rows(o.addr.port())).await;
        runs += leading_zero_port(&g).await;
        assert!(runs >= 20);
        assert_eq!(o.connection_count(), 0);
        // The approved host on the allowed port still works: the rows were about the port.
        let turn = g.api().turn("battery", "port-ok", &[]).await;
        let r = forward_raw(
            g.proxy(),
            &turn,
            &format!("{FILES}:{}", o.addr.port()),
            None,
        )
        .await
        .unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
    });
}

/// The port written with leading zeros (`00022`) is still port 22: refused, recorded as 22.
async fn leading_zero_port(g: &Gate) -> usize {
    let api = g.api();
    let authority = format!("{FILES}:00022");
    for path in [Path::Forward, Path::Connect] {
        let turn = api.turn("battery", &format!("zero-{path:?}"), &[]).await;
        let resp = match path {
            Path::Forward => forward_raw(g.proxy(), &turn, &authority, None)
                .await
                .unwrap(),
            Path::Connect => connect_raw(g.proxy(), &turn, &authority).await.unwrap().0,
        };
        assert_eq!(resp.status, 403, "[{path:?}] port 00022: {}", resp.text());
        assert_eq!(
            resp.header("x-egress-refused"),
            Some("port_not_allowed"),
            "[{path:?}] port 00022"
        );
        assert_eq!(resp.header("x-egress-approvable"), Some("false"));
        let rec = api.refusals(&turn).await;
        assert_eq!(rec["refusals"][0]["reason"], "port_not_allowed", "{rec}");
        assert_eq!(rec["refusals"][0]["port"], 22, "{rec}");
    }
    2
}

// ---------------------------------------------------------------------------------------------
// Battery 1: not_approved (the only approvable reason).
// ---------------------------------------------------------------------------------------------

fn not_approved_rows() -> Vec<Row> {
    const R: &str = "not_approved";
    vec![
        refused("suffix without a label boundary", "badexample.com", R).rec("badexample.com"),
        refused("hyphenated look-alike", "evil-example.com", R),
        refused(
            "approved name as a left-hand label",
            "example.com.evil.net",
            R,
        )
        .rec("example.com.evil.net"),
        refused(
            "approved sub-domain as a left-hand label",
            "sub.example.com.evil.net",
            R,
        ),
        refused(
            "approved exact host as a left-hand label",
            "files.example.com.evil.net",
            R,
        ),
        refused("approved name inside a label", "example.com-evil.net", R),
        refused(
            "sub-domain of an exact-approved host",
            "a.files.example.com",
            R,
        ),
        refused("apex of a wildcard-only approval", "wild.example.org", R).rec("wild.example.org"),
        refused(
            "apex of a wildcard, upper-case trailing dot",
            "WILD.Example.ORG.",
            R,
        )
        .rec("wild.example.org"),
        refused(
            "wildcard host as a left-hand label",
            "a.wild.example.org.evil.net",
            R,
        ),
        refused("same name, other TLD", "example.co", R),
        refused("same name, other TLD (.net)", "example.net", R),
        refused("IDN homograph: Cyrillic a (xn--)", "xn--exmple-4nf.com", R)
            .rec("xn--exmple-4nf.com"),
        refused(
            "IDN homograph: Cyrillic e, upper-case ACE prefix",
            "XN--XAMPLE-2OF.com",
            R,
        )
        .rec("xn--xample-2of.com"),
        refused("unapproved host on the allowed port", "evil.example.net", R),
    ]
}

#[test]
fn unapproved_look_alikes_are_refused_as_approvable() {
    in_netns(
        "unapproved_look_alikes_are_refused_as_approvable",
        || async {
            let o = origin().await;
            // All resolve to the origin: a wrong allow would really reach it.
            let resolve: Vec<String> = not_approved_rows()
                .iter()
                .map(|r| r.host.trim_end_matches('.').to_ascii_lowercase())
                .collect();
            let mut resolve: Vec<&str> = resolve.iter().map(String::as_str).collect();
            resolve.extend([FILES, "example.com", "a.wild.example.org"]);
            let g = name_gate(o.addr.port(), &resolve);
            let api = g.api();
            api.admin_site("example.com").await;
            api.admin_site(FILES).await;
            api.admin_site("*.wild.example.org").await;
            run_rows(&g, &[&o], o.addr.port(), &not_approved_rows()).await;
            assert_malformed(&g, &o, "raw UTF-8 homograph", "ex\u{430}mple.com").await;
            assert_eq!(o.connection_count(), 0);
            // The approvals themselves work (the rows were refused for being look-alikes).
            let turn = api.turn("battery", "approved-ok", &[]).await;
            for h in ["example.com", FILES, "a.wild.example.org"] {
                let r = forward_raw(g.proxy(), &turn, &format!("{h}:{}", o.addr.port()), None)
                    .await
                    .unwrap();
                assert_eq!(r.status, 200, "{h}: {}", r.text());
            }
        },
    );
}

// ---------------------------------------------------------------------------------------------
// Battery 1: host_mismatch (forwarding only).
// ---------------------------------------------------------------------------------------------

#[test]
fn host_header_disagreeing_with_the_uri_is_refused() {
    in_netns(
        "host_header_disagreeing_with_the_uri_is_refused",
        || async {
            let o = origin().await;
            let p = o.addr.port();
            let g = name_gate(p, &[FILES, OTHER]);
            let api = g.api();
            api.admin_site(FILES).await;
            api.admin_site(OTHER).await;
            const R: &str = "host_mismatch";
            let other_port = if p == 65535 { 65534 } else { p + 1 };
            let other_host = format!("{OTHER}:{p}");
            let evil = format!("evil.example.net:{p}");
            let files_other_port = format!("{FILES}:{other_port}");
            let files = format!("{FILES}:{p}");
            let loopback = format!("127.0.0.1:{p}");
            let localhost = format!("localhost:{p}");
            let userinfo = format!("{FILES}:{p}@evil.example.net");
            let rows = vec![
                refused("Host names another approved host", FILES, R)
                    .forward_only()
                    .host_headers(&[&other_host])
                    .rec(FILES),
                refused("Host names an unapproved host", FILES, R)
                    .forward_only()
                    .host_headers(&[&evil]),
                refused("Host names another port", FILES, R)
                    .forward_only()
                    .host_headers(&[&files_other_port]),
                refused("Host without the URI's port (means 80)", FILES, R)
                    .forward_only()
                    .host_headers(&[FILES]),
                refused("two Host headers, the second another host", FILES, R)
                    .forward_only()
                    .host_headers(&[&files, &evil]),
                refused("two Host headers, the first another host", FILES, R)
                    .forward_only()
                    .host_headers(&[&evil, &files]),
                refused("two identical Host headers", FILES, R)
                    .forward_only()
                    .host_headers(&[&files, &files]),
                refused("Host is an IP literal", FILES, R)
                    .forward_only()
                    .host_headers(&[&loopback]),
                refused("Host is localhost", FILES, R)
                    .forward_only()
                    .host_headers(&[&localhost]),
                refused("empty Host", FILES, R)
                    .forward_only()
                    .host_headers(&[""]),
                refused("Host with userinfo-like suffix", FILES, R)
                    .forward_only()
                    .host_headers(&[&userinfo]),
            ];
            run_rows(&g, &[&o], p, &rows).await;
            assert_eq!(o.connection_count(), 0);
            // Spelling differences alone are not a mismatch.
            let same = format!("FILES.Example.COM.:{p}");
            let ok = vec![
                reached("Host differs only in case and trailing dot", FILES)
                    .forward_only()
                    .host_headers(&[&same]),
            ];
            run_rows(&g, &[], p, &ok).await;
        },
    );
}

// ---------------------------------------------------------------------------------------------
// Battery 1: private_address (names an administrator approved, answers pointing inside).
// ---------------------------------------------------------------------------------------------

/// (trick, answers) — each becomes `rNN.rebind.example.com` with those `--resolve` answers.
fn private_answers() -> Vec<(&'static str, Vec<&'static str>)> {
    vec![
        ("loopback without --allow-cidr", vec!["127.0.0.1"]),
        ("loopback elsewhere in 127/8", vec!["127.8.9.10"]),
        ("private 10/8", vec!["10.1.2.3"]),
        ("private 172.16/12", vec!["172.16.0.1"]),
        ("private 172.16/12 top", vec!["172.31.255.255"]),
        ("private 192.168/16", vec!["192.168.1.1"]),
        ("link-local cloud metadata", vec!["169.254.169.254"]),
        ("CGNAT 100.64/10", vec!["100.64.0.1"]),
        ("Alibaba metadata (CGNAT)", vec!["100.100.100.200"]),
        (
            "IETF protocol assignments (Oracle metadata 192.0.0.192)",
            vec!["192.0.0.192"],
        ),
        ("documentation TEST-NET-1", vec!["192.0.2.1"]),
        ("documentation TEST-NET-3", vec!["203.0.113.9"]),
        ("benchmarking 198.18/15", vec!["198.18.0.1"]),
        ("multicast", vec!["224.0.0.1"]),
        ("reserved 240/4", vec!["240.0.0.1"]),
        ("broadcast", vec!["255.255.255.255"]),
        (
            "unspecified (reaches the local host on Linux)",
            vec!["0.0.0.0"],
        ),
        ("this-network 0/8", vec!["0.1.2.3"]),
        ("Azure wireserver (public space)", vec!["168.63.129.16"]),
        ("IPv6 loopback", vec!["::1"]),
        ("IPv6 unspecified", vec!["::"]),
        ("IPv6 unique-local", vec!["fc00::1"]),
        ("AWS IPv6 metadata", vec!["fd00:ec2::254"]),
        ("IPv6 link-local", vec!["fe80::1"]),
        ("IPv6 multicast", vec!["ff02::1"]),
        ("IPv6 documentation", vec!["2001:db8::1"]),
        ("IPv6 site-local (deprecated)", vec!["fec0::1"]),
        ("IPv6 discard-only 100::/64", vec!["100::1"]),
        ("IPv6 benchmarking 2001:2::/48", vec!["2001:2::1"]),
        ("IPv4-mapped loopback", vec!["::ffff:127.0.0.1"]),
        ("IPv4-mapped private", vec!["::ffff:10.0.0.1"]),
        ("IPv4-mapped metadata", vec!["::ffff:169.254.169.254"]),
        ("IPv4-compatible loopback", vec!["::127.0.0.1"]),
        ("NAT64 of the metadata address", vec!["64:ff9b::a9fe:a9fe"]),
        ("NAT64 of loopback", vec!["64:ff9b::7f00:1"]),
        ("local-use NAT64 /96 of private", vec!["64:ff9b:1::a00:1"]),
        (
            "local-use NAT64 64:ff9b:1::/48, /64 embedding of 127.0.0.1 (RFC 6052)",
            vec!["64:ff9b:1:0:7f:0:100:0"],
        ),
        ("6to4 of loopback", vec!["2002:7f00:1::1"]),
        ("6to4 of metadata", vec!["2002:a9fe:a9fe::1"]),
        (
            "Teredo of loopback",
            vec!["2001:0:4136:e378:8000:63bf:80ff:fffe"],
        ),
        (
            "two answers: public first, private second",
            vec!["1.1.1.1", "10.0.0.1"],
        ),
        (
            "two answers: private first, public second",
            vec!["10.0.0.1", "1.1.1.1"],
        ),
        (
            "two answers: public first, loopback (the origin) second",
            vec!["1.1.1.1", "127.0.0.1"],
        ),
        (
            "IPv6 public and IPv4-mapped loopback",
            vec!["2606:4700:4700::1111", "::ffff:127.0.0.1"],
        ),
    ]
}

#[test]
fn names_resolving_inside_are_refused_as_private_address() {
    in_netns(
        "names_resolving_inside_are_refused_as_private_address",
        || async {
            let o = origin().await;
            let mut b = gate().arg("--allow-port").arg(&o.addr.port().to_string());
            let mut rows = Vec::new();
            for (i, (trick, answers)) in private_answers().into_iter().enumerate() {
                let name = format!("r{i:02}.rebind.example.com");
                for a in &answers {
                    b = b.resolve(&name, a);
                }
                rows.push(
                    refused(
                        &format!("{trick} ({})", answers.join(", ")),
                        &name,
                        "private_address",
                    )
                    .rec(&name),
                );
            }
            // Mixed case and a trailing dot do not change what the name resolves to.
            rows.push(
                refused(
                    "loopback answer, name in upper case with trailing dot",
                    "R00.REBIND.Example.COM.",
                    "private_address",
                )
                .rec("r00.rebind.example.com"),
            );
            let g = b.start();
            g.api().admin_site("*.rebind.example.com").await;
            let runs = run_rows(&g, &[&o], o.addr.port(), &rows).await;
            assert!(runs >= 80);
            assert_eq!(o.connection_count(), 0);
        },
    );
}

/// An approved name that does not resolve (no DNS in the namespace, no `--resolve` entry) is
/// `502`, not a refusal: nothing to approve, nothing recorded.
#[test]
fn approved_name_without_an_answer_is_502_not_a_refusal() {
    in_netns(
        "approved_name_without_an_answer_is_502_not_a_refusal",
        || async {
            let o = origin().await;
            let g = gate()
                .arg("--allow-port")
                .arg(&o.addr.port().to_string())
                .arg("--connect-timeout")
                .arg("3s")
                .start();
            let api = g.api();
            api.admin_site("nxdomain.example.com").await;
            for path in [Path::Forward, Path::Connect] {
                let turn = api.turn("battery", &format!("nx-{path:?}"), &[]).await;
                let authority = format!("nxdomain.example.com:{}", o.addr.port());
                let r = match path {
                    Path::Forward => forward_raw(g.proxy(), &turn, &authority, None)
                        .await
                        .unwrap(),
                    Path::Connect => connect_raw(g.proxy(), &turn, &authority).await.unwrap().0,
                };
                assert!(
                    r.status == 502 || r.status == 504,
                    "[{path:?}] {} {}",
                    r.status,
                    r.text()
                );
                assert_eq!(r.header("x-egress-refused"), None);
                assert_eq!(
                    api.refusals(&turn).await["refusals"]
                        .as_array()
                        .map(Vec::len),
                    Some(0)
                );
            }
            assert_eq!(o.connection_count(), 0);
        },
    );
}

/// The database's own address is never dialled, even inside an allowed range and on an
/// allowed port (a throwaway PostgreSQL on loopback).
#[test]
fn the_database_is_never_dialled_even_inside_an_allowed_range() {
    in_netns(
        "the_database_is_never_dialled_even_inside_an_allowed_range",
        || async {
            let pg = support::pg::PgCluster::start();
            let g = gate()
                .database(&pg.url())
                .resolve("db.example.com", "127.0.0.1")
                .resolve("db6.example.com", "::ffff:127.0.0.1")
                .arg("--allow-cidr")
                .arg("127.0.0.0/8")
                .arg("--allow-port")
                .arg(&pg.port.to_string())
                .start();
            g.api().admin_site("*.example.com").await;
            let rows = vec![
                refused(
                    "the database's address",
                    "db.example.com",
                    "private_address",
                ),
                refused(
                    "the database's address, IPv4-mapped",
                    "db6.example.com",
                    "private_address",
                ),
            ];
            run_rows(&g, &[], pg.port, &rows).await;
        },
    );
}

// ---------------------------------------------------------------------------------------------
// Battery 1: allowed ranges, and the gate never dials itself.
// ---------------------------------------------------------------------------------------------

#[test]
fn allowed_ranges_open_loopback_but_never_the_gate_itself() {
    in_netns(
        "allowed_ranges_open_loopback_but_never_the_gate_itself",
        || async {
            let o = origin().await;
            let p = o.addr.port();
            let proxy_port = free_port();
            let control_port = free_port();
            let g = gate()
                .resolve("loop.example.com", "127.0.0.1")
                .resolve("loop6.example.com", "::ffff:127.0.0.1")
                .resolve("self.example.com", "127.0.0.1")
                .resolve("self6.example.com", "::ffff:127.0.0.1")
                .resolve("alias.example.com", "127.0.0.2")
                .resolve("any.example.com", "0.0.0.0")
                .resolve("nat64.example.com", "64:ff9b::7f00:1")
                .resolve("v6.example.com", "::1")
                .resolve("ten.example.com", "10.0.0.1")
                .resolve("mixed.example.com", "127.0.0.1")
                .resolve("mixed.example.com", "10.0.0.1")
                .arg("--allow-cidr")
                .arg("127.0.0.0/8")
                .arg("--allow-port")
                .arg(&p.to_string())
                .arg("--allow-port")
                .arg(&proxy_port.to_string())
                .arg("--allow-port")
                .arg(&control_port.to_string())
                // The control plane on every address: 127.0.0.2 reaches it too.
                .start_on(
                    &format!("127.0.0.1:{proxy_port}"),
                    &format!("0.0.0.0:{control_port}"),
                );
            assert_eq!(g.proxy().port(), proxy_port);
            assert_eq!(g.control.unwrap().port(), control_port);
            let api = g.api();
            api.admin_site("*.example.com").await;
            const R: &str = "private_address";
            let positive = vec![
                reached(
                    "loopback name inside --allow-cidr 127.0.0.0/8",
                    "loop.example.com",
                ),
                reached(
                    "IPv4-mapped loopback answer inside --allow-cidr 127.0.0.0/8",
                    "loop6.example.com",
                ),
            ];
            run_rows(&g, &[], p, &positive).await;
            let before = o.connection_count();
            assert_eq!(o.requests().len(), 4, "the positive rows reach the origin");
            let rows = vec![
                refused("the gate's own proxy listener", "self.example.com", R).port(proxy_port),
                refused("the gate's own control listener", "self.example.com", R)
                    .port(control_port),
                refused(
                    "the gate's own control listener via IPv4-mapped answer",
                    "self6.example.com",
                    R,
                )
                .port(control_port),
                refused(
                    "the gate's own control listener (bound to 0.0.0.0) via 127.0.0.2",
                    "alias.example.com",
                    R,
                )
                .port(control_port),
                refused(
                    "0.0.0.0 answer (the local host) is outside 127/8",
                    "any.example.com",
                    R,
                ),
                refused(
                    "NAT64 of loopback is not inside an IPv4 allow range",
                    "nat64.example.com",
                    R,
                ),
                refused("IPv6 loopback is not inside 127/8", "v6.example.com", R),
                refused("10/8 is still private", "ten.example.com", R),
                refused(
                    "allowed and private answers together",
                    "mixed.example.com",
                    R,
                ),
            ];
            run_rows(&g, &[&o], p, &rows).await;
            assert_eq!(o.connection_count(), before);
            assert!(
                api.get("/v1/admin/sites", ADMIN).await.status == 200,
                "the control plane is alive"
            );
        },
    );
}

#[test]
fn allowed_range_with_a_pattern_applies_only_to_matching_hosts() {
    in_netns(
        "allowed_range_with_a_pattern_applies_only_to_matching_hosts",
        || async {
            let o = origin().await;
            let p = o.addr.port();
            let g = gate()
                .resolve("a.dev.example.org", "127.0.0.1")
                .resolve("b.c.dev.example.org", "127.0.0.1")
                .resolve("dev.example.org", "127.0.0.1")
                .resolve("other.example.org", "127.0.0.1")
                .resolve("adev.example.org", "127.0.0.1")
                .resolve("a.dev.example.org.evil.net", "127.0.0.1")
                .arg("--allow-cidr")
                .arg("127.0.0.0/8=*.dev.example.org")
                .arg("--allow-port")
                .arg(&p.to_string())
                .start();
            let api = g.api();
            for s in [
                "*.dev.example.org",
                "dev.example.org",
                "other.example.org",
                "adev.example.org",
                "a.dev.example.org.evil.net",
            ] {
                api.admin_site(s).await;
            }
            let positive = vec![
                reached("matching host", "a.dev.example.org"),
                reached(
                    "matching host, upper-case with trailing dot",
                    "A.DEV.Example.ORG.",
                ),
                reached("deeper matching host", "b.c.dev.example.org"),
            ];
            run_rows(&g, &[], p, &positive).await;
            let before = o.connection_count();
            const R: &str = "private_address";
            let rows = vec![
                refused(
                    "approved host outside the range's pattern",
                    "other.example.org",
                    R,
                )
                .rec("other.example.org"),
                refused(
                    "the pattern's apex (wildcards never match it)",
                    "dev.example.org",
                    R,
                ),
                refused("no label boundary (adev)", "adev.example.org", R),
                refused(
                    "matching name as a left-hand label",
                    "a.dev.example.org.evil.net",
                    R,
                ),
            ];
            run_rows(&g, &[&o], p, &rows).await;
            assert_eq!(o.connection_count(), before);
        },
    );
}

// ---------------------------------------------------------------------------------------------
// Battery 1: sni_mismatch (CONNECT only, real TLS).
// ---------------------------------------------------------------------------------------------

/// The bytes a rustls client sends first: its ClientHello (SNI for a DNS name, none for an
/// IP address).
fn client_hello(client: Arc<rustls::ClientConfig>, sni: Option<&str>) -> Vec<u8> {
    let name = match sni {
        Some(s) => rustls::pki_types::ServerName::try_from(s.to_owned()).unwrap(),
        None => {
            rustls::pki_types::ServerName::IpAddress(std::net::IpAddr::from([127, 0, 0, 1]).into())
        }
    };
    let mut conn = rustls::ClientConnection::new(client, name).unwrap();
    let mut out = Vec::new();
    while conn.wants_write() {
        conn.write_tls(&mut out).unwrap();
    }
    assert_eq!(out[0], 0x16, "a handshake record");
    out
}

/// Re-frames a single-record ClientHello as two TLS records (record-layer fragmentation).
fn two_records(hello: &[u8]) -> Vec<u8> {
    let (hdr, body) = hello.split_at(5);
    assert_eq!(
        usize::from(u16::from_be_bytes([hdr[3], hdr[4]])),
        body.len(),
        "one record"
    );
    let mid = body.len() / 2;
    let mut out = Vec::new();
    for part in [&body[..mid], &body[mid..]] {
        out.extend_from_slice(&hdr[..3]);
        out.extend_from_slice(&u16::try_from(part.len()).unwrap().to_be_bytes());
        out.extend_from_slice(part);
    }
    out
}

/// How the client opens the tunnel.
enum Hello {
    /// A real tokio-rustls handshake with this SNI.
    Tls(&'static str),
    /// A real handshake without SNI (IP server name).
    TlsNoSni,
    /// Raw bytes written at once.
    Bytes(Vec<u8>),
    /// Raw bytes written one at a time.
    Trickle(Vec<u8>),
}

#[test]
fn sni_that_differs_from_the_connect_host_closes_the_tunnel() {
    in_netns(
        "sni_that_differs_from_the_connect_host_closes_the_tunnel",
        || async {
            let pki = pki(&[
                FILES,
                OTHER,
                "a.files.example.com",
                "evil.example.net",
                "127.0.0.1",
            ]);
            let o = tls_origin(&pki).await;
            // In the namespace port 443 is ours.
            let o443 = tls_origin_at(&pki, "127.0.0.1:443").await;
            let p = o.addr.port();
            let g = gate()
                .resolve(FILES, "127.0.0.1")
                .resolve(OTHER, "127.0.0.1")
                .arg("--allow-cidr")
                .arg("127.0.0.0/8")
                .arg("--allow-port")
                .arg(&p.to_string())
                .arg("--allow-port")
                .arg("443")
                .start();
            let api = g.api();
            api.admin_site(FILES).await;
            api.admin_site(OTHER).await;
            let client = pki.client();
            let other_hello = client_hello(client.clone(), Some(OTHER));
            let rows: Vec<(&str, u16, Hello)> = vec![
                ("SNI names another approved host", p, Hello::Tls(OTHER)),
                (
                    "SNI names an unapproved host",
                    p,
                    Hello::Tls("evil.example.net"),
                ),
                (
                    "SNI names a sub-domain of the CONNECT host",
                    p,
                    Hello::Tls("a.files.example.com"),
                ),
                (
                    "SNI names another approved host on 443",
                    443,
                    Hello::Tls(OTHER),
                ),
                ("no SNI on port 443", 443, Hello::TlsNoSni),
                (
                    "plain HTTP instead of TLS on port 443",
                    443,
                    Hello::Bytes(format!("GET / HTTP/1.1\r\nhost: {FILES}\r\n\r\n").into_bytes()),
                ),
                (
                    "ClientHello written one byte at a time",
                    p,
                    Hello::Trickle(other_hello.clone()),
                ),
                (
                    "ClientHello fragmented across two TLS records",
                    p,
                    Hello::Bytes(two_records(&other_hello)),
                ),
                (
                    "fragmented ClientHello on 443",
                    443,
                    Hello::Bytes(two_records(&other_hello)),
                ),
            ];
            let mut failures = Vec::new();
            for (trick, port, hello) in rows {
                let turn = api.turn("battery", &format!("sni-{trick}"), &[]).await;
                let (head, mut stream) = connect_raw(g.proxy(), &turn, &format!("{FILES}:{port}"))
                    .await
                    .unwrap();
                assert_eq!(head.status, 200, "{trick}: the SNI check comes after 200");
                let outcome = match hello {
                    Hello::Tls(sni) => tls_get(stream, client.clone(), sni)
                        .await
                        .map(|r| r.status)
                        .map_err(|e| e.to_string()),
                    Hello::TlsNoSni => tls_get(stream, client.clone(), "127.0.0.1")
                        .await
                        .map(|r| r.status)
                        .map_err(|e| e.to_string()),
                    Hello::Bytes(b) => {
                        let _ = stream.write_all(&b).await;
                        wait_closed(&mut stream, 15)
                            .await
                            .map(|_| 0)
                            .map_err(|b| format!("closed? data {} bytes", b.len()))
                    }
                    Hello::Trickle(b) => {
                        for byte in b {
                            if stream.write_all(&[byte]).await.is_err() {
                                break;
                            }
                            tokio::time::sleep(Duration::from_millis(1)).await;
                        }
                        wait_closed(&mut stream, 15)
                            .await
                            .map(|_| 0)
                            .map_err(|b| format!("closed? data {} bytes", b.len()))
                    }
                };
                // A real handshake must fail; raw bytes must see the tunnel closed (Ok(0)).
                if matches!(outcome, Ok(s) if s != 0) {
                    failures.push(format!(
                        "{trick}: the tunnel carried a response ({outcome:?})"
                    ));
                }
                if matches!(&outcome, Err(e) if e.starts_with("closed?")) {
                    failures.push(format!("{trick}: the tunnel was not closed: {outcome:?}"));
                }
                match wait_for_refusal(&api, &turn, "sni_mismatch", 5).await {
                    None => failures.push(format!(
                        "{trick}: no sni_mismatch recorded: {}",
                        api.refusals(&turn).await
                    )),
                    Some(r) => {
                        if r["host"] != FILES || r["port"] != port || r["approvable"] != false {
                            failures.push(format!("{trick}: recorded {r}"));
                        }
                    }
                }
                if o.connection_count() + o443.connection_count() != 0 {
                    failures.push(format!("{trick}: a TLS origin was contacted"));
                }
            }
            assert!(
                failures.is_empty(),
                "sni rows failed:\n{}",
                failures.join("\n")
            );
            // Positive rows: the matching SNI passes on both ports, and case does not matter.
            for (port, sni, origin) in [
                (p, FILES, &o),
                (443, FILES, &o443),
                (p, "FILES.EXAMPLE.COM", &o),
            ] {
                let turn = api
                    .turn("battery", &format!("sni-ok-{port}-{sni}"), &[])
                    .await;
                let before = origin.connection_count();
                let (head, stream) = connect_raw(g.proxy(), &turn, &format!("{FILES}:{port}"))
                    .await
                    .unwrap();
                assert_eq!(head.status, 200);
                let r = tls_get(stream, client.clone(), sni)
                    .await
                    .unwrap_or_else(|e| panic!("matching SNI {sni} on {port}: {e}"));
                assert_eq!((r.status, r.text().as_str()), (200, "origin says hi"));
                assert_eq!(origin.connection_count(), before + 1);
                assert_eq!(
                    api.refusals(&turn).await["refusals"]
                        .as_array()
                        .map(Vec::len),
                    Some(0)
                );
            }
        },
    );
}

#[test]
fn require_sni_false_lets_a_hello_without_sni_through() {
    in_netns(
        "require_sni_false_lets_a_hello_without_sni_through",
        || async {
            let pki = pki(&[FILES, "127.0.0.1"]);
            let o443 = tls_origin_at(&pki, "127.0.0.1:443").await;
            let g = gate()
                .resolve(FILES, "127.0.0.1")
                .arg("--allow-cidr")
                .arg("127.0.0.0/8")
                .arg("--allow-port")
                .arg("443")
                .arg("--require-sni")
                .arg("false")
                .start();
            let api = g.api();
            api.admin_site(FILES).await;
            let turn = api.turn("battery", "no-sni-ok", &[]).await;
            let (head, stream) = connect_raw(g.proxy(), &turn, &format!("{FILES}:443"))
                .await
                .unwrap();
            assert_eq!(head.status, 200);
            let r = tls_get(stream, pki.client(), "127.0.0.1")
                .await
                .expect("a hello without SNI passes when require-sni is false");
            assert_eq!((r.status, r.text().as_str()), (200, "origin says hi"));
            assert_eq!(o443.connection_count(), 1);
            // A differing SNI is still domain fronting.
            let turn = api.turn("battery", "no-sni-other", &[]).await;
            let (head, stream) = connect_raw(g.proxy(), &turn, &format!("{FILES}:443"))
                .await
                .unwrap();
            assert_eq!(head.status, 200);
            assert!(
                tls_get(stream, pki.client(), "evil.example.net")
                    .await
                    .is_err()
            );
            assert!(
                wait_for_refusal(&api, &turn, "sni_mismatch", 5)
                    .await
                    .is_some()
            );
            assert_eq!(o443.connection_count(), 1);
        },
    );
}

/// A ClientHello whose first bytes arrive, then nothing until the hello timeout (10 s, not
/// configurable) has passed, then the rest naming another host. Once the bytes look like TLS,
/// running out of time must not turn into "not TLS, let it through": on any port.
#[test]
fn stalled_client_hello_is_not_let_through_after_the_hello_timeout() {
    in_netns(
        "stalled_client_hello_is_not_let_through_after_the_hello_timeout",
        || async {
            let pki = pki(&[FILES, OTHER]);
            let o = tls_origin(&pki).await;
            let o443 = tls_origin_at(&pki, "127.0.0.1:443").await;
            let p = o.addr.port();
            let g = gate()
                .resolve(FILES, "127.0.0.1")
                .resolve(OTHER, "127.0.0.1")
                .arg("--allow-cidr")
                .arg("127.0.0.0/8")
                .arg("--allow-port")
                .arg(&p.to_string())
                .arg("--allow-port")
                .arg("443")
                .start();
            let api = g.api();
            api.admin_site(FILES).await;
            api.admin_site(OTHER).await;
            let hello = client_hello(pki.client(), Some(OTHER));
            let runs = [p, 443].map(|port| {
                let (api, proxy, hello) = (api, g.proxy(), hello.clone());
                tokio::spawn(async move {
                    let turn = api.turn("battery", &format!("stall-{port}"), &[]).await;
                    let (head, mut s) = connect_raw(proxy, &turn, &format!("{FILES}:{port}"))
                        .await
                        .unwrap();
                    assert_eq!(head.status, 200);
                    s.write_all(&hello[..5]).await.unwrap();
                    tokio::time::sleep(Duration::from_millis(11_500)).await;
                    let _ = s.write_all(&hello[5..]).await;
                    let closed = wait_closed(&mut s, 5).await;
                    let recorded = wait_for_refusal(&api, &turn, "sni_mismatch", 3).await;
                    (port, closed.map_err(|b| b.len()), recorded.is_some())
                })
            });
            let mut failures = Vec::new();
            for r in runs {
                let (port, closed, recorded) = r.await.unwrap();
                if closed.is_err() {
                    failures.push(format!(
                        "port {port}: tunnel still open after the stalled hello (data {closed:?})"
                    ));
                }
                if !recorded {
                    failures.push(format!("port {port}: no sni_mismatch recorded"));
                }
            }
            if o.connection_count() != 0 {
                failures.push(format!(
                    "port {p}: the origin was dialled and received the ClientHello for {OTHER}"
                ));
            }
            if o443.connection_count() != 0 {
                failures.push("port 443: the origin was dialled".to_owned());
            }
            assert!(
                failures.is_empty(),
                "stalled ClientHello (SNI {OTHER} in a CONNECT to {FILES}):\n{}",
                failures.join("\n")
            );
        },
    );
}

/// Grows a single-record ClientHello past 64 KiB (the most rustls will parse; OpenSSL accepts
/// ClientHellos up to 128 KiB): GREASE cipher suites plus a zero padding extension, the SNI
/// unchanged, split into records of at most 16 KiB.
fn oversized_hello(hello: &[u8]) -> Vec<u8> {
    let body = &hello[5..];
    assert_eq!(body[0], 1, "a ClientHello");
    let ch = &body[4..];
    let mut pos = 2 + 32;
    pos += 1 + usize::from(ch[pos]);
    let cs_len = usize::from(u16::from_be_bytes([ch[pos], ch[pos + 1]]));
    let suites = &ch[pos + 2..pos + 2 + cs_len];
    let after_suites = pos + 2 + cs_len;
    let comp_len = usize::from(ch[after_suites]);
    let ext_at = after_suites + 1 + comp_len;
    let ext_len = usize::from(u16::from_be_bytes([ch[ext_at], ch[ext_at + 1]]));
    let exts = &ch[ext_at + 2..ext_at + 2 + ext_len];
    let grease = 5000usize;
    let padding = 60_000usize.min(65_535 - ext_len - 4);
    let mut out = Vec::new();
    out.extend_from_slice(&ch[..pos]);
    out.extend_from_slice(&u16::try_from(cs_len + 2 * grease).unwrap().to_be_bytes());
    for _ in 0..grease {
        out.extend_from_slice(&[0x0a, 0x0a]);
    }
    out.extend_from_slice(suites);
    out.extend_from_slice(&ch[after_suites..ext_at]);
    out.extend_from_slice(&u16::try_from(ext_len + 4 + padding).unwrap().to_be_bytes());
    out.extend_from_slice(exts);
    out.extend_from_slice(&[0x00, 0x15]); // padding (RFC 7685)
    out.extend_from_slice(&u16::try_from(padding).unwrap().to_be_bytes());
    out.extend(std::iter::repeat_n(0u8, padding));
    let n = u32::try_from(out.len()).unwrap();
    assert!(n > 0xffff, "bigger than rustls' handshake limit");
    let mut hs = vec![1u8];
    hs.extend_from_slice(&n.to_be_bytes()[1..]);
    hs.extend_from_slice(&out);
    let mut records = Vec::new();
    for chunk in hs.chunks(16_384) {
        records.extend_from_slice(&[0x16, 0x03, 0x01]);
        records.extend_from_slice(&u16::try_from(chunk.len()).unwrap().to_be_bytes());
        records.extend_from_slice(chunk);
    }
    records
}

/// A well-formed ClientHello naming another host that is merely too large for the proxy's
/// parser: failing to judge it must not mean letting it through, on any port.
#[test]
fn oversized_client_hello_is_not_let_through() {
    in_netns("oversized_client_hello_is_not_let_through", || async {
        let pki = pki(&[FILES, OTHER]);
        let o = tls_origin(&pki).await;
        let o443 = tls_origin_at(&pki, "127.0.0.1:443").await;
        let p = o.addr.port();
        let g = gate()
            .resolve(FILES, "127.0.0.1")
            .resolve(OTHER, "127.0.0.1")
            .arg("--allow-cidr")
            .arg("127.0.0.0/8")
            .arg("--allow-port")
            .arg(&p.to_string())
            .arg("--allow-port")
            .arg("443")
            .start();
        let api = g.api();
        api.admin_site(FILES).await;
        api.admin_site(OTHER).await;
        let big = oversized_hello(&client_hello(pki.client(), Some(OTHER)));
        let mut failures = Vec::new();
        for (port, origin) in [(p, &o), (443, &o443)] {
            let turn = api.turn("battery", &format!("big-{port}"), &[]).await;
            let (head, mut s) = connect_raw(g.proxy(), &turn, &format!("{FILES}:{port}"))
                .await
                .unwrap();
            assert_eq!(head.status, 200);
            let _ = s.write_all(&big).await;
            if let Err(data) = wait_closed(&mut s, 15).await {
                failures.push(format!(
                    "port {port}: tunnel still open ({} bytes came back)",
                    data.len()
                ));
            }
            if wait_for_refusal(&api, &turn, "sni_mismatch", 3)
                .await
                .is_none()
            {
                failures.push(format!("port {port}: no sni_mismatch recorded"));
            }
            if origin.connection_count() != 0 {
                failures.push(format!(
                    "port {port}: the origin was dialled and sent the ClientHello naming {OTHER}"
                ));
            }
        }
        assert!(
            failures.is_empty(),
            "oversized ClientHello (SNI {OTHER}, CONNECT {FILES}):\n{}",
            failures.join("\n")
        );
    });
}

// ---------------------------------------------------------------------------------------------
// Negative battery: legitimate public-looking names pass both ways.
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn legitimate_public_looking_names_pass_both_paths() {
    let long = format!(
        "{}.{}.{}.{}.long.example.com",
        "a".repeat(44),
        "b".repeat(63),
        "c".repeat(63),
        "d".repeat(63)
    );
    assert_eq!(long.len(), 253);
    let label63 = format!("{}.example.com", "x".repeat(63));
    // (as sent, approval pattern)
    let names: Vec<(String, &str)> = vec![
        ("1e100.example.com".into(), "1e100.example.com"),
        ("123.example.com".into(), "123.example.com"),
        ("my-files-1.example.com".into(), "my-files-1.example.com"),
        (
            "xn--bcher-kva.example.com".into(),
            "xn--bcher-kva.example.com",
        ),
        (
            "XN--BCHER-KVA.Example.com".into(),
            "xn--bcher-kva.example.com",
        ),
        (label63.clone(), "*.example.com"),
        ("UPPER.Example.COM".into(), "upper.example.com"),
        ("trailing.example.com.".into(), "trailing.example.com"),
        ("a.b.c.d.e.deep.example.org".into(), "*.deep.example.org"),
        ("0x.example.org".into(), "0x.example.org"),
        ("0x7f.example.org".into(), "0x7f.example.org"),
        ("127.0.0.1.nip.example.org".into(), "*.nip.example.org"),
        ("2130706433.example.org".into(), "2130706433.example.org"),
        ("coffee.cafe".into(), "coffee.cafe"),
        ("dead.beef".into(), "dead.beef"),
        ("localhost.example.net".into(), "localhost.example.net"),
        ("svc.example.net".into(), "svc.example.net"),
        ("corp.example.net".into(), "corp.example.net"),
        ("notlocalhost.com".into(), "notlocalhost.com"),
        (
            "in-addr.arpa.example.net".into(),
            "in-addr.arpa.example.net",
        ),
        ("files.example.co.uk".into(), "files.example.co.uk"),
        (long.clone(), "*.long.example.com"),
    ];
    let o = origin().await;
    let mut b = gate()
        .arg("--allow-cidr")
        .arg("127.0.0.0/8")
        .arg("--allow-port")
        .arg(&o.addr.port().to_string());
    for (sent, _) in &names {
        b = b.resolve(
            &sent.trim_end_matches('.').to_ascii_lowercase(),
            "127.0.0.1",
        );
    }
    let g = b.start();
    let api = g.api();
    for (_, pattern) in &names {
        api.admin_site(pattern).await;
    }
    let rows: Vec<Row> = names
        .iter()
        .map(|(sent, _)| reached("legitimate name", sent))
        .collect();
    let runs = run_rows(&g, &[], o.addr.port(), &rows).await;
    assert!(runs >= 30);
    // Forwarding may reuse an idle upstream connection, so count requests, not connections.
    assert_eq!(o.requests().len(), runs, "one origin request per row run");
}

// ---------------------------------------------------------------------------------------------
// Keep-alive: every request on one connection is identified and decided on its own.
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn keep_alive_requests_are_each_decided_on_their_own() {
    let o = origin().await;
    let p = o.addr.port();
    let g = gate()
        .resolve(FILES, "127.0.0.1")
        .resolve("localhost", "127.0.0.1")
        .arg("--allow-cidr")
        .arg("127.0.0.0/8")
        .arg("--allow-port")
        .arg(&p.to_string())
        .start();
    let api = g.api();
    api.admin_site(FILES).await;
    let turn = api.turn("battery", "keepalive", &[]).await;
    let auth = turn.auth_header();
    let mut s = TcpStream::connect(g.proxy()).await.unwrap();
    let mut ask = async |target: &str, with_auth: bool| {
        let cred = if with_auth {
            format!("proxy-authorization: {auth}\r\n")
        } else {
            String::new()
        };
        s.write_all(
            format!("GET http://{target}/ HTTP/1.1\r\nhost: {target}\r\n{cred}\r\n").as_bytes(),
        )
        .await
        .unwrap();
        read_head(&mut s).await.unwrap()
    };
    let first = ask(&format!("{FILES}:{p}"), true).await;
    assert_eq!(first.status, 200);
    let second = ask(&format!("localhost:{p}"), true).await;
    assert_eq!(
        (second.status, second.header("x-egress-refused")),
        (403, Some("internal_name"))
    );
    let third = ask(&format!("127.0.0.1:{p}"), true).await;
    assert_eq!(
        (third.status, third.header("x-egress-refused")),
        (403, Some("ip_literal"))
    );
    let fourth = ask(&format!("{FILES}:{p}"), false).await;
    assert_eq!(
        fourth.status, 407,
        "the credential is checked on every request, not once per connection"
    );
    assert_eq!(
        o.requests().len(),
        1,
        "only the first request reached the origin"
    );
}
