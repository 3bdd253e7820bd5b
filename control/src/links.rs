//! The links a person opens, built in one place so the MCP tool, the API's `card_url` and the
//! inbox hand out the same shapes: the card page with its secret in the fragment, and the
//! inbox with its secret as the whole fragment. A fragment never reaches a server, so the
//! secret stays out of access logs and `Referer` headers.

/// The card page of `interrupt_id`, opened with `secret` (its resume secret, or an inbox
/// secret of its user), under `base` (a public URL without trailing slash, or `""` for a
/// path-only link).
pub(crate) fn card(base: &str, interrupt_id: &str, secret: &str) -> String {
    with_secret(&card_page(base, interrupt_id), secret)
}

/// The card page of `interrupt_id` with no secret: what a notification shows by default
/// (opening the card still needs its secret or the person's inbox).
pub(crate) fn card_page(base: &str, interrupt_id: &str) -> String {
    format!("{}/ui/cards/{interrupt_id}", base.trim_end_matches('/'))
}

/// A card page link (from [`card_page`]) opened with `secret`.
pub(crate) fn with_secret(card_page: &str, secret: &str) -> String {
    format!("{card_page}#secret={secret}")
}

/// The inbox page opened with `secret`, under `base` (as for [`card`]).
pub(crate) fn inbox(base: &str, secret: &str) -> String {
    format!("{}/ui/inbox#{secret}", base.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_go_in_the_fragment_only() {
        assert_eq!(
            card("https://gate.example.org/", "int_x", "s3"),
            "https://gate.example.org/ui/cards/int_x#secret=s3"
        );
        assert_eq!(card_page("", "int_x"), "/ui/cards/int_x");
        assert_eq!(inbox("", "inb_a.b"), "/ui/inbox#inb_a.b");
        assert_eq!(
            inbox("https://gate.example.org/approve", "k"),
            "https://gate.example.org/approve/ui/inbox#k"
        );
    }
}
