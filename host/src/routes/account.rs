//! `/v1/account`: the account holder's own keys, agents, plugins, wallets, payments and
//! jobs, for keys with scope `manage`. Every route calls the service the CLI calls and
//! answers with the JSON the CLI prints (`views`), in the keyed API's envelope. An id of
//! another account's record answers exactly like a missing one.

use axum::Router;
use axum::extract::{DefaultBodyLimit, FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::middleware;
use axum::response::IntoResponse;
use axum::routing::{delete, get, put};
use serde::Deserialize;
use serde_json::{Value, json};

use super::AppState;
use super::guard;
use super::requests;
use crate::domain::KeyScope;
use crate::error::{ApiBody, ApiError, ApiJson, ApiPath, ApiQuery};
use crate::services::integrations::IntegrationKind;
use crate::services::keys::Caller;
use crate::services::payments::breaker;
use crate::services::{
    accounts, agents, chat_budget, chatapp, integrations, jobs, keys, payments, plugins, social, wallet_alerts, wallets,
};
use crate::views;

pub fn routes(state: AppState) -> Router<AppState> {
    let max_component = state.services.settings.plugins.plugin_max_component_bytes;
    Router::new()
        .route("/v1/account", get(show_account))
        .route("/v1/account/keys", get(list_keys).post(create_key))
        .route("/v1/account/keys/{key_id}", delete(revoke_key).patch(update_key))
        .route("/v1/account/agents", get(list_agents).post(apply_agent))
        .route("/v1/account/agents/{agent_id}", get(show_agent).delete(delete_agent))
        .route(
            "/v1/account/agents/{agent_id}/wallets",
            get(list_wallets).post(add_wallet),
        )
        .route("/v1/account/agents/{agent_id}/wallets/{network}/qr", get(wallet_qr))
        .route("/v1/account/agents/{agent_id}/transfers", get(list_transfers))
        .route("/v1/account/agents/{agent_id}/payments", get(list_payments))
        .route("/v1/account/agents/{agent_id}/jobs", get(list_jobs))
        .route("/v1/account/agents/{agent_id}/logs", get(list_logs))
        .route("/v1/account/agents/{agent_id}/integrations", get(show_integrations))
        .route(
            "/v1/account/agents/{agent_id}/integrations/chatapp",
            put(connect_chatapp).patch(enable_chatapp).delete(disconnect_chatapp),
        )
        .route(
            "/v1/account/agents/{agent_id}/integrations/social",
            put(connect_social).patch(enable_social).delete(disconnect_social),
        )
        .route(
            "/v1/account/plugins",
            get(list_plugins)
                .post(upload_plugin)
                .layer(DefaultBodyLimit::max(max_component)),
        )
        .route("/v1/account/plugins/{plugin}", delete(delete_plugin))
        .merge(super::usage::routes())
        .merge(super::webhooks::routes())
        .merge(super::schedules::routes())
        .merge(super::remote_mcp::routes())
        .merge(super::spending::routes())
        .merge(super::oauth::grant_routes())
        .route_layer(middleware::from_fn_with_state(state, guard::require_key))
}

/// A caller whose key may manage the account. Checked before the body is read.
pub struct Manager(pub Caller);

impl<S: Send + Sync> FromRequestParts<S> for Manager {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let caller = Caller::from_request_parts(parts, state).await?;
        caller.require(KeyScope::Manage)?;
        Ok(Manager(caller))
    }
}

pub(super) type Answer = Result<(StatusCode, axum::Json<Value>), ApiError>;

pub(super) fn ok(data: Value) -> Answer {
    Ok((StatusCode::OK, axum::Json(json!({ "success": true, "data": data }))))
}

fn created(data: Value) -> Answer {
    Ok((
        StatusCode::CREATED,
        axum::Json(json!({ "success": true, "data": data })),
    ))
}

/// `?limit=N` on the lists: 1 to 500, 50 when absent.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ListQuery {
    limit: Option<u32>,
}

impl ListQuery {
    pub(super) fn limit(&self) -> Result<u32, ApiError> {
        match self.limit {
            None => Ok(50),
            Some(n @ 1..=500) => Ok(n),
            Some(n) => Err(ApiError::validation(format!(
                "Invalid query parameter 'limit': {n} is not between 1 and 500"
            ))),
        }
    }
}

