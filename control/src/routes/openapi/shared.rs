//! Pieces of the document that several endpoints share word for word: the parameters of a
//! path that names a turn, an interrupt or a chat, and the error answers the shared
//! extractors and lookups give alike (an unknown or expired turn, an unknown card, a lost
//! claim, a missing user). An endpoint lists them by name in its `#[utoipa::path]`, so one
//! wording serves every endpoint that answers the case, as one function produces it.

use utoipa::IntoParams;
use utoipa::openapi::path::{Parameter, ParameterBuilder, ParameterIn};
use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};
use utoipa::openapi::{ContentBuilder, Ref, RefOr, Required, Response, ResponseBuilder};

/// An error status's response: `description` (naming its codes in backticks) over an
/// `ErrorBody`.
pub(crate) fn error_response(description: &str) -> RefOr<Response> {
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("ErrorBody")))
                .build(),
        )
        .build()
        .into()
}

/// A text parameter, required or not; `bounded` adds the id rule (1 to 200 printable ASCII
/// characters) that chat and user ids follow.
fn text_param(
    name: &str,
    at: ParameterIn,
    required: bool,
    bounded: bool,
    about: &str,
) -> Parameter {
    let kind = if required {
        SchemaType::Type(Type::String)
    } else {
        SchemaType::from_iter([Type::String, Type::Null])
    };
    let mut schema = ObjectBuilder::new().schema_type(kind);
    if bounded {
        schema = schema
            .min_length(Some(1))
            .max_length(Some(200))
            .pattern(Some("^[!-~]+$"));
    }
    ParameterBuilder::new()
        .name(name)
        .parameter_in(at)
        .required(if required {
            Required::True
        } else {
            Required::False
        })
        .description(Some(about))
        .schema(Some(schema))
        .build()
}

/// Declares a parameter set: a unit type whose `IntoParams` gives these parameters in order.
macro_rules! params {
    ($(#[$doc:meta])* $name:ident: $($param:expr),+ $(,)?) => {
        $(#[$doc])*
        pub(crate) struct $name;

        impl IntoParams for $name {
            fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
                vec![$($param),+]
            }
        }
    };
}

/// Declares a response set: a unit type whose `IntoResponses` gives these error answers.
macro_rules! errors {
    ($(#[$doc:meta])* $name:ident: $($status:literal => $about:literal),+ $(,)?) => {
        $(#[$doc])*
        pub(crate) struct $name;

        impl utoipa::IntoResponses for $name {
            fn responses() -> std::collections::BTreeMap<
                String,
                utoipa::openapi::RefOr<utoipa::openapi::Response>,
            > {
                std::collections::BTreeMap::from([$((
                    $status.to_owned(),
                    $crate::routes::openapi::shared::error_response($about),
                )),+])
            }
        }
    };
}

params!(
    /// `{turn_id}`, and the user header that hides other users' turns.
    TurnParams:
    text_param("turn_id", ParameterIn::Path, true, false, "The turn's id."),
    text_param("X-Egressgate-User", ParameterIn::Header, false, false,
        "When sent, a turn of another user answers as unknown."),
);

params!(
    /// `{id}` of an interrupt, and the user header the runtime may send with its token.
    InterruptParams:
    text_param("id", ParameterIn::Path, true, false, "The interrupt id."),
    text_param("X-Egressgate-User", ParameterIn::Header, false, false,
        "With the runtime token: the card must be this user's."),
);

params!(
    /// `{chat_id}` of the user the required header names.
    ChatParams:
    text_param("chat_id", ParameterIn::Path, true, true,
        "The chat's id (of the user named by the header)."),
    text_param("X-Egressgate-User", ParameterIn::Header, true, true,
        "The person the runtime speaks for."),
);

pub(crate) use errors;

errors!(
    /// What `turn_access` answers for a turn that does not exist or is another user's.
    TurnNotFound: "404" => "`TURN_NOT_FOUND`: no such turn (or another user's).",
);

errors!(
    /// What `turn_access` answers for an expired turn.
    TurnExpired: "410" => "`TURN_EXPIRED`: the turn has expired.",
);

errors!(
    /// What `pointer::find` and the caller's ownership check answer alike.
    InterruptNotFound: "404" => "`INTERRUPT_NOT_FOUND`: unknown id or another user's card.",
);

errors!(
    /// What the claim holder's calls answer once the claim is gone.
    ClaimLost: "409" => "`CLAIM_LOST`: the claim is no longer held.",
);

errors!(
    /// What the user-naming extractors answer without a usable user header.
    MissingUser: "400" => "`MISSING_USER`: the X-Egressgate-User header is missing or malformed.",
);
