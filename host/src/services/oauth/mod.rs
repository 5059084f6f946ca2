//! OAuth 2.1 for the agents' MCP endpoints, as the MCP authorization specification asks:
//! each agent's endpoint is a protected resource, and this host is its authorization
//! server. A person allows a client (registered by RFC 7591, or named by its metadata
//! document's URL) to call one agent's tools as their account; the client gets short-lived
//! access tokens bound to that endpoint and refresh tokens that rotate.
//!
//! Tokens are opaque, in the keys' shape (`<prefix><id>_<secret>`), kept as hashes and
//! compared in constant time; an access token opens nothing but the MCP endpoint of its
//! grant's agent, with the power of a `use` key. Opt-in (`mcp_oauth`): some clients stop
//! sending a configured header once they find OAuth metadata.

use std::sync::Arc;

use super::keys::{self, Caller};
use super::{ServiceError, Services};
use crate::domain::KeyScope;
use crate::store::{GrantInfo, StoreError};

mod clients;
mod flow;
pub mod pkce;

pub use clients::{Client, ClientCredentials, register};
pub use flow::{
    Authorization, AuthorizationParams, Refusal, TokenAnswer, TokenForm, check_authorization, consent, decline,
    exchange, revoke_token,
};

/// The one scope: call the agent's tools as the account (what a `use` key may do there).
pub const SCOPE: &str = "mcp:tools";
pub const ACCESS_PREFIX: &str = "ahat_";
pub const REFRESH_PREFIX: &str = "ahrt_";
const CODE_PREFIX: &str = "ahac_";
const CLIENT_PREFIX: &str = "ahcl_";
const GRANT_PREFIX: &str = "ahgr_";
/// An authorization code is exchanged within this, or never.
const CODE_LIFETIME_MS: i64 = 300_000;
/// A grant's last use is written at most this often.
const TOUCH_EVERY_MS: i64 = 60_000;

/// An OAuth error as the token, registration and revocation endpoints answer it
/// (`{error, error_description}`), with its HTTP status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthError {
    pub status: u16,
    pub error: &'static str,
    pub description: String,
}

impl OAuthError {
    pub fn new(error: &'static str, description: impl Into<String>) -> OAuthError {
        let status = match error {
            "invalid_client" => 401,
            "server_error" => 500,
            "temporarily_unavailable" => 503,
            _ => 400,
        };
        OAuthError {
            status,
            error,
            description: description.into(),
        }
    }
}

impl From<StoreError> for OAuthError {
    fn from(err: StoreError) -> OAuthError {
        tracing::error!("an OAuth request failed on the store: {err}");
        OAuthError::new("server_error", "The server could not answer; retry shortly")
    }
}

/// The endpoint a grant's tokens are for: the agent's MCP address as the client named it.
pub fn resource_of(public_base_url: &str, agent_ref: &str) -> String {
    format!("{}/mcp/{agent_ref}", public_base_url.trim_end_matches('/'))
}

/// The agent an endpoint's address names (its MCP `<base>/mcp/<agent>` or its A2A
/// `<base>/a2a/<agent>`), if it is one of ours. A grant is the agent's: its tokens work on
/// both of its endpoints.
fn agent_of_resource<'a>(public_base_url: &str, resource: &'a str) -> Option<&'a str> {
    let path = resource.strip_prefix(public_base_url.trim_end_matches('/'))?;
    let agent = path.strip_prefix("/mcp/").or_else(|| {
        let a2a = path.strip_prefix("/a2a/")?;
        // A2A 0.3's URL is the agent's with `/v0.3`.
        Some(a2a.strip_suffix("/v0.3").unwrap_or(a2a))
    })?;
    is_endpoint_name(agent).then_some(agent)
}

/// Whether `agent` can name an MCP endpoint (an agent's id or username): nothing a URL or a
/// header would read as more than a name.
pub fn is_endpoint_name(agent: &str) -> bool {
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_');
    !agent.is_empty() && agent.len() <= 64 && agent.chars().all(plain)
}

/// Whether a presented bearer credential is an access token (not an API key).
pub fn is_access_token(presented: &str) -> bool {
    presented.starts_with(ACCESS_PREFIX)
}

