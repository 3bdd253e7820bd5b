//! The sandbox's resolver: answers every name from the pool and sends nothing anywhere.
//!
//! `A` and `AAAA` get the name's pool address; every other type gets an empty answer
//! (NOERROR, no records), so a TXT or a data-carrying label reaches nobody but this process.
//! Names that are not host names (bytes outside letters, digits, `-` and `_`) get NXDOMAIN:
//! they could never be a `CONNECT` target. Parsing and writing are hickory-proto's.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use hickory_proto::op::{Message, Metadata, OpCode, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA};
use hickory_proto::rr::{DNSClass, RData, Record, RecordType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

use super::ACCEPT_BACKOFF;
use super::pool::{Family, Pool};

/// Time to live of every answer. The address never changes within the sandbox, so this only
/// bounds how long a client caches it.
const TTL: u32 = 300;
/// How long a DNS-over-TCP client may take to send its next query.
const TCP_IDLE: Duration = Duration::from_secs(10);
/// Longest host name (RFC 1035, without the trailing dot).
const MAX_NAME: usize = 253;

/// Answers one query message; `None` for bytes that are not a DNS query (dropped unanswered).
pub(crate) fn answer(query: &[u8], pool: &Mutex<Pool>) -> Option<Vec<u8>> {
    let request = Message::from_vec(query).ok()?;
    if request.metadata.message_type != hickory_proto::op::MessageType::Query {
        return None;
    }
    let mut metadata = Metadata::response_from_request(&request.metadata);
    metadata.recursion_available = true;
    let mut response = Message::new(metadata.id, metadata.message_type, metadata.op_code);
    response.metadata = metadata;
    response.add_queries(request.queries.iter().cloned());
    let code = match (request.metadata.op_code, request.queries.as_slice()) {
        (OpCode::Query, [query]) => {
            let family = match (query.query_class(), query.query_type()) {
                (DNSClass::IN, RecordType::A) => Some(Family::V4),
                (DNSClass::IN, RecordType::AAAA) => Some(Family::V6),
                _ => None,
            };
            match (host_name(query.name()), family) {
                (None, _) => ResponseCode::NXDomain,
                (Some(_), None) => ResponseCode::NoError,
                (Some(name), Some(family)) => {
                    let addr = pool
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .address(&name, family);
                    match addr {
                        Some(addr) => {
                            let rdata = match addr {
                                std::net::IpAddr::V4(v4) => RData::A(A(v4)),
                                std::net::IpAddr::V6(v6) => RData::AAAA(AAAA(v6)),
                            };
                            response.add_answer(Record::from_rdata(
                                query.name().clone(),
                                TTL,
                                rdata,
                            ));
                            ResponseCode::NoError
                        }
                        // The pool's name limit: refuse rather than reuse an address.
                        None => ResponseCode::Refused,
                    }
                }
            }
        }
        (OpCode::Query, _) => ResponseCode::FormErr,
        _ => ResponseCode::NotImp,
    };
    response.metadata.response_code = code;
    response.to_vec().ok()
}

/// The query name as the proxy will see it in `CONNECT`: lower-case ASCII labels of letters,
/// digits, `-` and `_`, joined by dots, without the root's dot. `None` for anything else.
pub(crate) fn host_name(name: &hickory_proto::rr::Name) -> Option<String> {
    let mut out = String::new();
    for label in name.iter() {
        if label.is_empty()
            || !label
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_')
        {
            return None;
        }
        if !out.is_empty() {
            out.push('.');
        }
        out.extend(label.iter().map(|b| char::from(b.to_ascii_lowercase())));
    }
    (!out.is_empty() && out.len() <= MAX_NAME).then_some(out)
}

/// Serves DNS over UDP on `socket` until the process ends.
pub(crate) async fn serve_udp(socket: UdpSocket, pool: Arc<Mutex<Pool>>) {
    let mut buf = vec![0u8; 4096];
    loop {
        match socket.recv_from(&mut buf).await {
            Ok((len, from)) => {
                if let Some(reply) = buf.get(..len).and_then(|q| answer(q, &pool)) {
                    let _ = socket.send_to(&reply, from).await;
                }
            }
            Err(_) => tokio::time::sleep(ACCEPT_BACKOFF).await,
        }
    }
}

/// Serves DNS over TCP on `listener` until the process ends.
pub(crate) async fn serve_tcp(listener: TcpListener, pool: Arc<Mutex<Pool>>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                tokio::spawn(serve_tcp_client(stream, Arc::clone(&pool)));
            }
            Err(_) => tokio::time::sleep(ACCEPT_BACKOFF).await,
        }
    }
}

