//! Requests without a valid credential are limited per client address in memory, before the
//! database is asked about the credential: a missing, unknown or expired bearer token, a
//! console cookie of no session and a wrong sign-in token all count, and past the limit the
//! answer is `429 TOO_MANY_ATTEMPTS` with `Retry-After`. The env tokens are never limited, and
//! another address is not charged for the first one's failures.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::*;
use tokio::io::AsyncWriteExt as _;

/// One request from the local address `from`, with `headers`.
async fn send(api: &Api, from: &str, method: &str, path: &str, headers: &[(&str, &str)]) -> Resp {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
    let mut s = socket.connect(api.addr).await.unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nhost: {}\r\nconnection: close\r\n",
        api.addr
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    let body = if method == "POST" {
        r#"{"token":"not-the-admin-token"}"#
    } else {
        ""
    };
    if method == "POST" {
        req.push_str(&format!(
            "content-type: application/json\r\ncontent-length: {}\r\n",
            body.len()
        ));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).await.unwrap();
    read_response(&mut s).await.unwrap()
}

const REFUSALS: &str = "/v1/turns/t_AAAAAAAAAAAAAAAAAAAAAA/refusals";
const UNKNOWN: (&str, &str) = ("authorization", "Bearer not-a-token-of-this-gate-0123");

/// A turn's refusals read from `from` with `authorization` (`Bearer …`).
async fn refusals(api: &Api, from: &str, authorization: &str) -> Resp {
    send(
        api,
        from,
        "GET",
        REFUSALS,
        &[("authorization", authorization)],
    )
    .await
}

/// The limited address's bucket after its first `429`. It refills continuously (the default
/// 300 a minute is one failure every 200 ms), so on a slow machine a request may find a
/// refilled token and get its `401`; that spends the token, and the next is a `429` again.
/// [`Refilling::waits`] allows exactly as many `401`s as the time since the limit refilled.
struct Refilling {
    since: std::time::Instant,
    spent: u128,
}

impl Refilling {
    fn since_limited() -> Self {
        Self {
            since: std::time::Instant::now(),
            spent: 0,
        }
    }

    /// Asserts that `(what, method, path)` from the limited address meets `429`, after at
    /// most the `401`s its bucket refilled since the limit.
    async fn waits(
        &mut self,
        api: &Api,
        (what, method, path): (&str, &str, &str),
        headers: &[(&str, &str)],
    ) {
        loop {
            let r = send(api, "127.0.0.1", method, path, headers).await;
            if is_too_many(&r) {
                return;
            }
            assert_eq!(r.status, 401, "{what}: {}", r.text());
            self.spent += 1;
            let refilled = self.since.elapsed().as_millis() / 200;
            assert!(
                self.spent <= refilled,
                "{what}: {} failures answered 401 after the limit, but only {refilled} refilled",
                self.spent
            );
        }
    }
}

fn is_too_many(r: &Resp) -> bool {
    r.status == 429 && r.json()["error"]["code"] == "TOO_MANY_ATTEMPTS"
}

/// With the defaults (300 a minute), a guesser is stopped after about 300 unknown tokens; every
/// other kind of missing credential is then refused from that address too, while the env
/// tokens and another address are served.
#[tokio::test]
async fn a_token_guesser_is_stopped_before_the_database() {
    let g = gate().start();
    let api = g.api();
    let mut unauthorized = 0;
    let limited = loop {
        let r = send(&api, "127.0.0.1", "GET", REFUSALS, &[UNKNOWN]).await;
        if r.status != 401 {
            break r;
        }
        assert_eq!(r.json()["error"]["code"], "UNAUTHORIZED", "{}", r.text());
        unauthorized += 1;
        assert!(
            unauthorized < 1000,
            "no limit after {unauthorized} unknown tokens"
        );
    };
    assert!(
        is_too_many(&limited),
        "{} {}",
        limited.status,
        limited.text()
    );
    assert!(unauthorized >= 300, "limited after only {unauthorized}");
    let wait: u64 = limited.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&wait), "Retry-After {wait}");

    // Every kind of missing credential from that address waits too, from the same bucket.
    let mut bucket = Refilling::since_limited();
    bucket
        .waits(&api, ("missing token", "GET", REFUSALS), &[])
        .await;
    let cookie = ("cookie", "egressgate_admin=not-a-session");
    bucket
        .waits(&api, ("dead cookie", "GET", "/v1/admin/sites"), &[cookie])
        .await;
    bucket
        .waits(&api, ("sign-in", "POST", "/ui/admin/session"), &[])
        .await;

    // The env tokens are compared in memory and never limited.
    let runtime = format!("Bearer {RUNTIME}");
    let r = refusals(&api, "127.0.0.1", &runtime).await;
    assert_eq!(r.status, 404, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], "TURN_NOT_FOUND", "{}", r.text());
    // Another address has its own bucket.
    let r = send(&api, "127.0.0.2", "GET", REFUSALS, &[UNKNOWN]).await;
    assert_eq!(r.status, 401, "{}", r.text());
}

/// The limit and its window are settings; unknown tokens, missing ones and dead console cookies
/// share it, and a named token from a limited address waits (telling it apart needs the
/// database) while the same token from another address is served.
#[tokio::test]
async fn the_limit_is_a_setting_shared_by_every_missing_credential() {
    let g = gate()
        .args(&[
            "--auth-failures-per-client",
            "3",
            "--auth-failure-window",
            "1h",
        ])
        .start();
    let api = g.api();
    let r = api.add_token("ci", &["turns"]).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let named = format!("Bearer {}", r.json()["token"].as_str().unwrap());
    let r = refusals(&api, "127.0.0.1", &named).await;
    assert_eq!(r.status, 404, "{}", r.text());

    let cookie = ("cookie", "egressgate_admin=not-a-session");
    let failing: [&[(&str, &str)]; 3] = [&[UNKNOWN], &[], &[cookie]];
    for headers in failing {
        let path = if headers.is_empty() {
            REFUSALS
        } else {
            "/v1/admin/sites"
        };
        let r = send(&api, "127.0.0.1", "GET", path, headers).await;
        assert_eq!(r.status, 401, "{headers:?}: {}", r.text());
    }
    let r = send(&api, "127.0.0.1", "GET", REFUSALS, &[UNKNOWN]).await;
    assert!(is_too_many(&r), "{} {}", r.status, r.text());
    let wait: u64 = r.header("retry-after").unwrap().parse().unwrap();
    assert!(
        (1100..=1200).contains(&wait),
        "Retry-After {wait} (one failure per 20 min)"
    );
    let r = refusals(&api, "127.0.0.1", &named).await;
    assert!(
        is_too_many(&r),
        "named token from a limited address: {}",
        r.status
    );
    let r = refusals(&api, "127.0.0.2", &named).await;
    assert_eq!(r.status, 404, "{}", r.text());
}
