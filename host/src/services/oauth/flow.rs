//! The authorization code flow with PKCE: an authorization request checked, the person's
//! consent turned into a code, the code exchanged for tokens, refresh tokens rotated, and
//! tokens revoked. Each refusal is the OAuth error RFC 6749 (and 7636, 8707, 7009) names.

use reqwest::Url;
use serde::{Deserialize, Serialize};

use super::clients::{self, Client, ClientCredentials};
use super::{
    ACCESS_PREFIX, CODE_LIFETIME_MS, CODE_PREFIX, GRANT_PREFIX, OAuthError, REFRESH_PREFIX, SCOPE, agent_of_resource,
    pkce,
};
use crate::domain::KeyScope;
use crate::services::keys::{self, Caller};
use crate::services::{ServiceError, Services, agents};
use crate::store::{Authorized, NewToken, TokenRecord};

/// An authorization request's parameters, each at most once.
#[derive(Debug, Clone, Default)]
pub struct AuthorizationParams {
    pub response_type: Option<String>,
    pub client_id: Option<String>,
    pub redirect_uri: Option<String>,
    pub code_challenge: Option<String>,
    pub code_challenge_method: Option<String>,
    pub state: Option<String>,
    pub scope: Option<String>,
    pub resource: Option<String>,
}

impl AuthorizationParams {
    /// From a query's pairs; a parameter given twice is refused (RFC 6749 §3.1), and its
    /// error cannot be trusted to any redirect address.
    pub fn from_pairs(pairs: &[(String, String)]) -> Result<AuthorizationParams, OAuthError> {
        let mut params = AuthorizationParams::default();
        for (name, value) in pairs {
            let slot = match name.as_str() {
                "response_type" => &mut params.response_type,
                "client_id" => &mut params.client_id,
                "redirect_uri" => &mut params.redirect_uri,
                "code_challenge" => &mut params.code_challenge,
                "code_challenge_method" => &mut params.code_challenge_method,
                "state" => &mut params.state,
                "scope" => &mut params.scope,
                "resource" => &mut params.resource,
                _ => continue,
            };
            if slot.replace(value.clone()).is_some() {
                return Err(OAuthError::new(
                    "invalid_request",
                    format!("{name} is given more than once"),
                ));
            }
        }
        Ok(params)
    }
}

/// An authorization request that may be shown to the person for consent.
#[derive(Debug, Clone)]
pub struct Authorization {
    pub client: Client,
    pub redirect_uri: String,
    pub state: Option<String>,
    pub scope: String,
    pub resource: String,
    /// The agent as the resource names it (its id or username).
    pub agent_ref: String,
    code_challenge: String,
}

/// An authorization request refused.
#[derive(Debug)]
pub enum Refusal {
    /// Told to the person only: the client, or where to send its answer, is not known.
    Shown(OAuthError),
    /// Sent back to the client at its redirect address (with the request's `state`).
    Redirect(String),
}

