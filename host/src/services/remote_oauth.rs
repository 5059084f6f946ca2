//! An owner's OAuth grant to a remote MCP server their agent uses (`oauth = true` in its
//! `[[mcp_servers]]` entry): started from the console or the account API, consented to at
//! the server's authorization server, finished at this host's callback, and kept sealed as
//! the server's credential among the agent's integrations. The access token is refreshed
//! before it runs out, one host at a time.
//!
//! Nothing is kept while the owner is away consenting: the grant's `state` carries what its
//! end needs (the PKCE verifier, the client, the endpoints), sealed with the master key every
//! host shares, so the owner may come back to any host, within ten minutes. The public
//! callback grants nothing: the owner, signed in to the console, finishes the grant with a
//! key of the account that began it, once.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

use super::{ServiceError, Services};
use crate::clients::mcp::McpError;
use crate::clients::oauth::{self, AuthServer, Client, OAuthClient, OAuthClientError, Tokens};
use crate::domain::Agent;
use crate::domain::remote_mcp::McpServerDef;
use crate::outbound::origin_of;

/// Where the owner's browser comes back with the code.
pub const CALLBACK_PATH: &str = "/oauth/mcp-servers/callback";
/// How long an owner may take to consent.
const STATE_TTL_MS: i64 = 10 * 60 * 1000;
/// An access token this close to its end is refreshed first.
const REFRESH_BEFORE_MS: i64 = 60 * 1000;
/// What the state is sealed for.
const STATE_PURPOSE: &str = "remote-mcp-oauth-state";

/// What the grant's end needs, carried in its `state`.
#[derive(Serialize, Deserialize)]
struct Pending {
    /// This grant's own id: kept with its tokens, so its state finishes it once.
    id: String,
    account_id: String,
    agent_id: String,
    server: String,
    /// The server's address when the grant began: a manifest that moved it since is refused.
    url: String,
    verifier: String,
    auth: AuthServer,
    client: Client,
    redirect_uri: String,
    expires_at: i64,
}

/// The grant, sealed as the server's credential.
#[derive(Serialize, Deserialize)]
struct Granted {
    access_token: String,
    refresh_token: Option<String>,
    /// When the access token stops working (Unix ms), when the server said.
    expires_at: Option<i64>,
    auth: AuthServer,
    client: Client,
    /// The resource the tokens are for: the server's address.
    resource: String,
    /// The grant they came from (`Pending::id`).
    #[serde(default)]
    grant_id: String,
}

/// What is kept in the open beside it (as a header credential's is: the header and the
/// address it was given for).
#[derive(Serialize, Deserialize)]
struct GrantedPublic {
    header: String,
    origin: String,
    oauth: bool,
    /// The grant whose state was used (`Pending::id`).
    #[serde(default)]
    grant_id: String,
}

fn oauth_server<'a>(agent: &'a Agent, name: &str) -> Result<&'a McpServerDef, ServiceError> {
    let def = agent
        .def
        .mcp_servers
        .iter()
        .find(|s| s.name == name)
        .ok_or_else(|| ServiceError::NotFound(format!("The agent names no MCP server '{name}'")))?;
    if !def.oauth {
        return Err(ServiceError::Validation(format!(
            "server '{name}' does not sign in with OAuth: its manifest entry says no `oauth = true`"
        )));
    }
    Ok(def)
}

fn client<'a>(services: &'a Services, def: &McpServerDef) -> OAuthClient<'a> {
    OAuthClient {
        outbound: &services.outbound,
        timeout: Duration::from_millis(def.timeout_ms),
        resource: def.url.clone(),
    }
}

/// The lock a grant's writes take, on every host: a refresh, a grant's end, its removal.
fn turn(agent: &Agent, def: &McpServerDef) -> String {
    format!("{}:{}", agent.id, def.name)
}

fn failed(def: &McpServerDef, err: OAuthClientError) -> ServiceError {
    ServiceError::Validation(format!("{}: {err}", def.name))
}

