//! Transparent capture with a fake proxy: a client that reads no proxy settings still ends at
//! the proxy, as `CONNECT name:port` with the turn's credential (or the IP literal it dialled),
//! and a command that removes the capture is left with no network at all.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::*;

/// `base64("turn-7:s3cr@t")`: what the capture sends for `turn-7:s3cr%40t@`.
const BASIC_TURN_7: &str = "Basic dHVybi03OnMzY3JAdA==";

/// Python, reading no proxy settings: connects to the first address of each `host port`
/// argument pair (no fallback to the next address, so each pair is one connection) and says
/// how the connection ended. A reset may come before `connect` returns, on a busy machine.
const PROBE: &str = r#"
import socket, sys
args = sys.argv[1:]
for host, port in zip(args[::2], args[1::2]):
    try:
        family, kind, proto, _, addr = socket.getaddrinfo(host, int(port), 0, socket.SOCK_STREAM)[0]
        s = socket.socket(family, kind, proto)
        s.settimeout(10)
        s.connect(addr)
        print(host, "eof" if s.recv(1) == b"" else "data")
    except ConnectionResetError:
        print(host, "reset")
    except OSError as e:
        print(host, type(e).__name__)
"#;

#[test]
fn a_client_that_ignores_the_proxy_settings_reaches_the_proxy_as_connect() {
    let proxy = FakeProxy::start();
    let script = format!(
        "getent hosts files.example.com; getent ahostsv4 files.example.com | head -n 1; \
         python3 -c '{PROBE}' files.example.com 8080 192.0.2.1 80 2001:db8::1 443; \
         python3 -c 'import socket; u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); \
u.connect((\"192.0.2.1\", 443)); u.send(b\"quic?\")' 2>&1 | tail -n 1; \
         curl -sS -m 20 -o /dev/null -w 'proxied=%{{http_code}}\\n' http://example.com/"
    );
    let output = run(launcher(
        &proxy.url("turn-7:s3cr%40t"),
        &["sh", "-c", &script],
    ));
    assert_eq!(code(&output), 0, "{output:?}");
    let out = stdout(&output);
    let lines: Vec<_> = out.lines().collect();
    // The sandbox's resolver answers from the pool, IPv6 first for clients that take the
    // system's order (the capture listens on both families).
    assert!(
        lines[0].starts_with("2001:2::2 ") && lines[0].ends_with("files.example.com"),
        "{out}"
    );
    assert!(lines[1].starts_with("198.18.0.2 "), "{out}");
    // Each connection was accepted, then reset once the proxy refused it.
    assert_eq!(
        &lines[2..],
        [
            "files.example.com reset",
            "192.0.2.1 reset",
            "2001:db8::1 reset",
            // UDP (QUIC, say) other than DNS is rejected on the spot.
            "PermissionError: [Errno 1] Operation not permitted",
            "proxied=403"
        ],
        "{output:?}"
    );
    let seen = proxy.seen();
    let requests: Vec<_> = seen.iter().map(|s| s.request_line.as_str()).collect();
    assert_eq!(
        requests,
        [
            "CONNECT files.example.com:8080 HTTP/1.1",
            "CONNECT 192.0.2.1:80 HTTP/1.1",
            "CONNECT [2001:db8::1]:443 HTTP/1.1",
            "GET http://example.com/ HTTP/1.1",
        ]
    );
    for request in &seen {
        assert_eq!(request.proxy_authorization.as_deref(), Some(BASIC_TURN_7));
    }
}

/// Only a command that is root in its user namespace can try this: `--as-user root` (every
/// other holds no capability, `tests/identity.rs`).
#[test]
fn a_root_command_that_removes_the_capture_has_no_network_at_all() {
    let proxy = FakeProxy::start();
    let origin = Origin::start();
    let port = origin.addr.port().to_string();
    let script = format!(
        "id -u; nft flush ruleset && echo flushed; nft list ruleset | wc -l; \
         python3 -c '{PROBE}' files.example.com 80 198.18.0.2 443 192.0.2.1 80 \
           2001:db8::1 443 127.0.0.1 {port}; \
         python3 -c 'import socket; u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); \
u.settimeout(3); u.connect((\"8.8.8.8\", 53)); u.send(b\"x\"); u.recv(1)' 2>&1 | tail -n 1; \
         tail -n +3 /proc/self/net/dev | cut -d: -f1 | tr -d ' '"
    );
    let output = run(launcher_with(
        &proxy.url("t:s"),
        &["--as-user", "root"],
        &["sh", "-c", &script],
    ));
    assert_eq!(code(&output), 0, "{output:?}");
    let out = stdout(&output);
    let lines: Vec<_> = out.lines().collect();
    assert_eq!(lines[..3], ["0", "flushed", "0"], "{output:?}");
    // Nothing answers any more: every address is the namespace's own, and only `lo` exists.
    assert_eq!(
        lines[3..8],
        [
            "files.example.com ConnectionRefusedError",
            "198.18.0.2 ConnectionRefusedError",
            "192.0.2.1 ConnectionRefusedError",
            "2001:db8::1 ConnectionRefusedError",
            "127.0.0.1 ConnectionRefusedError",
        ],
        "{output:?}"
    );
    assert!(lines[8].contains("ConnectionRefusedError"), "{output:?}");
    assert_eq!(lines[9..], ["lo"], "{output:?}");
    assert!(proxy.seen().is_empty(), "{:?}", proxy.seen());
    assert_eq!(origin.connections(), 0, "the origin outside was reached");
}

