//! A raw HTTP/1.1 client over TCP that controls every byte it sends: absolute-form requests
//! for forwarding, CONNECT for tunnels, origin-form inside tunnels and for direct requests.

use std::io;
use std::net::SocketAddr;

use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

const BUF: usize = 16 * 1024;
/// Read size for large bodies (bulk downloads).
const BULK_READ: usize = 256 * 1024;
const MAX_HEAD: usize = 32 * 1024;

/// A connection with a read buffer: over TCP, or over TLS once [`Conn::into_tls`] ran.
pub struct Conn<S = TcpStream> {
    pub stream: S,
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

/// What a response head said.
#[derive(Debug, Clone)]
pub struct Head {
    pub status: u16,
    pub content_length: Option<u64>,
    pub chunked: bool,
    /// The server will close after this response.
    pub close: bool,
}

fn err(msg: impl Into<String>) -> io::Error {
    io::Error::other(msg.into())
}

/// Refuses anything that is not a loopback address: the benchmark never leaves the machine.
pub fn check_loopback(addr: SocketAddr) -> io::Result<()> {
    if addr.ip().is_loopback() {
        Ok(())
    } else {
        Err(err(format!(
            "{addr} is not a loopback address; the benchmark only talks to 127.0.0.0/8"
        )))
    }
}

impl Conn {
    pub async fn connect(addr: SocketAddr) -> io::Result<Self> {
        check_loopback(addr)?;
        let stream = TcpStream::connect(addr).await?;
        let _ = stream.set_nodelay(true);
        Ok(Self {
            stream,
            buf: vec![0; BUF],
            start: 0,
            end: 0,
        })
    }

    /// Runs a TLS handshake for `name` on this connection (directly to a TLS origin, or
    /// inside an established tunnel) and verifies the origin's certificate.
    pub async fn into_tls(
        self,
        tls: &Arc<rustls::ClientConfig>,
        name: &str,
    ) -> io::Result<Conn<TlsStream<TcpStream>>> {
        if self.start != self.end {
            return Err(err(
                "bytes after the CONNECT answer, before the TLS handshake",
            ));
        }
        let name = rustls::pki_types::ServerName::try_from(name.to_owned())
            .map_err(|e| err(format!("{name}: {e}")))?;
        let stream = TlsConnector::from(tls.clone())
            .connect(name, self.stream)
            .await?;
        Ok(Conn {
            stream,
            buf: self.buf,
            start: 0,
            end: 0,
        })
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> Conn<S> {
    pub async fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes).await
    }

    async fn fill(&mut self) -> io::Result<usize> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.end == self.buf.len() {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buf.len() {
            return Err(err("response head too large"));
        }
        let n = self.stream.read(&mut self.buf[self.end..]).await?;
        self.end += n;
        Ok(n)
    }

