//! The MCP server: two tools over [`flow`], and how a person is asked. On protocol
//! 2026-07-28 and later an `input_required` result (a form asking approve yes/no, with a
//! sealed `requestState`); on earlier clients an elicitation request — URL mode pointing at
//! the card page when the client offers it, else a form; with no elicitation at all the
//! interrupt itself, so the runtime pauses on it.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequest,
    ElicitRequestParams, ElicitResult, ElicitationAction, Implementation, InitializeRequestParams,
    InitializeResult, InputRequest, InputRequests, InputRequiredResult, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{ElicitationMode, RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{Value, json};

use super::backend::Backend;
use super::flow::{self, PersonSaid, Registered, Step, ToolAnswer};
use super::state::{CardState, StateKeys};

/// Tool names.
pub const REFUSALS_TOOL: &str = "egress_refusals";
/// The approval tool's name.
pub const APPROVAL_TOOL: &str = "request_egress_approval";
/// The key of the one input request of an `input_required` answer.
const INPUT_KEY: &str = "approval";

/// How a tool call finds its turn and the API.
#[derive(Clone)]
pub enum Binding {
    /// Fixed when the server was started (`egressgate mcp --turn`).
    Fixed {
        /// The API.
        backend: Backend,
        /// The turn.
        turn: String,
    },
    /// Per HTTP request: the bearer token it carried, against this process's API router. The
    /// turn is the one the session was opened for: the `X-Egressgate-Turn` of its first
    /// request (`initialize`). A later request of the session naming another turn is refused,
    /// so a session handed from one turn's agent to another's serves neither wrongly.
    PerRequest {
        /// The API router (without `/mcp`).
        api: axum::Router,
        /// The session's turn, fixed by its first request (a fresh cell per session).
        turn: Arc<OnceLock<String>>,
    },
}

impl Binding {
    /// A binding for one `/mcp` session (or one stateless request) against `api`.
    pub fn per_session(api: axum::Router) -> Self {
        Self::PerRequest {
            api,
            turn: Arc::new(OnceLock::new()),
        }
    }
}

/// The turn an HTTP request of a session names, checked against the turn the session was
/// opened for (the first request's, recorded here).
fn session_turn(
    bound: &OnceLock<String>,
    parts: &axum::http::request::Parts,
) -> Result<String, ErrorData> {
    let named = parts
        .headers
        .get(super::TURN_HEADER)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| {
            ErrorData::invalid_request("the X-Egressgate-Turn header is missing", None)
        })?;
    let session = bound.get_or_init(|| named.to_owned());
    if session != named {
        return Err(ErrorData::invalid_request(
            format!(
                "this MCP session was opened for turn {session} and serves that turn only; \
                 this request names turn {named}: open a new session (initialize) for it"
            ),
            Some(json!({"reason": "turn_mismatch", "session_turn": session, "turn": named})),
        ));
    }
    Ok(named.to_owned())
}

/// The HTTP request a tool call or handshake came in, when it came over `/mcp`.
fn http_parts(ctx: &RequestContext<RoleServer>) -> Result<&axum::http::request::Parts, ErrorData> {
    ctx.extensions
        .get::<axum::http::request::Parts>()
        .ok_or_else(|| ErrorData::internal_error("no HTTP request", None))
}

/// The server.
#[derive(Clone)]
pub struct EgressTools {
    binding: Binding,
    keys: Arc<StateKeys>,
    /// Base URL people reach the card page under.
    public_url: String,
}

impl EgressTools {
    /// A server bound as `binding`; card links start with `public_url`.
    pub fn new(binding: Binding, keys: Arc<StateKeys>, public_url: String) -> Self {
        Self {
            binding,
            keys,
            public_url: public_url.trim_end_matches('/').to_owned(),
        }
    }

