//! One HTTP/1.1 POST over the vetted way out, for every receiver the outbox or the Slack
//! front end talks to (webhook endpoints, Slack's Web API, incoming webhooks, a click's
//! `response_url`): the request built from a checked [`Target`], the answer's status and a
//! bounded body, all within a timeout.

use std::time::Duration;

use axum::body::Bytes;
use http_body_util::{BodyExt as _, Full, Limited};

use super::Egress;
use egressgate_store::Host;

/// Most of an answer's body read (Slack's answers are small; webhooks' bodies are ignored).
const ANSWER_MAX_BYTES: usize = 64 * 1024;

/// What to POST.
pub struct Post<'a> {
    /// Where.
    pub target: &'a Target,
    /// `Content-Type`.
    pub content_type: &'static str,
    /// Further headers (signatures, `Authorization`).
    pub headers: Vec<(&'static str, String)>,
    /// The body.
    pub body: String,
}

/// The answer: its status and (bounded) body.
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// At most [`ANSWER_MAX_BYTES`] of the body.
    pub body: Bytes,
}

/// Sends `post` within `timeout`; the error says why no answer came (never a header value).
pub async fn post(
    egress: &dyn Egress,
    post: Post<'_>,
    timeout: Duration,
) -> Result<Answer, String> {
    match tokio::time::timeout(timeout, send(egress, post)).await {
        Err(_) => Err(format!("timed out after {timeout:?}")),
        Ok(answer) => answer,
    }
}

async fn send(egress: &dyn Egress, post: Post<'_>) -> Result<Answer, String> {
    let target = post.target;
    let conn = egress
        .connect(&target.host, target.port, target.tls)
        .await?;
    let io = hyper_util::rt::TokioIo::new(conn);
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| format!("HTTP handshake: {e}"))?;
    let driver = tokio::spawn(connection);
    let default_port = if target.tls { 443 } else { 80 };
    let host = if target.port == default_port {
        target.host.to_string()
    } else {
        format!("{}:{}", target.host, target.port)
    };
    let mut req = hyper::Request::post(target.path.as_str())
        .header(hyper::header::HOST, host)
        .header(hyper::header::CONTENT_TYPE, post.content_type)
        .header(hyper::header::USER_AGENT, "egressgate");
    for (name, value) in post.headers {
        req = req.header(name, value);
    }
    let req = req
        .body(Full::new(Bytes::from(post.body)))
        .map_err(|_| "request: a header value is not valid".to_owned())?;
    let answer = sender.send_request(req).await;
    let result = match answer {
        Ok(r) => {
            let status = r.status().as_u16();
            let body = Limited::new(r.into_body(), ANSWER_MAX_BYTES)
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            Ok(Answer { status, body })
        }
        Err(e) => Err(format!("sending: {e}")),
    };
    driver.abort();
    result
}

/// A receiver's URL (a webhook endpoint, Slack's API, an incoming webhook), checked: `http` or `https`, a host name (not an address: like the
/// proxy, a literal address is refused), no credentials, no fragment, not internal-looking.
#[derive(Clone, Debug)]
pub struct Target {
    /// The host to resolve and vet.
    pub host: Host,
    /// Port (the scheme's default when absent).
    pub port: u16,
    /// `https`.
    pub tls: bool,
    /// Path and query of the request.
    pub path: String,
}

impl Target {
    /// Parses and checks `url`; the error is the message for a `422`.
    pub fn parse(url: &str, internal_suffixes: &[Host]) -> Result<Self, String> {
        let u = url::Url::parse(url).map_err(|e| format!("url: not a URL ({e})"))?;
        let tls = match u.scheme() {
            "https" => true,
            "http" => false,
            s => return Err(format!("url: the scheme must be http or https, not {s}")),
        };
        if !u.username().is_empty() || u.password().is_some() {
            return Err("url: credentials in the URL are not accepted".into());
        }
        if u.fragment().is_some() {
            return Err("url: a fragment is never sent; remove it".into());
        }
        let host = match u.host() {
            Some(url::Host::Domain(d)) => Host::parse(d).map_err(|e| format!("url: {e}"))?,
            Some(_) => {
                return Err(
                    "url: use a host name, not an address (an internal receiver: a name \
                            through --resolve, its range through --allow-cidr)"
                        .into(),
                );
            }
            None => return Err("url: no host".into()),
        };
        if host.is_internal(internal_suffixes) {
            return Err(format!("url: {host} is an internal name"));
        }
        let port = u
            .port_or_known_default()
            .unwrap_or(if tls { 443 } else { 80 });
        let path = match u.query() {
            Some(q) => format!("{}?{q}", u.path()),
            None => u.path().to_owned(),
        };
        Ok(Self {
            host,
            port,
            tls,
            path,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_checked() {
        let ok = Target::parse("https://hooks.example.com/in?x=1", &[]).map(|t| t.path);
        assert_eq!(ok.as_deref(), Ok("/in?x=1"));
        for bad in [
            "ftp://hooks.example.com/",
            "https://user:pw@hooks.example.com/",
            "https://10.0.0.1/",
            "http://[::1]/",
            "http://localhost/",
            "http://db.internal/",
            "https://hooks.example.com/#f",
            "not a url",
        ] {
            assert!(Target::parse(bad, &[]).is_err(), "{bad}");
        }
    }
}
