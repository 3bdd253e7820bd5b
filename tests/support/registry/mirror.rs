//! A real registry on loopback, a gate that knows it as a mirror, and the scratch directory
//! installs run in: what each test of a package suite starts from, so the test reads as the
//! installs it tries and what they must do.

use std::process::Output;

use tempfile::TempDir;

use super::super::{Gate, Turn, approve_card, proxy_get};
use super::{
    Server, ask_packages, installed, mirror_gate, npm_install, npm_publish, npm_tools, pip_install,
    pip_tools, pypiserver, refused_packages, verdaccio, write_wheel,
};

/// One wheel a test's PyPI registry holds: name, version, the requirements its METADATA names.
pub type Wheel<'a> = (&'a str, &'a str, &'a [&'a str]);

/// One package version a test's npm registry holds: name, version, dependencies (name →
/// range).
pub type NpmPackage<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)]);

/// The installer a mirror's tests drive (and the ecosystem the gate is told it mirrors).
#[derive(Clone, Copy, Debug)]
pub enum Installer {
    /// `pip` against a PyPI mirror.
    Pip,
    /// `npm` against an npm mirror.
    Npm,
}

/// A started registry and its gate. Fields drop in order: the gate, then the registry,
/// then the directory both worked in.
pub struct Mirror {
    /// The gate, with the registry as its mirror of the installer's ecosystem.
    pub gate: Gate,
    /// The registry server.
    pub server: Server,
    /// Where the registry's files and every install live.
    pub dir: TempDir,
    host: &'static str,
    installer: Installer,
}

impl Mirror {
    /// pypiserver holding `wheels`, reached as `host` through a gate that mirrors it; `None` when this machine lacks
    /// pip's tools (the test then returns early; in CI it fails loudly instead).
    pub fn pypi(host: &'static str, wheels: &[Wheel<'_>]) -> Option<Self> {
        if !pip_tools() {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let files = dir.path().join("wheels");
        std::fs::create_dir_all(&files).unwrap();
        for (name, version, requires) in wheels {
            write_wheel(&files, name, version, requires);
        }
        let server = pypiserver(&files);
        Some(Self::start(dir, server, Installer::Pip, host))
    }

    /// verdaccio with `packages` published, reached as `host` through a gate that mirrors it; `None` when this machine lacks
    /// npm's tools.
    pub fn npm(host: &'static str, packages: &[NpmPackage<'_>]) -> Option<Self> {
        if !npm_tools() {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let server = verdaccio(dir.path());
        for (name, version, deps) in packages {
            npm_publish(server.port, dir.path(), name, version, deps);
        }
        Some(Self::start(dir, server, Installer::Npm, host))
    }

    /// Starts a gate that knows `server`, reached as `host`, as the installer's mirror.
    fn start(dir: TempDir, server: Server, installer: Installer, host: &'static str) -> Self {
        let ecosystem = match installer {
            Installer::Pip => "pypi",
            Installer::Npm => "npm",
        };
        let gate = mirror_gate(ecosystem, host, server.port).start();
        Self {
            gate,
            server,
            dir,
            host,
            installer,
        }
    }

    /// Installs `specs` in `turn` through the proxy, into a fresh directory.
    pub fn install(&self, turn: &Turn, specs: &[&str]) -> Output {
        let (proxy, port, work) = (self.gate.proxy(), self.server.port, self.dir.path());
        match self.installer {
            Installer::Pip => pip_install(proxy, turn, self.host, port, work, specs),
            Installer::Npm => npm_install(proxy, turn, self.host, port, work, specs),
        }
    }

    /// Whether installing `spec` in `turn` succeeds (the installer's output is printed when
    /// it does not).
    pub fn installs(&self, turn: &Turn, spec: &str) -> bool {
        installed(&self.install(turn, &[spec]))
    }

    /// Whether installing `spec` in `turn` fails.
    pub fn refuses(&self, turn: &Turn, spec: &str) -> bool {
        !self.install(turn, &[spec]).status.success()
    }

    /// `http://HOST:PORT` + `path` on the registry, as a client names it through the proxy.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}:{}{path}", self.host, self.server.port)
    }

    /// A plain `GET` of `path` on the registry through the proxy, as `turn`.
    pub async fn get(&self, turn: &Turn, path: &str) -> super::super::Resp {
        proxy_get(self.gate.proxy(), turn, &self.url(path)).await
    }

    /// The design's row "a package and its dependency need one card", in this ecosystem:
    /// installing `package` in a fresh turn fails with it and its dependency (`refused`, as
    /// recorded) on the turn's record, the approval tool asks for exactly those on one card
    /// and no site, and once that is approved the same install in the same turn (the resumed
    /// run) succeeds. Returns that install's output, for what a suite checks after.
    pub async fn one_card_covers_a_dependency(&self, package: &str, refused: [&str; 2]) -> Output {
        let api = self.gate.api();
        let turn = api.turn("u", "c", &[]).await;
        assert!(self.refuses(&turn, package), "{package} is not approved");
        assert_eq!(refused_packages(&api, &turn).await, refused);
        let (card, id, secret) = ask_packages(&api, &turn, &[]).await;
        assert_eq!(card["packages"], serde_json::json!(refused), "{card}");
        assert_eq!(card["sites"], serde_json::json!([]), "{card}");
        approve_card(&api, &id, &secret).await;
        let out = self.install(&turn, &[package]);
        assert!(installed(&out));
        out
    }
}
