//! One text spelling per variant for the store's closed enums (access levels, modes, scopes,
//! states, kinds): the wire, config and database all read and write the same word, so the
//! table of words is written once per enum, and `as_str`, `parse`, `ALL` and `Display` are
//! derived from it rather than kept in step by hand.

/// Implements, from one `Variant => "word"` table, `ALL` (every variant in table order),
/// `as_str` (the word), `parse` (the word back; anything else is `None`, never a guess) and
/// `Display` (the word).
macro_rules! spelling {
    ($name:ident { $($variant:ident => $word:literal),+ $(,)? }) => {
        impl $name {
            /// Every variant, in a fixed order: schemas, metric label sets and filters list
            /// the closed set from it.
            pub const ALL: [Self; [$($word),+].len()] = [$(Self::$variant),+];

            /// The one spelling the wire, the config and the database use.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $word,)+
                }
            }

            /// Parses [`Self::as_str`]'s spelling exactly (case and all), so a stored or sent
            /// word maps back to one variant or to none.
            pub fn parse(s: &str) -> Option<Self> {
                Self::ALL.into_iter().find(|v| v.as_str() == s)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

pub(crate) use spelling;

#[cfg(test)]
mod tests {
    use crate::db::tokens::Scope as TokenScope;
    use crate::db::webhooks::DeliveryStatus;
    use crate::{Access, Mode, RefusalReason, Scope};

    /// Every spelled word reads back as its own variant and as nothing else, a near miss
    /// (another case, another word) as none, and `Display` writes the word.
    #[test]
    fn every_word_round_trips_and_nothing_else_parses() {
        fn check<T: Copy + PartialEq + std::fmt::Debug + std::fmt::Display>(
            all: &[T],
            as_str: fn(T) -> &'static str,
            parse: fn(&str) -> Option<T>,
        ) {
            for &v in all {
                assert_eq!(parse(as_str(v)), Some(v));
                assert_eq!(v.to_string(), as_str(v));
                assert_eq!(parse(&as_str(v).to_uppercase()), None, "{v:?}");
            }
            assert_eq!(parse("write"), None);
            assert_eq!(parse(""), None);
        }
        check(&Access::ALL, Access::as_str, Access::parse);
        check(&Mode::ALL, Mode::as_str, Mode::parse);
        check(&Scope::ALL, Scope::as_str, Scope::parse);
        check(
            &RefusalReason::ALL,
            RefusalReason::as_str,
            RefusalReason::parse,
        );
        check(&TokenScope::ALL, TokenScope::as_str, TokenScope::parse);
        check(
            &DeliveryStatus::ALL,
            DeliveryStatus::as_str,
            DeliveryStatus::parse,
        );
    }
}