/// Checks an authorization request: the client and its redirect address first (a request
/// that fails them is never sent anywhere), then the rest.
pub async fn check_authorization(services: &Services, params: AuthorizationParams) -> Result<Authorization, Refusal> {
    let client_id = params
        .client_id
        .ok_or_else(|| Refusal::Shown(OAuthError::new("invalid_request", "client_id is missing")))?;
    let client = clients::find(services, &client_id).await.map_err(Refusal::Shown)?;
    // A document is fetched again for each step: its client must name the address, or the
    // one the person was shown could differ from the one the code goes to.
    let redirect_uri = match (params.redirect_uri, client.redirect_uris.as_slice()) {
        (Some(uri), registered) if registered.contains(&uri) => uri,
        (None, [only]) if !client.by_document => only.clone(),
        (Some(_), _) => {
            return Err(Refusal::Shown(OAuthError::new(
                "invalid_request",
                "redirect_uri is not one this client registered (they are compared exactly)",
            )));
        }
        (None, _) => {
            return Err(Refusal::Shown(OAuthError::new(
                "invalid_request",
                "redirect_uri is missing",
            )));
        }
    };
    let state = params.state;
    let back = |error: &'static str, description: &str| {
        Refusal::Redirect(redirect(
            services,
            &redirect_uri,
            state.as_deref(),
            &[("error", error), ("error_description", description)],
        ))
    };
    if params.response_type.as_deref() != Some("code") {
        return Err(back(
            "unsupported_response_type",
            "Only response_type=code is supported",
        ));
    }
    let code_challenge = match (params.code_challenge, params.code_challenge_method.as_deref()) {
        (Some(challenge), Some("S256")) if pkce::is_challenge(&challenge) => challenge,
        (Some(_), Some("S256")) => return Err(back("invalid_request", "code_challenge is not an S256 challenge")),
        (Some(_), _) => return Err(back("invalid_request", "code_challenge_method must be S256")),
        (None, _) => return Err(back("invalid_request", "PKCE is required: code_challenge with S256")),
    };
    let scope = params.scope.unwrap_or_else(|| SCOPE.to_string());
    if scope.split(' ').any(|s| s != SCOPE) {
        return Err(back("invalid_scope", &format!("The one scope offered is {SCOPE}")));
    }
    let Some(resource) = params.resource else {
        return Err(back(
            "invalid_target",
            "resource is missing: name the agent's MCP or A2A endpoint",
        ));
    };
    let Some(agent_ref) = agent_of_resource(&services.public_base_url, &resource) else {
        return Err(back(
            "invalid_target",
            "resource is not an MCP or A2A endpoint of this server",
        ));
    };
    Ok(Authorization {
        agent_ref: agent_ref.to_string(),
        client,
        redirect_uri,
        state,
        scope: SCOPE.to_string(),
        resource,
        code_challenge,
    })
}

/// The person declined: `access_denied`, at the client's redirect address.
pub fn decline(services: &Services, request: Authorization) -> String {
    let params = [("error", "access_denied"), ("error_description", "The person declined")];
    redirect(services, &request.redirect_uri, request.state.as_deref(), &params)
}

/// The person allowed, signed in with their key: a code for the client, at its redirect
/// address. Only a key that manages the account may allow, and only for one of its agents.
pub async fn consent(services: &Services, caller: &Caller, request: Authorization) -> Result<String, ServiceError> {
    let state = request.state.as_deref();
    caller.require(KeyScope::Manage)?;
    let key_id = caller
        .key_id
        .clone()
        .ok_or_else(|| ServiceError::Forbidden("Only an API key may allow a client".into()))?;
    let agent = agents::owned_with_commands(&services.store, &caller.account.id, &request.agent_ref).await?;
    let (id, code, hash) = keys::new_secret(CODE_PREFIX);
    let now = crate::clock::now_ms();
    let authorized = Authorized {
        account_id: caller.account.id.clone(),
        agent_id: agent.agent.id.clone(),
        client_id: request.client.id.clone(),
        client_name: Some(request.client.shown_name()),
        redirect_uri: request.redirect_uri.clone(),
        resource: request.resource.clone(),
        scope: request.scope.clone(),
        code_challenge: request.code_challenge.clone(),
        key_id,
    };
    services
        .store
        .insert_oauth_code(&id, hash.to_vec(), authorized, now, now + CODE_LIFETIME_MS)
        .await?;
    Ok(redirect(services, &request.redirect_uri, state, &[("code", &code)]))
}

/// `uri` with `params`, the request's `state` and our issuer (`iss`, RFC 9207) added to
/// its query.
fn redirect(services: &Services, uri: &str, state: Option<&str>, params: &[(&str, &str)]) -> String {
    let Ok(mut url) = Url::parse(uri) else {
        return uri.to_string();
    };
    {
        let mut query = url.query_pairs_mut();
        for (name, value) in params {
            query.append_pair(name, value);
        }
        if let Some(state) = state {
            query.append_pair("state", state);
        }
        query.append_pair("iss", services.public_base_url.trim_end_matches('/'));
    }
    url.to_string()
}

/// The token endpoint's form (RFC 6749 §4.1.3, §6; RFC 8707's `resource`).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct TokenForm {
    pub grant_type: Option<String>,
    pub code: Option<String>,
    pub redirect_uri: Option<String>,
    pub code_verifier: Option<String>,
    pub refresh_token: Option<String>,
    pub resource: Option<String>,
    pub scope: Option<String>,
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    /// The revocation endpoint's (RFC 7009).
    pub token: Option<String>,
    pub token_type_hint: Option<String>,
}

