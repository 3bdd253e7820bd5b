//! The Prometheus plumbing both planes share: each plane registers its metrics under its own
//! prefix (`egressgate_proxy_`, `egressgate_control_`), made and registered in one call so
//! a metric's name and help stand beside the field that counts it, and the hot path keeps
//! handles on single series. The store crate is the one crate both planes depend on, so the
//! plumbing lives here; what each plane counts (names, labels, meaning) stays with it.

use std::hash::Hash;

pub use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::{Metric, Registry};

/// Declares label sets of one closed text label each (a request kind, a refusal reason, a card
/// state): a struct whose one field names the label. Each plane states its labels in one
/// place, a line each with what the values are, and every one of them encodes alike:
/// `label_sets! { KindLabel(kind): "What the client asked for."; }`.
#[macro_export]
macro_rules! label_sets {
    ($($name:ident($label:ident): $doc:literal;)+) => {$(
        #[doc = concat!("`", stringify!($label), "` label. ", $doc)]
        #[derive(Clone, Debug, Hash, PartialEq, Eq, $crate::metric_registry::EncodeLabelSet)]
        pub struct $name {
            #[doc = $doc]
            pub $label: &'static str,
        }
    )+};
}

/// One plane's part of the registry: every metric added here is named under its prefix.
pub struct Prefixed<'a> {
    registry: &'a mut Registry,
}

impl<'a> Prefixed<'a> {
    /// The part of `registry` under `prefix` (`egressgate_proxy`: a metric `requests` is
    /// exported as `egressgate_proxy_requests`).
    pub fn new(registry: &'a mut Registry, prefix: &str) -> Self {
        Self {
            registry: registry.sub_registry_with_prefix(prefix),
        }
    }

    /// Registers a new, empty metric (a counter, a gauge, a family) and returns the plane's
    /// handle on it: the registry exports what the handle counts.
    pub fn add<M: Metric + Clone + Default>(&mut self, name: &str, help: &str) -> M {
        self.add_made(name, help, M::default())
    }

    /// [`Prefixed::add`] for a metric that needs making (a histogram and its buckets).
    pub fn add_made<M: Metric + Clone>(&mut self, name: &str, help: &str, metric: M) -> M {
        self.registry.register(name, help, metric.clone());
        metric
    }
}

/// A handle on the series of `family` labelled `label`; the family keeps exporting it, so
/// counting on the handle is one atomic add with no label hashing or lock. Take each handle
/// in its own statement: `get_or_create` holds a read guard, and a second call on the same
/// family while one is alive would wait for itself.
pub fn series<L, M>(family: &Family<L, M>, label: &L) -> M
where
    L: Clone + Hash + Eq + EncodeLabelSet + std::fmt::Debug + Send + Sync + 'static,
    M: Metric + Clone + Default,
{
    let guard = family.get_or_create(label);
    let handle = guard.clone();
    drop(guard);
    handle
}

#[cfg(test)]
mod tests {
    use prometheus_client::metrics::counter::Counter;

    use super::*;

    /// What `add` and `series` hand out is what the registry exports, under the prefix.
    #[test]
    fn handles_count_the_registered_series() {
        #[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
        struct Kind {
            kind: &'static str,
        }
        let mut registry = Registry::default();
        let mut plane = Prefixed::new(&mut registry, "egressgate_test");
        let plain: Counter = plane.add("plain", "A counter");
        let family: Family<Kind, Counter> = plane.add("kinds", "Counters by kind");
        let one = series(&family, &Kind { kind: "one" });
        plain.inc();
        one.inc_by(3);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry)
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert!(
            text.contains("# HELP egressgate_test_plain A counter."),
            "{text}"
        );
        assert!(text.contains("egressgate_test_plain_total 1"), "{text}");
        assert!(
            text.contains(r#"egressgate_test_kinds_total{kind="one"} 3"#),
            "{text}"
        );
    }
}
