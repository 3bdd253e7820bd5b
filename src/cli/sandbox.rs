//! `egressgate sandbox run`: the launcher's options (it runs before any async runtime exists).

use std::ffi::OsString;
use std::path::PathBuf;

use clap::Subcommand;

/// `sandbox run`.
#[derive(Subcommand, Debug)]
pub enum SandboxCmd {
    /// Run CMD with the proxy as its only route out.
    Run {
        /// The turn's proxy URL (`http://TURN_ID:SECRET@host:port`). Every local user can
        /// read a command line: prefer --proxy-url-file or EGRESSGATE_PROXY_URL. Given here,
        /// the launcher re-executes itself at once with the URL moved into its environment.
        #[arg(long, conflicts_with = "proxy_url_file")]
        proxy_url: Option<String>,
        /// A file whose first line is the turn's proxy URL.
        #[arg(long)]
        proxy_url_file: Option<PathBuf>,
        /// Capture connections that ignore the proxy settings: on (default), off, or auto
        /// (off, with one line on stderr, where this machine cannot capture).
        #[arg(long, default_value = "on")]
        capture: egressgate_sandbox::Capture,
        /// Only set the proxy variables (no network namespace).
        #[arg(long)]
        no_isolate: bool,
        /// The deployment CA (PEM) the command should trust, for inspected hosts: it gets a
        /// bundle of the system roots plus this CA.
        #[arg(long, conflicts_with = "control_url")]
        ca_file: Option<PathBuf>,
        /// The control plane (`http://HOST:PORT`) to fetch the deployment CA from
        /// (`GET /v1/ca.pem`), instead of --ca-file.
        #[arg(long, env = "EGRESSGATE_CONTROL_URL")]
        control_url: Option<String>,
        /// Run the command as this user (a name or a uid). A root launcher defaults to
        /// `nobody`, so the command is never host root unless `--as-user root` says so; an
        /// unprivileged launcher runs it as itself.
        #[arg(long, value_name = "USER|UID")]
        as_user: Option<String>,
        /// The gate's data directory: the launcher refuses to start when the command's user
        /// could reach it (also checked: EGRESSGATE_DATA_DIR and ./egressgate-data).
        #[arg(long, value_name = "DIR")]
        gate_data_dir: Vec<PathBuf>,
        /// The command and its arguments.
        #[arg(last = true, required = true)]
        command: Vec<OsString>,
    },
}