#[test]
fn a_bad_capture_value_is_refused_before_anything_runs() {
    let proxy = FakeProxy::start();
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let output = run(launcher_with(
        &proxy.url("t:s"),
        &["--capture", "sometimes"],
        &["touch", ran.to_str().unwrap()],
    ));
    assert_eq!(code(&output), egressgate_sandbox::EXIT_LAUNCHER_ERROR);
    let err = stderr(&output);
    assert!(err.contains("--capture must be on, off or auto"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!ran.exists());
}

#[test]
fn concurrent_lookups_get_one_address_per_name_and_every_connection_its_connect() {
    let proxy = FakeProxy::start();
    let script = r#"
import collections, socket, threading
names = ["n%d.example" % i for i in range(8)]
seen, ends, lock = collections.defaultdict(set), [], threading.Lock()
def work(name):
    addr = socket.getaddrinfo(name, 80, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
    try:
        s = socket.create_connection((addr, 80), timeout=20)
        s.settimeout(20)
        end = "eof" if s.recv(1) == b"" else "data"
    except ConnectionResetError:
        end = "reset"
    with lock:
        seen[name].add(addr)
        ends.append(end)
threads = [threading.Thread(target=work, args=(n,)) for n in names for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(all(len(seen[n]) == 1 for n in names), len({a for n in names for a in seen[n]}))
print(sorted(collections.Counter(ends).items()))
"#;
    let output = run(launcher(&proxy.url("t:s"), &["python3", "-c", script]));
    assert_eq!(code(&output), 0, "{output:?}");
    assert_eq!(stdout(&output), "True 8\n[('reset', 32)]\n", "{output:?}");
    let mut requests: Vec<_> = proxy.seen().into_iter().map(|s| s.request_line).collect();
    requests.sort();
    requests.dedup_by(|a, b| a == b);
    assert_eq!(requests.len(), 8, "{requests:?}");
    let connects = proxy.seen().len();
    assert_eq!(connects, 32, "every connection asks the proxy");
    assert!(
        requests.iter().all(|r| r.starts_with("CONNECT n")),
        "{requests:?}"
    );
}

/// Capture speaks plain HTTP to the proxy: with an `https://` proxy URL, `on` (the default)
/// refuses to start (122, one line, nothing ran) and `auto` says so and runs without it.
#[test]
fn where_capture_is_impossible_on_refuses_and_auto_runs_without_it() {
    let dir = shared_tempdir();
    let ran = dir.path().join("ran");
    let url = "https://t:topsecret@127.0.0.1:1";
    let refused = run(launcher(url, &["touch", ran.to_str().unwrap()]));
    assert_eq!(
        code(&refused),
        egressgate_sandbox::EXIT_ISOLATION_UNAVAILABLE,
        "{refused:?}"
    );
    let err = stderr(&refused);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("cannot capture") && err.contains("http:// proxy URL"),
        "{err}"
    );
    assert!(!err.contains("topsecret"), "{err}");
    assert!(!ran.exists(), "the command ran");

    let fell_back = run(launcher_with(
        url,
        &["--capture", "auto"],
        &[
            "sh",
            "-c",
            "touch \"$1\"; getent hosts example.com; echo dns=$?",
            "sh",
            ran.to_str().unwrap(),
        ],
    ));
    assert_eq!(code(&fell_back), 0, "{fell_back:?}");
    let err = stderr(&fell_back);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--capture auto: running without capture"),
        "{err}"
    );
    // Without capture there is no resolver inside: the lookup fails.
    assert_eq!(stdout(&fell_back), "dns=2\n", "{fell_back:?}");
    assert!(ran.exists(), "the command did not run");
}

/// `auto` where capture can be done is `on`, silently.
#[test]
fn auto_captures_where_it_can_without_a_word() {
    let proxy = FakeProxy::start();
    let output = run(launcher_with(
        &proxy.url("t:s"),
        &["--capture", "auto"],
        &["getent", "ahostsv4", "files.example.com"],
    ));
    assert_eq!(code(&output), 0, "{output:?}");
    assert!(stdout(&output).starts_with("198.18.0.2 "), "{output:?}");
    assert_eq!(stderr(&output), "", "{output:?}");
}
