//! The command line: the subcommands and every flag the bench scripts pass. The flags,
//! their defaults and `--help` are what bench/*.sh rely on; keep them as they are.

use std::io;
use std::net::SocketAddr;

use clap::{Parser, Subcommand};

use crate::args::SuiteArgs;
use crate::{client, gate, inspected, miss, origin, scale};

/// The command line: one subcommand per job of the benchmark scripts.
#[derive(Parser)]
#[command(about = "egressgate benchmark: loopback origin and load generator")]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
}

/// What the scripts ask for (bench/run.sh, scale.sh, gate.sh, capture.sh, profile.sh).
#[derive(Subcommand)]
pub enum Cmd {
    /// Serve the loopback origin (`/small`, `/bulk?mib=N`), and the same over TLS 1.3.
    Origin(OriginArgs),
    /// Run every workload against direct and each proxy; write the markdown report.
    Suite(Box<SuiteArgs>),
    /// Time the cache-miss decision and the approval tool's merge (bench/scale.sh).
    Scale(scale::ScaleArgs),
    /// Cache-miss decisions per second: a new host per request, many turns (bench/run.sh).
    Miss(miss::MissArgs),
    /// Inspected TLS against opaque, and the cost of minting a leaf (bench/run.sh).
    Inspected(inspected::InspectedArgs),
    /// Time the gate's own latencies: click to first allowed byte, revoke to closed, an
    /// expiring grant to closed (bench/gate.sh).
    Gate(gate::GateArgs),
    /// Print `count` currently free TCP ports on 127.0.0.1 (for proxies that need a fixed port).
    FreePorts {
        #[arg(default_value_t = 1)]
        count: usize,
    },
}

/// Where the origin listens; the scripts read its addresses from its log lines.
#[derive(clap::Args)]
pub struct OriginArgs {
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Also serve TLS 1.3 here, with a fresh self-signed certificate for `--tls-name`.
    #[arg(long, requires = "cert_out")]
    tls_listen: Option<SocketAddr>,
    /// The TLS certificate's names (repeat; `*.suffix` names every host below it).
    #[arg(long, default_value = "bench.example.com")]
    tls_name: Vec<String>,
    /// Where the TLS certificate (DER) is written, for the clients to trust.
    #[arg(long)]
    cert_out: Option<std::path::PathBuf>,
    /// Where the same certificate is written in PEM (egressgate's `--upstream-ca`).
    #[arg(long)]
    cert_pem_out: Option<std::path::PathBuf>,
}

impl OriginArgs {
    /// The plain listener and the TLS one, once both are known to be loopback addresses.
    pub fn checked(self) -> io::Result<(SocketAddr, Option<origin::TlsOrigin>)> {
        for addr in std::iter::once(self.listen).chain(self.tls_listen) {
            client::check_loopback(addr)?;
        }
        let tls = self
            .tls_listen
            .zip(self.cert_out)
            .map(|(listen, cert_out)| origin::TlsOrigin {
                listen,
                names: self.tls_name,
                cert_out,
                pem_out: self.cert_pem_out,
            });
        Ok((self.listen, tls))
    }
}
