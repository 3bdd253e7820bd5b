//! A private network namespace for tests that resolve names (or name addresses) outside
//! loopback: the whole test (gate, origins, clients) runs where only `lo` is up, so even a
//! wrong dial cannot leave the machine.

use std::future::Future;
use std::io::Read as _;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Set in the re-executed child: the test is already inside its namespace.
const NETNS_ENV: &str = "EGRESSGATE_IN_NETNS";

/// Runs `body` inside a fresh network namespace whose only interface is `lo`.
///
/// Outside the namespace (no `EGRESSGATE_IN_NETNS`), re-executes this test binary for exactly
/// the calling test under `unshare --net` and asserts the child passed exactly one test. The
/// test is named by its thread (the test harness names each test's thread after the test), so
/// the name is written once, in the `fn`, and cannot drift from it. If `unshare` cannot create
/// the namespace the test fails loudly: it never silently skips.
/// Inside, it first proves there is no way out (only `lo`, no IPv4 routes, IPv6 only on `lo`),
/// then runs `body` on a multi-threaded runtime.
pub fn in_netns<F, Fut>(body: F)
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = ()>,
{
    if std::env::var_os(NETNS_ENV).is_some() {
        assert_sealed();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(body());
        return;
    }
    let current = std::thread::current();
    let test_name = current
        .name()
        .expect("in_netns runs on a test's own thread, which the harness names after the test");
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new("unshare")
        .args([
            "--net",
            "--",
            "sh",
            "-c",
            r#"ip link set lo up && exec "$0" "$@""#,
        ])
        .arg(exe)
        .args([test_name, "--exact", "--nocapture", "--test-threads=1"])
        .env(NETNS_ENV, "1")
        // A CI PostgreSQL on the host's loopback is unreachable from the namespace: the gates
        // inside use the embedded SQLite store.
        .env_remove("EGRESSGATE_TEST_POSTGRES_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot run `unshare --net` for {test_name} (needs root or CAP_SYS_ADMIN): {e}")
        });
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = out_reader.join().unwrap();
    let stderr = err_reader.join().unwrap();
    let ran_one = stdout.contains("test result: ok. 1 passed");
    assert!(
        status.is_some_and(|s| s.success()) && ran_one,
        "{test_name} inside the network namespace: status {status:?} (None = killed after 300 s)\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}"
    );
}

/// Inside the namespace: prove no dial can leave the machine.
fn assert_sealed() {
    let dev = std::fs::read_to_string("/proc/self/net/dev").unwrap();
    let ifaces: Vec<&str> = dev
        .lines()
        .skip(2)
        .filter_map(|l| l.split(':').next())
        .map(str::trim)
        .collect();
    assert_eq!(
        ifaces,
        ["lo"],
        "the namespace must only have loopback: {dev}"
    );
    let route = std::fs::read_to_string("/proc/self/net/route").unwrap();
    assert!(
        route.lines().skip(1).all(|l| l.trim().is_empty()),
        "IPv4 routes inside the namespace: {route}"
    );
    let route6 = std::fs::read_to_string("/proc/self/net/ipv6_route").unwrap_or_default();
    assert!(
        route6
            .lines()
            .all(|l| l.trim().is_empty() || l.trim_end().ends_with("lo")),
        "IPv6 routes off loopback: {route6}"
    );
}
