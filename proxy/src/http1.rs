//! HTTP/1 as the tunnel relay reads and writes it. `framing` tells how long a body is from its
//! headers; `body` follows a body to its end as it streams (and writes a chunked one again);
//! `head` parses a request head into typed parts and frames it; `encode` writes a framed head
//! afresh. The relay passes on only what these produced, never the client's head bytes, so an
//! origin cannot read a request differently from the way the proxy judged it.

pub mod body;
pub mod encode;
pub mod frame;
pub mod framing;
pub mod head;

pub use body::{Body, Scan};
pub use frame::Framed;
pub use framing::{BodyLen, FramingError};
pub use head::{HeadError, MAX_HEADERS, RequestHead, RequestTarget, Version};
