//! The approval loop through egressgate's control API, as a runtime and a person drive it:
//! ask for a URL (the approval tool, then registering the interrupt), the person's click
//! (a resume with a decision), the resumed run finishing, a revocation, and an approval's
//! expiry as the API lists it.

use std::io;
use std::net::SocketAddr;

use crate::control::{Caller, call, json_str};

/// A registered card: its interrupt id and resume secret.
#[derive(Clone, Debug)]
pub struct Card {
    pub id: String,
    pub secret: String,
}

fn expect(what: &str, want: u16, (status, text): (u16, String)) -> io::Result<String> {
    if status == want {
        Ok(text)
    } else {
        Err(io::Error::other(format!(
            "{what} answered {status} (expected {want}): {text}"
        )))
    }
}

/// The approval tool for `url` in turn `turn` (which must answer `ask`), then the interrupt's
/// registration.
pub async fn ask(addr: SocketAddr, who: Caller<'_>, turn: &str, url: &str) -> io::Result<Card> {
    let body = format!(r#"{{"reason":"the gate benchmark needs {url}","urls":["{url}"]}}"#);
    let path = format!("/v1/turns/{turn}/approval-requests");
    let text = expect(
        "approval request",
        200,
        call(addr, "POST", &path, who, Some(&body)).await?,
    )?;
    if json_str(&text, "outcome").as_deref() != Some("ask") {
        return Err(io::Error::other(format!(
            "approval request did not ask: {text}"
        )));
    }
    let draft = json_str(&text, "draft_id")
        .ok_or_else(|| io::Error::other(format!("no draft_id in {text}")))?;
    let body = format!(r#"{{"draft_id":"{draft}"}}"#);
    let text = expect(
        "register",
        201,
        call(addr, "POST", "/v1/interrupts", who, Some(&body)).await?,
    )?;
    // The interrupt's own id is the first "id" of the answer's `interrupt` object.
    let interrupt = text
        .find("\"interrupt\"")
        .map(|at| &text[at..])
        .ok_or_else(|| io::Error::other(format!("no interrupt in {text}")))?;
    Ok(Card {
        id: json_str(interrupt, "id")
            .ok_or_else(|| io::Error::other(format!("no interrupt id in {text}")))?,
        secret: json_str(&text, "resume_secret")
            .ok_or_else(|| io::Error::other(format!("no resume_secret in {text}")))?,
    })
}

/// The person's click: a resume of `card` with `payload` (a JSON object), which must claim
/// it. Returns the claim id.
pub async fn resume(addr: SocketAddr, card: &Card, payload: &str) -> io::Result<String> {
    let body = format!(
        r#"{{"secret":"{}","resume":[{{"interruptId":"{}","status":"resolved","payload":{payload}}}]}}"#,
        card.secret, card.id
    );
    let path = format!("/v1/interrupts/{}/resume", card.id);
    let text = expect(
        "resume",
        200,
        call(addr, "POST", &path, Caller::Anonymous, Some(&body)).await?,
    )?;
    json_str(&text, "claim_id").ok_or_else(|| io::Error::other(format!("no claim in {text}")))
}

/// The resumed run finished: frees the user's resume slot.
pub async fn complete(addr: SocketAddr, card: &Card, claim: &str) -> io::Result<()> {
    let body = format!(r#"{{"claim_id":"{claim}"}}"#);
    let path = format!("/v1/interrupts/{}/complete", card.id);
    expect(
        "complete",
        200,
        call(addr, "POST", &path, Caller::Anonymous, Some(&body)).await?,
    )?;
    Ok(())
}

/// `DELETE /v1/chats/{chat}/approvals/site/{host}`.
pub async fn revoke(addr: SocketAddr, who: Caller<'_>, chat: &str, host: &str) -> io::Result<()> {
    let path = format!("/v1/chats/{chat}/approvals/site/{host}");
    expect("revoke", 200, call(addr, "DELETE", &path, who, None).await?)?;
    Ok(())
}

/// When the caller's user-scope approval of `host` expires, in Unix milliseconds.
pub async fn user_grant_expiry(addr: SocketAddr, who: Caller<'_>, host: &str) -> io::Result<u64> {
    let Caller::Runtime { user, .. } = who else {
        return Err(io::Error::other(
            "a user's approvals are read by the runtime",
        ));
    };
    let path = format!("/v1/users/{user}/approvals");
    let text = expect(
        "user approvals",
        200,
        call(addr, "GET", &path, who, None).await?,
    )?;
    let row = text
        .find(&format!("\"value\":\"{host}\""))
        .and_then(|at| text[..at].rfind('{').map(|start| &text[start..]))
        .ok_or_else(|| io::Error::other(format!("no user approval of {host}: {text}")))?;
    let at = json_str(row, "expires_at")
        .ok_or_else(|| io::Error::other(format!("no expires_at in {row}")))?;
    rfc3339_millis(&at).ok_or_else(|| io::Error::other(format!("bad expires_at {at:?}")))
}

/// `YYYY-MM-DDTHH:MM:SS[.mmm]Z` (what the API writes) as Unix milliseconds.
fn rfc3339_millis(s: &str) -> Option<u64> {
    let s = s.strip_suffix('Z')?;
    let (date, time) = s.split_once('T')?;
    let mut d = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let mut t = hms.splitn(3, ':').map(|p| p.parse::<i64>().ok());
    let (hh, mm, ss) = (t.next()??, t.next()??, t.next()??);
    let ms: i64 = format!("{frac:0<3}").get(..3)?.parse().ok()?;
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    u64::try_from(((days * 24 + hh) * 60 + mm) * 60 * 1000 + ss * 1000 + ms).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times() {
        assert_eq!(rfc3339_millis("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(rfc3339_millis("1970-01-02T00:00:01.5Z"), Some(86_401_500));
        // `date -u -d 2026-12-01T15:25:00.123Z +%s%3N`
        assert_eq!(
            rfc3339_millis("2026-12-01T15:25:00.123Z"),
            Some(1_796_138_700_123)
        );
        assert_eq!(rfc3339_millis("2026-12-01 15:25:00Z"), None);
    }
}
