//! Enforce or shadow: whether a would-be refusal is enforced, or only recorded and logged
//! while the request goes ahead (so administrators can roll out a list and read what it
//! would refuse before it does).

/// How policy refusals are applied, per deployment (`--mode`) and per user (which wins).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Refusals are enforced (the default).
    #[default]
    Enforce,
    /// Policy refusals are recorded with `shadow: true` and logged, and the request is
    /// allowed; refusals that protect the network are still enforced
    /// ([`crate::RefusalReason::shadowable`]).
    Shadow,
}

impl Mode {
    /// The wire, config and database spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Enforce => "enforce",
            Self::Shadow => "shadow",
        }
    }

    /// Parses [`Mode::as_str`]'s spelling.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "enforce" => Some(Self::Enforce),
            "shadow" => Some(Self::Shadow),
            _ => None,
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s).ok_or_else(|| format!("expected `enforce` or `shadow`, got `{s}`"))
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_round_trip() {
        for m in [Mode::Enforce, Mode::Shadow] {
            assert_eq!(Mode::parse(m.as_str()), Some(m));
            assert_eq!(m.as_str().parse::<Mode>(), Ok(m));
        }
        assert_eq!(Mode::parse("Shadow"), None);
        assert!("audit".parse::<Mode>().is_err());
        assert_eq!(Mode::default(), Mode::Enforce);
    }
}
