//! The canonical decision line: one `proxy decision` line at info per proxied request and per
//! tunnel, whatever the outcome (`200`, `403`, `407`, `429`, `502`, `503`, `504`), with the
//! same fields everywhere, so an operator can follow every decision. Allowed lines can be
//! sampled (`--log-allowed all|none|1/N`); refusals and failures never are, but repeats of an
//! identical one (same turn, host, reason and status) are limited to one line per
//! [`REPEAT_WINDOW`], the next line carrying how many were suppressed, so a retry storm
//! cannot fill a disk (the refusal record already coalesces them).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::num::NonZeroU64;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use egressgate_store::{ChatId, Grant, Host, TurnId};

/// At most one identical refusal or failure line per this window.
pub const REPEAT_WINDOW: Duration = Duration::from_secs(1);

/// Distinct repeat keys remembered before stale ones are dropped.
const REPEAT_KEYS: usize = 10_000;

/// Which allowed lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Sampling {
    /// Every allowed line (the default).
    #[default]
    All,
    /// No allowed line (refusals and failures are still written).
    None,
    /// One allowed line in N.
    OneIn(NonZeroU64),
}

impl std::str::FromStr for Sampling {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("expected all, none or 1/N (N ≥ 1), got `{s}`");
        match s {
            "all" => Ok(Self::All),
            "none" => Ok(Self::None),
            _ => {
                let n = s.strip_prefix("1/").ok_or_else(bad)?;
                let n: NonZeroU64 = n.parse().map_err(|_| bad())?;
                Ok(if n.get() == 1 {
                    Self::All
                } else {
                    Self::OneIn(n)
                })
            }
        }
    }
}

/// What was decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Let through (possibly in shadow mode: then `grant` is `shadow`).
    Allow,
    /// Refused for a refusal reason (or, with `shadow`, would have been).
    Refuse,
    /// Not a policy decision: bad credentials, a malformed request, an upstream or database
    /// failure, a limit before any turn was known.
    Fail,
}

impl Verdict {
    fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Refuse => "refuse",
            Self::Fail => "fail",
        }
    }
}

/// One decision line's fields.
#[derive(Clone, Debug)]
pub struct Line<'a> {
    /// What was decided.
    pub decision: Verdict,
    /// The status the client got (for a tunnel: `200`, or `502` when its upstream failed
    /// after the `200`; for a shadowed refusal: the `403` it would have got).
    pub status: u16,
    /// The refusal reason, or a short failure code (`bad_credentials`, `dns`, …).
    pub reason: Option<&'a str>,
    /// `connect`, `forward`, or `tunnel_http` (a plain-HTTP request inside a tunnel).
    pub kind: &'static str,
    /// The turn, once known.
    pub turn: Option<&'a TurnId>,
    /// Its chat.
    pub chat: Option<&'a ChatId>,
    /// The target host (as asked, for refusals of unparseable names).
    pub host: &'a str,
    /// The target port (0 when unknown).
    pub port: u16,
    /// The vetted address dialled.
    pub addr: Option<SocketAddr>,
    /// Bytes client → origin (for a forwarded request: its body's declared length).
    pub bytes_up: Option<u64>,
    /// Bytes origin → client.
    pub bytes_down: Option<u64>,
    /// From the start of the decision to the end of the request or tunnel.
    pub duration: Duration,
    /// The grant that let it through.
    pub grant: Option<&'a Grant>,
    /// Shadow mode.
    pub shadow: bool,
    /// How a tunnel ended (`closed`, `idle`, `turn_expired`, `revoked`, …).
    pub end: Option<&'a str>,
    /// The package a registry refusal was about.
    pub package: Option<&'a str>,
}

impl<'a> Line<'a> {
    /// A line with only the verdict, status and kind set.
    pub fn new(decision: Verdict, status: u16, kind: &'static str, started: Instant) -> Self {
        Self {
            decision,
            status,
            reason: None,
            kind,
            turn: None,
            chat: None,
            host: "",
            port: 0,
            addr: None,
            bytes_up: None,
            bytes_down: None,
            duration: started.elapsed(),
            grant: None,
            shadow: false,
            end: None,
            package: None,
        }
    }

    fn emit(&self, suppressed: u64) {
        let card_id = self.grant.and_then(|g| match &g.kind {
            egressgate_store::GrantKind::Approval { card_id } => Some(card_id.as_str()),
            _ => None,
        });
        tracing::info!(
            decision = self.decision.as_str(),
            status = self.status,
            reason = self.reason,
            kind = self.kind,
            turn_id = self.turn.map(display),
            chat_id = self.chat.map(display),
            host = self.host,
            port = self.port,
            addr = self.addr.map(display),
            bytes_up = self.bytes_up,
            bytes_down = self.bytes_down,
            duration_ms = u64::try_from(self.duration.as_millis()).unwrap_or(u64::MAX),
            grant = self.grant.map(Grant::kind_str),
            card_id,
            shadow = self.shadow,
            end = self.end,
            package = self.package,
            suppressed = (suppressed > 0).then_some(suppressed),
            "proxy decision"
        );
    }
}

