//! Parses `--proxy-url` into where to dial and how to rebuild the URL around another address.
//!
//! Accepted: `http://[USER[:PASS]@]HOST[:PORT][/]` and the same with `https://`. The launcher
//! relays bytes, so an `https://` proxy works through the forwarder too and the scheme is kept
//! in the URL the command sees; note that the command's TLS client then checks the proxy's
//! certificate against `127.0.0.1`. Anything else (other schemes, no host, a path, a query) is
//! an error before anything runs. Error messages never repeat the URL: it carries a secret.

use crate::error::SandboxError;

/// The proxy named by `--proxy-url`, split into the parts the launcher needs.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct ProxyUrl {
    /// `http` or `https`.
    scheme: &'static str,
    /// `USER` or `USER:PASS` exactly as written (percent-encoding kept), without the `@`.
    userinfo: Option<String>,
    /// `HOST:PORT` to dial (IPv6 hosts in brackets), the port defaulted from the scheme.
    authority: String,
}

impl std::fmt::Debug for ProxyUrl {
    // The userinfo is the turn's credential: never print it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyUrl")
            .field("scheme", &self.scheme)
            .field("userinfo", &self.userinfo.as_ref().map(|_| "<redacted>"))
            .field("authority", &self.authority)
            .finish()
    }
}

impl ProxyUrl {
    /// Parses and validates `--proxy-url`.
    pub(crate) fn parse(raw: &str) -> Result<Self, SandboxError> {
        let bad = |why: &str| SandboxError::InvalidProxyUrl(why.to_owned());
        let url = url::Url::parse(raw).map_err(|e| bad(&format!("not a URL ({e})")))?;
        let (scheme, default_port) = match url.scheme() {
            "http" => ("http", 80),
            "https" => ("https", 443),
            _ => return Err(bad("the scheme must be http:// (or https://)")),
        };
        let host = match url.host_str() {
            Some(h) if !h.is_empty() => h.to_owned(),
            _ => return Err(bad("no host")),
        };
        if !matches!(url.path(), "" | "/") || url.query().is_some() || url.fragment().is_some() {
            return Err(bad("a proxy URL has no path, query or fragment"));
        }
        let userinfo = match (url.username(), url.password()) {
            ("", None) => None,
            (user, None) => Some(user.to_owned()),
            (user, Some(pass)) => Some(format!("{user}:{pass}")),
        };
        let port = url.port().unwrap_or(default_port);
        Ok(Self {
            scheme,
            userinfo,
            authority: format!("{host}:{port}"),
        })
    }

    /// `HOST:PORT` of the proxy, for the outside half to dial.
    pub(crate) fn authority(&self) -> &str {
        &self.authority
    }

    /// The proxy URL with its address replaced by `authority`, keeping scheme and credential.
    pub(crate) fn with_authority(&self, authority: &str) -> String {
        match &self.userinfo {
            Some(userinfo) => format!("{}://{userinfo}@{authority}", self.scheme),
            None => format!("{}://{authority}", self.scheme),
        }
    }

    /// Whether the proxy is spoken to in plain HTTP (`http://`), as the capture does.
    pub(crate) fn is_plain_http(&self) -> bool {
        self.scheme == "http"
    }

    /// The `Proxy-Authorization` header value for the URL's credential, as a client builds it
    /// from the same URL: `Basic base64(user:pass)` with the percent-encoding undone.
    pub(crate) fn basic_authorization(&self) -> Option<String> {
        use base64::Engine as _;
        let userinfo = self.userinfo.as_ref()?;
        let (user, pass) = userinfo.split_once(':').unwrap_or((userinfo, ""));
        let mut plain: Vec<u8> = percent_encoding::percent_decode_str(user).collect();
        plain.push(b':');
        plain.extend(percent_encoding::percent_decode_str(pass));
        Some(format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(plain)
        ))
    }

    /// The proxy URL itself, normalised (what `--no-isolate` hands to the command).
    pub(crate) fn direct(&self) -> String {
        self.with_authority(&self.authority)
    }
}

#[cfg(test)]
#[allow(clippy::panic)]
mod tests {
    use super::*;

    fn ok(raw: &str) -> ProxyUrl {
        match ProxyUrl::parse(raw) {
            Ok(url) => url,
            Err(e) => panic!("{raw}: {e}"),
        }
    }

    fn err(raw: &str) -> String {
        match ProxyUrl::parse(raw) {
            Ok(url) => panic!("{raw} was accepted as {url:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn keeps_the_credential_exactly_and_defaults_the_port() {
        let url = ok("http://turn-1:s3cr%40t%3A@proxy.example:3128");
        assert_eq!(url.authority(), "proxy.example:3128");
        assert_eq!(
            url.with_authority("127.0.0.1:4000"),
            "http://turn-1:s3cr%40t%3A@127.0.0.1:4000"
        );
        assert_eq!(ok("http://gate/").authority(), "gate:80");
        assert_eq!(ok("http://gate").direct(), "http://gate:80");
        assert_eq!(ok("https://u:p@gate").direct(), "https://u:p@gate:443");
        assert_eq!(ok("http://user@[::1]:9").direct(), "http://user@[::1]:9");
    }

    #[test]
    fn rejects_what_is_not_an_http_proxy_without_echoing_the_secret() {
        for (raw, why) in [
            ("ftp://u:topsecret@gate:21", "scheme"),
            ("socks5://gate:1080", "scheme"),
            ("gate:3128", "scheme"),
            ("not a url", "not a URL"),
            ("", "not a URL"),
            ("http://", "not a URL"),
            ("http://u:topsecret@:80", "not a URL"),
            ("http://gate:99999", "not a URL"),
            ("http://gate:3128/path", "no path"),
            ("http://gate:3128/?q=1", "no path"),
            ("http://u:topsecret@gate:3128/#x", "no path"),
        ] {
            let message = err(raw);
            assert!(message.contains(why), "{raw}: {message}");
            assert!(!message.contains("topsecret"), "{raw}: {message}");
            assert!(!message.contains('\n'), "{raw}: {message}");
        }
    }

    #[test]
    fn basic_authorization_decodes_the_userinfo_as_clients_do() {
        // base64("turn-7:s3cr@t")
        assert_eq!(
            ok("http://turn-7:s3cr%40t@gate:1")
                .basic_authorization()
                .as_deref(),
            Some("Basic dHVybi03OnMzY3JAdA==")
        );
        // base64("solo:")
        assert_eq!(
            ok("http://solo@gate:1").basic_authorization().as_deref(),
            Some("Basic c29sbzo=")
        );
        assert_eq!(ok("http://gate:1").basic_authorization(), None);
        assert!(ok("http://gate:1").is_plain_http());
        assert!(!ok("https://gate:1").is_plain_http());
    }

    #[test]
    fn debug_hides_the_credential() {
        let shown = format!("{:?}", ok("http://turn:topsecret@gate:1"));
        assert!(!shown.contains("topsecret"), "{shown}");
    }
}
