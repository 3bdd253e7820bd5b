//! The gate's own endpoints that the proxy must never dial, even inside `--allow-cidr`: the
//! control plane's addresses (`--control-addr`, for a proxy-only process) and every TCP
//! address the database URL names. A Unix-socket database has no IP address to refuse (and a
//! sandboxed script cannot reach a socket path through the proxy, which only dials TCP).

use std::net::{SocketAddr, ToSocketAddrs as _};

use anyhow::{Result, anyhow};

/// PostgreSQL's default port.
const PG_PORT: u16 = 5432;

/// Resolves `--control-addr` entries (`HOST:PORT` or `[V6]:PORT`) once, at start.
pub fn control_addrs(label: &str, entries: &[String]) -> Result<Vec<SocketAddr>> {
    let mut out = Vec::new();
    for e in entries {
        let addrs: Vec<SocketAddr> = e
            .trim()
            .to_socket_addrs()
            .map_err(|err| anyhow!("{label} {e:?}: expected HOST:PORT ({err})"))?
            .collect();
        if addrs.is_empty() {
            return Err(anyhow!("{label} {e:?}: the name has no address"));
        }
        out.extend(addrs);
    }
    Ok(out)
}

/// Every TCP address a database URL names (resolved once, at start): the authority's hosts
/// (libpq allows a comma-separated list, `host1:5432,host2:5433`), and the `host=`,
/// `hostaddr=` and `port=` query parameters (comma-separated lists too, ports paired with
/// hosts by position, one port for all). Unix-socket hosts (a path, `%2F…`, `@abstract`, or
/// none) have no address. SQLite URLs name no server.
pub fn database_addrs(url: &str) -> Vec<SocketAddr> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Vec::new();
    };
    if !matches!(scheme, "postgres" | "postgresql") {
        return Vec::new();
    }
    let (before_query, query) = rest.split_once('?').unwrap_or((rest, ""));
    let authority = before_query.split('/').next().unwrap_or("");
    let hosts_part = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let params: Vec<(String, String)> = url::form_urlencoded::parse(query.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let list = |key: &str| -> Vec<String> {
        params
            .iter()
            .filter(|(k, _)| k == key)
            .flat_map(|(_, v)| v.split(',').map(str::to_owned).collect::<Vec<_>>())
            .collect()
    };
    let ports: Vec<u16> = list("port")
        .iter()
        .filter_map(|p| p.trim().parse().ok())
        .collect();
    let port_at = |i: usize| match ports.as_slice() {
        [] => PG_PORT,
        [one] => *one,
        many => many.get(i).copied().unwrap_or(PG_PORT),
    };
    let mut named: Vec<(String, u16)> = Vec::new();
    for (i, entry) in hosts_part.split(',').enumerate() {
        let (host, port) = split_host_port(entry);
        named.push((decode(host), port.unwrap_or_else(|| port_at(i))));
    }
    for (i, h) in list("host").into_iter().enumerate() {
        named.push((h, port_at(i)));
    }
    for (i, h) in list("hostaddr").into_iter().enumerate() {
        named.push((h, port_at(i)));
    }
    named
        .into_iter()
        .filter(|(h, _)| !h.is_empty() && !h.starts_with('/') && !h.starts_with('@'))
        .flat_map(|(h, port)| {
            let h = h.trim_start_matches('[').trim_end_matches(']').to_owned();
            (h.as_str(), port)
                .to_socket_addrs()
                .map(Iterator::collect::<Vec<_>>)
                .unwrap_or_default()
        })
        .collect()
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`.
fn split_host_port(entry: &str) -> (&str, Option<u16>) {
    if let Some(end) = entry.find(']') {
        let port = entry[end + 1..]
            .strip_prefix(':')
            .and_then(|p| p.parse().ok());
        return (&entry[..=end], port);
    }
    match entry.rsplit_once(':') {
        Some((h, p)) => (h, p.parse().ok()),
        None => (entry, None),
    }
}

fn decode(s: &str) -> String {
    url::form_urlencoded::parse(format!("h={s}").as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs(url: &str) -> Vec<String> {
        database_addrs(url)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn every_tcp_address_a_postgres_url_names() {
        assert_eq!(addrs("postgres://u:p@10.0.0.5/db"), ["10.0.0.5:5432"]);
        assert_eq!(addrs("postgresql://10.0.0.5:6432/db"), ["10.0.0.5:6432"]);
        assert_eq!(addrs("postgres://[fd00::5]:6000/db"), ["[fd00::5]:6000"]);
        assert_eq!(
            addrs("postgres://u@10.0.0.5:5433,10.0.0.6/db?sslmode=require"),
            ["10.0.0.5:5433", "10.0.0.6:5432"]
        );
        assert_eq!(
            addrs("postgres:///db?host=10.0.0.7&port=5444"),
            ["10.0.0.7:5444"]
        );
        assert_eq!(
            addrs("postgres:///db?hostaddr=10.0.0.8,10.0.0.9&port=5001,5002"),
            ["10.0.0.8:5001", "10.0.0.9:5002"]
        );
        assert_eq!(
            addrs("postgres://10.0.0.5/db?host=10.0.0.6"),
            ["10.0.0.5:5432", "10.0.0.6:5432"]
        );
    }

    #[test]
    fn unix_sockets_and_sqlite_name_no_address() {
        for url in [
            "postgres:///db",
            "postgres://%2Fvar%2Frun%2Fpostgresql/db",
            "postgres:///db?host=/var/run/postgresql",
            "postgres://u@/db?host=%2Ftmp",
            "postgres:///db?host=@abstract",
            "sqlite:///data/egressgate.db",
            "not a url",
        ] {
            assert!(addrs(url).is_empty(), "{url}: {:?}", addrs(url));
        }
    }

    #[test]
    fn control_addresses_are_resolved_or_refused() {
        let a = control_addrs(
            "--control-addr",
            &["127.0.0.1:8080".into(), "[::1]:9000".into()],
        );
        let a: Vec<String> = a
            .unwrap_or_default()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(a, ["127.0.0.1:8080", "[::1]:9000"]);
        for bad in ["127.0.0.1", "no-port", "127.0.0.1:x", ""] {
            assert!(
                control_addrs("--control-addr", &[bad.into()]).is_err(),
                "{bad}"
            );
        }
    }
}
