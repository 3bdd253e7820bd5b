//! What the hostile-client tests (`tests/limits*.rs`) share: a gate that can reach the origin
//! with the limit under test, and the well-behaved client whose requests and tunnels must
//! keep being served. Every wait is bounded.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::net::TcpStream;

use super::*;

/// A gate that can reach the loopback origin as `files.example.com`, plus `extra` flags.
pub fn gate_for(o: &Origin, extra: &[&str]) -> Gate {
    gate().reach(o).names(&[FILES]).args(extra).start()
}

/// A fresh loopback origin, a [`gate_for`] it with [`FILES`] on the administrator's list, and
/// a turn of (`u`, `c`): the well-behaved client's side of every row, which starts each test.
pub async fn listed_gate(extra: &[&str]) -> (Origin, Gate, Turn) {
    let o = origin().await;
    let g = gate().reach(&o).names(&[FILES]).args(extra);
    let g = g.sites(&[FILES]).ready().await;
    let turn = g.turn("u", "c").await;
    (o, g, turn)
}

pub fn files_url(o: &Origin) -> String {
    o.url(FILES, "/")
}

/// A well-behaved forwarded request for the origin's [`files_url`] is answered by it within
/// two seconds, whatever the hostile clients hold meanwhile.
pub async fn served_promptly(g: &Gate, turn: &Turn, o: &Origin) {
    let within = Duration::from_secs(2);
    let t = Instant::now();
    let r = tokio::time::timeout(within, proxy_get(g.proxy(), turn, &files_url(o)))
        .await
        .unwrap_or_else(|_| panic!("a normal request was not answered within {within:?}"));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text(), "origin says hi");
    assert!(t.elapsed() < within);
}

/// Opens a CONNECT tunnel to the origin and proves it carries a request.
pub async fn open_tunnel(proxy: SocketAddr, turn: &Turn, o: &Origin) -> TcpStream {
    let (head, mut s) =
        tokio::time::timeout(Duration::from_secs(5), connect(proxy, turn, &o.at(FILES)))
            .await
            .expect("CONNECT answered");
    assert_eq!(
        head.status,
        200,
        "CONNECT: {} {:?}",
        head.status,
        head.text()
    );
    let r = get_over(&mut s, FILES).await.unwrap();
    assert_eq!(r.status, 200);
    s
}

/// Retries `CONNECT` until it is `200` (a slot was freed asynchronously), bounded.
pub async fn tunnel_eventually(
    proxy: SocketAddr,
    turn: &Turn,
    o: &Origin,
    within: Duration,
) -> TcpStream {
    let deadline = Instant::now() + within;
    loop {
        let (head, mut s) = connect(proxy, turn, &o.at(FILES)).await;
        if head.status == 200 {
            let r = get_over(&mut s, FILES).await.unwrap();
            assert_eq!(r.status, 200);
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "no tunnel within {within:?}: still {} {:?}",
            head.status,
            head.header("x-egress-refused")
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
