use serde_json::json;

use super::*;

fn event(card: serde_json::Value) -> OutboxEvent {
    OutboxEvent {
        id: 7,
        at: egressgate_store::Timestamp::from_millis(0),
        user: "alice".into(),
        chat: "c1".into(),
        kind: "approval.requested".into(),
        data: json!({"interrupt_id": "int_abc", "expires_at": "2030-01-01T00:00:00Z"}),
        card: Some(card),
        contacts: Default::default(),
    }
}

fn card() -> serde_json::Value {
    json!({
        "sites": ["data.example.com"],
        "urls": ["https://data.example.com/x.csv"],
        "packages": ["numpy==2.1.*"],
        "reason": "<script>alert(1)</script> & \"more\"",
        "evidence": [
            {"host": "data.example.com", "port": 443, "method": "POST",
             "url": "https://data.example.com/up", "package": null, "reason": "not_approved",
             "count": 3, "first_at": null, "last_at": null, "upload": true,
             "command": "curl <b>-d</b>"},
            {"host": "other.example.com", "port": 443, "method": null, "url": null,
             "package": null, "reason": null, "count": 0, "first_at": null, "last_at": null,
             "tried": false}
        ]
    })
}

#[test]
fn both_parts_carry_the_question_evidence_and_link() {
    let m = compose(&event(card()), Some("https://gate.example/")).unwrap_or_else(|| {
        unreachable!("an approval.requested event with a card composes");
    });
    assert_eq!(
        m.subject,
        "Approval needed: data.example.com and numpy==2.1.*"
    );
    for part in [&m.text, &m.html] {
        assert!(
            part.contains("https://gate.example/ui/cards/int_abc"),
            "{part}"
        );
        assert!(part.contains("data.example.com"), "{part}");
        assert!(part.contains("numpy==2.1.*"), "{part}");
        assert!(part.contains("POST https://data.example.com/up"), "{part}");
        assert!(part.contains("refused 3 times (not_approved)"), "{part}");
        assert!(part.contains("never tried"), "{part}");
        assert!(part.contains("c1"), "{part}");
        assert!(!part.contains("#secret"), "{part}");
    }
    assert!(
        m.text.contains("<script>alert(1)</script> & \"more\""),
        "{}",
        m.text
    );
    assert!(!m.html.contains("<script>"), "{}", m.html);
    assert!(
        m.html
            .contains("&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;more&quot;"),
        "{}",
        m.html
    );
    assert!(m.html.contains("curl &lt;b&gt;-d&lt;/b&gt;"), "{}", m.html);
    assert!(m.html.contains("Allow connections"), "{}", m.html);
}

#[test]
fn without_a_public_url_the_message_says_where_to_look() {
    let m = compose(&event(card()), None).unwrap_or_else(|| unreachable!());
    assert!(!m.text.contains("/ui/cards/"), "{}", m.text);
    assert!(m.text.contains("link your agent gave you"), "{}", m.text);
}

#[test]
fn only_requests_with_a_card_compose() {
    let mut e = event(card());
    e.kind = "approval.resolved".into();
    assert!(compose(&e, None).is_none());
    let mut e = event(card());
    e.card = None;
    assert!(compose(&e, None).is_none());
}

#[test]
fn subjects_are_one_bounded_line() {
    let c: Card = serde_json::from_value(json!({
        "sites": ["a.example", "b.example", "c.example", "d.example"],
        "urls": [], "packages": ["x\r\nBcc: evil@example.com"], "reason": "r"
    }))
    .unwrap_or_else(|e| unreachable!("{e}"));
    let s = subject(&c);
    assert_eq!(
        s,
        "Approval needed: a.example, b.example, c.example and 2 more"
    );
    assert!(!one_line("x\r\nBcc: y").contains('\n'));
}
