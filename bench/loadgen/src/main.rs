//! Load generator for the egressgate benchmark. `origin` runs the loopback origin; `suite`
//! measures every workload against the origin itself and each proxy and writes the report;
//! `scale` and `gate` time the database-bound steps and the approval gate's own latencies.
//! Everything stays on 127.0.0.0/8; every loop is bounded by time and count.

mod args;
mod cards;
mod cli;
mod client;
mod control;
mod gate;
mod inspected;
mod logwatch;
mod miss;
mod origin;
mod ports;
mod proc;
mod report;
mod results;
mod rows;
mod scale;
mod suite;
mod work;

use std::process::ExitCode;

use clap::Parser as _;

use crate::cli::{Cli, Cmd};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match cli.cmd {
        Cmd::Origin(args) => match args.checked() {
            Ok((listen, tls)) => finished("origin", rt.block_on(origin::serve(listen, tls))),
            Err(e) => {
                eprintln!("{e}");
                ExitCode::FAILURE
            }
        },
        Cmd::FreePorts { count } => {
            let Some(ports) = ports::free(count) else {
                eprintln!("cannot find {count} free ports");
                return ExitCode::FAILURE;
            };
            for p in ports {
                println!("{p}");
            }
            ExitCode::SUCCESS
        }
        Cmd::Scale(args) => finished("scale", rt.block_on(scale::run(args))),
        Cmd::Miss(args) => passed("miss", rt.block_on(miss::run(args))),
        Cmd::Inspected(args) => passed("inspected", rt.block_on(inspected::run(args))),
        Cmd::Gate(args) => finished("gate", rt.block_on(gate::run(args))),
        Cmd::Suite(args) => {
            proc::CLK_TCK.store(args.clk_tck, std::sync::atomic::Ordering::Relaxed);
            passed("suite", rt.block_on(suite::run(*args)))
        }
    }
}

/// Success when the measurement ran and everything in it held; a failed check is exit code 2
/// (the section is printed all the same), an error `NAME failed: …` and exit code 1.
fn passed(name: &str, r: std::io::Result<bool>) -> ExitCode {
    match r {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("{name} finished with failures (see the report)");
            ExitCode::from(2)
        }
        Err(e) => finished(name, Err(e)),
    }
}

/// Success, or `NAME failed: …` on stderr and a failure code.
fn finished(name: &str, r: std::io::Result<()>) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name} failed: {e}");
            ExitCode::FAILURE
        }
    }
}