/// Length-prefixed queries on one connection, answered in order, until it closes or idles.
async fn serve_tcp_client(mut stream: TcpStream, pool: Arc<Mutex<Pool>>) -> io::Result<()> {
    loop {
        let len = match tokio::time::timeout(TCP_IDLE, stream.read_u16()).await {
            Ok(Ok(len)) => usize::from(len),
            _ => return Ok(()),
        };
        let mut query = vec![0u8; len];
        tokio::time::timeout(TCP_IDLE, stream.read_exact(&mut query))
            .await
            .map_err(|_| io::ErrorKind::TimedOut)??;
        let Some(reply) = answer(&query, &pool) else {
            return Ok(());
        };
        let len = u16::try_from(reply.len()).map_err(|_| io::ErrorKind::InvalidData)?;
        // One write for prefix and message: some clients expect both in one segment.
        let mut framed = Vec::with_capacity(reply.len() + 2);
        framed.extend_from_slice(&len.to_be_bytes());
        framed.extend_from_slice(&reply);
        stream.write_all(&framed).await?;
    }
}

/// Where the resolver listens: one UDP socket and one TCP listener per family, all on
/// port 53 of the namespace's loopback addresses.
pub(crate) struct Listeners {
    /// `127.0.0.1:53` and `[::1]:53`, UDP.
    pub(crate) udp: Vec<std::net::UdpSocket>,
    /// `127.0.0.1:53` and `[::1]:53`, TCP.
    pub(crate) tcp: Vec<std::net::TcpListener>,
}

impl Listeners {
    /// Binds them (the namespace's root may bind port 53).
    pub(crate) fn bind(addrs: &[SocketAddr]) -> io::Result<Self> {
        let mut udp = Vec::new();
        let mut tcp = Vec::new();
        for addr in addrs {
            udp.push(std::net::UdpSocket::bind(addr)?);
            tcp.push(std::net::TcpListener::bind(addr)?);
        }
        Ok(Self { udp, tcp })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::op::Query;
    use hickory_proto::rr::Name;

    fn ask(pool: &Mutex<Pool>, name: &str, kind: RecordType) -> Message {
        let mut q = Message::query();
        let name = Name::from_ascii(name).unwrap_or_else(|_| Name::root());
        q.add_query(Query::query(name, kind));
        q.metadata.recursion_desired = true;
        let reply = q
            .to_vec()
            .ok()
            .and_then(|bytes| answer(&bytes, pool))
            .unwrap_or_default();
        let reply = Message::from_vec(&reply).unwrap_or_else(|_| Message::query());
        assert_eq!(reply.metadata.id, q.metadata.id);
        reply
    }

    /// The name the pool gave its first address (198.18.0.2) to, if any.
    fn first_address_name(pool: &Mutex<Pool>) -> Option<String> {
        let guard = pool.lock().unwrap_or_else(PoisonError::into_inner);
        let first = "198.18.0.2"
            .parse()
            .unwrap_or(super::super::pool::OWN_V4.into());
        guard.name(first).map(str::to_owned)
    }

    #[test]
    fn a_and_aaaa_come_from_the_pool_and_stay_stable() {
        let pool = Mutex::new(Pool::default());
        let a = ask(&pool, "Files.Example.COM.", RecordType::A);
        assert_eq!(a.metadata.response_code, ResponseCode::NoError);
        assert_eq!(a.answers.len(), 1);
        assert_eq!(
            a.answers[0].data,
            RData::A(A("198.18.0.2"
                .parse()
                .unwrap_or(super::super::pool::OWN_V4)))
        );
        let again = ask(&pool, "files.example.com", RecordType::A);
        assert_eq!(again.answers, a.answers);
        let aaaa = ask(&pool, "files.example.com", RecordType::AAAA);
        assert_eq!(
            aaaa.answers[0].data,
            RData::AAAA(AAAA(
                "2001:2::2".parse().unwrap_or(super::super::pool::OWN_V6)
            ))
        );
        assert_eq!(
            first_address_name(&pool).as_deref(),
            Some("files.example.com")
        );
    }

    #[test]
    fn other_types_get_an_empty_answer_and_odd_names_nxdomain() {
        let pool = Mutex::new(Pool::default());
        for kind in [
            RecordType::TXT,
            RecordType::MX,
            RecordType::SRV,
            RecordType::ANY,
        ] {
            let reply = ask(&pool, "c2.example", kind);
            assert_eq!(
                reply.metadata.response_code,
                ResponseCode::NoError,
                "{kind}"
            );
            assert!(reply.answers.is_empty(), "{kind}");
        }
        let reply = ask(&pool, "bad\\032name.example", RecordType::A);
        assert_eq!(reply.metadata.response_code, ResponseCode::NXDomain);
        assert!(reply.answers.is_empty());
        // No TXT lookup handed out an address.
        assert_eq!(first_address_name(&pool), None);
    }

    #[test]
    fn garbage_is_dropped_unanswered() {
        let pool = Mutex::new(Pool::default());
        assert_eq!(answer(b"", &pool), None);
        assert_eq!(answer(b"\x01\x02\x03", &pool), None);
    }
}
