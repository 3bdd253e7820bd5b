//! `loadgen free-ports`: loopback ports free right now, for the proxies that need a fixed port
//! in their configuration (tinyproxy, squid, a throwaway PostgreSQL).

/// `count` distinct free ports on 127.0.0.1, or `None` when that many cannot be bound.
pub fn free(count: usize) -> Option<Vec<u16>> {
    // Hold every listener until all are chosen, so the ports differ.
    let listeners: Vec<_> = (0..count)
        .filter_map(|_| std::net::TcpListener::bind("127.0.0.1:0").ok())
        .collect();
    if listeners.len() != count {
        return None;
    }
    Some(
        listeners
            .iter()
            .filter_map(|l| l.local_addr().ok())
            .map(|a| a.port())
            .collect(),
    )
}
