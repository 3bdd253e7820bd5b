//! Longer than a room of one job (~400 lines) on purpose: it is mostly tables (79 cases), and
//! its harness lives here as no other suite sends requests this way.
//!
//! What a `read` grant lets through on an inspected host, tried as an attacker would, over
//! HTTP/1.1 and HTTP/2 through the real binary: `GET`/`HEAD`/`OPTIONS` without a body (a
//! `Content-Length: 0` is no body), and git's fetch `POST …/<repo>/git-upload-pack` with its
//! own content type on a plain path; every other request (a body on a read, a method
//! override in a header, a query key or a form, git's push service in any spelling, a fetch
//! path or content type that is not git's) is a recorded, approvable `method_not_allowed`
//! that never reaches the origin.
//!
//! Each test is a table of cases, sent one per connection over both protocols; `Table::run`
//! checks each answer, the refusal row (method, count) and what the origin saw.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use support::inspect::*;
use support::*;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// How a case's body is framed.
#[derive(Clone, Copy, Debug)]
enum Body {
    /// None at all (HTTP/2: `END_STREAM` on the `HEADERS` frame).
    None,
    /// `Content-Length` and the bytes.
    Sized(&'static str),
    /// HTTP/1.1 `Transfer-Encoding: chunked`; HTTP/2 `DATA` frames with no `content-length`.
    Streamed(&'static str),
}

/// Whether the gate must let a case through to the origin.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Want {
    Pass,
    Refused,
}
use Want::*;

/// One request of a table.
#[derive(Clone, Copy, Debug)]
struct Case {
    method: &'static str,
    target: &'static str,
    headers: &'static [(&'static str, &'static str)],
    body: Body,
    want: Want,
}

const fn case(method: &'static str, target: &'static str, want: Want) -> Case {
    Case {
        method,
        target,
        headers: &[],
        body: Body::None,
        want,
    }
}

const fn with(
    method: &'static str,
    target: &'static str,
    headers: &'static [(&'static str, &'static str)],
    body: Body,
    want: Want,
) -> Case {
    Case {
        method,
        target,
        headers,
        body,
        want,
    }
}

const GIT: &[(&str, &str)] = &[("content-type", "application/x-git-upload-pack-request")];
/// A fetch's body as git starts it (a pkt-line flush is enough for the table's origin).
const WANTS: Body = Body::Sized("0000");

/// An inspecting gate with a `read` site for [`HOST`] in front of the test's TLS origin, and a
/// turn.
struct Table {
    s: Setup,
    turn: Turn,
    refusals: i64,
}

impl Table {
    async fn new() -> Self {
        let s = setup(&[]).await;
        let site = serde_json::json!({"pattern": HOST, "inspect": true, "access": "read"});
        let r = add_site(&s.gate.api(), site).await;
        assert_eq!(r.status, 201, "{}", r.text());
        let turn = s.gate.api().turn("u", "c", &[]).await;
        Self {
            s,
            turn,
            refusals: 0,
        }
    }

    /// Sends every case over HTTP/1.1 and then over HTTP/2 and checks what came of it.
    async fn run(&mut self, cases: &[Case]) {
        for case in cases {
            for h2 in [false, true] {
                let seen = self.s.origin.requests().len();
                let r = if h2 {
                    self.over_h2(case).await
                } else {
                    self.over_h1(case).await
                };
                let what = format!("{} {case:?}", if h2 { "h2" } else { "h1" });
                match case.want {
                    Pass => {
                        assert_eq!(r.status, 200, "{what}: {}", r.text());
                        assert_eq!(self.s.origin.requests().len(), seen + 1, "{what}");
                    }
                    Refused => self.refused(&r, case.method, &what).await,
                }
                assert_eq!(
                    self.s.origin.requests().len(),
                    seen + usize::from(case.want == Pass),
                    "{what}: a refused request never reaches the origin"
                );
            }
        }
    }

    /// A `method_not_allowed` answer, recorded first with the request's method.
    async fn refused(&mut self, r: &Resp, method: &str, what: &str) {
        assert_eq!(r.status, 403, "{what}: {}", r.text());
        assert_eq!(
            r.header("x-egress-refused"),
            Some("method_not_allowed"),
            "{what}"
        );
        assert_eq!(r.header("x-egress-approvable"), Some("true"), "{what}");
        // Recorded before the answer: one look, no waiting.
        let api = self.s.gate.api();
        let row = wait_for_refusal(&api, &self.turn, "method_not_allowed", 0)
            .await
            .unwrap_or_else(|| panic!("{what}: not recorded"));
        self.refusals += 1;
        assert_eq!(row["count"], self.refusals, "{what}: recorded once: {row}");
        assert_eq!(row["method"], method, "{what}: {row}");
        assert_eq!(row["approvable"], true, "{what}");
    }

