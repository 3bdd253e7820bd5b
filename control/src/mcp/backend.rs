//! How the MCP tools reach the control API: in the control process, the API's own router
//! (no socket, the same handlers); from `egressgate mcp` (stdio), HTTP to `--control-url`.
//! Either way every answer comes from the REST handlers, so there is one approval logic.

use axum::body::Body;
use axum::http::{HeaderValue, Method, Request, header};
use http_body_util::{BodyExt as _, Limited};
use serde_json::Value;
use tower::ServiceExt as _;

/// Largest API answer the MCP server reads.
const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;
/// How long one call to a remote control API may take, connect to last byte: a hung control
/// plane becomes a tool error, not a tool call that never returns.
const HTTP_CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Why a call did not get an HTTP answer.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The control API could not be reached or its answer could not be read.
    #[error("the control API is unreachable: {0}")]
    Unreachable(String),
}

/// One API answer: status and JSON body (`Null` when empty or not JSON).
#[derive(Debug, Clone)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// The body.
    pub body: Value,
}

/// Where API calls go.
#[derive(Clone)]
pub enum Backend {
    /// The API router of this process, called with the runtime token the MCP request bore.
    Router {
        /// The API (without `/mcp`).
        router: axum::Router,
        /// `Bearer …` as presented.
        authorization: HeaderValue,
    },
    /// A control plane over HTTP (`egressgate mcp --control-url`).
    Http {
        /// `host:port` to connect to.
        authority: String,
        /// Path prefix of the API (usually empty).
        base_path: String,
        /// `Bearer …` with `EGRESSGATE_RUNTIME_TOKEN`.
        authorization: HeaderValue,
    },
}

impl Backend {
    /// A backend for `control_url` (`http://host:port[/prefix]`); https is not spoken here
    /// (run the MCP server next to the control plane, or put a local TLS terminator in front).
    pub fn http(control_url: &str, token: &str) -> Result<Self, String> {
        let u = url::Url::parse(control_url).map_err(|e| format!("--control-url: {e}"))?;
        if u.scheme() != "http" {
            return Err("--control-url: only http:// URLs are supported".into());
        }
        let host = u.host_str().ok_or("--control-url: no host")?;
        let port = u.port_or_known_default().unwrap_or(80);
        let authority = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let authorization = HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| "EGRESSGATE_RUNTIME_TOKEN is not a valid header value".to_owned())?;
        Ok(Self::Http {
            authority,
            base_path: u.path().trim_end_matches('/').to_owned(),
            authorization,
        })
    }

    /// Sends one request and reads the JSON answer.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Answer, BackendError> {
        let bytes = body.map(|b| b.to_string()).unwrap_or_default();
        match self {
            Self::Router {
                router,
                authorization,
            } => {
                let req = request(method, path, authorization, None, bytes)?;
                let resp = router
                    .clone()
                    .oneshot(req)
                    .await
                    .map_err(|e| BackendError::Unreachable(e.to_string()))?;
                read(resp).await
            }
            Self::Http {
                authority,
                base_path,
                authorization,
            } => {
                let full = format!("{base_path}{path}");
                let req = request(method, &full, authorization, Some(authority), bytes)?;
                tokio::time::timeout(HTTP_CALL_TIMEOUT, over_http(authority, req))
                    .await
                    .map_err(|_| BackendError::Unreachable("timed out".into()))?
            }
        }
    }
}

/// One request on a fresh HTTP/1.1 connection to `authority`.
async fn over_http(authority: &str, req: Request<Body>) -> Result<Answer, BackendError> {
    let stream = tokio::net::TcpStream::connect(authority)
        .await
        .map_err(|e| BackendError::Unreachable(e.to_string()))?;
    let io = hyper_util::rt::TokioIo::new(stream);
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| BackendError::Unreachable(e.to_string()))?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "control API connection ended");
        }
    });
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| BackendError::Unreachable(e.to_string()))?;
    read(resp).await
}

fn request(
    method: Method,
    path: &str,
    authorization: &HeaderValue,
    host: Option<&str>,
    body: String,
) -> Result<Request<Body>, BackendError> {
    let mut b = Request::builder()
        .method(method)
        .uri(path)
        .header(header::AUTHORIZATION, authorization.clone());
    if let Some(h) = host {
        b = b.header(header::HOST, h);
    }
    if !body.is_empty() {
        b = b.header(header::CONTENT_TYPE, "application/json");
    }
    b.body(Body::from(body))
        .map_err(|e| BackendError::Unreachable(e.to_string()))
}

async fn read<B>(resp: axum::http::Response<B>) -> Result<Answer, BackendError>
where
    B: hyper::body::Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let status = resp.status().as_u16();
    let bytes = Limited::new(resp.into_body(), MAX_ANSWER_BYTES)
        .collect()
        .await
        .map_err(|e| BackendError::Unreachable(format!("reading the answer: {e}")))?
        .to_bytes();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Ok(Answer { status, body })
}
