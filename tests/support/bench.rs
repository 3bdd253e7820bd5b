//! The bench a row of the design's table runs on, set up in one expression: which names resolve
//! to the loopback origins, which ranges and ports the gate may dial, and what the
//! administrator has listed, e.g.
//! `gate().reach_as(&o, &[FILES]).sites(&[FILES]).ready().await`.
//! Plus the short calls the rows then make: an origin's URLs, the chat and admin changes that
//! revoke, and the check that a response is a refusal for a reason.

use std::time::Duration;

use super::*;

/// The host most rows reach: a name the gate resolves to the loopback origin.
pub const FILES: &str = "files.example.com";

impl GateBuilder {
    /// Every name resolves to 127.0.0.1, where the test's origins listen (names written in
    /// the test, or computed from its rows).
    pub fn names(self, names: &[impl AsRef<str>]) -> Self {
        names
            .iter()
            .fold(self, |b, name| b.resolve(name.as_ref(), "127.0.0.1"))
    }

    /// The gate's own DNS: each (name, address) is one `--resolve` answer (a name listed twice
    /// has two answers).
    pub fn answers(self, answers: &[(&str, &str)]) -> Self {
        answers
            .iter()
            .fold(self, |b, (name, addr)| b.resolve(name, addr))
    }

    /// `--allow-cidr 127.0.0.0/8`: loopback is dialable, so a rule that failed to refuse
    /// would really reach an origin.
    pub fn loopback(self) -> Self {
        self.args(&["--allow-cidr", "127.0.0.0/8"])
    }

    /// `--allow-port` for each port.
    pub fn ports(self, ports: &[u16]) -> Self {
        ports
            .iter()
            .fold(self, |b, p| b.args(&["--allow-port", &p.to_string()]))
    }

    /// The origin is reachable: loopback allowed, and its port.
    pub fn reach(self, origin: &Origin) -> Self {
        self.loopback().ports(&[origin.addr.port()])
    }

    /// The origin is reachable under `names`: [`GateBuilder::reach`] it, and each name
    /// resolves to it ([`GateBuilder::names`]); how most rows put a host in front of their
    /// origin.
    pub fn reach_as(self, origin: &Origin, names: &[impl AsRef<str>]) -> Self {
        self.reach(origin).names(names)
    }

    /// Sites the administrator lists once the gate is up.
    pub fn sites(self, patterns: &[&str]) -> Listed {
        Listed::from(self).sites(patterns)
    }

    /// Packages the administrator lists once the gate is up.
    pub fn packages(self, names: &[&str]) -> Listed {
        Listed::from(self).packages(names)
    }

    /// Starts the gate (async, like [`Listed::ready`], so both read alike).
    pub async fn ready(self) -> Gate {
        self.start()
    }
}

/// A gate builder with the lists the administrator fills once the gate is up: the last step
/// before [`Listed::ready`], so no list can be forgotten by a plain `start()`.
pub struct Listed {
    builder: GateBuilder,
    sites: Vec<String>,
    packages: Vec<String>,
}

impl From<GateBuilder> for Listed {
    fn from(builder: GateBuilder) -> Self {
        Self {
            builder,
            sites: Vec::new(),
            packages: Vec::new(),
        }
    }
}

impl Listed {
    /// More sites.
    pub fn sites(mut self, patterns: &[&str]) -> Self {
        self.sites.extend(patterns.iter().map(|p| (*p).to_owned()));
        self
    }

    /// More packages.
    pub fn packages(mut self, names: &[&str]) -> Self {
        self.packages.extend(names.iter().map(|p| (*p).to_owned()));
        self
    }

    /// Starts the gate, then lists the sites and packages through the admin API.
    pub async fn ready(self) -> Gate {
        let g = self.builder.start();
        let api = g.api();
        for s in &self.sites {
            api.admin_site(s).await;
        }
        for p in &self.packages {
            api.admin_package(p).await;
        }
        g
    }
}