    /// Reads a response head; `connect` marks the answer to a CONNECT (no body on 2xx).
    pub async fn read_head(&mut self, connect: bool) -> io::Result<Head> {
        loop {
            let avail = &self.buf[self.start..self.end];
            if let Some(pos) = avail.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = parse_head(&avail[..pos], connect)?;
                self.start += pos + 4;
                if head.status >= 100 && head.status < 200 && head.status != 101 {
                    continue;
                }
                return Ok(head);
            }
            if avail.len() > MAX_HEAD {
                return Err(err("response head too large"));
            }
            if self.fill().await? == 0 {
                if self.start == self.end {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "connection closed before a response",
                    ));
                }
                return Err(err(format!(
                    "eof in response head: {:?}",
                    String::from_utf8_lossy(&self.buf[self.start..self.end])
                )));
            }
        }
    }

    /// Sends one request and reads its whole answer: the head and the body's length.
    pub async fn exchange(&mut self, req: &[u8]) -> io::Result<(Head, u64)> {
        self.send(req).await?;
        let head = self.read_head(false).await?;
        let n = self.read_body(&head).await?;
        Ok((head, n))
    }

    /// Reads (and discards) the body; returns its length.
    pub async fn read_body(&mut self, head: &Head) -> io::Result<u64> {
        self.body(head, None).await
    }

    /// Reads the body into `out` (small bodies: control API answers).
    pub async fn read_body_into(&mut self, head: &Head, out: &mut Vec<u8>) -> io::Result<u64> {
        self.body(head, Some(out)).await
    }

    async fn body(&mut self, head: &Head, mut sink: Option<&mut Vec<u8>>) -> io::Result<u64> {
        if let Some(n) = head.content_length {
            return self.skip(n, sink).await;
        }
        if head.chunked {
            let mut total = 0u64;
            loop {
                let line = self.read_line().await?;
                let size_txt = line.split(';').next().unwrap_or("").trim();
                let size = u64::from_str_radix(size_txt, 16)
                    .map_err(|_| err(format!("bad chunk size {line:?}")))?;
                if size == 0 {
                    // Trailers until the empty line.
                    while !self.read_line().await?.is_empty() {}
                    return Ok(total);
                }
                total += self.skip(size, sink.as_deref_mut()).await?;
                if !self.read_line().await?.is_empty() {
                    return Err(err("chunk not followed by CRLF"));
                }
            }
        }
        // Until close.
        let mut total = (self.end - self.start) as u64;
        if let Some(s) = sink.as_deref_mut() {
            s.extend_from_slice(&self.buf[self.start..self.end]);
        }
        self.start = self.end;
        loop {
            let n = self.stream.read(&mut self.buf).await?;
            if n == 0 {
                return Ok(total);
            }
            if let Some(s) = sink.as_deref_mut() {
                s.extend_from_slice(&self.buf[..n]);
            }
            total += n as u64;
        }
    }

    async fn read_line(&mut self) -> io::Result<String> {
        loop {
            let avail = &self.buf[self.start..self.end];
            if let Some(pos) = avail.windows(2).position(|w| w == b"\r\n") {
                let line = String::from_utf8_lossy(&avail[..pos]).into_owned();
                self.start += pos + 2;
                return Ok(line);
            }
            if self.fill().await? == 0 {
                return Err(err("eof in chunked body"));
            }
        }
    }

    async fn skip(&mut self, n: u64, mut sink: Option<&mut Vec<u8>>) -> io::Result<u64> {
        let mut left = n;
        let buffered = ((self.end - self.start) as u64).min(left);
        if let Some(s) = sink.as_deref_mut() {
            s.extend_from_slice(&self.buf[self.start..self.start + buffered as usize]);
        }
        self.start += buffered as usize;
        left -= buffered;
        if left == 0 {
            return Ok(n);
        }
        let mut big = if left > BUF as u64 {
            vec![0u8; BULK_READ]
        } else {
            Vec::new()
        };
        let scratch: &mut [u8] = if big.is_empty() {
            &mut self.buf
        } else {
            &mut big
        };
        while left > 0 {
            let want = usize::try_from(left.min(scratch.len() as u64)).unwrap_or(scratch.len());
            let got = self.stream.read(&mut scratch[..want]).await?;
            if got == 0 {
                return Err(err(format!("eof after {} of {n} body bytes", n - left)));
            }
            if let Some(s) = sink.as_deref_mut() {
                s.extend_from_slice(&scratch[..got]);
            }
            left -= got as u64;
        }
        self.start = 0;
        self.end = 0;
        Ok(n)
    }

    /// Waits (briefly) for the server to close, so the server side closes first and keeps the
    /// TIME_WAIT state, as a real client reading to EOF would.
    pub async fn wait_close(&mut self) {
        let _ = tokio::time::timeout(std::time::Duration::from_secs(2), async {
            loop {
                match self.stream.read(&mut self.buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
            }
        })
        .await;
    }
}

fn parse_head(raw: &[u8], connect: bool) -> io::Result<Head> {
    let text = std::str::from_utf8(raw).map_err(|_| err("response head is not UTF-8"))?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or("");
    if !version.starts_with("HTTP/1.") {
        return Err(err(format!("not an HTTP/1 response: {status_line:?}")));
    }
    let status: u16 = parts
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| err(format!("bad status line {status_line:?}")))?;
    let mut head = Head {
        status,
        content_length: None,
        chunked: false,
        close: version == "HTTP/1.0",
    };
    for line in lines {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        if k.eq_ignore_ascii_case("content-length") {
            head.content_length = v.parse().ok();
        } else if k.eq_ignore_ascii_case("transfer-encoding") {
            head.chunked = v.to_ascii_lowercase().contains("chunked");
        } else if k.eq_ignore_ascii_case("connection") || k.eq_ignore_ascii_case("proxy-connection")
        {
            let v = v.to_ascii_lowercase();
            if v.contains("close") {
                head.close = true;
            } else if v.contains("keep-alive") {
                head.close = false;
            }
        }
    }
    if connect && (200..300).contains(&status) {
        head.content_length = Some(0);
        head.chunked = false;
    } else if status == 204 || status == 304 {
        head.content_length = Some(0);
    }
    if head.chunked {
        head.content_length = None;
    }
    Ok(head)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads() {
        let h = parse_head(
            b"HTTP/1.0 200 Connection established\r\nProxy-agent: x",
            true,
        )
        .unwrap();
        assert_eq!((h.status, h.content_length, h.close), (200, Some(0), true));
        let h = parse_head(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked", false).unwrap();
        assert!(h.chunked && h.content_length.is_none() && !h.close);
        let h = parse_head(
            b"HTTP/1.1 403 Forbidden\r\ncontent-length: 12\r\nconnection: close",
            false,
        )
        .unwrap();
        assert_eq!((h.status, h.content_length, h.close), (403, Some(12), true));
    }
}
