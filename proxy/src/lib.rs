//! The data plane. A request flows through the modules in this order:
//!
//! `server` (accept, TLS, limits) → `handler` (one request) → `identify` (turn credential) →
//! `target` (parse and normalise) → `decide` (ordered rules) → `dial` + `addr` (resolve once,
//! vet, connect) → `tunnel` (CONNECT: first bytes judged by `first_bytes` + `sni`; plain HTTP
//! relayed with every head parsed, judged and written afresh by `http1`, or served request by
//! request) or `forward` (absolute-form HTTP, where `packages` judges each request to a package
//! registry by the package `registry` maps it to) → `access` (the per-request access level
//! check) → `recorder` (refusals before the 403, egress summaries). `inspect` ends TLS for
//! inspected hosts so their requests take the forwarding path too. `relay` and `relay_tcp`
//! move tunnel bytes; `respond` writes what the proxy says itself (and `present` shows
//! a captured connection its refusal inside the stream); `metrics` counts it all.

pub mod access;
pub mod addr;
pub mod decide;
pub mod decision_log;
pub mod dial;
mod epoch_watch;
pub mod first_bytes;
pub mod http1;
pub mod identify;
pub mod inspect;
pub mod metrics;
pub mod pool;
pub mod recorder;
pub mod registry;
pub mod relay;
pub mod relay_tcp;
pub mod respond;
mod revoke;
pub mod settings;
pub mod sni;
pub mod target;

mod forward;
mod handler;
mod in_flight;
mod packages;
mod present;
mod server;
mod shared;
mod tunnel;

pub use server::Proxy;
pub use settings::{AllowedRange, Settings};
