//! The approval tool's first call, as the design's table orders it: validate the request
//! (step 1), merge in what the proxy refused this turn (2), refuse empty calls (3) and hosts no
//! approval can fix (4), drop what is already granted (5), deny deterministically when nobody
//! can answer (6), otherwise compute the card the person will see (7). The pure steps live in
//! the submodules; `routes::approval` gathers the facts from the store and runs them in order.
//!
//! The resume branch never comes here: it answers from the stored card and decision only.

pub(crate) mod fit;
pub(crate) mod input;
pub(crate) mod merge;
pub(crate) mod schema;
pub(crate) mod text;

#[cfg(test)]
mod testing {
    //! Parsing the values the steps' tests write as text.

    use egressgate_store::{Host, PackageSpec, SanitizedUrl};

    pub(crate) fn host(s: &str) -> Host {
        Host::parse(s).unwrap_or_else(|e| unreachable!("{e}"))
    }

    pub(crate) fn spec(s: &str) -> PackageSpec {
        PackageSpec::parse(s).unwrap_or_else(|e| unreachable!("{e}"))
    }

    pub(crate) fn url(s: &str) -> SanitizedUrl {
        SanitizedUrl::parse(s).unwrap_or_else(|e| unreachable!("{e}"))
    }
}
