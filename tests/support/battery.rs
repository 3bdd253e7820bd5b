//! The security battery's rows: one trick each, run through forwarding (`GET
//! http://HOST:PORT/`) and through CONNECT, with the raw clients that send them. A refusal row
//! asserts `403`, `X-Egress-Refused: <reason>`, `X-Egress-Approvable` (true only for
//! `not_approved`), exactly one matching row in the turn's refusal record, and that an origin
//! whose port is allowed was never contacted; a positive row that the origin answered.
//! Shared by `tests/security_battery*.rs`.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;

use super::*;

/// A second approvable host, for rows that need two.
pub const OTHER: &str = "other.example.net";

/// Reads a response head (and a content-length body) within 10 seconds.
pub async fn read_head_within(s: &mut TcpStream) -> Result<Resp, String> {
    within(10, "response head", read_head(s))
        .await
        .map_err(|e| e.to_string())
}

/// Sends `CONNECT authority` (any bytes) with the turn's credential.
pub async fn connect_raw(
    proxy: SocketAddr,
    turn: &Turn,
    authority: &str,
) -> Result<(Resp, TcpStream), String> {
    let mut s = TcpStream::connect(proxy).await.map_err(|e| e.to_string())?;
    let _ = s.set_nodelay(true);
    s.write_all(connect_head(turn, authority).as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let r = read_head_within(&mut s).await?;
    Ok((r, s))
}

/// Sends an absolute-form `GET` with the given Host header values (none = the authority).
pub async fn forward_raw(
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
    read_head_within(&mut s).await
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    Forward,
    Connect,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    Both,
    ForwardOnly,
}

/// What a row must get.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expect {
    /// `403` with this reason, recorded.
    Refused(&'static str),
    /// `200` from the origin (positive rows).
    Reached,
}

/// One trick.
#[derive(Clone, Debug)]
pub struct Row {
    pub trick: String,
    /// The host as the client writes it in the URI / CONNECT authority.
    pub host: String,
    /// `None`: the bench's default (the origin's) port.
    pub port: Option<u16>,
    /// Forwarding without a port in the URI (the http default, 80); CONNECT then uses 80.
    pub no_port: bool,
    /// Forwarding: these Host header values instead of the authority.
    pub host_headers: Option<Vec<String>>,
    pub expect: Expect,
    /// The normalised host the refusal record must show (when the row pins it).
    pub recorded: Option<String>,
    pub via: Via,
}

pub fn refused(trick: &str, host: &str, reason: &'static str) -> Row {
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

pub fn reached(trick: &str, host: &str) -> Row {
    Row {
        expect: Expect::Reached,
        ..refused(trick, host, "")
    }
}

impl Row {
    pub fn port(mut self, p: u16) -> Self {
        self.port = Some(p);
        self
    }
    pub fn rec(mut self, host: &str) -> Self {
        self.recorded = Some(host.to_owned());
        self
    }
    pub fn no_port(mut self) -> Self {
        self.no_port = true;
        self
    }
    pub fn forward_only(mut self) -> Self {
        self.via = Via::ForwardOnly;
        self
    }
    pub fn host_headers(mut self, hs: &[&str]) -> Self {
        self.host_headers = Some(hs.iter().map(|s| (*s).to_owned()).collect());
        self
    }
    pub fn runs(&self, path: Path) -> bool {
        self.via == Via::Both || path == Path::Forward
    }
}

/// Runs every row through its paths; collects every failure and fails once with all of them.
/// Returns the number of row runs. `untouched` are origins that no refusal row may reach.
pub async fn run_rows(g: &Gate, untouched: &[&Origin], default_port: u16, rows: &[Row]) -> usize {
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

pub async fn check_row(
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
            status_is(&resp, 200, "200")?;
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
            status_is(&resp, 403, &format!("403 {reason}"))?;
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
/// The administrator listed `sites`.
pub async fn name_gate(origin: &Origin, names: &[impl AsRef<str>], sites: &[&str]) -> Gate {
    gate()
        .reach(origin)
        .args(&["--internal-suffix", "example-corp.net"])
        .names(names)
        .sites(sites)
        .ready()
        .await
}

/// The names `rows` reach as the gate resolves them (no trailing dot, lower case), and
/// `more`: what a battery resolves to its origin, so a rule that failed to refuse a row would
/// really reach it.
pub fn row_names(rows: &[Row], more: &[&str]) -> Vec<String> {
    rows.iter()
        .map(|r| r.host.trim_end_matches('.').to_ascii_lowercase())
        .chain(more.iter().map(|m| (*m).to_owned()))
        .collect()
}

/// Asserts a request that the HTTP layer cannot parse is `400`, recorded nowhere, and dials
/// nothing. Used for spellings that never reach the normaliser (raw UTF-8 and `%` in a host
/// are invalid in an HTTP request-target).
pub async fn assert_malformed(g: &Gate, o: &Origin, trick: &str, host: &str) {
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

/// `Err` naming what was expected and what came (status, body, `X-Egress-Refused`) unless
/// the answer's status is `want`.
fn status_is(resp: &Resp, want: u16, expected: &str) -> Result<(), String> {
    if resp.status == want {
        return Ok(());
    }
    Err(format!(
        "expected {expected}, got {} {:?} (x-egress-refused {:?})",
        resp.status,
        resp.text(),
        resp.header("x-egress-refused")
    ))
}
