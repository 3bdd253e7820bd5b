//! The operationId of every endpoint, in one table: the name a generated client gives the
//! call (`openTurn` in TypeScript, `open_turn` in Python), so it says what the call does and
//! is unique across the API. Handler names (`list`, `add`, `open`) repeat between modules and
//! say little on their own, which is why the document does not use them.
//!
//! To document a new endpoint: add its row here (the test below fails until every operation
//! of the document has one, and every row an operation), then regenerate the clients
//! (`python3 clients/generate.py`).

use utoipa::openapi::OpenApi;

/// `(method, path, operationId)`, grouped as the route table is.
pub(crate) const OPERATION_IDS: &[(&str, &str, &str)] = &[
    ("get", "/healthz", "checkLiveness"),
    ("get", "/readyz", "checkReadiness"),
    ("get", "/openapi.json", "getOpenApiDocument"),
    ("get", "/v1/ca.pem", "getCaCertificate"),
    ("get", "/v1/tools/approval.json", "getApprovalToolSchema"),
    ("post", "/v1/turns", "openTurn"),
    ("get", "/v1/turns/{turn_id}/refusals", "listRefusals"),
    ("get", "/v1/turns/{turn_id}/egress", "listEgress"),
    ("get", "/v1/turns/{turn_id}/policy", "getTurnPolicy"),
    (
        "post",
        "/v1/turns/{turn_id}/approval-requests",
        "requestApproval",
    ),
    ("post", "/v1/batches/decide", "decideBatch"),
    ("get", "/v1/admin/sites", "listAdminSites"),
    ("post", "/v1/admin/sites", "addAdminSite"),
    ("delete", "/v1/admin/sites/{pattern}", "removeAdminSite"),
    ("get", "/v1/admin/packages", "listAdminPackages"),
    ("post", "/v1/admin/packages", "addAdminPackage"),
    ("delete", "/v1/admin/packages/{name}", "removeAdminPackage"),
    ("put", "/v1/admin/users/{user_id}", "setUserPermission"),
    ("get", "/v1/admin/users/{user_id}", "getAdminUser"),
    ("get", "/v1/admin/tokens", "listAdminTokens"),
    ("post", "/v1/admin/tokens", "addAdminToken"),
    ("delete", "/v1/admin/tokens/{name}", "removeAdminToken"),
    ("get", "/v1/admin/audit", "listAuditLog"),
    ("get", "/v1/admin/webhooks", "listWebhooks"),
    ("post", "/v1/slack/interactions", "slackInteraction"),
    ("post", "/v1/admin/webhooks", "addWebhook"),
    ("delete", "/v1/admin/webhooks/{id}", "removeWebhook"),
    (
        "get",
        "/v1/admin/webhooks/{id}/deliveries",
        "listWebhookDeliveries",
    ),
    (
        "post",
        "/v1/admin/webhooks/{id}/deliveries/{delivery_id}/retry",
        "retryWebhookDelivery",
    ),
    ("get", "/v1/admin/dry-run", "dryRunAdminEntry"),
    (
        "get",
        "/v1/users/{user_id}/interrupts",
        "listPendingInterrupts",
    ),
    ("post", "/v1/users/{user_id}/inbox-link", "createInboxLink"),
    ("post", "/v1/inbox/cards", "listInboxCards"),
    ("post", "/v1/inbox/events", "streamInboxEvents"),
    ("post", "/v1/interrupts/{id}/view", "viewCard"),
    ("post", "/v1/interrupts/{id}/takeover", "takeOverClaim"),
    ("get", "/v1/chats/{chat_id}/events", "streamChatEvents"),
    ("post", "/v1/interrupts", "registerInterrupt"),
    ("get", "/v1/interrupts/{id}/outcome", "getInterruptOutcome"),
    ("post", "/v1/interrupts/{id}/resume", "resumeInterrupt"),
    ("post", "/v1/interrupts/{id}/heartbeat", "heartbeatClaim"),
    ("post", "/v1/interrupts/{id}/complete", "completeInterrupt"),
    ("delete", "/v1/chats/{chat_id}", "hideChat"),
    (
        "post",
        "/v1/chats/{chat_id}/interrupt/reissue",
        "reissueInterrupt",
    ),
    ("get", "/v1/chats/{chat_id}/approvals", "listChatApprovals"),
    (
        "delete",
        "/v1/chats/{chat_id}/approvals/{kind}/{value}",
        "revokeApproval",
    ),
    ("get", "/v1/users/{user_id}/approvals", "listUserApprovals"),
    (
        "delete",
        "/v1/users/{user_id}/approvals/{kind}/{value}",
        "revokeUserApproval",
    ),
];

/// Sets each operation's id from [`OPERATION_IDS`]; an operation without a row keeps the
/// handler's name, which the test below rejects.
pub(crate) fn apply(doc: &mut OpenApi) {
    for (path, item) in doc.paths.paths.iter_mut() {
        for (method, op) in [
            ("get", &mut item.get),
            ("post", &mut item.post),
            ("put", &mut item.put),
            ("delete", &mut item.delete),
            ("patch", &mut item.patch),
        ] {
            let Some(op) = op else { continue };
            if let Some((_, _, id)) = OPERATION_IDS
                .iter()
                .find(|(m, p, _)| *m == method && p == path)
            {
                op.operation_id = Some((*id).to_owned());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::OPERATION_IDS;

    /// Every operation of the document has a row, every row is an operation, and no two rows
    /// share a name or an endpoint.
    #[test]
    fn every_operation_has_one_unique_id() {
        let rows: BTreeSet<(String, String)> = OPERATION_IDS
            .iter()
            .map(|(m, p, _)| ((*m).to_owned(), (*p).to_owned()))
            .collect();
        assert_eq!(rows.len(), OPERATION_IDS.len(), "an endpoint has two rows");
        crate::routes::openapi::assert_names_every_operation(
            &rows,
            "rows for no operation",
            "operations without an operationId row in operation_ids.rs",
        );
        let names: BTreeSet<&str> = OPERATION_IDS.iter().map(|(_, _, n)| *n).collect();
        assert_eq!(names.len(), OPERATION_IDS.len(), "an operationId repeats");
        for name in names {
            assert!(
                name.starts_with(|c: char| c.is_ascii_lowercase())
                    && name.chars().all(|c| c.is_ascii_alphanumeric())
                    && name.chars().any(|c| c.is_ascii_uppercase()),
                "{name} is not a verb-and-noun lowerCamelCase name"
            );
        }
    }
}
