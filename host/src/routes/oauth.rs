//! OAuth for the agents' MCP endpoints, when the operator turns it on (`mcp_oauth`):
//!
//! - `GET /.well-known/oauth-protected-resource/mcp/{agent}`: the endpoint's Protected
//!   Resource Metadata (RFC 9728), naming this host as its authorization server;
//! - `GET /.well-known/oauth-authorization-server`: the server's metadata (RFC 8414);
//! - `POST /oauth/register` (RFC 7591), `POST /oauth/token`, `POST /oauth/revoke` (RFC 7009),
//!   answered in OAuth's own error shape (`{error, error_description}`);
//! - `GET /oauth/authorize`: the consent page (the console's files and policy), which reads
//!   the request from `GET /oauth/authorize/request` and answers through
//!   `POST /oauth/authorize/decision` with the person's key (same origin only).
//!
//! Off, none of these exist (404) and access tokens are not taken.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};

use super::AppState;
use super::account::{Answer, Manager, ok};
use super::guard;
use crate::error::{ApiError, ApiPath};
use crate::services::oauth::{self, AuthorizationParams, ClientCredentials, OAuthError, Refusal, SCOPE, TokenForm};
use crate::views;

pub fn routes(state: AppState) -> Router<AppState> {
    if !state.services.settings.mcp.mcp_oauth {
        return Router::new();
    }
    // Each may make the host fetch a client's metadata document: counted per client address.
    let anonymous = Router::new()
        .route("/oauth/register", post(register))
        .route("/oauth/token", post(token))
        .route("/oauth/revoke", post(revoke))
        .route("/oauth/authorize/request", get(describe))
        .route("/oauth/authorize/decision", post(decide))
        .route_layer(axum::middleware::from_fn_with_state(state, super::x402::limit_clients));
    Router::new()
        .route(
            "/.well-known/oauth-protected-resource/mcp/{agent}",
            get(resource_metadata),
        )
        .route("/.well-known/oauth-authorization-server", get(server_metadata))
        .route("/oauth/authorize", get(|| async { super::console::consent_page() }))
        .merge(anonymous)
}

/// `/v1/account/oauth/grants`: the account's grants, and revoking one (its tokens stop
/// working at once). Behind the keyed API's gate, for keys that manage the account.
pub fn grant_routes() -> Router<AppState> {
    Router::new().route("/v1/account/oauth/grants", get(list_grants)).route(
        "/v1/account/oauth/grants/{grantId}",
        axum::routing::delete(revoke_grant),
    )
}

async fn list_grants(State(state): State<AppState>, Manager(caller): Manager) -> Answer {
    let grants = oauth::grants(&state.services, &caller.account.id).await?;
    ok(json!({ "grants": grants.iter().map(views::oauth_grant).collect::<Vec<_>>() }))
}

async fn revoke_grant(
    State(state): State<AppState>,
    Manager(caller): Manager,
    ApiPath(grant_id): ApiPath<String>,
) -> Answer {
    let grant = oauth::revoke_grant(&state.services, &caller.account.id, &grant_id).await?;
    ok(views::oauth_grant(&grant))
}

/// This host as an issuer: its public base URL.
fn issuer(state: &AppState) -> String {
    state.services.public_base_url.trim_end_matches('/').to_string()
}

/// Where an agent's endpoint's metadata is, for the `WWW-Authenticate` of its 401s; `None`
/// when OAuth is off.
pub fn resource_metadata_url(state: &AppState, agent: &str) -> Option<String> {
    // Only a name an endpoint can have goes into a header (no quotes or commas from a path).
    (state.services.settings.mcp.mcp_oauth && oauth::is_endpoint_name(agent))
        .then(|| format!("{}/.well-known/oauth-protected-resource/mcp/{agent}", issuer(state)))
}

async fn resource_metadata(State(state): State<AppState>, ApiPath(agent): ApiPath<String>) -> Response {
    metadata(json!({
        "resource": oauth::resource_of(&state.services.public_base_url, &agent),
        "authorization_servers": [issuer(&state)],
        "scopes_supported": [SCOPE],
        "bearer_methods_supported": ["header"],
        "resource_name": format!("The MCP tools of agent {agent}"),
    }))
}

