//! The launcher's own failures, and the exit code each one maps to.

/// Exit code for a launcher failure (bad flag, setup error), like `env` and `docker run`.
pub const EXIT_LAUNCHER_ERROR: i32 = 125;
/// Exit code when isolation was asked for but the kernel refused it, so that a caller can tell
/// "this machine cannot sandbox" apart from every other failure and never mistake it for the
/// command's own status.
pub const EXIT_ISOLATION_UNAVAILABLE: i32 = 122;
/// Exit code when the command exists but cannot be executed (as `env` and shells do).
pub const EXIT_NOT_EXECUTABLE: i32 = 126;
/// Exit code when the command does not exist (as `env` and shells do).
pub const EXIT_NOT_FOUND: i32 = 127;

/// Why the launcher itself failed (never the command's own failure, which is an exit code).
///
/// Messages are one line and never contain the proxy credential.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// No proxy URL, or more than one, among `--proxy-url`, `--proxy-url-file` and
    /// `EGRESSGATE_PROXY_URL`; or the file could not be read.
    #[error("{0}")]
    ProxyUrlSource(String),
    /// `--proxy-url` was rejected before anything ran.
    #[error("invalid --proxy-url: {0}")]
    InvalidProxyUrl(String),
    /// Nothing to run.
    #[error("no command given (usage: sandbox run --proxy-url URL -- CMD [ARGS...])")]
    NoCommand,
    /// The caller started threads before calling `run`; forking then is unsafe and the kernel
    /// refuses to create a user namespace.
    #[error("the sandbox launcher must start before any other thread ({0} threads running)")]
    NotSingleThreaded(usize),
    /// The kernel refused a namespace step; the command did not run.
    #[error(
        "cannot isolate the command's network: {0} (needs root or unprivileged user namespaces, \
         see sysctl user.max_user_namespaces; --no-isolate runs without isolation)"
    )]
    IsolationUnavailable(String),
    /// `--capture on` where capture cannot be done; the command did not run.
    #[error(
        "cannot capture the command's connections: {0} (--capture auto or off runs without \
         capture)"
    )]
    CaptureUnavailable(String),
    /// Some other step of setting up the sandbox failed; the command did not run.
    #[error("sandbox setup failed: {what}: {source}")]
    Setup {
        /// The step that failed, in a few words.
        what: &'static str,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// The deployment CA could not be read or fetched; the command did not run.
    #[error("cannot give the command the deployment CA: {0}")]
    Trust(String),
    /// A setup step inside the namespace failed; the message came from the inside half.
    #[error("sandbox setup failed: {0}")]
    InsideSetup(String),
    /// `--as-user` names no user, or a user this launcher cannot become; nothing ran.
    #[error("--as-user {0}")]
    AsUser(String),
    /// The command's user could reach the gate's data directory, or could not enter the
    /// working directory; nothing ran.
    #[error("refusing to start: {0}")]
    Refused(String),
}

impl SandboxError {
    /// The exit code the launcher process should use for this failure: 125, except
    /// [`EXIT_ISOLATION_UNAVAILABLE`] when isolation itself is impossible on this machine.
    pub fn exit_code(&self) -> i32 {
        match self {
            Self::IsolationUnavailable(_) | Self::CaptureUnavailable(_) => {
                EXIT_ISOLATION_UNAVAILABLE
            }
            _ => EXIT_LAUNCHER_ERROR,
        }
    }

    /// Wraps an I/O failure of a setup step.
    pub(crate) fn setup(what: &'static str, source: impl Into<std::io::Error>) -> Self {
        Self::Setup {
            what,
            source: source.into(),
        }
    }
}
