//! Access levels: how much of a host a grant opens. `full` is every method (today's meaning);
//! `read` is downloads only, which the proxy can enforce only where it sees each request (an
//! inspected host, or plain HTTP forwarding).

use crate::spelling::spelling;

/// How much of a host a grant opens.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    /// Downloads only: `GET`, `HEAD`, `OPTIONS`, and git's fetch and clone.
    Read,
    /// Every method (uploads too).
    #[default]
    Full,
}

spelling!(Access {
    Read => "read",
    Full => "full",
});

impl Access {
    /// Whether this is [`Access::Full`] (for `skip_serializing_if`).
    pub fn is_full(&self) -> bool {
        *self == Self::Full
    }

    /// The wider of two levels: a host allowed by several grants gets the widest.
    pub fn widest(self, other: Self) -> Self {
        self.max(other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_and_default() {
        assert_eq!(Access::Read.widest(Access::Full), Access::Full);
        assert_eq!(Access::default(), Access::Full);
    }
}