async fn server_metadata(State(state): State<AppState>) -> Response {
    let issuer = issuer(&state);
    let client_auth = ["none", "client_secret_post", "client_secret_basic"];
    metadata(json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}/oauth/authorize"),
        "token_endpoint": format!("{issuer}/oauth/token"),
        "registration_endpoint": format!("{issuer}/oauth/register"),
        "revocation_endpoint": format!("{issuer}/oauth/revoke"),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": client_auth,
        "revocation_endpoint_auth_methods_supported": client_auth,
        "scopes_supported": [SCOPE],
        "client_id_metadata_document_supported": true,
        "authorization_response_iss_parameter_supported": true,
    }))
}

fn metadata(body: Value) -> Response {
    let mut response = axum::Json(body).into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("max-age=300"));
    response
}

/// An OAuth error answer; never cached.
fn oauth_error(err: OAuthError) -> Response {
    let status = StatusCode::from_u16(err.status).unwrap_or(StatusCode::BAD_REQUEST);
    let body = json!({ "error": err.error, "error_description": err.description });
    no_store((status, axum::Json(body)).into_response())
}

fn no_store(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    response
}

async fn register(State(state): State<AppState>, body: Bytes) -> Response {
    let request: Value = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(_) => {
            return oauth_error(OAuthError::new(
                "invalid_client_metadata",
                "The registration must be a JSON object",
            ));
        }
    };
    match oauth::register(&state.services, &request).await {
        Ok(answer) => no_store((StatusCode::CREATED, axum::Json(answer)).into_response()),
        Err(err) => oauth_error(err),
    }
}

/// The client's credentials: HTTP Basic (RFC 6749 §2.3.1, each part form-encoded) or the
/// form's `client_id` and `client_secret`; both, they must agree.
fn credentials(headers: &HeaderMap, form: &TokenForm) -> Result<ClientCredentials, OAuthError> {
    let mut credentials = ClientCredentials {
        id: form.client_id.clone(),
        secret: form.client_secret.clone(),
    };
    let Some(authorization) = headers.get(header::AUTHORIZATION) else {
        return Ok(credentials);
    };
    let invalid = || {
        OAuthError::new(
            "invalid_client",
            "The Authorization header is not HTTP Basic client credentials",
        )
    };
    let encoded = authorization
        .to_str()
        .ok()
        .and_then(|v| {
            v.get(..6)
                .filter(|p| p.eq_ignore_ascii_case("basic "))
                .map(|_| v[6..].trim())
        })
        .ok_or_else(invalid)?;
    use base64::Engine;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .ok_or_else(invalid)?;
    let (id, secret) = decoded.split_once(':').ok_or_else(invalid)?;
    let decode = |part: &str| form_urlencoded_decode(part).ok_or_else(invalid);
    let (id, secret) = (decode(id)?, decode(secret)?);
    if credentials.id.as_ref().is_some_and(|given| *given != id) || credentials.secret.is_some() {
        return Err(OAuthError::new(
            "invalid_request",
            "Client credentials are given twice: use HTTP Basic or the form, not both",
        ));
    }
    credentials.id = Some(id);
    credentials.secret = Some(secret);
    Ok(credentials)
}

fn form_urlencoded_decode(text: &str) -> Option<String> {
    serde_urlencoded::from_str::<Vec<(String, String)>>(&format!("v={text}"))
        .ok()?
        .pop()
        .map(|(_, value)| value)
}

/// The token and revocation endpoints' form body: urlencoded, each parameter once.
fn read_form(headers: &HeaderMap, body: &[u8]) -> Result<TokenForm, OAuthError> {
    let invalid = || {
        OAuthError::new(
            "invalid_request",
            "The body must be application/x-www-form-urlencoded, each parameter once",
        )
    };
    let form_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().starts_with("application/x-www-form-urlencoded"));
    if !form_type {
        return Err(invalid());
    }
    serde_urlencoded::from_bytes(body).map_err(|_| invalid())
}

