//! Reading a deployment CA's certificate back: when it ends and which names it permits. The
//! certificate is the record of both, so nothing kept beside it can disagree with it, and a
//! CA made by an older release (ten years, no name constraints) reads as exactly that.

use x509_parser::extensions::{GeneralName, GeneralSubtree};

use super::{CaError, names};
use crate::pattern::SitePattern;
use crate::time::Timestamp;

/// What a CA certificate says of itself.
pub(super) struct Read {
    /// Its end.
    pub(super) not_after: Timestamp,
    /// The names it permits (`None`: no name constraints, so any).
    pub(super) names: Option<Vec<SitePattern>>,
}

/// Reads the first certificate of `cert_pem`.
pub(super) fn read(cert_pem: &str) -> Result<Read, CaError> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes())
        .map_err(|_| CaError::Corrupt("no certificate"))?;
    let x509 = pem
        .parse_x509()
        .map_err(|_| CaError::Corrupt("certificate"))?;
    let not_after =
        Timestamp::from_millis(x509.validity().not_after.timestamp().saturating_mul(1000));
    let constraints = x509
        .name_constraints()
        .map_err(|_| CaError::Corrupt("name constraints"))?;
    let names = constraints.map(|c| {
        names::from_constraints(
            &dns_names(c.value.permitted_subtrees.as_deref()),
            &dns_names(c.value.excluded_subtrees.as_deref()),
        )
    });
    Ok(Read { not_after, names })
}

/// The dNSName entries of a list of subtrees.
fn dns_names<'a>(subtrees: Option<&'a [GeneralSubtree<'a>]>) -> Vec<&'a str> {
    subtrees
        .unwrap_or_default()
        .iter()
        .filter_map(|s| match s.base {
            GeneralName::DNSName(n) => Some(n),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::ca::DeploymentCa;

    fn p(s: &str) -> SitePattern {
        SitePattern::parse(s, &[]).unwrap_or_else(|e| unreachable!("{s}: {e}"))
    }

    #[test]
    fn a_ca_reads_back_its_end_and_its_names() -> Result<(), CaError> {
        let t0 = Timestamp::from_millis(1_700_000_000_000);
        let day = Duration::from_secs(86_400);
        let open = DeploymentCa::generate(t0, day, None)?;
        assert_eq!(open.not_after().millis(), t0.millis() + 86_400_000);
        assert_eq!(open.names(), None);
        let names = [p("git.example.com"), p("*.example.org")];
        let closed = DeploymentCa::generate(t0, day, Some(&names))?;
        assert_eq!(closed.names(), Some(&names::minimal(names.to_vec())[..]));
        let none = DeploymentCa::generate(t0, day, Some(&[]))?;
        assert_eq!(none.names(), Some(&[][..]), "constrained to nothing");
        assert!(read("not a certificate").is_err());
        Ok(())
    }
}
