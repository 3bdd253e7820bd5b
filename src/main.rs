//! The `egressgate` binary: command-line wiring only. `sandbox run` is dispatched before any
//! runtime exists (namespaces need a single-threaded process); everything else runs on tokio.

mod admin_tokens;
mod cli;
mod config;
mod data_dir;
mod logwriter;
mod run;
mod selfaddr;
mod tls;
mod tokens;

use std::process::ExitCode;

use crate::cli::{Command, SandboxCmd};

fn main() -> ExitCode {
    let cli = cli::parse();
    if let Command::Sandbox {
        action:
            SandboxCmd::Run {
                proxy_url,
                proxy_url_file,
                capture,
                no_isolate,
                ca_file,
                control_url,
                as_user,
                gate_data_dir,
                command,
            },
    } = cli.command
    {
        let started = egressgate_sandbox::hide_proxy_url_from_argv()
            .and_then(|()| egressgate_sandbox::proxy_url_from(proxy_url, proxy_url_file.as_deref()))
            .and_then(|proxy_url| {
                egressgate_sandbox::run(egressgate_sandbox::RunOptions {
                    proxy_url,
                    isolate: !no_isolate,
                    capture,
                    ca: ca_file
                        .map(egressgate_sandbox::CaSource::File)
                        .or(control_url.map(egressgate_sandbox::CaSource::ControlUrl)),
                    as_user,
                    gate_data_dirs: gate_data_dir,
                    command,
                })
            });
        return match started {
            Ok(code) => ExitCode::from(u8::try_from(code.clamp(0, 255)).unwrap_or(1)),
            Err(e) => {
                report(&e);
                ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(125))
            }
        };
    }
    unblock_shutdown_signals();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .on_thread_park(logwriter::on_park)
        .on_thread_stop(logwriter::on_stop)
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            report(&e);
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run::run(cli.command)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            report(&format!("{e:#}"));
            ExitCode::FAILURE
        }
    }
}

/// Unblocks SIGTERM and SIGINT before any thread starts, so every runtime thread inherits
/// them unblocked. A supervisor, CI runner or init system may start us with them blocked (the
/// mask survives exec); the graceful drain waits for them, and a blocked SIGTERM would leave
/// `serve` deaf until SIGKILL cuts every connection. `sandbox run` is not affected: it hands
/// its caller's own mask to the command.
fn unblock_shutdown_signals() {
    use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
    let mut set = SigSet::empty();
    set.add(Signal::SIGTERM);
    set.add(Signal::SIGINT);
    if let Err(e) = pthread_sigmask(SigmaskHow::SIG_UNBLOCK, Some(&set), None) {
        report(&format!("cannot unblock SIGTERM and SIGINT: {e}"));
    }
}

/// One line on stderr: the binary's edge, where context-rich errors end.
#[allow(clippy::print_stderr)]
fn report(e: &dyn std::fmt::Display) {
    eprintln!("egressgate: error: {e}");
}
