//! A counted grant on PostgreSQL with two proxy processes sharing the database: concurrent
//! connections through both spend exactly the grant's uses (each use is one conditional
//! `UPDATE`, so no two proxies spend the same one), and every connection past them is a
//! recorded, approvable `not_approved`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use serde_json::json;
use support::pg::PgCluster;
use support::*;

#[tokio::test]
async fn two_proxies_spend_exactly_the_uses_of_one_counted_grant() {
    let pg = PgCluster::start();
    let o = origin().await;
    let proxy = || proxy_on(&pg.url()).reach_as(&o, &[FILES]).start();
    let (p1, p2) = (proxy(), proxy());
    let control = control_on(&pg.url(), &p1.proxy().to_string()).start();
    let api = control.api();
    let turn = control.turn("u", "c").await;
    let url = o.url(FILES, "/data.csv");
    assert_eq!(p1.get(&turn, &url).await.status, 403);
    let three = json!({"approved": true, "max_uses": 3});
    let (r, _, _) = ask_and_answer(&api, &turn, &[], three).await;
    assert_eq!(r.status, 200, "{}", r.text());
    // Twelve connections at once, half through each proxy.
    let requests = (0..12).map(|i| {
        let (proxy, turn, url) = (if i % 2 == 0 { &p1 } else { &p2 }, &turn, &url);
        async move { proxy.get(turn, url).await }
    });
    let answers = futures_util::future::join_all(requests).await;
    let admitted = answers.iter().filter(|r| r.status == 200).count();
    assert_eq!(admitted, 3, "exactly the grant's uses were admitted");
    for r in answers.iter().filter(|r| r.status != 200) {
        assert_eq!(r.status, 403, "{}", r.text());
        assert_eq!(r.header("x-egress-refused"), Some("not_approved"));
        assert_eq!(r.header("x-egress-approvable"), Some("true"));
    }
    assert_eq!(
        o.requests().len(),
        3,
        "only the admitted requests reached the origin"
    );
    let rows = api.chat_approvals("u", "c").await;
    assert_eq!(rows["approvals"][0]["uses_left"], 0, "{rows}");
}