/// Begins the owner's grant to the agent's server `name`: finds its authorization server,
/// registers this host as a client there, and gives the address to send the owner to.
pub async fn start(services: &Services, agent: &Agent, name: &str) -> Result<String, ServiceError> {
    let def = oauth_server(agent, name)?;
    // The server's own 401 says where its metadata is; one that lets us in needs no grant.
    let remote = crate::clients::mcp::Remote {
        url: def.url.clone(),
        headers: Vec::new(),
        timeout: Duration::from_millis(def.timeout_ms),
        max_bytes: services.settings.mcp.mcp_remote_max_response_bytes,
    };
    let challenge = match remote.initialize(&services.outbound).await {
        Ok(_) => {
            return Err(ServiceError::Validation(format!(
                "{} answers without signing in: it needs no OAuth grant",
                def.name
            )));
        }
        Err(McpError::Unauthorized(challenge)) => challenge,
        Err(_) => None,
    };
    let oauth = client(services, def);
    let auth = oauth
        .discover(&def.url, challenge.as_deref())
        .await
        .map_err(|e| failed(def, e))?;
    let redirect_uri = format!("{}{CALLBACK_PATH}", services.public_base_url.trim_end_matches('/'));
    let registered = oauth
        .register(&auth, &redirect_uri, &format!("agent-host: {}", agent.def.name))
        .await
        .map_err(|e| failed(def, e))?;
    let (verifier, code_challenge) = oauth::pkce_pair();
    let pending = Pending {
        id: crate::random::hex_token(16),
        account_id: agent.account_id.clone(),
        agent_id: agent.id.clone(),
        server: def.name.clone(),
        url: def.url.clone(),
        verifier,
        auth,
        client: registered,
        redirect_uri,
        expires_at: crate::clock::now_ms() + STATE_TTL_MS,
    };
    let json = serde_json::to_vec(&pending).map_err(|e| ServiceError::Validation(e.to_string()))?;
    let state = URL_SAFE_NO_PAD.encode(services.secrets.seal(STATE_PURPOSE, &json));
    Ok(oauth::authorization_url(
        &pending.auth,
        &pending.client,
        &pending.redirect_uri,
        &state,
        &code_challenge,
        &def.url,
    ))
}

/// Ends a grant, for the account `account_id` that began it: trades the code for tokens and
/// keeps them sealed. Returns the agent and the server's name. `issuer`: the callback's
/// `iss` (RFC 9207), which must be the grant's own, and must be there when its
/// authorization server says it sends one.
pub async fn finish(
    services: &Services,
    account_id: &str,
    state: &str,
    code: &str,
    issuer: Option<&str>,
) -> Result<(Agent, String), ServiceError> {
    let unknown = || ServiceError::Validation("This sign-in is unknown or was altered; start it again".into());
    let sealed = URL_SAFE_NO_PAD.decode(state).map_err(|_| unknown())?;
    let opened = services.secrets.open(STATE_PURPOSE, &sealed).map_err(|_| unknown())?;
    let pending: Pending = serde_json::from_slice(&opened).map_err(|_| unknown())?;
    // Only the account that began it ends it: a code another browser brings back grants
    // nothing (a victim's consent cannot land on an attacker's agent, nor the reverse).
    if pending.account_id != account_id {
        return Err(unknown());
    }
    if crate::clock::now_ms() > pending.expires_at {
        return Err(ServiceError::Validation(
            "This sign-in took longer than 10 minutes; start it again".into(),
        ));
    }
    let issuer_missing = issuer.is_none() && pending.auth.sends_issuer;
    if issuer_missing || issuer.is_some_and(|iss| iss.trim_end_matches('/') != pending.auth.issuer) {
        return Err(ServiceError::Validation(
            "The answer came from another authorization server than the one asked; start again".into(),
        ));
    }
    let agent = services
        .store
        .agent(&pending.agent_id)
        .await?
        .filter(|agent| agent.account_id == pending.account_id)
        .ok_or_else(|| ServiceError::NotFound("The agent of this sign-in is gone".into()))?;
    let def = oauth_server(&agent, &pending.server)?;
    if def.url != pending.url {
        return Err(ServiceError::Validation(format!(
            "{}'s address changed since this sign-in began; start it again",
            def.name
        )));
    }
    let _turn = services.oauth_refreshes.lock(turn(&agent, def)).await?;
    if let Some(stored) = services.store.integration(&agent.id, &def.credential_kind()).await? {
        let kept: Option<GrantedPublic> = super::integrations::public(&stored).ok();
        if kept.is_some_and(|kept| kept.grant_id == pending.id) {
            return Err(ServiceError::Validation("This sign-in was finished already".into()));
        }
    }
    let tokens = client(services, def)
        .exchange(
            &pending.auth,
            &pending.client,
            code,
            &pending.verifier,
            &pending.redirect_uri,
            &def.url,
        )
        .await
        .map_err(|e| failed(def, e))?;
    keep(
        services,
        &agent,
        def,
        (pending.auth, pending.client, &pending.id),
        tokens,
        None,
    )
    .await?;
    let name = def.name.clone();
    Ok((agent, name))
}

