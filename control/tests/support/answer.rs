//! Reading and checking answers: an error's code and message, a list's column, and the
//! asserts a row of the design's table makes on an error.

use axum::http::StatusCode;
use serde_json::Value;

/// The `error.code` of an error body.
pub fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or("")
}

/// The `error.message` of an error body.
pub fn message(body: &Value) -> &str {
    body["error"]["message"].as_str().unwrap_or("")
}

/// Asserts a `422 INVALID_INPUT` whose message names `entry` first and says `why`.
#[track_caller]
pub fn assert_invalid_input(status: StatusCode, body: &Value, entry: &str, why: &str, case: &str) {
    assert_eq!(
        (status, code(body)),
        (StatusCode::UNPROCESSABLE_ENTITY, "INVALID_INPUT"),
        "{case}: {body}"
    );
    assert!(
        message(body).starts_with(entry) && message(body).contains(why),
        "{case}: {body}"
    );
}

/// `422 INVALID_INPUT`: a well-formed body with a value the design refuses.
pub const INVALID_INPUT: (StatusCode, &str) = (StatusCode::UNPROCESSABLE_ENTITY, "INVALID_INPUT");
/// `400 INVALID_BODY`: a body that is not the endpoint's JSON shape.
pub const INVALID_BODY: (StatusCode, &str) = (StatusCode::BAD_REQUEST, "INVALID_BODY");
/// `404 NOT_FOUND`.
pub const NOT_FOUND: (StatusCode, &str) = (StatusCode::NOT_FOUND, "NOT_FOUND");

/// Asserts an error answer: `want`'s status and `error.code` (`case` names the row).
#[track_caller]
pub fn assert_error(s: StatusCode, body: &Value, want: (StatusCode, &str), case: &str) {
    assert_eq!((s, code(body)), want, "{case}: {body}");
}

/// Asserts an error answer: `want`'s status and `error.code` (the body names the row).
#[track_caller]
pub fn assert_code(s: StatusCode, body: &Value, want: (StatusCode, &str)) {
    assert_eq!((s, code(body)), want, "{body}");
}

/// One string field of every entry of a JSON list (`pointer` as in `/detail/action`).
pub fn pluck<'a>(list: &'a Value, pointer: &str) -> Vec<&'a str> {
    list.as_array()
        .map(|rows| {
            rows.iter()
                .map(|r| r.pointer(pointer).and_then(Value::as_str).unwrap_or("?"))
                .collect()
        })
        .unwrap_or_default()
}