async fn token(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let answered = async {
        let form = read_form(&headers, &body)?;
        let credentials = credentials(&headers, &form)?;
        oauth::exchange(&state.services, form, credentials).await
    };
    match answered.await {
        Ok(answer) => no_store(axum::Json(answer).into_response()),
        Err(err) => oauth_error(err),
    }
}

async fn revoke(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let answered = async {
        let form = read_form(&headers, &body)?;
        let credentials = credentials(&headers, &form)?;
        oauth::revoke_token(&state.services, form, credentials).await
    };
    match answered.await {
        Ok(()) => no_store(StatusCode::OK.into_response()),
        Err(err) => oauth_error(err),
    }
}

fn params(query: Option<&str>) -> Result<AuthorizationParams, OAuthError> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query.unwrap_or_default())
        .map_err(|_| OAuthError::new("invalid_request", "The query cannot be read"))?;
    AuthorizationParams::from_pairs(&pairs)
}

/// What the consent page shows: who asks, for which agent's tools, and where the answer
/// goes; or where to send the browser when the request is refused back to the client.
async fn describe(State(state): State<AppState>, RawQuery(query): RawQuery) -> Response {
    let params = match params(query.as_deref()) {
        Ok(params) => params,
        Err(err) => return oauth_error(err),
    };
    match oauth::check_authorization(&state.services, params).await {
        Ok(request) => no_store(
            axum::Json(json!({
                "client": {
                    "id": request.client.id,
                    "name": request.client.shown_name(),
                    "document": request.client.by_document,
                },
                "agent": request.agent_ref,
                "resource": request.resource,
                "scope": request.scope,
                "redirect_uri": request.redirect_uri,
            }))
            .into_response(),
        ),
        Err(Refusal::Shown(err)) => oauth_error(err),
        Err(Refusal::Redirect(to)) => no_store(axum::Json(json!({ "redirect": to })).into_response()),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Decision {
    /// The authorization request's query, as the page was given it.
    query: String,
    allow: bool,
}

/// The person's answer: `{redirect}`, where the page sends the browser. Allowing takes the
/// account's key (`x-api-key`), checked, throttled and rate-limited as on the keyed API.
async fn decide(State(state): State<AppState>, parts: axum::http::request::Parts, body: Bytes) -> Response {
    // JSON only: a form another site posts (no preflight) is not a decision.
    let json = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().starts_with("application/json"));
    if !json {
        return ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "validation_error",
            "A decision is sent as application/json",
        )
        .into_response();
    }
    let decision: Decision = match serde_json::from_slice(&body) {
        Ok(decision) => decision,
        Err(err) => return ApiError::validation(format!("Invalid body: {err}")).into_response(),
    };
    let params = match params(Some(decision.query.trim_start_matches('?'))) {
        Ok(params) => params,
        Err(err) => return oauth_error(err),
    };
    let request = match oauth::check_authorization(&state.services, params).await {
        Ok(request) => request,
        Err(Refusal::Shown(err)) => return oauth_error(err),
        Err(Refusal::Redirect(to)) => return no_store(axum::Json(json!({ "redirect": to })).into_response()),
    };
    let caller = match (decision.allow, parts.headers.get("x-api-key")) {
        (false, _) => None,
        (true, None) => {
            return ApiError::unauthorized("Sign in with your account's API key (x-api-key)").into_response();
        }
        (true, Some(key)) => match guard::check_key(&state, &parts, &key.clone()).await {
            Ok((caller, _)) => Some(caller),
            Err(err) => return err.into_response(),
        },
    };
    let answered = match &caller {
        Some(caller) => oauth::consent(&state.services, caller, request).await,
        None => Ok(oauth::decline(&state.services, request)),
    };
    match answered {
        Ok(to) => no_store(axum::Json(json!({ "redirect": to })).into_response()),
        Err(err) => ApiError::from(err).into_response(),
    }
}