/// The caller an access token makes at the MCP endpoint of `agent_ref` (the agent's id or
/// username): its grant's account, with a `use` key's power, until the token ends. A token
/// for another agent, revoked, or past its end is refused.
pub async fn authenticate(services: &Services, presented: &str, agent_ref: &str) -> Result<Caller, ServiceError> {
    let invalid = || ServiceError::Unauthorized("Invalid access token".into());
    let (id, secret) = keys::split_secret(presented.trim(), ACCESS_PREFIX).ok_or_else(invalid)?;
    let now = crate::clock::now_ms();
    let record = services.store.oauth_token(id, now).await?;
    if !keys::secret_matches(secret, record.as_ref().map(|r| r.secret_hash.as_slice())) {
        return Err(invalid());
    }
    let Some(token) = record.filter(|t| t.kind == "access") else {
        return Err(invalid());
    };
    if token.grant.revoked_at.is_some() {
        return Err(ServiceError::Unauthorized(
            "This access token's grant was revoked".into(),
        ));
    }
    if token.key_ended {
        return Err(ServiceError::Unauthorized(
            "The key that allowed this access token's grant was revoked or has expired".into(),
        ));
    }
    if token.expires_at <= now {
        return Err(ServiceError::Unauthorized(
            "This access token has expired; refresh it".into(),
        ));
    }
    let bound = token.grant.agent_id == agent_ref || token.agent_username.as_deref() == Some(agent_ref);
    if !bound {
        return Err(ServiceError::Unauthorized(
            "This access token was issued for another agent's endpoint".into(),
        ));
    }
    if token.grant.last_used_at.is_none_or(|at| now - at >= TOUCH_EVERY_MS) {
        // Bookkeeping only: the request does not wait for it.
        let (store, grant) = (services.store.clone(), token.grant.id.clone());
        tokio::spawn(async move {
            if let Err(e) = store.touch_oauth_grant(&grant, now).await {
                tracing::warn!(error = %e, "could not record an OAuth grant's use");
            }
        });
    }
    Ok(Caller {
        account: Arc::clone(&token.account),
        scope: KeyScope::Use,
        key_ends_at: Some(token.expires_at),
        key_id: None,
    })
}

/// The account's live grants, newest first.
pub async fn grants(services: &Services, account_id: &str) -> Result<Vec<GrantInfo>, ServiceError> {
    Ok(services.store.oauth_grants(account_id).await?)
}

/// Revokes one of the account's grants: its tokens stop working at once. Another
/// account's grant answers as unknown.
pub async fn revoke_grant(services: &Services, account_id: &str, grant_id: &str) -> Result<GrantInfo, ServiceError> {
    services
        .store
        .revoke_oauth_grant(grant_id.trim(), Some(account_id), crate::clock::now_ms())
        .await?
        .ok_or_else(|| ServiceError::NotFound(format!("no OAuth grant with id {grant_id}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resource_names_one_of_our_agents() {
        let base = "https://agents.example";
        assert_eq!(
            agent_of_resource(base, "https://agents.example/mcp/helper"),
            Some("helper")
        );
        assert_eq!(
            agent_of_resource("https://agents.example/", "https://agents.example/mcp/a-1"),
            Some("a-1")
        );
        assert_eq!(agent_of_resource(base, "https://other.example/mcp/helper"), None);
        assert_eq!(agent_of_resource(base, "https://agents.example/mcp/"), None);
        assert_eq!(
            agent_of_resource(base, "https://agents.example/a2a/helper"),
            Some("helper")
        );
        assert_eq!(agent_of_resource(base, "https://agents.example/a2a"), None);
        assert_eq!(
            agent_of_resource(base, "https://agents.example/a2a/helper/v0.3"),
            Some("helper")
        );
        assert_eq!(agent_of_resource(base, "https://agents.example/mcp/helper/x"), None);
        assert_eq!(agent_of_resource(base, "https://agents.example/mcp/helper?x=1"), None);
        assert_eq!(agent_of_resource(base, "https://agents.example.evil/mcp/helper"), None);
        assert_eq!(
            resource_of("https://agents.example/", "helper"),
            "https://agents.example/mcp/helper"
        );
    }
}