async fn show_account(State(state): State<AppState>, Manager(caller): Manager) -> Answer {
    let services = &state.services;
    let quotas = accounts::quotas(&services.store, &services.settings, &caller.account.id).await?;
    let paused = breaker::paused(&services.store, &caller.account.id).await?;
    let rules = breaker::Rules::of(&services.settings.x402);
    let now = crate::clock::now_ms();
    let chat_tokens = chat_budget::standing(services, &caller.account.id).await?;
    let mut view = views::account_with_quotas(&caller.account, &quotas);
    view["paused_commands"] = paused.iter().map(|b| views::paused(b, &rules, now)).collect();
    view["chat_tokens"] = views::chat_budget(&chat_tokens);
    ok(view)
}

async fn list_keys(State(state): State<AppState>, Manager(caller): Manager) -> Answer {
    let list = keys::list(&state.services.store, &caller.account).await?;
    ok(json!({ "keys": list.iter().map(views::key).collect::<Vec<_>>() }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateKey {
    /// `use` when absent: a new key gets the least power unless more is asked for.
    scope: Option<String>,
    /// The owner's label, to tell keys apart in the list.
    name: Option<String>,
    /// When it stops working (RFC 3339), or `expires_in_days`; neither: it never does.
    expires_at: Option<String>,
    #[serde(default, deserialize_with = "requests::whole")]
    expires_in_days: Option<i64>,
}

const BOTH_EXPIRY_FIELDS: &str = "Give 'expires_at' or 'expires_in_days', not both";

/// The key's end as a request gives it: one of the two fields, or neither.
fn expiry(at: Option<&str>, in_days: Option<i64>) -> Result<Option<i64>, ApiError> {
    let now = crate::clock::now_ms();
    Ok(match (at, in_days) {
        (Some(_), Some(_)) => return Err(ApiError::validation(BOTH_EXPIRY_FIELDS)),
        (Some(at), None) => Some(keys::expiry_at(at, now)?),
        (None, Some(days)) => Some(keys::expiry_in_days(days, now)?),
        (None, None) => None,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdateKey {
    /// A new label; `null` or blank removes it.
    #[serde(default, deserialize_with = "requests::present")]
    name: Option<Option<String>>,
    /// A new end; `null` removes it.
    #[serde(default, deserialize_with = "requests::present")]
    expires_at: Option<Option<String>>,
    #[serde(default, deserialize_with = "requests::whole")]
    expires_in_days: Option<i64>,
}

async fn create_key(
    State(state): State<AppState>,
    Manager(caller): Manager,
    ApiJson(body): ApiJson<CreateKey>,
) -> Answer {
    let scope = match body.scope.as_deref() {
        None => KeyScope::Use,
        Some(text) => keys::parse_scope(text)?,
    };
    let name = keys::parse_name(body.name.as_deref())?;
    let expires_at = expiry(body.expires_at.as_deref(), body.expires_in_days)?;
    caller.may_set_end(expires_at)?;
    let issued = keys::issue(&state.services.store, &caller.account, scope, name, expires_at).await?;
    created(views::issued_key(&issued, &caller.account))
}

async fn update_key(
    State(state): State<AppState>,
    Manager(caller): Manager,
    ApiPath(key_id): ApiPath<String>,
    ApiJson(body): ApiJson<UpdateKey>,
) -> Answer {
    if body.name.is_none() && body.expires_at.is_none() && body.expires_in_days.is_none() {
        return Err(ApiError::validation(
            "Nothing to change: give 'name', 'expires_at' or 'expires_in_days'",
        ));
    }
    let name = body.name.map(|n| keys::parse_name(n.as_deref())).transpose()?;
    let expires_at = match (body.expires_at, body.expires_in_days) {
        (None, None) => None,
        (Some(None), None) => Some(None),
        (Some(None), Some(_)) => return Err(ApiError::validation(BOTH_EXPIRY_FIELDS)),
        (at, days) => Some(expiry(at.flatten().as_deref(), days)?),
    };
    if let Some(end) = expires_at {
        caller.may_set_end(end)?;
    }
    let key = keys::update(&state.services.store, &key_id, Some(&caller.account), name, expires_at).await?;
    ok(views::key(&key))
}

async fn revoke_key(
    State(state): State<AppState>,
    Manager(caller): Manager,
    ApiPath(key_id): ApiPath<String>,
) -> Answer {
    let key = keys::revoke(&state.services.store, &key_id, Some(&caller.account)).await?;
    ok(views::key(&key))
}

async fn list_agents(State(state): State<AppState>, Manager(caller): Manager) -> Answer {
    let list = agents::list(&state.services.store, Some(&caller.account.id)).await?;
    ok(json!({ "agents": list.iter().map(views::agent_summary).collect::<Vec<_>>() }))
}

/// Creates or updates an agent from its manifest: TOML (`application/toml`, `text/plain`
/// or no content type) or the same as JSON (`application/json`).
async fn apply_agent(State(state): State<AppState>, Manager(caller): Manager, body: ApiBody) -> Answer {
    let json = match body.mime.as_deref() {
        None | Some("application/toml") | Some("text/plain") | Some("text/x-toml") => false,
        Some("application/json") => true,
        Some(other) => {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "validation_error",
                format!("Content-Type {other} is not a manifest: send application/toml or application/json"),
            ));
        }
    };
    let manifest = agents::parse_sent(&body.bytes, json)?;
    let outcome = agents::apply_as(&state.services, &manifest, &caller.account.id).await?;
    let view = views::applied(&manifest, &outcome);
    if outcome.created { created(view) } else { ok(view) }
}

async fn show_agent(
    State(state): State<AppState>,
    Manager(caller): Manager,
    ApiPath(agent_id): ApiPath<String>,
) -> Answer {
    let services = &state.services;
    let found = agents::owned_with_commands(&services.store, &caller.account.id, &agent_id).await?;
    let mut view = views::agent(&found.agent, &caller.account.name, &found.commands);
    views::mark_paused(
        &mut view,
        &found.open_breakers,
        &breaker::Rules::of(&services.settings.x402),
        crate::clock::now_ms(),
    );
    ok(view)
}

async fn delete_agent(
    State(state): State<AppState>,
    Manager(caller): Manager,
    ApiPath(agent_id): ApiPath<String>,
) -> Answer {
    let agent = agents::delete(&state.services.store, &caller.account.id, &agent_id).await?;
    ok(json!({ "id": agent.id, "username": agent.def.username, "deleted": true }))
}

async fn list_wallets(
    State(state): State<AppState>,
    Manager(caller): Manager,
    ApiPath(agent_id): ApiPath<String>,
) -> Answer {
    let store = &state.services.store;
    let agent = agents::owned(store, &caller.account.id, &agent_id).await?;
    let list = wallets::list(store, &agent.id).await?;
    let alerts = wallet_alerts::of_agent(&state.services, &agent.id).await?;
    let rows: Vec<Value> = list
        .iter()
        .map(|w| {
            let mut row = views::wallet(w, &state.services.chains);
            let alert = alerts.iter().find(|a| a.network == w.network.as_str());
            row["low_balance_alert"] = alert.map(views::wallet_alert).unwrap_or(Value::Null);
            row
        })
        .collect();
    ok(json!({ "wallets": rows }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AddWallet {
    network: String,
    /// An existing secret key to import (as `wallet import` reads it); absent: a new one.
    secret: Option<String>,
}

async fn add_wallet(
    State(state): State<AppState>,
    Manager(caller): Manager,
    ApiPath(agent_id): ApiPath<String>,
    ApiJson(body): ApiJson<AddWallet>,
) -> Answer {
    let network = requests::network(&body.network)?;
    let services = &state.services;
    let agent = agents::owned(&services.store, &caller.account.id, &agent_id).await?;
    let address = wallets::add(services, &agent.id, network, body.secret.as_deref()).await?;
    created(json!({ "network": network.as_str(), "address": address }))
}

/// The wallet's funding request (`funding_uri`) as a QR code, `image/svg+xml`.
async fn wallet_qr(
    State(state): State<AppState>,
    Manager(caller): Manager,
    ApiPath((agent_id, network)): ApiPath<(String, String)>,
) -> Result<axum::response::Response, ApiError> {
    let network = requests::network(&network)?;
    let services = &state.services;
    let agent = agents::owned(&services.store, &caller.account.id, &agent_id).await?;
    let wallet = wallets::wallet(services, &agent.id, network).await?;
    let uri = services.chains.get(network).funding_uri(&wallet.address);
    let svg = views::qr_svg(&uri).ok_or_else(|| ApiError::internal("The address does not fit a QR code"))?;
    let headers = [
        (header::CONTENT_TYPE, "image/svg+xml"),
        (header::CACHE_CONTROL, "private, no-cache"),
    ];
    Ok((headers, svg).into_response())
}

async fn list_transfers(
    State(state): State<AppState>,
    Manager(caller): Manager,
    ApiPath(agent_id): ApiPath<String>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Answer {
    let services = &state.services;
    let agent = agents::owned(&services.store, &caller.account.id, &agent_id).await?;
    let list = wallets::transfers(&services.store, &agent.id, query.limit()?).await?;
    let rows: Vec<Value> = list.iter().map(|t| views::transfer(t, &services.chains)).collect();
    ok(json!({ "transfers": rows }))
}

async fn list_payments(
    State(state): State<AppState>,
    Manager(caller): Manager,
    ApiPath(agent_id): ApiPath<String>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Answer {
    let services = &state.services;
    let agent = agents::owned(&services.store, &caller.account.id, &agent_id).await?;
    let list = payments::list(&services.store, &agent.id, query.limit()?).await?;
    let rows: Vec<Value> = list.iter().map(|p| views::payment(p, &services.chains)).collect();
    ok(json!({ "payments": rows }))
}

async fn list_jobs(
    State(state): State<AppState>,
    Manager(caller): Manager,
    ApiPath(agent_id): ApiPath<String>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Answer {
    let services = &state.services;
    let agent = agents::owned(&services.store, &caller.account.id, &agent_id).await?;
    let list = jobs::list(&services.store, &agent.id, query.limit()?).await?;
    ok(json!({ "jobs": list.iter().map(views::job).collect::<Vec<_>>() }))
}

/// `?command=NAME&limit=N`: the kept runs of one command, or of all.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LogsQuery {
    command: Option<String>,
    limit: Option<u32>,
}

async fn list_logs(
    State(state): State<AppState>,
    Manager(caller): Manager,
    ApiPath(agent_id): ApiPath<String>,
    ApiQuery(query): ApiQuery<LogsQuery>,
) -> Answer {
    let store = &state.services.store;
    let agent = agents::owned(store, &caller.account.id, &agent_id).await?;
    let limit = ListQuery { limit: query.limit }.limit()?;
    let command = query.command.as_deref().map(|c| c.trim_start_matches('/'));
    let runs = plugins::runs(store, &agent.id, command, None, limit).await?;
    ok(json!({ "runs": runs.iter().map(views::plugin_run).collect::<Vec<_>>() }))
}

async fn list_plugins(State(state): State<AppState>, Manager(caller): Manager) -> Answer {
    let list = plugins::list(&state.services.store, &caller.account.id).await?;
    ok(json!({ "plugins": list.iter().map(views::account_plugin).collect::<Vec<_>>() }))
}

/// A component as the body (`application/wasm`), up to `plugin_max_component_bytes`.
async fn upload_plugin(State(state): State<AppState>, Manager(caller): Manager, body: ApiBody) -> Answer {
    match body.mime.as_deref() {
        Some("application/wasm") | Some("application/octet-stream") => {}
        _ => {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "validation_error",
                "Content-Type must be application/wasm: the body is the component's bytes",
            ));
        }
    }
    let inspection = plugins::upload(&state.services, &caller.account.id, body.bytes.to_vec()).await?;
    created(views::inspection(&inspection))
}

/// Removes a component from the account's (`sha256:HEX`, as listed), unless a command of
/// the account runs it (409).
async fn delete_plugin(
    State(state): State<AppState>,
    Manager(caller): Manager,
    ApiPath(plugin): ApiPath<String>,
) -> Answer {
    let Some(hash) = crate::manifest::uploaded_hash(&plugin) else {
        return Err(ApiError::validation(format!(
            "'{plugin}' is not a component reference: use sha256:<64 hex digits>, as the list shows"
        )));
    };
    plugins::remove(&state.services.store, &caller.account.id, hash).await?;
    ok(json!({ "plugin": plugin, "deleted": true }))
}

async fn show_integrations(
    State(state): State<AppState>,
    Manager(caller): Manager,
    ApiPath(agent_id): ApiPath<String>,
) -> Answer {
    let services = &state.services;
    let agent = agents::owned(&services.store, &caller.account.id, &agent_id).await?;
    let bot = integrations::connected(services, &agent.id, chatapp::KIND).await?;
    let account = integrations::connected(services, &agent.id, social::KIND).await?;
    ok(json!({
        "chatapp": views::integration(bot.as_ref()),
        "social": views::integration(account.as_ref()),
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConnectChatapp {
    /// The bot token from @BotFather; checked with Telegram's getMe before it is kept.
    token: String,
    /// Registered with setWebhook when given, so the bot answers in its chats.
    webhook_url: Option<String>,
}

async fn connect_chatapp(
    State(state): State<AppState>,
    Manager(caller): Manager,
    ApiPath(agent_id): ApiPath<String>,
    ApiJson(body): ApiJson<ConnectChatapp>,
) -> Answer {
    let services = &state.services;
    let agent = agents::owned(&services.store, &caller.account.id, &agent_id).await?;
    let username = chatapp::connect(services, &agent, &body.token).await?;
    if let Some(url) = &body.webhook_url {
        chatapp::register_webhook(services, &agent, url).await?;
    }
    ok(json!({ "bot_username": username, "enabled": true, "webhook_url": body.webhook_url }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConnectSocial {
    access_token: String,
    refresh_token: Option<String>,
    /// Seconds until the access token expires, as X's token endpoint said.
    #[serde(default, deserialize_with = "requests::whole")]
    expires_in: Option<i64>,
}

async fn connect_social(
    State(state): State<AppState>,
    Manager(caller): Manager,
    ApiPath(agent_id): ApiPath<String>,
    ApiJson(body): ApiJson<ConnectSocial>,
) -> Answer {
    let services = &state.services;
    let agent = agents::owned(&services.store, &caller.account.id, &agent_id).await?;
    let username = social::connect(
        services,
        &agent,
        &body.access_token,
        body.refresh_token.as_deref(),
        body.expires_in,
    )
    .await?;
    ok(json!({ "username": username, "enabled": true, "refreshable": body.refresh_token.is_some() }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Enabled {
    enabled: bool,
}

async fn enable_chatapp(
    state: State<AppState>,
    manager: Manager,
    path: ApiPath<String>,
    body: ApiJson<Enabled>,
) -> Answer {
    set_enabled(state, manager, path, body, chatapp::KIND).await
}

async fn enable_social(
    state: State<AppState>,
    manager: Manager,
    path: ApiPath<String>,
    body: ApiJson<Enabled>,
) -> Answer {
    set_enabled(state, manager, path, body, social::KIND).await
}

async fn set_enabled(
    State(state): State<AppState>,
    Manager(caller): Manager,
    ApiPath(agent_id): ApiPath<String>,
    ApiJson(body): ApiJson<Enabled>,
    kind: IntegrationKind,
) -> Answer {
    let services = &state.services;
    let agent = agents::owned(&services.store, &caller.account.id, &agent_id).await?;
    integrations::set_enabled(services, &agent.id, kind, body.enabled).await?;
    ok(json!({ "enabled": body.enabled }))
}

async fn disconnect_chatapp(state: State<AppState>, manager: Manager, path: ApiPath<String>) -> Answer {
    disconnect(state, manager, path, chatapp::KIND).await
}

async fn disconnect_social(state: State<AppState>, manager: Manager, path: ApiPath<String>) -> Answer {
    disconnect(state, manager, path, social::KIND).await
}

async fn disconnect(
    State(state): State<AppState>,
    Manager(caller): Manager,
    ApiPath(agent_id): ApiPath<String>,
    kind: IntegrationKind,
) -> Answer {
    let services = &state.services;
    let agent = agents::owned(&services.store, &caller.account.id, &agent_id).await?;
    let removed = integrations::disconnect(services, &agent.id, kind).await?;
    ok(json!({ "disconnected": removed }))
}
