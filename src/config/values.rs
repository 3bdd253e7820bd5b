//! The second step's value parsers: durations, sizes, addresses, URLs and keys, each
//! returning one error line that names the setting as the user wrote it.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Result, anyhow, bail};
use egressgate_store::Host;

/// A duration setting: plain seconds or humantime (`30s`, `15m`, `1h`, `7d`).
pub fn duration(name: &str, v: &Option<String>, default: Duration) -> Result<Duration> {
    match v {
        None => Ok(default),
        Some(s) => {
            let s = s.trim();
            if let Ok(secs) = s.parse::<u64>() {
                return Ok(Duration::from_secs(secs));
            }
            humantime::parse_duration(s)
                .map_err(|e| anyhow!("{name} {s:?}: {e} (use e.g. 30s, 15m, 1h, 7d)"))
        }
    }
}

/// A size setting: bytes, or a number with a decimal or binary unit (`400 KB`, `8 MiB`).
pub(super) fn size(name: &str, v: &Option<String>, default: u64) -> Result<u64> {
    let Some(s) = v else { return Ok(default) };
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| anyhow!("{name} {s:?}: expected a size like 400 KB or 8 MiB"))?;
    let mult = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" | "k" => 1000,
        "kib" => 1024,
        "mb" | "m" => 1_000_000,
        "mib" => 1024 * 1024,
        "gb" | "g" => 1_000_000_000,
        "gib" => 1024 * 1024 * 1024,
        other => bail!("{name} {s:?}: unknown unit {other:?}"),
    };
    n.checked_mul(mult)
        .ok_or_else(|| anyhow!("{name} {s:?}: too large"))
}

/// A listener address `IP:PORT`, or `default` when unset.
pub(super) fn socket(name: &str, v: &Option<String>, default: &str) -> Result<SocketAddr> {
    let s = v.as_deref().unwrap_or(default);
    s.parse()
        .map_err(|_| anyhow!("{name} {s:?}: expected IP:PORT (e.g. 127.0.0.1:3128)"))
}

/// A host name, normalised as every plane normalises it.
pub(super) fn host(what: &str, s: &str) -> Result<Host> {
    Host::parse(s).map_err(|e| anyhow!("{what} {s:?}: {e}"))
}

/// hyper cannot buffer less than 8 KiB, so a smaller limit is an error rather than silently
/// raised.
pub(super) fn header_bytes(name: &str, v: &Option<String>, default: usize) -> Result<usize> {
    let n = usize::try_from(size(name, v, default as u64)?)?;
    if n < 8192 {
        bail!("{name} must be at least 8192 (8 KiB)");
    }
    Ok(n)
}

/// A count that must be at least 1.
pub(super) fn positive(name: &str, v: Option<i64>, default: i64) -> Result<i64> {
    match v {
        Some(n) if n < 1 => bail!("{name} must be at least 1"),
        Some(n) => Ok(n),
        None => Ok(default),
    }
}

/// `host:port` (a scheme or path is tolerated and dropped).
pub(super) fn public_url(name: &str, u: &str) -> Result<String> {
    let rest = u.strip_prefix("http://").unwrap_or(u).trim_end_matches('/');
    let (h, port) = rest
        .rsplit_once(':')
        .ok_or_else(|| anyhow!("{name} {u:?}: expected host:port"))?;
    if h.is_empty() || h.contains(['/', '@']) || port.parse::<u16>().map_or(true, |p| p == 0) {
        bail!("{name} {u:?}: expected host:port");
    }
    Ok(rest.to_owned())
}

/// A database URL with its password blanked, for error messages.
pub fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => url.to_owned(),
    }
}

/// `--cors-origin`: exactly `scheme://host[:port]`, as a browser sends it in `Origin`.
pub(super) fn cors_origin(name: &str, o: &str) -> Result<String> {
    let u = url::Url::parse(o).map_err(|e| anyhow!("{name} {o:?}: {e}"))?;
    let origin = u.origin().ascii_serialization();
    if !matches!(u.scheme(), "http" | "https") || origin != o.trim_end_matches('/') {
        bail!(
            "{name} {o:?}: expected an origin such as https://app.example.com (scheme, host and port only)"
        );
    }
    Ok(origin)
}

/// `--control-public-url`: an http(s) URL without query or fragment; kept without a
/// trailing slash so paths can be appended.
pub(super) fn control_public_url(name: &str, u: &str) -> Result<String> {
    let parsed = url::Url::parse(u).map_err(|e| anyhow!("{name} {u:?}: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https")
        || parsed.query().is_some()
        || parsed.fragment().is_some()
        || parsed.host_str().is_none()
    {
        bail!("{name} {u:?}: expected http(s)://host[:port][/path]");
    }
    Ok(u.trim_end_matches('/').to_owned())
}

/// `--mcp-state-key`: at least 32 bytes of key (hex is decoded, anything else taken as text).
pub fn mcp_state_key(name: &str, k: &str) -> Result<egressgate_control::settings::StateKey> {
    let bytes = hex::decode(k).unwrap_or_else(|_| k.as_bytes().to_vec());
    if bytes.len() < 32 {
        bail!("{name}: too short; give at least 32 bytes (64 hex digits)");
    }
    Ok(egressgate_control::settings::StateKey(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cors_origins_are_bare_origins() {
        let n = "--cors-origin";
        assert_eq!(
            cors_origin(n, "https://app.example.com").ok().as_deref(),
            Some("https://app.example.com")
        );
        assert_eq!(
            cors_origin(n, "http://localhost:5173").ok().as_deref(),
            Some("http://localhost:5173")
        );
        for bad in [
            "app.example.com",
            "https://app.example.com/path",
            "ftp://x.example",
            "*",
            "https://a.example.com?x",
        ] {
            assert!(cors_origin(n, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn public_url_and_state_key() {
        let n = "--x";
        assert_eq!(
            control_public_url(n, "https://gate.example.com/")
                .ok()
                .as_deref(),
            Some("https://gate.example.com")
        );
        assert!(control_public_url(n, "gate.example.com").is_err());
        assert!(control_public_url(n, "https://gate.example.com/?a").is_err());
        assert!(mcp_state_key(n, "short").is_err());
        assert_eq!(
            mcp_state_key(n, &"ab".repeat(32)).map(|k| k.0.len()).ok(),
            Some(32)
        );
    }
}
