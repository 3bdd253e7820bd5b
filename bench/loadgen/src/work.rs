//! The workloads: request loops (forwarded or tunnelled, new connection or keep-alive), bulk
//! downloads, idle tunnels with RSS sampling. Every loop is bounded by a deadline and a count.

mod bulk;
mod conn;
mod idle;
mod load;
mod meas;
mod requests;

pub use bulk::bulk;
pub use idle::{Idle, idle};
pub use load::{Kind, Load, REQUEST_TIMEOUT, REQUEST_WORKLOADS, Target, TlsLoad};
pub use meas::{Meas, measured};
pub use requests::requests;
