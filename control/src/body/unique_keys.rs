//! One JSON object key twice is ambiguous: `serde_json` keeps the last one for maps and
//! `Value`s (so `{"approved": false, "approved": true}` would approve), while a derived struct
//! refuses it. This walk refuses it everywhere, at any depth, before a body is read for
//! meaning.

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// A JSON document in which no object names one key twice; nothing else is kept.
pub(crate) struct UniqueKeys;

impl<'de> Deserialize<'de> for UniqueKeys {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(Walk)
    }
}

struct Walk;

impl<'de> Visitor<'de> for Walk {
    type Value = UniqueKeys;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }
    fn visit_i64<E>(self, _: i64) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }
    fn visit_u64<E>(self, _: u64) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }
    fn visit_f64<E>(self, _: f64) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }
    fn visit_str<E>(self, _: &str) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }
    fn visit_unit<E>(self) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<UniqueKeys, A::Error> {
        while seq.next_element::<UniqueKeys>()?.is_some() {}
        Ok(UniqueKeys)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<UniqueKeys, A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            map.next_value::<UniqueKeys>()?;
            if !seen.insert(key) {
                return Err(de::Error::custom("an object names the same key twice"));
            }
        }
        Ok(UniqueKeys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(raw: &str) -> bool {
        serde_json::from_str::<UniqueKeys>(raw).is_ok()
    }

    #[test]
    fn a_repeated_key_is_refused_at_any_depth() {
        assert!(!ok(r#"{"approved": false, "approved": true}"#));
        assert!(!ok(
            r#"{"resume": [{"payload": {"approved": true, "approved": true}}]}"#
        ));
        assert!(!ok(r#"[[{"a": 1, "b": {"c": 1, "c": 2}}]]"#));
        // The same key in sibling objects is not a repeat.
        assert!(ok(
            r#"{"a": {"k": 1}, "b": {"k": 2}, "c": [{"k": 1}, {"k": 1}], "d": null, "e": 1.5}"#
        ));
        // Escapes name the same key: `\u0061` is `a`.
        assert!(!ok(r#"{"a": 1, "\u0061": 2}"#));
        assert!(!ok("{not json"));
    }
}