    /// The backend and turn of this call.
    fn bind(&self, ctx: &RequestContext<RoleServer>) -> Result<(Backend, String), ErrorData> {
        match &self.binding {
            Binding::Fixed { backend, turn } => Ok((backend.clone(), turn.clone())),
            Binding::PerRequest { api, turn } => {
                let parts = http_parts(ctx)?;
                let turn = session_turn(turn, parts)?;
                let authorization = parts
                    .headers
                    .get(axum::http::header::AUTHORIZATION)
                    .cloned()
                    .ok_or_else(|| ErrorData::invalid_request("no bearer token", None))?;
                Ok((
                    Backend::Router {
                        router: api.clone(),
                        authorization,
                    },
                    turn,
                ))
            }
        }
    }

    fn card_url(&self, card: &Registered) -> String {
        crate::links::card(&self.public_url, &card.interrupt_id, &card.secret)
    }
}

fn object(v: Value) -> Arc<rmcp::model::JsonObject> {
    Arc::new(v.as_object().cloned().unwrap_or_default())
}

/// The two tools, with input schemas whose root is `type: object`.
pub fn tools() -> Vec<Tool> {
    let refusals = Tool::new(
        REFUSALS_TOOL,
        "What the egress proxy refused in this turn: host, port, reason, and whether a person \
         can approve it. Call it after a download failed with a 403 from the proxy.",
        object(json!({"type": "object", "properties": {}, "additionalProperties": false})),
    );
    let mut schema = crate::approval::schema::approval_tool_schema();
    if let Some(o) = schema.as_object_mut() {
        o.remove("$schema");
        o.remove("title");
    }
    let description = schema["description"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let approval = Tool::new(APPROVAL_TOOL, description, object(schema));
    vec![refusals, approval]
}

fn result(answer: ToolAnswer) -> CallToolResponse {
    let text = ContentBlock::text(answer.body.to_string());
    let mut r = if answer.is_error {
        CallToolResult::error(vec![text])
    } else {
        CallToolResult::success(vec![text])
    };
    if answer.body.is_object() {
        r.structured_content = Some(answer.body);
    }
    r.into()
}

/// Whether the request speaks 2026-07-28 or later (dates compare as strings).
fn speaks_input_required(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// The form a person answers: approve yes/no.
fn approve_form(message: &str) -> Result<ElicitRequestParams, ErrorData> {
    let requested_schema = serde_json::from_value(json!({
        "type": "object",
        "properties": {
            "approved": {
                "type": "boolean",
                "title": "Allow",
                "description": "Allow these connections for the rest of this chat"
            }
        },
        "required": ["approved"]
    }))
    .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
    Ok(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: message.to_owned(),
        requested_schema,
    })
}

/// What an elicitation answer means. Only an accepted form with `approved: true` approves
/// (fail closed).
fn said(r: &ElicitResult) -> PersonSaid {
    match r.action {
        ElicitationAction::Accept
            if r.content.as_ref().and_then(|c| c.get("approved")) == Some(&json!(true)) =>
        {
            PersonSaid::Approve
        }
        ElicitationAction::Accept | ElicitationAction::Decline => PersonSaid::Decline,
        _ => PersonSaid::Cancel,
    }
}

/// Seconds until an RFC 3339 time, at least one.
fn ttl_until(expires_at: &str) -> Duration {
    let now = egressgate_store::Timestamp::now().millis();
    let until = egressgate_store::Timestamp::parse_rfc3339(expires_at)
        .map_or(now, egressgate_store::Timestamp::millis);
    Duration::from_millis(u64::try_from(until - now).unwrap_or(0)).max(Duration::from_secs(1))
}

impl EgressTools {
    /// Asks the person for `card` in the way the client supports.
    async fn ask(
        &self,
        backend: &Backend,
        turn: &str,
        card: Registered,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let ttl = ttl_until(&card.expires_at);
        if speaks_input_required(ctx) {
            let state = self.keys.seal(
                turn,
                &CardState {
                    interrupt_id: card.interrupt_id.clone(),
                    secret: card.secret.clone(),
                },
                ttl,
            );
            let mut requests = InputRequests::new();
            requests.insert(
                INPUT_KEY.to_owned(),
                InputRequest::Elicitation(ElicitRequest::new(approve_form(&card.message)?)),
            );
            return Ok(InputRequiredResult::new(Some(requests), Some(state)).into());
        }
        let modes = ctx.peer.supported_elicitation_modes();
        if modes.contains(&ElicitationMode::Url) {
            let params = ElicitRequestParams::UrlElicitationParams {
                meta: None,
                message: format!("{} Open the card to answer.", card.message),
                url: self.card_url(&card),
                elicitation_id: card.interrupt_id.clone(),
            };
            let went = match ctx
                .peer
                .create_elicitation_with_timeout(params, Some(ttl))
                .await
            {
                Ok(r) => r.action == ElicitationAction::Accept,
                Err(e) => {
                    tracing::info!(error = %e, "URL elicitation failed; the card stays open");
                    return Ok(result(flow::waiting(&card)));
                }
            };
            return Ok(result(flow::after_page(backend, &card, went).await));
        }
        if modes.contains(&ElicitationMode::Form) {
            return match ctx
                .peer
                .create_elicitation_with_timeout(approve_form(&card.message)?, Some(ttl))
                .await
            {
                Ok(r) => Ok(result(
                    flow::answer(backend, &card.interrupt_id, &card.secret, said(&r)).await,
                )),
                Err(e) => {
                    tracing::info!(error = %e, "form elicitation failed; the card stays open");
                    Ok(result(flow::waiting(&card)))
                }
            };
        }
        Ok(result(flow::waiting(&card)))
    }

    /// The retry of an `input_required` answer: the sealed state names the card; the
    /// person's answer goes through the resume endpoint (a replay claims nothing).
    async fn retry(
        &self,
        backend: &Backend,
        turn: &str,
        state: &str,
        request: &CallToolRequestParams,
    ) -> Result<CallToolResponse, ErrorData> {
        let card = self.keys.open(turn, state).map_err(|e| {
            ErrorData::invalid_params(
                e.to_string(),
                Some(json!({"reason": "invalid_request_state"})),
            )
        })?;
        // No answer at all is a client error and changes nothing; an answer of an unknown
        // shape declines (fail closed).
        let response = request
            .input_responses
            .as_ref()
            .and_then(|r| r.get(INPUT_KEY))
            .ok_or_else(|| {
                ErrorData::invalid_params(format!("inputResponses.{INPUT_KEY} is missing"), None)
            })?;
        let said = serde_json::from_value::<ElicitResult>(response.clone())
            .map_or(PersonSaid::Decline, |r| said(&r));
        Ok(result(
            flow::answer(backend, &card.interrupt_id, &card.secret, said).await,
        ))
    }
}

impl ServerHandler for EgressTools {
    /// The handshake also fixes an HTTP session's turn: the one its `initialize` names.
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        if let Binding::PerRequest { turn, .. } = &self.binding {
            session_turn(turn, http_parts(&context)?)?;
        }
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("egressgate", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Network access from the sandbox goes through an egress proxy. When a download \
                 is refused, call egress_refusals, then request_egress_approval once; a person \
                 answers. Never try to get around the proxy.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let (backend, turn) = self.bind(&ctx)?;
        let args = Value::Object(request.arguments.clone().unwrap_or_default());
        match request.name.as_ref() {
            REFUSALS_TOOL => Ok(result(flow::refusals(&backend, &turn).await)),
            APPROVAL_TOOL => {
                if let Some(state) = request.request_state.as_deref() {
                    return self.retry(&backend, &turn, state, &request).await;
                }
                match flow::request(&backend, &turn, args).await {
                    Step::Done(answer) => Ok(result(answer)),
                    Step::Ask(card) => self.ask(&backend, &turn, card, &ctx).await,
                }
            }
            other => Err(ErrorData::invalid_params(
                format!("no tool named {other:?}"),
                None,
            )),
        }
    }
}
