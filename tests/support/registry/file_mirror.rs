//! A static file server as a package registry mirror, as naive as many are: it decodes the
//! request path once, cuts it at `?`, `#` or `;`, reads `\` as `/`, resolves dot segments,
//! honours `X-Original-URL` as some frameworks do, and serves the file under its root. The
//! package tests point the gate at it to prove that no spelling of a path judged as one
//! package (or as metadata) makes it serve another package's file. It records every request
//! target it was sent, so a test can also check the origin got exactly the judged path.

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// A running file mirror on 127.0.0.1.
pub struct FileMirror {
    pub port: u16,
    seen: Arc<Mutex<Vec<String>>>,
}

impl FileMirror {
    /// The request targets received so far, in order.
    pub fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

/// Serves the files under `root` (the thread ends with the test process).
pub fn file_mirror(root: &Path) -> FileMirror {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (root, seen2) = (root.to_path_buf(), seen.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming().map_while(Result::ok) {
            let (root, seen) = (root.clone(), seen2.clone());
            std::thread::spawn(move || serve(stream, &root, &seen));
        }
    });
    FileMirror { port, seen }
}

/// One request, then close.
fn serve(stream: std::net::TcpStream, root: &Path, seen: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(&stream);
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let mut target = line.split(' ').nth(1).unwrap_or("/").to_owned();
    seen.lock().unwrap().push(target.clone());
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':')
            && k.trim().eq_ignore_ascii_case("x-original-url")
        {
            target = v.trim().to_owned();
        }
    }
    let reply = match std::fs::read(resolve(root, &target)) {
        Ok(body) => [
            format!(
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            )
            .into_bytes(),
            body,
        ]
        .concat(),
        Err(_) => {
            b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_vec()
        }
    };
    let _ = (&stream).write_all(&reply);
}

/// The file a naive server reads for `target`.
fn resolve(root: &Path, target: &str) -> PathBuf {
    let decoded = String::from_utf8_lossy(&percent_decode(target)).into_owned();
    let cut = decoded.split(['?', '#', ';']).next().unwrap_or("");
    let mut parts: Vec<&str> = Vec::new();
    for seg in cut.split(['/', '\\']) {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    parts.iter().fold(root.to_path_buf(), |p, s| p.join(s))
}

fn percent_decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b[i],
            b.get(i + 1).copied().and_then(hex),
            b.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}