/// A loopback origin and a gate that may reach it under `names`, nothing listed yet.
pub async fn reachable(names: &[&str]) -> (Gate, Origin) {
    reachable_with(names, &[]).await
}

/// [`reachable`] with the gate's own flags `args` (a TTL, a poll, a cap), the setup of most
/// rows that check one flag against one origin.
pub async fn reachable_with(names: &[&str], args: &[&str]) -> (Gate, Origin) {
    let o = origin().await;
    (gate().reach_as(&o, names).args(args).ready().await, o)
}

/// A gate started with the flags `args` (no origin, nothing listed), its control API, and a
/// turn of `user` in `chat`: where the rows that check one control-plane flag (an opted-in
/// host, a public URL) begin, so each reads as the flag and what it changes.
pub async fn gate_and_turn(args: &[&str], user: &str, chat: &str) -> (Gate, Api, Turn) {
    let g = gate().args(args).start();
    let api = g.api();
    let turn = api.turn(user, chat, &[]).await;
    (g, api, turn)
}

/// A proxy-only process on the database at `db` (the scale-out and split-process rows).
pub fn proxy_on(db: &str) -> GateBuilder {
    gate().subcommand("proxy").database(db)
}

/// A control-only process on the database at `db` that hands runtimes the proxy at `public`.
pub fn control_on(db: &str, public: &str) -> GateBuilder {
    gate()
        .subcommand("control")
        .database(db)
        .args(&["--proxy-public-url", public])
}

impl Gate {
    /// Asserts that a log line with every needle arrives (bounded, 5 s).
    pub async fn assert_logged(&self, needles: &[&str], what: &str) {
        let line = self.log_line(needles).await;
        assert!(line.is_some(), "{what}: no log line with {needles:?}");
    }

    /// Opens a turn for (user, chat) with no launch-time sites.
    pub async fn turn(&self, user: &str, chat: &str) -> Turn {
        self.api().turn(user, chat, &[]).await
    }

    /// The proxy URL with the turn's credential (`http://TURN:SECRET@ADDR`), as a sandbox or
    /// a client's `--proxy` gets it.
    pub fn proxy_url(&self, turn: &Turn) -> String {
        format!("http://{}@{}", turn.credential, self.proxy())
    }

    /// `GET url` through this gate's proxy with the turn's credential.
    pub async fn get(&self, turn: &Turn, url: &str) -> Resp {
        proxy_get(self.proxy(), turn, url).await
    }

    /// The status of [`Gate::get`], or `None` when the proxy closed the connection before
    /// the client read an answer: what a request admitted by a cache the revocation has not
    /// reached yet meets when the sweep closes the revoked grant's connections after the
    /// origin's head arrived (before it, the proxy answers; see docs/revocation.md).
    /// Any other failure (a timeout, a refused connect) still fails the test.
    pub async fn status_or_cut(&self, turn: &Turn, url: &str) -> Option<u16> {
        match try_proxy_get(self.proxy(), turn, url).await {
            Ok(r) => Some(r.status),
            Err(e) if is_cut(&e) => None,
            Err(e) => panic!("GET {url} through the proxy: {e}"),
        }
    }
}

impl Turn {
    /// The same turn id with a secret that is not its own: what a forger holds.
    pub fn forged(&self, secret: &str) -> Turn {
        Turn {
            id: self.id.clone(),
            credential: format!("{}:{secret}", self.id),
        }
    }
}

impl Origin {
    /// Waits (bounded, 5 s) until something has dialled this origin: a tunnel whose client has
    /// not spoken is dialled only after the proxy's first-bytes wait.
    pub async fn assert_dialled(&self) {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while self.connection_count() == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the proxy never dialled the origin"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The origin's port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `host:port`: the origin under a name the gate resolves to it.
    pub fn at(&self, host: &str) -> String {
        format!("{host}:{}", self.addr.port())
    }

    /// `http://host:port{path}`.
    pub fn url(&self, host: &str, path: &str) -> String {
        format!("http://{host}:{}{path}", self.addr.port())
    }
}

impl Api {
    /// `POST /v1/admin/packages` as the administrator (201 or 200 asserted).
    pub async fn admin_package(&self, name: &str) {
        self.admin_add("packages", serde_json::json!({"name": name}))
            .await;
    }