    /// The case as raw HTTP/1.1 through a tunnel's TLS; the answer (no body read for `HEAD`).
    async fn over_h1(&self, case: &Case) -> Resp {
        let mut raw = format!(
            "{} {} HTTP/1.1\r\nhost: {HOST}\r\n",
            case.method, case.target
        );
        for (k, v) in case.headers {
            raw.push_str(&format!("{k}: {v}\r\n"));
        }
        match case.body {
            Body::None => raw.push_str("connection: close\r\n\r\n"),
            Body::Sized(b) => raw.push_str(&format!(
                "content-length: {}\r\nconnection: close\r\n\r\n{b}",
                b.len()
            )),
            Body::Streamed(b) => raw.push_str(&format!(
                "transfer-encoding: chunked\r\nconnection: close\r\n\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
                b.len()
            )),
        }
        let mut tls = self.tls(&[b"http/1.1"]).await;
        tls.write_all(raw.as_bytes()).await.unwrap();
        let read = async {
            if case.method != "HEAD" {
                return read_response(&mut tls).await.unwrap();
            }
            let mut head = Vec::new();
            while !head.ends_with(b"\r\n\r\n") {
                head.push(tls.read_u8().await.unwrap());
            }
            let (status, headers) = parse_head(&head);
            Resp {
                status,
                headers,
                body: Vec::new(),
            }
        };
        tokio::time::timeout(Duration::from_secs(10), read)
            .await
            .expect("an answer in time")
    }

    /// The case as one HTTP/2 stream through a tunnel's TLS (ALPN `h2`).
    async fn over_h2(&self, case: &Case) -> Resp {
        use http_body_util::BodyExt as _;
        let mut send = h2_sender(self.tls(&[b"h2"]).await).await;
        let port = self.s.origin.addr.port();
        let mut req = http::Request::builder()
            .method(case.method)
            .uri(format!("https://{HOST}:{port}{}", case.target));
        for (k, v) in case.headers {
            req = req.header(*k, *v);
        }
        type Frames = http_body_util::combinators::BoxBody<bytes::Bytes, std::convert::Infallible>;
        let body: Frames = match case.body {
            Body::None => http_body_util::Empty::new().boxed(),
            Body::Sized(b) => http_body_util::Full::new(bytes::Bytes::from(b)).boxed(),
            Body::Streamed(b) => {
                let frame = Ok(hyper::body::Frame::data(bytes::Bytes::from(b)));
                http_body_util::StreamBody::new(futures_util::stream::iter([frame])).boxed()
            }
        };
        let resp = tokio::time::timeout(
            Duration::from_secs(10),
            send.send_request(req.body(body).unwrap()),
        )
        .await
        .expect("an answer in time")
        .unwrap();
        let status = resp.status().as_u16();
        let headers = resp
            .headers()
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_owned()))
            .collect();
        let body = resp
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec();
        Resp {
            status,
            headers,
            body,
        }
    }

    /// A tunnel to [`HOST`] with the client's TLS (trusting the deployment CA) on it.
    async fn tls(&self, alpn: &[&[u8]]) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
        let authority = format!("{HOST}:{}", self.s.origin.addr.port());
        let (r, stream) = connect(self.s.gate.proxy(), &self.turn, &authority).await;
        assert_eq!(r.status, 200, "CONNECT: {}", r.text());
        let client: Arc<rustls::ClientConfig> = client_trusting(&self.s.ca_pem, alpn);
        handshake(stream, client, HOST).await.unwrap()
    }
}

