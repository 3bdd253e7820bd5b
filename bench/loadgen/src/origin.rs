//! The loopback origin: HTTP/1.1 keep-alive server with a small answer (`/small`) and a bulk
//! endpoint (`/bulk?mib=N`) that streams N MiB of zeros with a content-length.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::BodyExt as _;
use http_body_util::Full;
use http_body_util::combinators::BoxBody;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// The small answer's body (the same bytes for every target).
pub const SMALL_BODY: &[u8] = b"hello from the bench origin\n";

/// Largest bulk body the origin serves (bounds a mistaken request).
const MAX_BULK_MIB: u64 = 4096;

const CHUNK: usize = 256 * 1024;

/// A body of `left` zero bytes, sent in 256 KiB frames sharing one buffer.
struct Bulk {
    left: u64,
    chunk: Bytes,
}

impl Body for Bulk {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        let n = usize::try_from(self.left.min(CHUNK as u64)).unwrap_or(CHUNK);
        self.left -= n as u64;
        Poll::Ready(Some(Ok(Frame::data(self.chunk.slice(..n)))))
    }

    fn is_end_stream(&self) -> bool {
        self.left == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.left)
    }
}

type OriginBody = BoxBody<Bytes, Infallible>;

fn answer(req: &Request<Incoming>, chunk: &Bytes) -> Response<OriginBody> {
    let path = req.uri().path();
    if path == "/small" {
        let mut r = Response::new(Full::new(Bytes::from_static(SMALL_BODY)).boxed());
        r.headers_mut().insert(
            "content-type",
            hyper::header::HeaderValue::from_static("text/plain"),
        );
        return r;
    }
    if path == "/bulk" {
        let mib = req
            .uri()
            .query()
            .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("mib=")))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(1)
            .min(MAX_BULK_MIB);
        let mut r = Response::new(
            Bulk {
                left: mib << 20,
                chunk: chunk.clone(),
            }
            .boxed(),
        );
        r.headers_mut().insert(
            "content-type",
            hyper::header::HeaderValue::from_static("application/octet-stream"),
        );
        return r;
    }
    let mut r = Response::new(Full::new(Bytes::from_static(b"not found\n")).boxed());
    *r.status_mut() = StatusCode::NOT_FOUND;
    r
}

/// Serves forever on `listen` (loopback only); prints `origin listening addr=…` on stderr.
pub async fn serve(listen: SocketAddr) -> std::io::Result<()> {
    let listener = TcpListener::bind(listen).await?;
    eprintln!("origin listening addr={}", listener.local_addr()?);
    let chunk = Bytes::from(vec![0u8; CHUNK]);
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                eprintln!("origin accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let chunk = chunk.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req: Request<Incoming>| {
                let r = answer(&req, &chunk);
                async move { Ok::<_, Infallible>(r) }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}
