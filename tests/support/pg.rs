//! A throwaway PostgreSQL cluster for tests that must stop and restart the database or run
//! several processes against one: `initdb` + `pg_ctl` on a free loopback port, owned by the
//! `postgres` user when running as root, removed on drop.

use std::path::PathBuf;
use std::process::Command;

/// A running (or stopped) test cluster.
pub struct PgCluster {
    bin: PathBuf,
    dir: tempfile::TempDir,
    pub port: u16,
}

fn pg_bin() -> PathBuf {
    if let Ok(b) = std::env::var("EGRESSGATE_TEST_PG_BIN") {
        return b.into();
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.path().join("bin"))
                .filter(|p| p.join("initdb").exists())
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found.pop().expect(
        "PostgreSQL server binaries not found: install the `postgresql` package (.ci/run does)",
    )
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout.starts_with(b"0"))
        .unwrap_or(false)
}

impl PgCluster {
    /// initdb and start.
    pub fn start() -> Self {
        let bin = pg_bin();
        let dir = tempfile::Builder::new()
            .prefix("egressgate-pg")
            .tempdir()
            .unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if is_root() {
            Command::new("chown")
                .arg("postgres")
                .arg(dir.path())
                .status()
                .unwrap();
        }
        let c = Self { bin, dir, port };
        c.run(&format!(
            "{}/initdb -D {}/data -A trust -U postgres --no-sync",
            c.bin.display(),
            c.dir.path().display()
        ));
        c.up();
        c
    }

    fn run(&self, cmd: &str) {
        let status = if is_root() {
            Command::new("su")
                .args(["-s", "/bin/sh", "postgres", "-c", cmd])
                .stdout(std::process::Stdio::null())
                .status()
        } else {
            Command::new("sh")
                .args(["-c", cmd])
                .stdout(std::process::Stdio::null())
                .status()
        }
        .unwrap();
        assert!(status.success(), "{cmd} failed");
    }

    /// Starts (or restarts) the server on the same port and data.
    pub fn up(&self) {
        let d = self.dir.path().display();
        self.run(&format!(
            "{}/pg_ctl -D {d}/data -l {d}/log -w -o \"-p {} -k {d} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200\" start",
            self.bin.display(),
            self.port
        ));
    }

    /// Stops the server (fast shutdown: connections are cut).
    pub fn down(&self) {
        self.run(&format!(
            "{}/pg_ctl -D {}/data -m fast -w stop",
            self.bin.display(),
            self.dir.path().display()
        ));
    }

    /// The server's URL for database `db`.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        let d = self.dir.path().display();
        let cmd = format!(
            "{}/pg_ctl -D {d}/data -m immediate stop",
            self.bin.display()
        );
        let _ = if is_root() {
            Command::new("su")
                .args(["-s", "/bin/sh", "postgres", "-c", &cmd])
                .output()
        } else {
            Command::new("sh").args(["-c", &cmd]).output()
        };
    }
}
