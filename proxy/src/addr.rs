//! Address vetting: is a resolved address public unicast? Everything the design lists as
//! internal is refused, IPv6 forms that embed an IPv4 address are judged by the address inside,
//! and cloud metadata endpoints outside those ranges are named explicitly.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

/// IPv4 ranges that are never public unicast (RFC 6890 and friends).
const V4_BLOCKED: &[(u8, u8, u8, u8, u8)] = &[
    (0, 0, 0, 0, 8),       // "this network", unspecified
    (10, 0, 0, 0, 8),      // private
    (100, 64, 0, 0, 10),   // CGNAT
    (127, 0, 0, 0, 8),     // loopback
    (169, 254, 0, 0, 16),  // link-local, incl. 169.254.169.254 metadata
    (172, 16, 0, 0, 12),   // private
    (192, 0, 0, 0, 24),    // IETF protocol assignments
    (192, 0, 2, 0, 24),    // TEST-NET-1
    (192, 88, 99, 0, 24),  // 6to4 relay anycast
    (192, 168, 0, 0, 16),  // private
    (198, 18, 0, 0, 15),   // benchmarking
    (198, 51, 100, 0, 24), // TEST-NET-2
    (203, 0, 113, 0, 24),  // TEST-NET-3
    (224, 0, 0, 0, 4),     // multicast
    (240, 0, 0, 0, 4),     // reserved, incl. broadcast
];

/// Cloud metadata and platform endpoints that sit in otherwise public space.
const V4_METADATA: &[Ipv4Addr] = &[
    Ipv4Addr::new(168, 63, 129, 16),   // Azure wireserver
    Ipv4Addr::new(100, 100, 100, 200), // Alibaba (also CGNAT)
];

/// IPv6 ranges that are never public unicast.
const V6_BLOCKED: &[(u16, u16, u16, u8)] = &[
    (0x0064, 0xff9b, 0x0001, 48), // local-use NAT64 (RFC 8215): not globally reachable
    (0x0100, 0, 0, 64),           // discard-only
    (0x2001, 0x0db8, 0, 32),      // documentation
    (0x2001, 0x0002, 0, 48),      // benchmarking (2001:2::/48)
    (0x3fff, 0, 0, 20),           // documentation (RFC 9637)
    (0xfc00, 0, 0, 7),            // unique local
    (0xfe80, 0, 0, 10),           // link-local
    (0xfec0, 0, 0, 10),           // site-local (deprecated)
    (0xff00, 0, 0, 8),            // multicast
];

/// AWS's IPv6 instance metadata endpoint (inside ULA, listed for clarity).
const V6_METADATA: &[Ipv6Addr] = &[Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)];

fn v4_net(a: u8, b: u8, c: u8, d: u8, len: u8) -> Option<Ipv4Net> {
    Ipv4Net::new(Ipv4Addr::new(a, b, c, d), len).ok()
}

fn v6_net(a: u16, b: u16, c: u16, len: u8) -> Option<Ipv6Net> {
    Ipv6Net::new(Ipv6Addr::new(a, b, c, 0, 0, 0, 0, 0), len).ok()
}

/// The IPv4 address an IPv6 address stands for, when it embeds one: IPv4-mapped
/// (::ffff:0:0/96), IPv4-translated (RFC 2765 SIIT, ::ffff:0:0:0/96), IPv4-compatible
/// (deprecated ::/96), well-known NAT64 (64:ff9b::/96), 6to4 (2002::/16) and Teredo
/// (2001::/32, client address inverted in the last 32 bits). The local-use NAT64 prefix
/// (64:ff9b:1::/48, RFC 8215) places the IPv4 address where its operator chooses, so it is
/// not decoded here but refused as a whole (see `V6_BLOCKED`).
///
/// Not embeddings: ISATAP-style interface ids (`…:5efe:a.b.c.d`) and any other IPv4 address
/// written into the low 64 bits of a routable prefix. Such an address is routed by its
/// prefix, not by the IPv4 address in its interface id, so it is judged by the prefix like
/// every other IPv6 address.
pub fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let low32 = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    if s[..6] == [0, 0, 0, 0, 0xffff, 0] {
        return Some(low32(s[6], s[7])); // IPv4-translated (SIIT)
    }
    if s[..6] == [0, 0, 0, 0, 0, 0] && !(s[6] == 0 && s[7] <= 1) {
        return Some(low32(s[6], s[7])); // IPv4-compatible (deprecated), excluding :: and ::1
    }
    if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
        return Some(low32(s[6], s[7]));
    }
    if s[0] == 0x2002 {
        return Some(low32(s[1], s[2]));
    }
    if s[0] == 0x2001 && s[1] == 0 {
        return Some(low32(!s[6], !s[7]));
    }
    None
}

