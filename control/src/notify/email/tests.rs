use super::*;

#[test]
fn relay_urls_say_how_the_connection_is_protected() {
    for (url, host, port, tls) in [
        (
            "smtps://mail.example.com",
            "mail.example.com",
            465,
            SmtpTls::Implicit,
        ),
        (
            "smtps://mail.example.com:2465",
            "mail.example.com",
            2465,
            SmtpTls::Implicit,
        ),
        (
            "smtp://mail.example.com",
            "mail.example.com",
            587,
            SmtpTls::StartTls,
        ),
        (
            "smtp://mail.example.com:25?tls=starttls",
            "mail.example.com",
            25,
            SmtpTls::StartTls,
        ),
        ("smtp://127.0.0.1?tls=none", "127.0.0.1", 25, SmtpTls::None),
        ("smtp://[::1]:2525?tls=none", "::1", 2525, SmtpTls::None),
    ] {
        let r = SmtpRelay::parse(url).unwrap_or_else(|e| unreachable!("{url}: {e}"));
        assert_eq!(
            r,
            SmtpRelay {
                host: host.into(),
                port,
                tls
            },
            "{url}"
        );
    }
}

#[test]
fn relay_urls_that_could_leak_are_refused() {
    for (url, says) in [
        ("smtp://u:p@mail.example.com", "EGRESSGATE_SMTP_PASSWORD"),
        ("smtp://mail.example.com?tls=opportunistic", "stripped"),
        ("smtps://mail.example.com?tls=none", "tls=none is not"),
        ("http://mail.example.com", "smtp or smtps"),
        ("smtp://mail.example.com/x", "only scheme"),
        ("smtp://mail.example.com?tls=none&tls=starttls", "repeated"),
        ("smtp://mail.example.com?auth=plain", "unknown"),
        ("mail.example.com:25", "smtp or smtps"),
    ] {
        let e = SmtpRelay::parse(url)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains(says), "{url}: {e}");
    }
}

fn relay(url: &str) -> SmtpRelay {
    SmtpRelay::parse(url).unwrap_or_else(|e| unreachable!("{e}"))
}

#[test]
fn a_password_never_travels_in_clear_nor_in_debug() {
    let creds = || Some(SmtpCredentials::new("gate".into(), "hunter2-pw".into()));
    let e = EmailSettings::new(
        relay("smtp://m.example?tls=none"),
        "g@example.org",
        creds(),
        None,
    )
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(e.contains("unencrypted"), "{e}");
    let s = EmailSettings::new(
        relay("smtps://m.example"),
        "Gate <g@example.org>",
        creds(),
        None,
    )
    .unwrap_or_else(|e| unreachable!("{e}"));
    let shown = format!("{s:?}");
    assert!(
        shown.contains("gate") && !shown.contains("hunter2"),
        "{shown}"
    );
    assert_eq!(s.message_id("dlv_1"), "<dlv_1@example.org>");
}

#[test]
fn the_sender_and_an_extra_ca_are_checked() {
    let r = EmailSettings::new(relay("smtps://m.example"), "not an address", None, None);
    assert!(
        r.err()
            .map(|e| e.to_string())
            .unwrap_or_default()
            .contains("not a mailbox")
    );
    let r = EmailSettings::new(
        relay("smtps://m.example"),
        "g@example.org",
        None,
        Some(b"junk"),
    );
    assert!(
        r.err()
            .map(|e| e.to_string())
            .unwrap_or_default()
            .contains("no PEM certificate")
    );
}

#[test]
fn the_message_has_both_parts_and_the_stable_id() {
    let s = EmailSettings::new(
        relay("smtp://m.example?tls=none"),
        "egressgate <gate@example.org>",
        None,
        None,
    )
    .unwrap_or_else(|e| unreachable!("{e}"));
    let mail = Mail {
        subject: "Approval needed: ä.example".into(),
        text: "plain".into(),
        html: "<p>rich</p>".into(),
    };
    let m = build(&s, "alice@example.com", "dlv_9", &mail).unwrap_or_else(|e| unreachable!("{e}"));
    let text = String::from_utf8_lossy(&m.formatted()).into_owned();
    assert!(text.contains("Message-ID: <dlv_9@example.org>"), "{text}");
    assert!(text.contains("To: alice@example.com"), "{text}");
    assert!(text.contains("multipart/alternative"), "{text}");
    assert!(
        text.contains("text/plain") && text.contains("text/html"),
        "{text}"
    );
    assert!(build(&s, "not an address", "dlv_9", &mail).is_err());
}
