//! The namespace's nftables ruleset: TCP to any address but loopback goes to the capture
//! listener, port 53 (UDP and TCP, any address) goes to the resolver, and everything else
//! that is not loopback is rejected at once (a reset for TCP, an ICMP error otherwise).
//!
//! IPv4 and IPv6 are separate tables (`ip` and `ip6`): a redirect is per family, and so is
//! reading the original destination back. The whole ruleset is one `nft -f` batch, which the
//! kernel applies all or nothing. Replies (`ct direction reply`) pass: their destination is
//! the client's own address, which is not loopback once a redirect rewrote the other side.

use super::tool;

/// Ports the ruleset sends traffic to, on the namespace's loopback addresses.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ports {
    /// The capture listener on `127.0.0.1`.
    pub(crate) capture_v4: u16,
    /// The capture listener on `[::1]`.
    pub(crate) capture_v6: u16,
    /// The resolver (UDP and TCP) on both loopback addresses.
    pub(crate) dns: u16,
}

/// The ruleset text for `nft -f`.
pub(crate) fn ruleset(ports: Ports) -> String {
    let table = |family: &str, loopback: &str, capture: u16| {
        format!(
            "table {family} egressgate_capture {{\n\
             \x20 chain steer {{\n\
             \x20   type nat hook output priority -100; policy accept;\n\
             \x20   meta l4proto {{ tcp, udp }} th dport 53 redirect to :{dns}\n\
             \x20   {family} daddr {loopback} return\n\
             \x20   meta l4proto tcp redirect to :{capture}\n\
             \x20 }}\n\
             \x20 chain guard {{\n\
             \x20   type filter hook output priority 0; policy accept;\n\
             \x20   {family} daddr {loopback} accept\n\
             \x20   ct direction reply accept\n\
             \x20   meta l4proto tcp reject with tcp reset\n\
             \x20   reject\n\
             \x20 }}\n\
             }}\n",
            dns = ports.dns,
        )
    };
    format!(
        "flush ruleset\n{}{}",
        table("ip", "127.0.0.0/8", ports.capture_v4),
        table("ip6", "::1", ports.capture_v6)
    )
}

/// Loads the ruleset into the current network namespace.
pub(crate) fn apply(ports: Ports) -> Result<(), String> {
    tool::run("nft", &["-f", "-"], &ruleset(ports))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_families_redirect_dns_and_tcp_and_reject_the_rest() {
        let text = ruleset(Ports {
            capture_v4: 4000,
            capture_v6: 6000,
            dns: 53,
        });
        assert!(text.starts_with("flush ruleset\n"));
        for family in [
            "table ip egressgate_capture",
            "table ip6 egressgate_capture",
        ] {
            assert_eq!(text.matches(family).count(), 1, "{text}");
        }
        assert_eq!(text.matches("th dport 53 redirect to :53").count(), 2);
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        let follows = |a: &str, b: &str| lines.windows(2).any(|w| w == [a, b]);
        assert!(follows(
            "ip daddr 127.0.0.0/8 return",
            "meta l4proto tcp redirect to :4000"
        ));
        assert!(follows(
            "ip6 daddr ::1 return",
            "meta l4proto tcp redirect to :6000"
        ));
        assert_eq!(text.matches("reject with tcp reset").count(), 2);
    }
}
