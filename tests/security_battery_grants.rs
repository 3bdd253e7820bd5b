//! Security battery, what the grants cover: ports outside the allow list, unapproved
//! look-alikes of approved names (the only approvable refusal), a Host header disagreeing with
//! the URI, and every request on a keep-alive connection decided on its own. Each row runs
//! through forwarding and CONNECT (see `tests/support/battery.rs`) inside a private network
//! namespace.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::battery::*;
use support::netns::in_netns;
use support::*;
use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;

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
    in_netns(|| async {
        let o = origin().await;
        let g = name_gate(&o, &[FILES], &[FILES]).await;
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
    in_netns(|| async {
        let o = origin().await;
        // All resolve to the origin: a wrong allow would really reach it.
        let approved = [FILES, "example.com", "a.wild.example.org"];
        let resolve = row_names(&not_approved_rows(), &approved);
        let sites = ["example.com", FILES, "*.wild.example.org"];
        let g = name_gate(&o, &resolve, &sites).await;
        let api = g.api();
        run_rows(&g, &[&o], o.addr.port(), &not_approved_rows()).await;
        assert_malformed(&g, &o, "raw UTF-8 homograph", "ex\u{430}mple.com").await;
        assert_eq!(o.connection_count(), 0);
        // The approvals themselves work (the rows were refused for being look-alikes).
        let turn = api.turn("battery", "approved-ok", &[]).await;
        for h in approved {
            let r = forward_raw(g.proxy(), &turn, &format!("{h}:{}", o.addr.port()), None)
                .await
                .unwrap();
            assert_eq!(r.status, 200, "{h}: {}", r.text());
        }
    });
}

// ---------------------------------------------------------------------------------------------
// Battery 1: host_mismatch (forwarding only).
// ---------------------------------------------------------------------------------------------

#[test]
fn host_header_disagreeing_with_the_uri_is_refused() {
    in_netns(|| async {
        let o = origin().await;
        let p = o.addr.port();
        let g = name_gate(&o, &[FILES, OTHER], &[FILES, OTHER]).await;
        const R: &str = "host_mismatch";
        let other_port = if p == 65535 { 65534 } else { p + 1 };
        let other_host = format!("{OTHER}:{p}");
        let evil = format!("evil.example.net:{p}");
        let files_other_port = format!("{FILES}:{other_port}");
        let files = format!("{FILES}:{p}");
        let loopback = format!("127.0.0.1:{p}");
        let localhost = format!("localhost:{p}");
        let userinfo = format!("{FILES}:{p}@evil.example.net");
        // Forwarding only: CONNECT has no Host header.
        let mismatch = |trick: &str, hosts: &[&str]| {
            refused(trick, FILES, R).forward_only().host_headers(hosts)
        };
        let rows = vec![
            mismatch("Host names another approved host", &[&other_host]).rec(FILES),
            mismatch("Host names an unapproved host", &[&evil]),
            mismatch("Host names another port", &[&files_other_port]),
            mismatch("Host without the URI's port (means 80)", &[FILES]),
            mismatch(
                "two Host headers, the second another host",
                &[&files, &evil],
            ),
            mismatch("two Host headers, the first another host", &[&evil, &files]),
            mismatch("two identical Host headers", &[&files, &files]),
            mismatch("Host is an IP literal", &[&loopback]),
            mismatch("Host is localhost", &[&localhost]),
            mismatch("empty Host", &[""]),
            mismatch("Host with userinfo-like suffix", &[&userinfo]),
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
    });
}

// ---------------------------------------------------------------------------------------------
// Keep-alive: every request on one connection is identified and decided on its own.
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn keep_alive_requests_are_each_decided_on_their_own() {
    let o = origin().await;
    let p = o.addr.port();
    let g = gate()
        .reach_as(&o, &[FILES, "localhost"])
        .sites(&[FILES])
        .ready()
        .await;
    let turn = g.turn("battery", "keepalive").await;
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
