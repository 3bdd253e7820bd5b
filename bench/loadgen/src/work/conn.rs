//! Reaching the origin the way a workload does: straight, through the proxy, or through a
//! CONNECT tunnel; and the exact bytes of the GET that each way sends.

use std::io;
use std::net::SocketAddr;

use super::load::{Kind, Load, Target, TlsLoad};
use crate::client::Conn;

/// The TLS origin, which only the TLS workload needs.
pub fn tls_of(load: &Load) -> io::Result<&TlsLoad> {
    load.tls
        .as_ref()
        .ok_or_else(|| io::Error::other("no TLS origin given (--tls-origin)"))
}

/// The origin address a workload talks to (the TLS listener for the TLS workload).
fn origin_of(kind: Kind, load: &Load) -> io::Result<SocketAddr> {
    match kind {
        Kind::TunTlsClose => tls_of(load).map(|tls| tls.origin),
        _ => Ok(load.origin),
    }
}

fn authority(t: &Target, kind: Kind, load: &Load) -> String {
    let port = origin_of(kind, load).map_or(0, |a| a.port());
    format!("{}:{port}", t.host.as_deref().unwrap_or(&load.host))
}

/// The target's `Proxy-Authorization` header line, or nothing (the peers get none).
fn proxy_auth(t: &Target) -> String {
    t.auth
        .as_ref()
        .map(|a| format!("Proxy-Authorization: {a}\r\n"))
        .unwrap_or_default()
}

/// The request bytes for one GET.
pub fn get_request(t: &Target, kind: Kind, load: &Load, path: &str, close: bool) -> Vec<u8> {
    let conn = if close { "Connection: close\r\n" } else { "" };
    let host = authority(t, kind, load);
    let (target, auth) = if t.proxy.is_some() && !kind.tunnel() {
        (format!("http://{host}{path}"), proxy_auth(t))
    } else {
        (path.to_owned(), String::new())
    };
    format!("GET {target} HTTP/1.1\r\nHost: {host}\r\n{auth}User-Agent: egressgate-bench/0.1\r\nAccept: */*\r\n{conn}\r\n")
        .into_bytes()
}

/// Opens a client connection ready for GETs: to the origin (direct), to the proxy
/// (forwarding), or to the proxy with an established CONNECT tunnel.
pub async fn open(t: &Target, kind: Kind, load: &Load) -> io::Result<Conn> {
    let Some(proxy) = t.proxy else {
        return Conn::connect(origin_of(kind, load)?).await;
    };
    let mut c = Conn::connect(proxy).await?;
    if kind.tunnel() {
        let host = authority(t, kind, load);
        let auth = proxy_auth(t);
        c.send(format!("CONNECT {host} HTTP/1.1\r\nHost: {host}\r\n{auth}\r\n").as_bytes())
            .await?;
        let head = c.read_head(true).await?;
        if head.status != 200 {
            let _ = c.read_body(&head).await;
            return Err(io::Error::other(format!(
                "CONNECT answered {}",
                head.status
            )));
        }
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load() -> Load {
        Load {
            origin: "127.0.0.1:8080".parse().unwrap(),
            host: "bench.example.com".into(),
            path: "/small".into(),
            conns: 1,
            duration: std::time::Duration::from_secs(1),
            max_requests: 1,
            expect_status: 200,
            tls: None,
        }
    }

    fn target(proxy: Option<&str>, auth: Option<&str>, host: Option<&str>) -> Target {
        Target {
            name: "t".into(),
            proxy: proxy.map(|p| p.parse().unwrap()),
            pid: None,
            auth: auth.map(str::to_owned),
            host: host.map(str::to_owned),
        }
    }

    fn text(b: Vec<u8>) -> String {
        String::from_utf8(b).unwrap()
    }

    /// Forwarding sends the absolute form and the credential; a tunnel's GET and a direct
    /// one send the origin form and never the credential (the proxy saw it on CONNECT).
    #[test]
    fn each_way_sends_its_own_get() {
        let eg = target(Some("127.0.0.1:3128"), Some("Basic eDp5"), None);
        assert_eq!(
            text(get_request(&eg, Kind::FwdKeep, &load(), "/small", false)),
            "GET http://bench.example.com:8080/small HTTP/1.1\r\nHost: bench.example.com:8080\r\nProxy-Authorization: Basic eDp5\r\nUser-Agent: egressgate-bench/0.1\r\nAccept: */*\r\n\r\n"
        );
        assert_eq!(
            text(get_request(&eg, Kind::TunClose, &load(), "/small", true)),
            "GET /small HTTP/1.1\r\nHost: bench.example.com:8080\r\nUser-Agent: egressgate-bench/0.1\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
        let peer = target(Some("127.0.0.1:3129"), None, Some("127.0.0.1"));
        assert_eq!(
            text(get_request(
                &peer,
                Kind::FwdClose,
                &load(),
                "/bulk?mib=1",
                true
            )),
            "GET http://127.0.0.1:8080/bulk?mib=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: egressgate-bench/0.1\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
        let direct = target(None, None, None);
        assert!(
            text(get_request(
                &direct,
                Kind::FwdKeep,
                &load(),
                "/small",
                false
            ))
            .starts_with("GET /small HTTP/1.1\r\n")
        );
    }

    #[test]
    fn the_tls_workload_needs_a_tls_origin() {
        let err = origin_of(Kind::TunTlsClose, &load()).unwrap_err();
        assert_eq!(err.to_string(), "no TLS origin given (--tls-origin)");
        assert_eq!(origin_of(Kind::TunKeep, &load()).unwrap().port(), 8080);
    }
}