/// True when `ip` is public unicast: the only kind of address the gate dials unless an
/// allowed range says otherwise.
pub fn is_public_unicast(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4_public(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = embedded_v4(v6) {
                return v4_public(v4);
            }
            if v6.is_unspecified() || v6.is_loopback() || V6_METADATA.contains(&v6) {
                return false;
            }
            !V6_BLOCKED
                .iter()
                .filter_map(|&(a, b, c, len)| v6_net(a, b, c, len))
                .any(|n| n.contains(&v6))
        }
    }
}

fn v4_public(ip: Ipv4Addr) -> bool {
    !V4_METADATA.contains(&ip)
        && !V4_BLOCKED
            .iter()
            .filter_map(|&(a, b, c, d, len)| v4_net(a, b, c, d, len))
            .any(|n| n.contains(&ip))
}

/// Whether `net` contains `ip`, also matching an IPv4 range against the IPv4 inside a mapped
/// IPv6 address (an allow rule for 127.0.0.0/8 covers `::ffff:127.0.0.1`).
pub fn net_contains(net: &IpNet, ip: IpAddr) -> bool {
    if net.contains(&ip) {
        return true;
    }
    match (net, ip) {
        (IpNet::V4(n), IpAddr::V6(v6)) => v6.to_ipv4_mapped().is_some_and(|v4| n.contains(&v4)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap_or_else(|e| unreachable!("{s}: {e}"))
    }

    #[test]
    fn blocks_every_internal_range() {
        for s in [
            "0.0.0.0",
            "10.1.2.3",
            "100.64.0.1",
            "100.127.255.254",
            "127.0.0.1",
            "127.255.255.255",
            "169.254.169.254",
            "172.16.0.1",
            "172.31.255.255",
            "192.0.0.8",
            "192.0.2.1",
            "192.168.1.1",
            "198.18.0.1",
            "198.19.255.255",
            "198.51.100.7",
            "203.0.113.9",
            "224.0.0.1",
            "239.255.255.250",
            "255.255.255.255",
            "240.0.0.1",
            "168.63.129.16",
            "::",
            "::1",
            "fc00::1",
            "fd00:ec2::254",
            "fe80::1",
            "ff02::1",
            "2001:db8::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b::7f00:1",
            "64:ff9b:1::a00:1",
            "2002:7f00:1::",
            "2002:a9fe:a9fe::1",
            "2001:0:4136:e378:8000:63bf:80ff:fffe",
            "::127.0.0.1",
            "::ffff:0:127.0.0.1",
            "::ffff:0:a9fe:a9fe",
            "::ffff:0:10.0.0.1",
            "::ffff:0:0.0.0.0",
            "::10.0.0.1",
            "64:ff9b::10.0.0.1",
            "64:ff9b:1::808:808",
            "2002:a00:1::",
            "2001:0:4136:e378:8000:63bf:f5ff:fffe",
            "100::1",
            "2001:2::1",
        ] {
            assert!(!is_public_unicast(ip(s)), "{s} must not count as public");
        }
    }

    #[test]
    fn allows_public_addresses() {
        for s in [
            "1.1.1.1",
            "8.8.8.8",
            "93.184.216.34",
            "172.32.0.1",
            "100.128.0.1",
            "198.20.0.1",
            "2606:4700:4700::1111",
            "2a00:1450:4001:80b::200e",
            "::ffff:8.8.8.8",
            "::ffff:0:8.8.8.8",
            "64:ff9b::808:808",
            // ISATAP-style interface ids are not embeddings: routed by their public prefix.
            "2a00:1450::5efe:7f00:1",
            "2a00:1450::200:5efe:a00:1",
            "2002:808:808::1",
        ] {
            assert!(is_public_unicast(ip(s)), "{s} should count as public");
        }
    }

    #[test]
    fn teredo_is_judged_by_its_client_address() {
        // Teredo client 127.0.0.1 is stored inverted: !0x7f00 = 0x80ff, !0x0001 = 0xfffe.
        assert_eq!(
            embedded_v4(
                "2001:0:4136:e378:8000:63bf:80ff:fffe"
                    .parse()
                    .unwrap_or(Ipv6Addr::UNSPECIFIED)
            ),
            Some(Ipv4Addr::LOCALHOST)
        );
    }

    #[test]
    fn mapped_addresses_match_v4_ranges() {
        let net: IpNet = "127.0.0.0/8"
            .parse()
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert!(net_contains(&net, ip("::ffff:127.0.0.1")));
        assert!(!net_contains(&net, ip("::1")));
    }
}
