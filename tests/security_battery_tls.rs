//! Security battery, TLS: an SNI that differs from the CONNECT host closes the tunnel
//! (`sni_mismatch`), whether the hello comes whole, a byte at a time, fragmented, stalled past
//! the hello timeout or grown past the parser's limit; and `--require-sni false` lets a hello
//! without SNI through but still refuses fronting. Each row runs inside a private network
//! namespace.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use support::battery::*;
use support::hello::*;
use support::netns::in_netns;
use support::*;
use tokio::io::AsyncWriteExt as _;

// ---------------------------------------------------------------------------------------------
// Battery 1: sni_mismatch (CONNECT only, real TLS).
// ---------------------------------------------------------------------------------------------

/// A gate where [`FILES`] and [`OTHER`] are approved and resolve to loopback, with `port`
/// and 443 allowed: a TLS origin's SNI is all that tells the two apart.
async fn two_hosts_gate(port: u16) -> Gate {
    gate()
        .loopback()
        .names(&[FILES, OTHER])
        .ports(&[port, 443])
        .sites(&[FILES, OTHER])
        .ready()
        .await
}

/// TLS material for `names`, a TLS origin on a free port and one on 443 (in the namespace
/// port 443 is ours), and a [`two_hosts_gate`] for the first.
async fn tls_bench(names: &[&str]) -> (Pki, Origin, Origin, Gate) {
    let pki = pki(names);
    let o = tls_origin(&pki).await;
    let o443 = tls_origin_at(&pki, "127.0.0.1:443").await;
    let g = two_hosts_gate(o.port()).await;
    (pki, o, o443, g)
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
    in_netns(|| async {
        let names = [
            FILES,
            OTHER,
            "a.files.example.com",
            "evil.example.net",
            "127.0.0.1",
        ];
        let (pki, o, o443, g) = tls_bench(&names).await;
        let (api, p) = (g.api(), o.port());
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
    });
}

#[test]
fn require_sni_false_lets_a_hello_without_sni_through() {
    in_netns(|| async {
        let pki = pki(&[FILES, "127.0.0.1"]);
        let o443 = tls_origin_at(&pki, "127.0.0.1:443").await;
        let g = gate()
            .loopback()
            .names(&[FILES])
            .ports(&[443])
            .args(&["--require-sni", "false"])
            .sites(&[FILES])
            .ready()
            .await;
        let api = g.api();
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
        assert_recorded(&api, &turn, "sni_mismatch").await;
        assert_eq!(o443.connection_count(), 1);
    });
}

/// A ClientHello whose first bytes arrive, then nothing until the hello timeout (10 s, not
/// configurable) has passed, then the rest naming another host. Once the bytes look like TLS,
/// running out of time must not turn into "not TLS, let it through": on any port.
#[test]
fn stalled_client_hello_is_not_let_through_after_the_hello_timeout() {
    in_netns(|| async {
        let (pki, o, o443, g) = tls_bench(&[FILES, OTHER]).await;
        let (api, p) = (g.api(), o.port());
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
    });
}

/// A well-formed ClientHello naming another host that is merely too large for the proxy's
/// parser: failing to judge it must not mean letting it through, on any port.
#[test]
fn oversized_client_hello_is_not_let_through() {
    in_netns(|| async {
        let (pki, o, o443, g) = tls_bench(&[FILES, OTHER]).await;
        let (api, p) = (g.api(), o.port());
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