    /// Adds to an admin list, `POST /v1/admin/{list}`: 201, or 200 when it was there.
    pub async fn admin_add(&self, list: &str, body: serde_json::Value) {
        let r = self.post(&format!("/v1/admin/{list}"), ADMIN, body).await;
        assert!(r.status == 201 || r.status == 200, "{list}: {}", r.text());
    }

    /// What the runtime sees of card `id`: `GET /v1/interrupts/{id}/outcome` as JSON.
    pub async fn outcome(&self, id: &str) -> serde_json::Value {
        let path = format!("/v1/interrupts/{id}/outcome");
        self.get(&path, RUNTIME).await.json()
    }

    /// `GET /v1/admin/audit?kind={kind}` as the administrator.
    pub async fn audit(&self, kind: &str) -> Resp {
        self.get(&format!("/v1/admin/audit?kind={kind}"), ADMIN)
            .await
    }

    /// `DELETE /v1/admin/sites/{pattern}` as the administrator.
    pub async fn remove_site(&self, pattern: &str) -> Resp {
        let path = format!("/v1/admin/sites/{pattern}");
        self.call("DELETE", &path, Some(ADMIN), None, None).await
    }

    /// `PUT /v1/admin/users/{user}` with `can_approve`.
    pub async fn set_can_approve(&self, user: &str, can: bool) -> Resp {
        self.set_user(user, serde_json::json!({"can_approve": can}))
            .await
    }

    /// `PUT /v1/admin/users/{user}` with `body` (`can_approve`, `mode`).
    pub async fn set_user(&self, user: &str, body: serde_json::Value) -> Resp {
        let path = format!("/v1/admin/users/{user}");
        let body = body.to_string();
        self.call("PUT", &path, Some(ADMIN), None, Some(&body))
            .await
    }

    /// The user revokes one approval of their chat: `DELETE
    /// /v1/chats/{chat}/approvals/{kind}/{value}`.
    pub async fn revoke(&self, user: &str, chat: &str, kind: &str, value: &str) -> Resp {
        let path = format!("/v1/chats/{chat}/approvals/{kind}/{value}");
        self.as_user("DELETE", &path, user).await
    }

    /// `POST /v1/admin/tokens` as the administrator: a named token with `scopes`; the answer
    /// (its `token` is the secret, shown once).
    pub async fn add_token(&self, name: &str, scopes: &[&str]) -> Resp {
        let body = serde_json::json!({"name": name, "scopes": scopes});
        self.post("/v1/admin/tokens", ADMIN, body).await
    }

    /// The user hides a chat: `DELETE /v1/chats/{chat}`.
    pub async fn hide_chat(&self, user: &str, chat: &str) -> Resp {
        let path = format!("/v1/chats/{chat}");
        self.as_user("DELETE", &path, user).await
    }

    /// `GET path` with no credential (health, readiness, metrics, the CA).
    pub async fn open_get(&self, path: &str) -> Resp {
        self.call("GET", path, None, None, None).await
    }
}

/// Polls `f` (every 50 ms) until it returns true or `limit` passes; false if it never did.
pub async fn eventually(limit: Duration, mut f: impl AsyncFnMut() -> bool) -> bool {
    let start = std::time::Instant::now();
    while start.elapsed() < limit {
        if f().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// Asserts a proxy refusal: `403` with `X-Egress-Refused: reason`.
#[track_caller]
pub fn assert_refused(r: &Resp, reason: &str) {
    assert_eq!(
        (r.status, r.header("x-egress-refused")),
        (403, Some(reason)),
        "{}",
        r.text()
    );
}