/// The `Authorization` value for the agent's OAuth server `def`: its access token, refreshed
/// first when it is about to run out.
pub async fn bearer(services: &Services, agent: &Agent, def: &McpServerDef) -> Result<String, ServiceError> {
    let current = granted(services, agent, def).await?;
    if !expiring(&current) {
        return Ok(format!("Bearer {}", current.access_token));
    }
    // Detached: a refresh token is used once, so a refresh that began is kept, even when the
    // chat that needed it is cut off meanwhile.
    let (services, agent, def) = (services.clone(), agent.clone(), def.clone());
    tokio::spawn(async move { refresh(&services, &agent, &def).await })
        .await
        .map_err(|e| ServiceError::Execution(format!("the grant's refresh failed: {e}")))?
}

/// Refreshes the grant, one host at a time; a host that waited finds the other's result.
async fn refresh(services: &Services, agent: &Agent, def: &McpServerDef) -> Result<String, ServiceError> {
    let _turn = services
        .oauth_refreshes
        .lock_within(turn(agent, def), Duration::from_secs(30))
        .await?
        .ok_or_else(|| ServiceError::Busy(format!("{}'s grant is being refreshed; try again", def.name)))?;
    let current = granted(services, agent, def).await?;
    if !expiring(&current) {
        return Ok(format!("Bearer {}", current.access_token));
    }
    let Some(refresh_token) = &current.refresh_token else {
        return Err(ServiceError::Validation(format!(
            "{}'s OAuth grant ran out; its owner connects it again",
            def.name
        )));
    };
    let tokens = client(services, def)
        .refresh(&current.auth, &current.client, refresh_token, &current.resource)
        .await
        .map_err(|e| failed(def, e))?;
    let access = format!("Bearer {}", tokens.access_token);
    let kept_refresh = current.refresh_token.clone();
    let grant_id = current.grant_id.clone();
    keep(
        services,
        agent,
        def,
        (current.auth, current.client, &grant_id),
        tokens,
        kept_refresh,
    )
    .await?;
    Ok(access)
}

/// Forgets the agent's grant to `def` (its owner disconnects it), in turn with refreshes.
pub async fn forget(services: &Services, agent: &Agent, def: &McpServerDef) -> Result<bool, ServiceError> {
    let _turn = services.oauth_refreshes.lock(turn(agent, def)).await?;
    Ok(services
        .store
        .delete_integration(&agent.id, &def.credential_kind())
        .await?)
}

fn expiring(granted: &Granted) -> bool {
    granted
        .expires_at
        .is_some_and(|at| crate::clock::controllable_now_ms() + REFRESH_BEFORE_MS >= at)
}

/// The sealed grant of the agent's server, for its address as it is now.
async fn granted(services: &Services, agent: &Agent, def: &McpServerDef) -> Result<Granted, ServiceError> {
    let Some(stored) = services.store.integration(&agent.id, &def.credential_kind()).await? else {
        return Err(ServiceError::Validation(format!(
            "{} needs its owner's OAuth grant: connect it in the console, or POST /v1/account/agents/{{agent}}/mcp-servers/{}/oauth",
            def.name, def.name
        )));
    };
    let public: GrantedPublic = super::integrations::public(&stored)?;
    if !public.oauth || Some(&public.origin) != origin_of(&def.url).as_ref() {
        return Err(ServiceError::Validation(format!(
            "{}'s grant was made for {}; its owner connects it again for {}",
            def.name, public.origin, def.url
        )));
    }
    let granted: Granted = super::integrations::open(services, &stored)?;
    // Its tokens are for that address alone, not another path of the same host.
    if granted.resource != def.url {
        return Err(ServiceError::Validation(format!(
            "{}'s grant was made for {}; its owner connects it again for {}",
            def.name, granted.resource, def.url
        )));
    }
    Ok(granted)
}

/// Seals the tokens of grant `grant` (its server, client and id) as the server's credential
/// (a refresh that gave no new refresh token keeps `previous_refresh`).
async fn keep(
    services: &Services,
    agent: &Agent,
    def: &McpServerDef,
    grant: (AuthServer, Client, &str),
    tokens: Tokens,
    previous_refresh: Option<String>,
) -> Result<(), ServiceError> {
    let (auth, client, grant_id) = grant;
    let granted = Granted {
        access_token: tokens.access_token,
        refresh_token: tokens.refresh_token.or(previous_refresh),
        expires_at: tokens
            .expires_in
            .map(|secs| crate::clock::controllable_now_ms() + (secs.min(10 * 365 * 86_400) as i64) * 1000),
        auth,
        client,
        resource: def.url.clone(),
        grant_id: grant_id.to_string(),
    };
    let public = GrantedPublic {
        header: "Authorization".into(),
        origin: origin_of(&def.url).unwrap_or_default(),
        oauth: true,
        grant_id: grant_id.to_string(),
    };
    super::integrations::save_as(
        services,
        &agent.id,
        &def.credential_kind(),
        "MCP server OAuth grant",
        &granted,
        &public,
    )
    .await
}
