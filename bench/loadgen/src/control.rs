//! Just enough of egressgate's control API: open a turn, read a turn's refusals, and the
//! approval loop the gate's own latencies need (ask, register, resume, complete, revoke).

use std::io;
use std::net::SocketAddr;

use crate::client::Conn;

/// A turn: its id and the `Proxy-Authorization` value of its credential.
#[derive(Clone, Debug)]
pub struct Turn {
    pub id: String,
    pub auth: String,
}

/// Who calls: the runtime token speaking for a user, or nobody (a card's resume carries its
/// own secret).
#[derive(Clone, Copy)]
pub enum Caller<'a> {
    Runtime { token: &'a str, user: &'a str },
    Anonymous,
}

pub(crate) async fn call(
    addr: SocketAddr,
    method: &str,
    path: &str,
    who: Caller<'_>,
    body: Option<&str>,
) -> io::Result<(u16, String)> {
    let mut c = Conn::connect(addr).await?;
    let body = body.unwrap_or("");
    let auth = match who {
        Caller::Runtime { token, user } => {
            format!("Authorization: Bearer {token}\r\nX-Egressgate-User: {user}\r\n")
        }
        Caller::Anonymous => String::new(),
    };
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    c.send(req.as_bytes()).await?;
    let head = c.read_head(false).await?;
    let text = read_text(&mut c, &head).await?;
    Ok((head.status, text))
}

async fn read_text(c: &mut Conn, head: &crate::client::Head) -> io::Result<String> {
    // Re-read through the body reader, collecting bytes: small bodies only.
    let mut out = Vec::new();
    c.read_body_into(head, &mut out).await?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// The string value of `"key":"…"` in a flat JSON text (no escapes expected in our fields).
pub(crate) fn json_str(text: &str, key: &str) -> Option<String> {
    let pat = format!("\"{key}\":");
    let at = text.find(&pat)? + pat.len();
    let rest = text[at..].trim_start().strip_prefix('"')?;
    Some(rest[..rest.find('"')?].to_owned())
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16)
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Standard base64 with padding (credentials, and the origin's PEM certificate).
pub fn base64(input: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for ch in input.chunks(3) {
        let n = (u32::from(ch[0]) << 16)
            | (u32::from(*ch.get(1).unwrap_or(&0)) << 8)
            | u32::from(*ch.get(2).unwrap_or(&0));
        out.push(T[(n >> 18) as usize & 63] as char);
        out.push(T[(n >> 12) as usize & 63] as char);
        out.push(if ch.len() > 1 {
            T[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        out.push(if ch.len() > 2 {
            T[n as usize & 63] as char
        } else {
            '='
        });
    }
    out
}

/// The runtime token the scripts export (`EGRESSGATE_RUNTIME_TOKEN`), which opens turns.
pub fn runtime_token() -> io::Result<String> {
    std::env::var("EGRESSGATE_RUNTIME_TOKEN")
        .map_err(|_| io::Error::other("EGRESSGATE_RUNTIME_TOKEN is not set"))
}

/// The user every workload but the gate's own latencies opens turns for.
pub const USER: &str = "bench";

/// `POST /v1/turns` for [`USER`]'s `chat` with `sites` approved at launch.
pub async fn open_turn(
    addr: SocketAddr,
    token: &str,
    chat: &str,
    sites: &[&str],
) -> io::Result<Turn> {
    open_turn_for(addr, Caller::Runtime { token, user: USER }, chat, sites).await
}

/// `POST /v1/turns` for the caller's user's `chat` with `sites` approved at launch.
pub async fn open_turn_for(
    addr: SocketAddr,
    who: Caller<'_>,
    chat: &str,
    sites: &[&str],
) -> io::Result<Turn> {
    let user = match who {
        Caller::Runtime { user, .. } => user,
        Caller::Anonymous => return Err(io::Error::other("a turn is opened by the runtime")),
    };
    let sites_json = sites
        .iter()
        .map(|s| format!("\"{s}\""))
        .collect::<Vec<_>>()
        .join(",");
    let body = format!(
        "{{\"user_id\":\"{user}\",\"chat_id\":\"{chat}\",\"can_ask_human\":true,\"sites\":[{sites_json}]}}"
    );
    let (status, text) = call(addr, "POST", "/v1/turns", who, Some(&body)).await?;
    if status != 201 {
        return Err(io::Error::other(format!(
            "open turn answered {status}: {text}"
        )));
    }
    let id = json_str(&text, "turn_id")
        .ok_or_else(|| io::Error::other(format!("no turn_id in {text}")))?;
    let url = json_str(&text, "proxy_url")
        .ok_or_else(|| io::Error::other(format!("no proxy_url in {text}")))?;
    let userinfo = url
        .split_once("://")
        .and_then(|(_, r)| r.rsplit_once('@'))
        .map(|(u, _)| u.to_owned())
        .ok_or_else(|| io::Error::other(format!("no credential in proxy_url {url}")))?;
    let (user, pass) = userinfo
        .split_once(':')
        .ok_or_else(|| io::Error::other("no secret in proxy_url"))?;
    let cred = format!("{}:{}", percent_decode(user), percent_decode(pass));
    Ok(Turn {
        id,
        auth: format!("Basic {}", base64(cred.as_bytes())),
    })
}

/// The approval tool's first call for `turn` (`POST /v1/turns/{id}/approval-requests`): the
/// server merges the hosts refused this turn with the chat's approvals. Returns the status
/// and the answer's `outcome`.
pub async fn approval_request(
    addr: SocketAddr,
    token: &str,
    turn: &str,
) -> io::Result<(u16, Option<String>)> {
    let (status, text) = call(
        addr,
        "POST",
        &format!("/v1/turns/{turn}/approval-requests"),
        Caller::Runtime { token, user: USER },
        Some(r#"{"reason":"The scale benchmark asks for the host it was refused."}"#),
    )
    .await?;
    Ok((status, json_str(&text, "outcome")))
}

/// Sum of the `count` of every refusal recorded for the turn, plus the overflow counter.
pub async fn refusal_count(addr: SocketAddr, token: &str, turn: &str) -> io::Result<(u64, String)> {
    let (status, text) = call(
        addr,
        "GET",
        &format!("/v1/turns/{turn}/refusals"),
        Caller::Runtime { token, user: USER },
        None,
    )
    .await?;
    if status != 200 {
        return Err(io::Error::other(format!(
            "refusals answered {status}: {text}"
        )));
    }
    let mut total = 0u64;
    for part in text.split("\"count\":").skip(1) {
        let digits: String = part
            .trim_start()
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        total += digits.parse::<u64>().unwrap_or(0);
    }
    Ok((total, text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers() {
        assert_eq!(base64(b"t_1:abc"), "dF8xOmFiYw==");
        assert_eq!(percent_decode("a%3Ab"), "a:b");
        assert_eq!(
            json_str(r#"{"turn_id": "t_1","x":1}"#, "turn_id").as_deref(),
            Some("t_1")
        );
    }
}
