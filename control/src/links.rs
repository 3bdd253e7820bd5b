//! The links a person opens, built in one place so the MCP tool, the API's `card_url` and the
//! inbox hand out the same shapes: the card page with its secret in the fragment, and the
//! inbox with its secret as the whole fragment. A fragment never reaches a server, so the
//! secret stays out of access logs and `Referer` headers.

/// The card page of `interrupt_id`, opened with `secret` (its resume secret, or an inbox
/// secret of its user), under `base` (a public URL without trailing slash, or `""` for a
/// path-only link).
pub(crate) fn card(base: &str, interrupt_id: &str, secret: &str) -> String {
    format!(
        "{}/ui/cards/{interrupt_id}#secret={secret}",
        base.trim_end_matches('/')
    )
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
        assert_eq!(inbox("", "inb_a.b"), "/ui/inbox#inb_a.b");
        assert_eq!(
            inbox("https://gate.example.org/approve", "k"),
            "https://gate.example.org/approve/ui/inbox#k"
        );
    }
}
