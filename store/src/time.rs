//! Time as the store sees it: milliseconds since the Unix epoch in every column (portable across
//! SQLite and PostgreSQL), RFC 3339 UTC on the wire. "Expired" always means `now >= expires_at`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A point in time, millisecond precision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The current wall-clock time.
    pub fn now() -> Self {
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        Self(i64::try_from(ms).unwrap_or(i64::MAX))
    }

    /// From the database column.
    pub fn from_millis(ms: i64) -> Self {
        Self(ms)
    }

    /// For the database column.
    pub fn millis(self) -> i64 {
        self.0
    }

    /// `self + d`, saturating.
    pub fn plus(self, d: Duration) -> Self {
        Self(
            self.0
                .saturating_add(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
        )
    }

    /// Whether something expiring at `self` is expired at `now`.
    pub fn has_passed(self, now: Timestamp) -> bool {
        now >= self
    }

    /// RFC 3339 UTC with millisecond precision, e.g. `2026-11-30T20:00:00.000Z`.
    pub fn rfc3339(self) -> String {
        let ms = u64::try_from(self.0.max(0)).unwrap_or(0);
        humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
    }

    /// Parses an RFC 3339 timestamp (query parameters such as `since=`).
    pub fn parse_rfc3339(s: &str) -> Option<Self> {
        let t = humantime::parse_rfc3339_weak(s).ok()?;
        let ms = t.duration_since(UNIX_EPOCH).ok()?.as_millis();
        Some(Self(i64::try_from(ms).ok()?))
    }
}

impl serde::Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.rfc3339())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_round_trip() {
        let t = Timestamp::from_millis(1_700_000_000_123);
        assert_eq!(t.rfc3339(), "2023-11-14T22:13:20.123Z");
        assert_eq!(Timestamp::parse_rfc3339(&t.rfc3339()), Some(t));
        assert!(t.has_passed(t));
        assert!(!t.plus(Duration::from_millis(1)).has_passed(t));
    }
}
