//! Security battery, names refused before any DNS: one row per trick that attackers and
//! confused agents use to spell an IP literal or an internal name, each run through forwarding
//! and through CONNECT; and the negative battery of legitimate public-looking names that must
//! pass both ways. The row machinery is `tests/support/battery.rs`; the other batteries are
//! `security_battery_*.rs`.
//!
//! Traffic stays on this machine: a test that resolves a name (or names an address) outside
//! loopback runs inside a fresh network namespace with only `lo` up
//! (`tests/support/netns.rs`), so even a wrong dial cannot leave the machine.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::battery::*;
use support::netns::in_netns;
use support::*;

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
    in_netns(|| async {
        let o = origin().await;
        let g = name_gate(&o, &[FILES], &[FILES]).await;
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
    in_netns(|| async {
        let o = origin().await;
        // Every internal name resolves to the origin: a missing rule would really reach it.
        let resolve = row_names(&internal_name_rows(), &["localhost"]);
        let g = name_gate(&o, &resolve, &[]).await;
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
    let rows: Vec<Row> = names
        .iter()
        .map(|(sent, _)| reached("legitimate name", sent))
        .collect();
    let patterns: Vec<&str> = names.iter().map(|(_, pattern)| *pattern).collect();
    let g = gate()
        .reach_as(&o, &row_names(&rows, &[]))
        .sites(&patterns)
        .ready()
        .await;
    let runs = run_rows(&g, &[], o.addr.port(), &rows).await;
    assert!(runs >= 30);
    // Forwarding may reuse an idle upstream connection, so count requests, not connections.
    assert_eq!(o.requests().len(), runs, "one origin request per row run");
}
