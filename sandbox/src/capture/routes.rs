//! Gives the namespace's `lo` the pool's first addresses and makes every other address local
//! too, so that a connection to a pool address or an IP literal reaches the ruleset's
//! redirect instead of failing with "no route". Nothing here leads out of the namespace: its
//! only interface is still `lo`, so with the ruleset gone every such connection just finds
//! nothing listening.
//!
//! The pool's own addresses (not only loopback ones) matter to clients that ask
//! `getaddrinfo` for `AI_ADDRCONFIG`: glibc answers a family only when a non-loopback address
//! of it is configured.

use super::pool::{OWN_V4, OWN_V6, POOL_V4, POOL_V6};
use super::tool;

/// The `ip -batch` commands.
fn commands() -> String {
    format!(
        "address add {OWN_V4}/{} dev lo\n\
         address add {OWN_V6}/{} dev lo nodad\n\
         route add local 0.0.0.0/0 dev lo\n\
         route add local ::/0 dev lo\n",
        POOL_V4.1, POOL_V6.1
    )
}

/// Adds the addresses and routes in the current network namespace (`lo` must be up).
pub(crate) fn add() -> Result<(), String> {
    tool::run("ip", &["-batch", "-"], &commands())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_pool_is_on_lo_and_everything_else_is_local() {
        assert_eq!(
            super::commands(),
            "address add 198.18.0.1/15 dev lo\naddress add 2001:2::1/48 dev lo nodad\n\
             route add local 0.0.0.0/0 dev lo\nroute add local ::/0 dev lo\n"
        );
    }
}