/// A token endpoint's answer (RFC 6749 §5.1).
#[derive(Debug, Clone, Serialize)]
pub struct TokenAnswer {
    pub access_token: String,
    pub token_type: &'static str,
    pub expires_in: i64,
    pub refresh_token: String,
    pub scope: String,
}

/// The client a token or revocation request comes from, authenticated.
async fn client_of(services: &Services, credentials: &ClientCredentials) -> Result<Client, OAuthError> {
    let id = credentials
        .id
        .as_deref()
        .ok_or_else(|| OAuthError::new("invalid_client", "client_id is missing"))?;
    let client = clients::find(services, id).await?;
    client.authenticate(credentials)?;
    Ok(client)
}

/// Exchanges a code, or a refresh token, for tokens.
pub async fn exchange(
    services: &Services,
    form: TokenForm,
    credentials: ClientCredentials,
) -> Result<TokenAnswer, OAuthError> {
    let grant_type = form.grant_type.clone().unwrap_or_default();
    if !["authorization_code", "refresh_token"].contains(&grant_type.as_str()) {
        return Err(OAuthError::new(
            "unsupported_grant_type",
            "grant_type must be authorization_code or refresh_token",
        ));
    }
    let client = client_of(services, &credentials).await?;
    match grant_type.as_str() {
        "authorization_code" => redeem_code(services, &client, form).await,
        _ => refresh(services, &client, form).await,
    }
}

async fn redeem_code(services: &Services, client: &Client, form: TokenForm) -> Result<TokenAnswer, OAuthError> {
    let invalid = |why: &str| OAuthError::new("invalid_grant", why);
    let presented = form
        .code
        .as_deref()
        .ok_or_else(|| OAuthError::new("invalid_request", "code is missing"))?;
    let (id, secret) = keys::split_secret(presented, CODE_PREFIX).ok_or_else(|| invalid("Unknown code"))?;
    let record = services.store.oauth_code(id).await?;
    if !keys::secret_matches(secret, record.as_ref().map(|r| r.secret_hash.as_slice())) {
        return Err(invalid("Unknown code"));
    }
    let Some(code) = record else {
        return Err(invalid("Unknown code"));
    };
    let now = crate::clock::now_ms();
    let authorized = &code.authorized;
    // Whose code it is first: another client's replay must not revoke the real grant.
    if authorized.client_id != client.id {
        return Err(invalid("This code was issued to another client"));
    }
    if form.redirect_uri.as_deref() != Some(authorized.redirect_uri.as_str()) {
        return Err(invalid("redirect_uri differs from the authorization request's"));
    }
    if let Some(grant) = &code.grant_id {
        // A code used twice was stolen, or replayed: what the first use gave is revoked.
        services.store.revoke_oauth_grant(grant, None, now).await?;
        return Err(invalid("This code was used already; the tokens it gave are revoked"));
    }
    if code.expires_at <= now {
        return Err(invalid("This code has expired"));
    }
    let verifier = form
        .code_verifier
        .as_deref()
        .ok_or_else(|| OAuthError::new("invalid_request", "code_verifier is missing (PKCE)"))?;
    if !pkce::verifies(verifier, &authorized.code_challenge) {
        return Err(invalid("code_verifier does not match the code_challenge"));
    }
    check_resource(form.resource.as_deref(), &authorized.resource)?;
    let (grant_id, _, _) = keys::new_secret(GRANT_PREFIX);
    let (tokens, answer) = new_tokens(services, now, &authorized.scope);
    match services
        .store
        .exchange_oauth_code(&code.id, &grant_id, now, tokens)
        .await?
    {
        Ok(()) => Ok(answer),
        Err(earlier) => {
            if let Some(earlier) = earlier {
                services.store.revoke_oauth_grant(&earlier, None, now).await?;
            }
            Err(invalid("This code was used already; the tokens it gave are revoked"))
        }
    }
}

