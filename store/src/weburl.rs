//! URL sanitising: what an agent or a refused request names is stored and shown without
//! credentials, query strings or fragments, which can carry tokens.

use crate::host::{Host, HostError};

/// Why a URL cannot be put on a card.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    /// Not parseable as an absolute URL.
    #[error("not a valid absolute URL")]
    Malformed,
    /// Anything but http and https.
    #[error("only http and https URLs can be approved")]
    Scheme,
    /// `user:pass@` in the URL: a credential must never travel on a card.
    #[error("URLs must not carry credentials")]
    Credentials,
    /// The host did not normalise.
    #[error("{0}")]
    Host(#[from] HostError),
    /// No host at all.
    #[error("URL has no host")]
    NoHost,
}

/// An http(s) URL reduced to `scheme://host[:port]/path`, with the host normalised.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SanitizedUrl {
    /// The URL's normalised host (what approvals key on).
    pub host: Host,
    /// The port, explicit or the scheme's default.
    pub port: u16,
    /// The display form, without userinfo, query or fragment.
    pub text: String,
}

impl SanitizedUrl {
    /// Parses a URL named by an agent. Credentials are an error (the agent must not send them
    /// through us); query and fragment are silently dropped.
    pub fn parse(input: &str) -> Result<Self, UrlError> {
        let url = url::Url::parse(input.trim()).map_err(|_| UrlError::Malformed)?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(UrlError::Scheme);
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(UrlError::Credentials);
        }
        let raw_host = url.host_str().ok_or(UrlError::NoHost)?;
        let host = Host::parse(raw_host)?;
        let port = url.port_or_known_default().unwrap_or(80);
        Ok(Self::from_parts(url.scheme(), &host, port, url.path()))
    }

    /// Builds the display form from parts the proxy already parsed (the refusal sample URL);
    /// `path` may carry a query, which is cut here.
    pub fn from_parts(scheme: &str, host: &Host, port: u16, path: &str) -> Self {
        let path = path.split(['?', '#']).next().unwrap_or("");
        let path = if path.starts_with('/') { path } else { "/" };
        let default = matches!((scheme, port), ("http", 80) | ("https", 443));
        let text = if default {
            format!("{scheme}://{host}{path}")
        } else {
            format!("{scheme}://{host}:{port}{path}")
        };
        Self {
            host: host.clone(),
            port,
            text,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_query_fragment_and_normalises_host() -> Result<(), UrlError> {
        let u = SanitizedUrl::parse("https://Files.Example.com./data.csv?token=abc#frag")?;
        assert_eq!(u.text, "https://files.example.com/data.csv");
        assert_eq!(u.host.as_str(), "files.example.com");
        assert_eq!(u.port, 443);
        let u = SanitizedUrl::parse("http://example.org:8080")?;
        assert_eq!(u.text, "http://example.org:8080/");
        Ok(())
    }

    #[test]
    fn rejects_what_cannot_be_approved() {
        assert_eq!(
            SanitizedUrl::parse("ftp://example.com/x"),
            Err(UrlError::Scheme)
        );
        assert_eq!(
            SanitizedUrl::parse("https://u:p@example.com/"),
            Err(UrlError::Credentials)
        );
        assert_eq!(
            SanitizedUrl::parse("https://u@example.com/"),
            Err(UrlError::Credentials)
        );
        assert_eq!(SanitizedUrl::parse("not a url"), Err(UrlError::Malformed));
        assert_eq!(
            SanitizedUrl::parse("file:///etc/passwd"),
            Err(UrlError::Scheme)
        );
    }

    #[test]
    fn from_parts_cuts_query() {
        let h = Host::parse("example.com").unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(
            SanitizedUrl::from_parts("http", &h, 80, "/a?b=c").text,
            "http://example.com/a"
        );
        assert_eq!(
            SanitizedUrl::from_parts("http", &h, 81, "").text,
            "http://example.com:81/"
        );
    }
}
