//! The control plane's addresses (`--control-addr`) and the database's are never dialled,
//! even inside `--allow-cidr`, and a bad `--control-addr` is one line and a non-zero exit.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::*;

// ---------------------------------------------------------------------------------------------
// The control plane's addresses (`--control-addr`) are never dialled, even inside --allow-cidr.
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn control_addresses_are_refused_like_the_gates_own_listeners() {
    // A listener standing in for a control process elsewhere on this host.
    let control = origin().await;
    let g = gate()
        .reach_as(&control, &[FILES])
        .args(&["--control-addr", &control.at("127.0.0.1")])
        .sites(&[FILES])
        .ready()
        .await;
    let turn = g.turn("gina", "c1").await;
    assert_refused(
        &g.get(&turn, &control.url(FILES, "/")).await,
        "private_address",
    );
    let (r, _) = connect(g.proxy(), &turn, &control.at(FILES)).await;
    assert_eq!(r.header("x-egress-refused"), Some("private_address"));
    assert_eq!(
        control.connection_count(),
        0,
        "the control address was dialled"
    );
}

#[test]
fn a_bad_control_addr_is_one_line_and_a_non_zero_exit() {
    // The error names what the user wrote: the flag, or the environment variable.
    for (args, env, named) in [
        (vec!["--control-addr", "no-port"], None, "--control-addr"),
        (vec![], Some("127.0.0.1:80,junk"), "EGRESSGATE_CONTROL_ADDR"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = egressgate();
        cmd.arg("proxy")
            .arg("--data-dir")
            .arg(dir.path())
            .args(["--proxy-listen", "127.0.0.1:0"])
            .args(&args)
            .env_remove("EGRESSGATE_CONTROL_ADDR");
        if let Some(v) = env {
            cmd.env("EGRESSGATE_CONTROL_ADDR", v);
        }
        let out = cmd.output().unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(named), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
}

/// A proxy-only process told the control plane's address, on a database named only in the
/// URL's query (`?host=…&port=…`): neither is ever dialled, even inside `--allow-cidr`.
#[tokio::test]
async fn a_proxy_process_refuses_its_control_plane_and_a_query_named_database() {
    let pg = support::pg::PgCluster::start();
    let control = gate()
        .subcommand("control")
        .database(&pg.url())
        .args(&["--proxy-public-url", "127.0.0.1:3128"])
        .start();
    let control_port = control.control.unwrap().port();
    let query_url = format!(
        "postgres://postgres@localhost:1/postgres?host=127.0.0.1&port={}",
        pg.port
    );
    let proxy = gate()
        .subcommand("proxy")
        .database(&query_url)
        .names(&[FILES])
        .loopback()
        .ports(&[control_port, pg.port])
        .args(&["--control-addr", &format!("127.0.0.1:{control_port}")])
        .start();
    let api = control.api();
    api.admin_site(FILES).await;
    let turn = api.turn("hana", "c1", &[]).await;
    for port in [control_port, pg.port] {
        let r = proxy_get(proxy.proxy(), &turn, &format!("http://{FILES}:{port}/")).await;
        assert_eq!(r.status, 403, "port {port}: {}", r.text());
        assert_eq!(r.header("x-egress-refused"), Some("private_address"));
        let (r, _) = connect(proxy.proxy(), &turn, &format!("{FILES}:{port}")).await;
        assert_eq!(
            r.header("x-egress-refused"),
            Some("private_address"),
            "port {port}"
        );
    }
}