#[tokio::test]
async fn read_refuses_any_body_on_get_head_and_options() {
    let mut t = Table::new().await;
    let zero: &[(&str, &str)] = &[("content-length", "0")];
    let expect: &[(&str, &str)] = &[("expect", "100-continue")];
    // (A `HEAD` that passes is in the unit tests: the table's origin answers it with a body.)
    t.run(&[
        case("GET", "/data", Pass),
        case("OPTIONS", "/data", Pass),
        with("GET", "/data", zero, Body::None, Pass),
        with("GET", "/data", &[], Body::Sized("hello"), Refused),
        with("HEAD", "/data", &[], Body::Sized("hello"), Refused),
        with("OPTIONS", "/data", &[], Body::Sized("hello"), Refused),
        with("GET", "/data", &[], Body::Streamed("hello"), Refused),
        with("HEAD", "/data", &[], Body::Streamed("hello"), Refused),
        with("OPTIONS", "/data", &[], Body::Streamed("hello"), Refused),
        with("GET", "/data", expect, Body::Sized("hello"), Refused),
        with("GET", "/data", expect, Body::Streamed("hello"), Refused),
        with("PUT", "/data", &[], Body::Sized("hello"), Refused),
        with("DELETE", "/data", &[], Body::None, Refused),
    ])
    .await;
}

#[tokio::test]
async fn read_refuses_a_get_body_before_any_100_continue_and_without_reading_it() {
    let t = Table::new().await;
    let mut tls = t.tls(&[b"http/1.1"]).await;
    let head = format!(
        "GET /data HTTP/1.1\r\nhost: {HOST}\r\ncontent-length: 5\r\nexpect: 100-continue\r\n\r\n"
    );
    tls.write_all(head.as_bytes()).await.unwrap();
    let r = tokio::time::timeout(Duration::from_secs(10), read_response(&mut tls))
        .await
        .expect("an answer without the body being sent")
        .unwrap();
    // The first answer is the refusal, no 100 Continue.
    assert_refused(&r, "method_not_allowed");
    assert!(
        t.s.origin.requests().is_empty(),
        "{:?}",
        t.s.origin.requests()
    );
}

#[tokio::test]
async fn read_refuses_method_overrides_in_headers_queries_and_forms() {
    let mut t = Table::new().await;
    const QUERIES: [&str; 11] = [
        "/data?_method=PUT",
        "/data?a=1&_METHOD=put",
        "/data?a=1;_method=put",
        "/data?%5Fmethod=PUT",
        "/data?%255Fmethod=PUT",
        "/data?_method%3DPUT",
        "/data?a=1%26_method%3DPUT",
        "/data?_method%5B%5D=PUT",
        "/data?.method=PUT",
        "/data?+_method=PUT",
        "/data?_method",
    ];
    const HEADERS: [&[(&str, &str)]; 7] = [
        &[("x-http-method-override", "PUT")],
        &[("X-HTTP-Method", "DELETE")],
        &[("x-method-override", "PATCH")],
        &[("x_http_method_override", "PUT")],
        &[("x-http-method-override", "GET")],
        &[("x-original-url", "/upload")],
        &[("x-rewrite-url", "/upload")],
    ];
    const FORM: &[(&str, &str)] = &[("content-type", "application/x-www-form-urlencoded")];
    const FETCH_OVERRIDDEN: &[(&str, &str)] = &[
        ("content-type", "application/x-git-upload-pack-request"),
        ("x-http-method-override", "PUT"),
    ];
    let mut cases = vec![
        case("GET", "/data?payment_method=card&method=x", Pass),
        case("HEAD", "/data?_method=DELETE", Refused),
        with("POST", "/form", FORM, Body::Sized("_method=PUT"), Refused),
        with("GET", "/form", FORM, Body::Sized("_method=PUT"), Refused),
        with(
            "POST",
            "/r.git/git-upload-pack?_method=PUT",
            GIT,
            WANTS,
            Refused,
        ),
        with(
            "POST",
            "/r.git/git-upload-pack",
            FETCH_OVERRIDDEN,
            WANTS,
            Refused,
        ),
    ];
    cases.extend(QUERIES.iter().map(|q| case("GET", q, Refused)));
    cases.extend(
        HEADERS
            .iter()
            .map(|h| with("GET", "/data", h, Body::None, Refused)),
    );
    t.run(&cases).await;
}

