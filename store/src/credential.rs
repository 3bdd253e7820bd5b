//! The turn credential's wire form, `Basic base64(turn_id:secret)`: what the proxy reads from
//! `Proxy-Authorization` and the control plane from `Authorization` on the one endpoint a
//! sandbox may call (its own policy). One parser, so both read it alike.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// `Basic base64(id:secret)` → `(id, secret)`; `None` for any other scheme or a malformed
/// value.
pub fn parse_basic(value: &[u8]) -> Option<(String, String)> {
    let value = std::str::from_utf8(value).ok()?;
    let (scheme, b64) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let raw = String::from_utf8(STANDARD.decode(b64.trim()).ok()?).ok()?;
    let (id, secret) = raw.split_once(':')?;
    Some((id.to_owned(), secret.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_parsing() {
        let h = format!("Basic {}", STANDARD.encode("t_x:s3cret"));
        assert_eq!(
            parse_basic(h.as_bytes()),
            Some(("t_x".to_owned(), "s3cret".to_owned()))
        );
        assert_eq!(parse_basic(b"Bearer abc"), None);
        assert_eq!(parse_basic(b"Basic !!!"), None);
        assert_eq!(
            parse_basic(format!("Basic {}", STANDARD.encode("nocolon")).as_bytes()),
            None
        );
    }
}