/// An allowed request's or tunnel's facts, kept until its line is written at its end.
#[derive(Clone, Debug)]
pub struct Allowed {
    /// `connect`, `forward` or `tunnel_http`.
    pub kind: &'static str,
    /// The turn.
    pub turn: TurnId,
    /// Its chat.
    pub chat: ChatId,
    /// The target.
    pub host: Host,
    /// The target port.
    pub port: u16,
    /// What let it through.
    pub grant: Grant,
    /// Shadow mode (the grant is then `shadow`).
    pub shadow: bool,
    /// When its decision started.
    pub started: Instant,
}

impl Allowed {
    /// The line for its end: `status` sent, `addr` dialled, bytes each way.
    pub fn line(
        &self,
        status: u16,
        addr: Option<SocketAddr>,
        up: Option<u64>,
        down: Option<u64>,
    ) -> Line<'_> {
        Line {
            reason: None,
            turn: Some(&self.turn),
            chat: Some(&self.chat),
            host: self.host.as_str(),
            port: self.port,
            addr,
            bytes_up: up,
            bytes_down: down,
            grant: Some(&self.grant),
            shadow: self.shadow,
            ..Line::new(Verdict::Allow, status, self.kind, self.started)
        }
    }
}

/// Identifies "the same" refusal or failure for the repeat limit.
#[derive(Clone, PartialEq, Eq, Hash)]
struct RepeatKey {
    turn: Option<TurnId>,
    host: String,
    reason: Option<String>,
    status: u16,
}

struct Repeat {
    last: Instant,
    suppressed: u64,
}

/// Writes decision lines with the sampling and the repeat limit.
pub struct DecisionLog {
    sampling: Sampling,
    allowed_seen: AtomicU64,
    repeats: Mutex<HashMap<RepeatKey, Repeat>>,
}

impl DecisionLog {
    /// A log sampling allowed lines as `sampling` says.
    pub fn new(sampling: Sampling) -> Self {
        Self {
            sampling,
            allowed_seen: AtomicU64::new(0),
            repeats: Mutex::default(),
        }
    }

    /// Writes an allowed line, if the sampling picks it (one atomic add; no lock).
    pub fn allowed(&self, line: &Line<'_>) {
        let write = match self.sampling {
            Sampling::All => true,
            Sampling::None => false,
            Sampling::OneIn(n) => self
                .allowed_seen
                .fetch_add(1, Ordering::Relaxed)
                .is_multiple_of(n.get()),
        };
        if write {
            line.emit(0);
        }
    }

    /// Writes a refusal or failure line, unless an identical one was written within the
    /// repeat window (then it is counted, and the next one written says how many).
    pub fn refused(&self, line: &Line<'_>) {
        let key = RepeatKey {
            turn: line.turn.cloned(),
            host: line.host.to_owned(),
            reason: line.reason.map(str::to_owned),
            status: line.status,
        };
        let now = Instant::now();
        let suppressed = {
            let Ok(mut m) = self.repeats.lock() else {
                return line.emit(0);
            };
            if let Some(r) = m.get_mut(&key) {
                if now.duration_since(r.last) < REPEAT_WINDOW {
                    r.suppressed += 1;
                    return;
                }
                r.last = now;
                std::mem::take(&mut r.suppressed)
            } else {
                if m.len() >= REPEAT_KEYS {
                    m.retain(|_, r| now.duration_since(r.last) < REPEAT_WINDOW);
                }
                if m.len() < REPEAT_KEYS {
                    m.insert(
                        key,
                        Repeat {
                            last: now,
                            suppressed: 0,
                        },
                    );
                }
                0
            }
        };
        line.emit(suppressed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The repeat limit counts what it holds back per identical line, and keeps distinct
    /// lines apart.
    #[test]
    fn identical_lines_are_held_back_and_counted() {
        let log = DecisionLog::new(Sampling::All);
        let turn = TurnId::from_db("t_a".into());
        let line = |host| Line {
            reason: Some("not_approved"),
            turn: Some(&turn),
            host,
            ..Line::new(Verdict::Refuse, 403, "forward", Instant::now())
        };
        for _ in 0..5 {
            log.refused(&line("a.example"));
        }
        log.refused(&line("b.example"));
        let held = |host: &str| {
            let key = RepeatKey {
                turn: Some(turn.clone()),
                host: host.to_owned(),
                reason: Some("not_approved".to_owned()),
                status: 403,
            };
            log.repeats
                .lock()
                .ok()
                .and_then(|m| m.get(&key).map(|r| r.suppressed))
        };
        assert_eq!(held("a.example"), Some(4));
        assert_eq!(held("b.example"), Some(0));
    }

    #[test]
    fn sampling_spellings() {
        assert_eq!("all".parse(), Ok(Sampling::All));
        assert_eq!("none".parse(), Ok(Sampling::None));
        assert_eq!("1/1".parse(), Ok(Sampling::All));
        assert_eq!(
            "1/10".parse(),
            Ok(Sampling::OneIn(
                NonZeroU64::new(10).unwrap_or(NonZeroU64::MIN)
            ))
        );
        for bad in ["", "some", "1/0", "2/10", "1/", "1/x", "1/-3"] {
            assert!(bad.parse::<Sampling>().is_err(), "{bad}");
        }
    }
}