#[tokio::test]
async fn read_refuses_git_push_discovery_in_any_spelling() {
    let mut t = Table::new().await;
    const PUSH: [&str; 19] = [
        "/r.git/info/refs?service=git-receive-pack",
        "/r.git/info/refs?service=git%2Dreceive-pack",
        "/r.git/info/refs?service=git%2dreceive-pack",
        "/r.git/info/refs?service=git%252Dreceive-pack",
        "/r.git/info/refs?service=GIT-RECEIVE-PACK",
        "/r.git/info/refs?service=git-receive-pack%20",
        "/r.git/info/refs/?service=git-receive-pack",
        "/r.git//info/refs?service=git-receive-pack",
        "/r.git/./info/refs?service=git-receive-pack",
        "/r.git/x/../info/refs?service=git-receive-pack",
        "/r.git/info/refs;p?service=git-receive-pack",
        "/r.git/INFO/REFS?service=git-receive-pack",
        "/r.git/info/%72efs?service=git-receive-pack",
        "/r.git/info/refs?service%3Dgit-receive-pack",
        "/r.git/info/refs?x=1%26service=git-receive-pack",
        "/r.git/info/refs?service=git-receive-pack&x=1",
        "/r.git/info/refs?service=git-upload-pack&service=git-receive-pack",
        "/r.git/info/refs?service=git-receive-pack&service=git-upload-pack",
        "/r.git/git-receive-pack",
    ];
    let mut cases = vec![
        case("GET", "/r.git/info/refs?service=git-upload-pack", Pass),
        case("HEAD", "/r.git/info/refs?service=git-receive-pack", Refused),
        case("OPTIONS", "/r.git/git%2Dreceive-pack", Refused),
    ];
    cases.extend(PUSH.iter().map(|p| case("GET", p, Refused)));
    t.run(&cases).await;
}

#[tokio::test]
async fn read_lets_only_gits_own_fetch_post_through() {
    let mut t = Table::new().await;
    let receive: &[(&str, &str)] = &[("content-type", "application/x-git-receive-pack-request")];
    let two_types: &[(&str, &str)] = &[
        ("content-type", "application/x-git-upload-pack-request"),
        ("content-type", "text/plain"),
    ];
    let post = |target, headers, want| with("POST", target, headers, WANTS, want);
    t.run(&[
        post("/r.git/git-upload-pack", GIT, Pass),
        post("/org/r/git-upload-pack", GIT, Pass),
        post("/r.git/git-upload-pack", &[], Refused),
        post("/r.git/git-upload-pack", receive, Refused),
        post("/r.git/git-upload-pack", two_types, Refused),
        post("/git-upload-pack", GIT, Refused),
        post("/r.git/git-upload-pack/", GIT, Refused),
        post("/r.git//git-upload-pack", GIT, Refused),
        post("/r.git/./git-upload-pack", GIT, Refused),
        post("/x/../git-upload-pack", GIT, Refused),
        post("/r.git/git-receive-pack/../git-upload-pack", GIT, Refused),
        post(
            "/r.git%2F..%2Fgit-receive-pack/git-upload-pack",
            GIT,
            Refused,
        ),
        post("/r.git;x/git-upload-pack", GIT, Refused),
        post("/r.git/git-upload-pack;x", GIT, Refused),
        post("/r.git/GIT-UPLOAD-PACK", GIT, Refused),
        post("/r.git/git%2Dupload-pack", GIT, Refused),
        post("/r.git/git-upload-pack?x=1", GIT, Refused),
        post("/r.git/git-receive-pack", GIT, Refused),
        post("/upload", GIT, Refused),
        with("PUT", "/r.git/git-upload-pack", GIT, WANTS, Refused),
    ])
    .await;
}

#[tokio::test]
async fn read_refuses_a_get_body_in_plain_http_forwarding_too() {
    let plain = origin().await;
    let port = plain.addr.port();
    let gate = gate()
        .names(&[HOST])
        .reach(&plain)
        .args(&["--inspect", HOST])
        .start();
    let api = gate.api();
    let r = add_site(&api, serde_json::json!({"pattern": HOST, "access": "read"})).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let turn = api.turn("u", "c", &[]).await;
    let send = |extra: &'static str, body: &'static str| {
        let raw = format!(
            "GET http://{HOST}:{port}/data HTTP/1.1\r\nhost: {HOST}:{port}\r\nproxy-authorization: {}\r\n{extra}content-length: {}\r\nconnection: close\r\n\r\n{body}",
            turn.auth_header(),
            body.len()
        );
        let proxy = gate.proxy();
        async move { proxy_raw(proxy, &raw).await }
    };
    assert_eq!(send("", "").await.status, 200);
    assert_refused(&send("", "hello").await, "method_not_allowed");
    let r = send("x-http-method-override: PUT\r\n", "").await;
    assert_eq!(r.header("x-egress-refused"), Some("method_not_allowed"));
    assert_eq!(
        plain.requests().len(),
        1,
        "only the bodiless GET reached the origin"
    );
}
