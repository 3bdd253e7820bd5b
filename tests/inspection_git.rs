//! Inspection with a real git smart-HTTP server (`git http-backend` behind TLS): under `read`
//! a clone over HTTPS works and a push is refused at its first request, recorded.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::inspect::*;
use support::*;
use tokio::io::AsyncWriteExt as _;

/// A TLS origin for [`HOST`] that runs `git http-backend` (smart HTTP, CGI) for every request,
/// serving the bare repositories under `root` (pushes allowed, so only the proxy stops them).
async fn git_origin(pki: &Pki, root: std::path::PathBuf) -> std::net::SocketAddr {
    use http_body_util::BodyExt as _;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(pki.server.clone());
    tokio::spawn(async move {
        loop {
            let Ok((s, _)) = listener.accept().await else {
                return;
            };
            let (acceptor, root) = (acceptor.clone(), root.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(s).await else {
                    return;
                };
                let svc =
                    hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                        let root = root.clone();
                        async move {
                            let (parts, body) = req.into_parts();
                            let body = body
                                .collect()
                                .await
                                .map(|b| b.to_bytes())
                                .unwrap_or_default();
                            let header = |h: &str| {
                                parts
                                    .headers
                                    .get(h)
                                    .and_then(|v| v.to_str().ok())
                                    .unwrap_or("")
                                    .to_owned()
                            };
                            let mut cgi = tokio::process::Command::new("git");
                            cgi.arg("http-backend")
                                .env_clear()
                                .env("GIT_PROJECT_ROOT", &root)
                                .env("GIT_HTTP_EXPORT_ALL", "1")
                                .env("REMOTE_USER", "tester")
                                .env("REMOTE_ADDR", "127.0.0.1")
                                .env("REQUEST_METHOD", parts.method.as_str())
                                .env("PATH_INFO", parts.uri.path())
                                .env("QUERY_STRING", parts.uri.query().unwrap_or(""))
                                .env("CONTENT_TYPE", header("content-type"))
                                .env("CONTENT_LENGTH", body.len().to_string())
                                .env("HTTP_CONTENT_ENCODING", header("content-encoding"))
                                .env("HTTP_GIT_PROTOCOL", header("git-protocol"))
                                .stdin(std::process::Stdio::piped())
                                .stdout(std::process::Stdio::piped());
                            let mut child = cgi.spawn().unwrap();
                            let mut stdin = child.stdin.take().unwrap();
                            stdin.write_all(&body).await.unwrap();
                            drop(stdin);
                            let out = child.wait_with_output().await.unwrap().stdout;
                            let split = out.windows(4).position(|w| w == b"\r\n\r\n");
                            let (head, body, skip) = match split {
                                Some(i) => (&out[..i], &out[i..], 4),
                                None => {
                                    let i = out.windows(2).position(|w| w == b"\n\n").unwrap();
                                    (&out[..i], &out[i..], 2)
                                }
                            };
                            let mut resp = http::Response::builder();
                            for line in String::from_utf8_lossy(head).lines() {
                                let Some((k, v)) = line.split_once(':') else {
                                    continue;
                                };
                                if k.eq_ignore_ascii_case("status") {
                                    let code = v.trim().split(' ').next().unwrap_or("200");
                                    resp = resp.status(code.parse::<u16>().unwrap());
                                } else {
                                    resp = resp.header(k.trim(), v.trim());
                                }
                            }
                            let body = http_body_util::Full::new(bytes::Bytes::copy_from_slice(
                                &body[skip..],
                            ));
                            Ok::<_, std::convert::Infallible>(resp.body(body).unwrap())
                        }
                    });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    addr
}

fn git(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    git_with(dir, args, &[])
}

/// `git` with extra environment (the CA bundle: this git build reads `GIT_SSL_CAINFO`, as the
/// sandbox sets it, more reliably than `-c http.sslCAInfo`).
fn git_with(dir: &std::path::Path, args: &[&str], envs: &[(&str, &str)]) -> std::process::Output {
    std::process::Command::new("git")
        .current_dir(dir)
        .envs(envs.iter().copied())
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
        .env_remove("ALL_PROXY")
        .output()
        .unwrap()
}

fn ok(out: &std::process::Output) -> String {
    stdout_of(out, "git failed")
}

/// Commits what is staged in `dir` as a test author, with `message`.
fn commit(dir: &std::path::Path, message: &str) {
    let who = ["-c", "user.name=t", "-c", "user.email=t@e"];
    ok(&git(dir, &[&who[..], &["commit", "-qm", message]].concat()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_clone_works_under_read_and_git_push_is_refused() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    // A bare repository with one commit, served by git http-backend behind TLS.
    let root = w.join("srv");
    std::fs::create_dir(&root).unwrap();
    ok(&git(&root, &["init", "-q", "--bare", "repo.git"]));
    let seed = w.join("seed");
    std::fs::create_dir(&seed).unwrap();
    ok(&git(&seed, &["init", "-q", "-b", "main"]));
    std::fs::write(seed.join("README"), "hello\n").unwrap();
    ok(&git(&seed, &["add", "README"]));
    commit(&seed, "one");
    let bare = root.join("repo.git");
    ok(&git(&seed, &["push", "-q", bare.to_str().unwrap(), "main"]));
    ok(&git(&bare, &["symbolic-ref", "HEAD", "refs/heads/main"]));
    let head_before = ok(&git(&bare, &["rev-parse", "main"]));

    let origin_pki = pki(&[HOST]);
    let addr = git_origin(&origin_pki, root.clone()).await;
    let upstream_ca = w.join("upstream-ca.pem");
    std::fs::write(&upstream_ca, pem_of(&origin_pki.ca_der)).unwrap();
    let gate = gate()
        .resolve(HOST, "127.0.0.1")
        .args(&[
            "--allow-cidr",
            "127.0.0.0/8",
            "--allow-port",
            &addr.port().to_string(),
        ])
        .args(&["--upstream-ca", upstream_ca.to_str().unwrap()])
        .start();
    let api = gate.api();
    let r = add_site(
        &api,
        serde_json::json!({"pattern": HOST, "inspect": true, "access": "read"}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let ca = api.open_get("/v1/ca.pem").await.text();
    let ca_file = w.join("deployment-ca.pem");
    std::fs::write(&ca_file, ca).unwrap();
    let turn = api.turn("u", "c", &[]).await;
    let proxy = format!("http://{}@{}", turn.credential, gate.proxy());
    let ca_path = ca_file.to_str().unwrap();
    let via = |dir: &std::path::Path, args: &[&str]| {
        let mut all = vec!["-c".to_owned(), format!("http.proxy={proxy}")];
        all.extend(args.iter().map(|a| a.to_string()));
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        tokio::task::block_in_place(|| git_with(dir, &all, &[("GIT_SSL_CAINFO", ca_path)]))
    };
    let url = format!("https://{HOST}:{}/repo.git", addr.port());
    ok(&via(w, &["clone", "-q", &url, "clone"]));
    assert_eq!(
        std::fs::read_to_string(w.join("clone/README")).unwrap(),
        "hello\n"
    );

    let clone = w.join("clone");
    std::fs::write(clone.join("NEW"), "upload\n").unwrap();
    ok(&git(&clone, &["add", "NEW"]));
    commit(&clone, "two");
    let out = via(&clone, &["push", "origin", "main"]);
    assert!(!out.status.success(), "push must fail");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("403"),
        "git shows the proxy's 403: {stderr}"
    );
    assert_eq!(
        ok(&git(&bare, &["rev-parse", "main"])),
        head_before,
        "nothing was pushed"
    );
    let row = assert_recorded(&api, &turn, "method_not_allowed").await;
    assert_eq!(row["method"], "GET", "{row}");
    assert_eq!(
        row["url"],
        format!("https://{HOST}:{}/repo.git/info/refs", addr.port())
    );
}
