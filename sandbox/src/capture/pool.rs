//! The reserved address pool: one stable address per name for the sandbox's life, never
//! reused, and the way back from an address to its name.
//!
//! IPv4 comes from `198.18.0.0/15` and IPv6 from `2001:2::/48`: the ranges reserved for
//! benchmarking (RFC 2544 and RFC 5180), which are never routed on the Internet and are not
//! private ranges a real network might number itself with, so a pool address can never be
//! mistaken for a real destination. The first address of each range after the network address
//! (`198.18.0.1`, `2001:2::1`) is the namespace's own address on `lo`; names get the ones after.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The IPv4 pool's network address and prefix length.
pub(crate) const POOL_V4: (Ipv4Addr, u8) = (Ipv4Addr::new(198, 18, 0, 0), 15);
/// The IPv6 pool's network address and prefix length.
pub(crate) const POOL_V6: (Ipv6Addr, u8) = (Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 0), 48);
/// The namespace's own IPv4 address on `lo` (never handed to a name).
pub(crate) const OWN_V4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
/// The namespace's own IPv6 address on `lo` (never handed to a name).
pub(crate) const OWN_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 1);

/// Most names one sandbox may look up: bounds the launcher's memory against a script that
/// looks up endless random names. Far below either range's size, so no address is reused.
pub(crate) const MAX_NAMES: usize = 65_536;

/// Which family of address a lookup asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Family {
    /// An `A` record.
    V4,
    /// An `AAAA` record.
    V6,
}

/// Names and the addresses handed out for them.
#[derive(Default)]
pub(crate) struct Pool {
    by_name: HashMap<String, Slot>,
    by_addr: HashMap<IpAddr, String>,
    /// Addresses handed out so far, per family (the next one's offset is this + 2).
    issued_v4: u32,
    issued_v6: u32,
}

/// One name's addresses, each given out the first time it is asked for.
#[derive(Default)]
struct Slot {
    v4: Option<Ipv4Addr>,
    v6: Option<Ipv6Addr>,
}

impl Pool {
    /// The address of `name` in `family`, handing out the next free one the first time.
    /// `None` once [`MAX_NAMES`] names are known (the lookup then fails; nothing is reused).
    /// `name` must already be normalised (see `dns::host_name`).
    pub(crate) fn address(&mut self, name: &str, family: Family) -> Option<IpAddr> {
        if !self.by_name.contains_key(name) && self.by_name.len() >= MAX_NAMES {
            return None;
        }
        let slot = self.by_name.entry(name.to_owned()).or_default();
        let addr = match family {
            Family::V4 => IpAddr::V4(match slot.v4 {
                Some(addr) => addr,
                None => {
                    let addr = nth_v4(self.issued_v4)?;
                    self.issued_v4 += 1;
                    *slot.v4.insert(addr)
                }
            }),
            Family::V6 => IpAddr::V6(match slot.v6 {
                Some(addr) => addr,
                None => {
                    let addr = nth_v6(self.issued_v6);
                    self.issued_v6 += 1;
                    *slot.v6.insert(addr)
                }
            }),
        };
        self.by_addr.entry(addr).or_insert_with(|| name.to_owned());
        Some(addr)
    }

    /// The name an address was handed out for; `None` for any other address (an IP literal
    /// in the script, or the namespace's own address).
    pub(crate) fn name(&self, addr: IpAddr) -> Option<&str> {
        let addr = match addr {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
            v4 => v4,
        };
        self.by_addr.get(&addr).map(String::as_str)
    }
}

/// The `n`-th IPv4 address for names: offset `n + 2` in the /15 (after the network address
/// and the namespace's own), never the range's last (broadcast-looking) address.
fn nth_v4(n: u32) -> Option<Ipv4Addr> {
    let size = 1u32 << (32 - POOL_V4.1);
    let offset = n.checked_add(2).filter(|o| *o < size - 1)?;
    Some(Ipv4Addr::from(u32::from(POOL_V4.0) + offset))
}

/// The `n`-th IPv6 address for names: offset `n + 2` in the /48 (the range has 2^80).
fn nth_v6(n: u32) -> Ipv6Addr {
    Ipv6Addr::from(u128::from(POOL_V6.0) + u128::from(n) + 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_stable_address_per_name_and_family_and_the_way_back() {
        let mut pool = Pool::default();
        let a = pool.address("a.example", Family::V4);
        let b = pool.address("b.example", Family::V4);
        let a6 = pool.address("a.example", Family::V6);
        assert_eq!(a, Some(IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2))));
        assert_eq!(b, Some(IpAddr::V4(Ipv4Addr::new(198, 18, 0, 3))));
        assert_eq!(a6, Some(IpAddr::V6("2001:2::2".parse().unwrap_or(OWN_V6))));
        assert_eq!(pool.address("a.example", Family::V4), a);
        assert_eq!(pool.address("a.example", Family::V6), a6);
        for (addr, name) in [(a, "a.example"), (b, "b.example"), (a6, "a.example")] {
            assert_eq!(addr.and_then(|addr| pool.name(addr)), Some(name));
        }
        // An IPv4-mapped IPv6 address (a dual-stack socket's view) maps back too.
        let mapped = IpAddr::V6(Ipv4Addr::new(198, 18, 0, 3).to_ipv6_mapped());
        assert_eq!(pool.name(mapped), Some("b.example"));
        for literal in ["8.8.8.8", "198.18.0.1", "198.18.0.99", "2001:2::1", "::1"] {
            let addr: IpAddr = literal.parse().unwrap_or(IpAddr::V4(OWN_V4));
            assert_eq!(pool.name(addr), None, "{literal}");
        }
    }

    #[test]
    fn addresses_are_never_reused_and_the_name_count_is_bounded() {
        let mut pool = Pool::default();
        let mut seen = std::collections::HashSet::new();
        for i in 0..MAX_NAMES {
            let name = format!("n{i}.example");
            let v4 = pool.address(&name, Family::V4);
            let v6 = pool.address(&name, Family::V6);
            assert!(v4.is_some() && v6.is_some(), "{name}");
            assert!(
                seen.insert(v4) && seen.insert(v6),
                "{name} got a reused address"
            );
        }
        assert_eq!(pool.address("one-more.example", Family::V4), None);
        assert_eq!(pool.address("one-more.example", Family::V6), None);
        // Known names keep answering.
        assert!(pool.address("n0.example", Family::V4).is_some());
    }

    #[test]
    fn the_v4_range_ends_before_its_last_address() {
        assert_eq!(nth_v4(0), Some(Ipv4Addr::new(198, 18, 0, 2)));
        assert_eq!(
            nth_v4((1 << 17) - 4),
            Some(Ipv4Addr::new(198, 19, 255, 254))
        );
        assert_eq!(nth_v4((1 << 17) - 3), None);
    }
}
