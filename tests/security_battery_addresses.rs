//! Security battery, addresses: names an administrator approved whose answers point inside
//! (`private_address`), an approved name without an answer (502, not a refusal), the
//! database's own address, and the allowed ranges (`--allow-cidr`, with and without a
//! pattern) that open loopback but never the gate itself. Each row runs through forwarding and
//! CONNECT (see `tests/support/battery.rs`) inside a private network namespace.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::battery::*;
use support::netns::in_netns;
use support::*;

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
    in_netns(|| async {
        let o = origin().await;
        let mut b = gate().ports(&[o.port()]);
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
        let g = b.sites(&["*.rebind.example.com"]).ready().await;
        let runs = run_rows(&g, &[&o], o.addr.port(), &rows).await;
        assert!(runs >= 80);
        assert_eq!(o.connection_count(), 0);
    });
}

/// An approved name that does not resolve (no DNS in the namespace, no `--resolve` entry) is
/// `502`, not a refusal: nothing to approve, nothing recorded.
#[test]
fn approved_name_without_an_answer_is_502_not_a_refusal() {
    in_netns(|| async {
        let o = origin().await;
        let g = gate()
            .ports(&[o.port()])
            .args(&["--connect-timeout", "3s"])
            .sites(&["nxdomain.example.com"])
            .ready()
            .await;
        let api = g.api();
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
    });
}

/// The database's own address is never dialled, even inside an allowed range and on an
/// allowed port (a throwaway PostgreSQL on loopback).
#[test]
fn the_database_is_never_dialled_even_inside_an_allowed_range() {
    in_netns(|| async {
        let pg = support::pg::PgCluster::start();
        let g = gate()
            .database(&pg.url())
            .answers(&[
                ("db.example.com", "127.0.0.1"),
                ("db6.example.com", "::ffff:127.0.0.1"),
            ])
            .loopback()
            .ports(&[pg.port])
            .sites(&["*.example.com"])
            .ready()
            .await;
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
    });
}

// ---------------------------------------------------------------------------------------------
// Battery 1: allowed ranges, and the gate never dials itself.
// ---------------------------------------------------------------------------------------------

#[test]
fn allowed_ranges_open_loopback_but_never_the_gate_itself() {
    in_netns(|| async {
        let o = origin().await;
        let p = o.addr.port();
        let proxy_port = free_port();
        let control_port = free_port();
        let g = gate()
            .answers(&[
                ("loop.example.com", "127.0.0.1"),
                ("loop6.example.com", "::ffff:127.0.0.1"),
                ("self.example.com", "127.0.0.1"),
                ("self6.example.com", "::ffff:127.0.0.1"),
                ("alias.example.com", "127.0.0.2"),
                ("any.example.com", "0.0.0.0"),
                ("nat64.example.com", "64:ff9b::7f00:1"),
                ("v6.example.com", "::1"),
                ("ten.example.com", "10.0.0.1"),
                ("mixed.example.com", "127.0.0.1"),
                ("mixed.example.com", "10.0.0.1"),
            ])
            .loopback()
            .ports(&[p, proxy_port, control_port])
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
            refused("the gate's own control listener", "self.example.com", R).port(control_port),
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
    });
}

#[test]
fn allowed_range_with_a_pattern_applies_only_to_matching_hosts() {
    in_netns(|| async {
        let o = origin().await;
        let p = o.addr.port();
        let g = gate()
            .names(&[
                "a.dev.example.org",
                "b.c.dev.example.org",
                "dev.example.org",
                "other.example.org",
                "adev.example.org",
                "a.dev.example.org.evil.net",
            ])
            .args(&["--allow-cidr", "127.0.0.0/8=*.dev.example.org"])
            .ports(&[p])
            .sites(&[
                "*.dev.example.org",
                "dev.example.org",
                "other.example.org",
                "adev.example.org",
                "a.dev.example.org.evil.net",
            ])
            .ready()
            .await;
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
    });
}
