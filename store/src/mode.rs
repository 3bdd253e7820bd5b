//! Enforce or shadow: whether a would-be refusal is enforced, or only recorded and logged
//! while the request goes ahead (so administrators can roll out a list and read what it
//! would refuse before it does).

use crate::spelling::spelling;

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

spelling!(Mode {
    Enforce => "enforce",
    Shadow => "shadow",
});

impl std::str::FromStr for Mode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s).ok_or_else(|| format!("expected `enforce` or `shadow`, got `{s}`"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_str_and_default() {
        for m in Mode::ALL {
            assert_eq!(m.as_str().parse::<Mode>(), Ok(m));
        }
        assert!("audit".parse::<Mode>().is_err());
        assert_eq!(Mode::default(), Mode::Enforce);
    }
}
