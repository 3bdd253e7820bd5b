//! Parsing what the client asked for: a CONNECT authority (`host:port`) or an absolute-form
//! URI, into a normalised host and a port. Malformed targets are `400`, not refusals.

use egressgate_store::{Host, HostError};
use http::Uri;

/// A request's destination, normalised.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The normalised host (may still be an IP literal or internal name: deciding is later).
    pub host: Host,
    /// The port.
    pub port: u16,
}

/// Why a target could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// No `:port`, an empty host, or junk.
    #[error("malformed authority: expected host:port")]
    Authority,
    /// Port not a number in 1..=65535.
    #[error("invalid port")]
    Port,
    /// The host did not normalise.
    #[error("invalid host: {0}")]
    Host(#[from] HostError),
    /// Only `http://` URIs can be forwarded (HTTPS goes through CONNECT).
    #[error("only http:// URIs can be forwarded; use CONNECT for https")]
    Scheme,
    /// An origin-form request (`GET /path`): this is a proxy, not a web server.
    #[error("not a proxy request: use an absolute URI or CONNECT")]
    NotProxyRequest,
}

/// A CONNECT authority the test wrote, parsed (tests only: a bad one is the test's bug).
#[cfg(test)]
pub(crate) fn test_authority(s: &str) -> Target {
    parse_authority(s).unwrap_or_else(|e| unreachable!("{s}: {e}"))
}

/// Parses a CONNECT authority: `host:port` or `[v6]:port`. The port is mandatory.
pub fn parse_authority(s: &str) -> Result<Target, TargetError> {
    if s.contains(['@', '/', '?', '#']) || s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(TargetError::Authority);
    }
    let (host, port) = s.rsplit_once(':').ok_or(TargetError::Authority)?;
    if host.is_empty() || (host.contains(':') && !host.starts_with('[')) {
        return Err(TargetError::Authority);
    }
    Ok(Target {
        host: Host::parse(host)?,
        port: parse_port(port)?,
    })
}

fn parse_port(p: &str) -> Result<u16, TargetError> {
    if p.is_empty() || p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit()) {
        return Err(TargetError::Port);
    }
    match p.parse::<u16>() {
        Ok(0) | Err(_) => Err(TargetError::Port),
        Ok(n) => Ok(n),
    }
}

/// Parses an absolute-form request target (`http://host[:port]/path`).
pub fn parse_absolute(uri: &Uri) -> Result<Target, TargetError> {
    let Some(authority) = uri.authority() else {
        return Err(TargetError::NotProxyRequest);
    };
    match uri.scheme_str() {
        Some(s) if s.eq_ignore_ascii_case("http") => {}
        _ => return Err(TargetError::Scheme),
    }
    if authority.as_str().contains('@') {
        return Err(TargetError::Authority);
    }
    let port = match authority.port() {
        Some(p) => parse_port(p.as_str())?,
        None => 80,
    };
    Ok(Target {
        host: Host::parse(authority.host())?,
        port,
    })
}

/// Parses a `Host` header value the same way, defaulting the port to `default_port`.
pub fn parse_host_header(value: &str, default_port: u16) -> Result<Target, TargetError> {
    let has_port = match value.rfind(':') {
        Some(i) => !value[i..].contains(']'),
        None => false,
    };
    if has_port {
        parse_authority(value)
    } else {
        Ok(Target {
            host: Host::parse(value)?,
            port: default_port,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authority_forms() {
        let t = parse_authority("Example.COM.:443").unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!((t.host.as_str(), t.port), ("example.com", 443));
        let t = parse_authority("[::1]:8443").unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!((t.host.as_str(), t.port), ("[::1]", 8443));
        for bad in [
            "example.com",
            ":443",
            "example.com:",
            "example.com:0",
            "example.com:65536",
            "example.com:+1",
            "::1:443",
            "u@example.com:443",
            "exa mple.com:443",
            "a/b:443",
            "example.com:443:443",
            "[::1]",
            "[::1]:x",
        ] {
            assert!(parse_authority(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn absolute_forms() {
        let uri: Uri = "http://Files.Example.com:8080/a?b"
            .parse()
            .unwrap_or_default();
        let t = parse_absolute(&uri).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!((t.host.as_str(), t.port), ("files.example.com", 8080));
        let uri: Uri = "/just/a/path".parse().unwrap_or_default();
        assert_eq!(parse_absolute(&uri), Err(TargetError::NotProxyRequest));
        let uri: Uri = "https://example.com/".parse().unwrap_or_default();
        assert_eq!(parse_absolute(&uri), Err(TargetError::Scheme));
    }

    #[test]
    fn host_header_forms() {
        let t = parse_host_header("example.com", 80).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(t.port, 80);
        let t = parse_host_header("[::1]", 80).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!((t.host.as_str(), t.port), ("[::1]", 80));
        let t = parse_host_header("example.com:81", 80).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(t.port, 81);
    }
}