async fn refresh(services: &Services, client: &Client, form: TokenForm) -> Result<TokenAnswer, OAuthError> {
    let invalid = |why: &str| OAuthError::new("invalid_grant", why);
    let presented = form
        .refresh_token
        .as_deref()
        .ok_or_else(|| OAuthError::new("invalid_request", "refresh_token is missing"))?;
    let token = known_token(services, presented).await?.filter(|t| t.kind == "refresh");
    let Some(token) = token else {
        return Err(invalid("Unknown refresh token"));
    };
    let grant = &token.grant;
    if grant.revoked_at.is_some() {
        return Err(invalid("This grant was revoked"));
    }
    if token.key_ended {
        return Err(invalid("The key that allowed this grant was revoked or has expired"));
    }
    if grant.client_id != client.id {
        return Err(invalid("This refresh token was issued to another client"));
    }
    let now = crate::clock::now_ms();
    if token.replaced_at.is_some() {
        // Used before: one of the two users is not the client. Nobody keeps the grant.
        services.store.revoke_oauth_grant(&grant.id, None, now).await?;
        return Err(invalid("This refresh token was used already; the grant is revoked"));
    }
    if token.expires_at <= now {
        return Err(invalid("This refresh token has expired"));
    }
    if let Some(scope) = &form.scope
        && scope.split(' ').any(|s| s != grant.scope)
    {
        return Err(OAuthError::new(
            "invalid_scope",
            format!("The grant's scope is {}", grant.scope),
        ));
    }
    check_resource(form.resource.as_deref(), &grant.resource)?;
    let (tokens, answer) = new_tokens(services, now, &grant.scope);
    if !services
        .store
        .rotate_oauth_refresh(&token.id, &grant.id, now, tokens)
        .await?
    {
        services.store.revoke_oauth_grant(&grant.id, None, now).await?;
        return Err(invalid("This refresh token was used already; the grant is revoked"));
    }
    Ok(answer)
}

/// Revokes the grant of an access or refresh token of this client (RFC 7009). A token
/// that is unknown, or another client's, changes nothing and is not told apart.
pub async fn revoke_token(
    services: &Services,
    form: TokenForm,
    credentials: ClientCredentials,
) -> Result<(), OAuthError> {
    let client = client_of(services, &credentials).await?;
    let presented = form
        .token
        .as_deref()
        .ok_or_else(|| OAuthError::new("invalid_request", "token is missing"))?;
    if let Some(token) = known_token(services, presented).await?
        && token.grant.client_id == client.id
    {
        services
            .store
            .revoke_oauth_grant(&token.grant.id, None, crate::clock::now_ms())
            .await?;
    }
    Ok(())
}

/// An access or refresh token whose secret matches, with its grant.
async fn known_token(services: &Services, presented: &str) -> Result<Option<TokenRecord>, OAuthError> {
    let split = keys::split_secret(presented, REFRESH_PREFIX).or_else(|| keys::split_secret(presented, ACCESS_PREFIX));
    let Some((id, secret)) = split else {
        return Ok(None);
    };
    let record = services.store.oauth_token(id, crate::clock::now_ms()).await?;
    Ok(record.filter(|r| keys::secret_matches(secret, Some(&r.secret_hash))))
}

/// RFC 8707: a `resource` named at the token endpoint must be the grant's.
fn check_resource(asked: Option<&str>, granted: &str) -> Result<(), OAuthError> {
    match asked {
        Some(asked) if asked != granted => Err(OAuthError::new(
            "invalid_target",
            format!("This grant is for {granted} only"),
        )),
        _ => Ok(()),
    }
}

/// A new access token and refresh token, to record, and the answer that carries them.
fn new_tokens(services: &Services, now: i64, scope: &str) -> (Vec<NewToken>, TokenAnswer) {
    let settings = &services.settings.mcp;
    let access_ms = i64::try_from(settings.mcp_oauth_access_token_minutes).unwrap_or(60) * 60_000;
    let refresh_ms = i64::try_from(settings.mcp_oauth_refresh_token_days).unwrap_or(30) * crate::rate_window::DAY_MS;
    let (access_id, access, access_hash) = keys::new_secret(ACCESS_PREFIX);
    let (refresh_id, refresh, refresh_hash) = keys::new_secret(REFRESH_PREFIX);
    let tokens = vec![
        NewToken {
            id: access_id,
            kind: "access",
            secret_hash: access_hash.to_vec(),
            expires_at: now + access_ms,
        },
        NewToken {
            id: refresh_id,
            kind: "refresh",
            secret_hash: refresh_hash.to_vec(),
            expires_at: now + refresh_ms,
        },
    ];
    let answer = TokenAnswer {
        access_token: access,
        token_type: "Bearer",
        expires_in: access_ms / 1000,
        refresh_token: refresh,
        scope: scope.to_string(),
    };
    (tokens, answer)
}
