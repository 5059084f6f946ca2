//! An agent's connected third-party accounts (its chat-app bot, its social account): stored
//! with their tokens sealed at rest, enabled or not, shown to the owner without secrets.

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{ServiceError, Services};
use crate::store::Integration;

/// The kinds of account an agent connects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntegrationKind {
    /// Its Telegram bot.
    Chatapp,
    /// Its X account.
    Social,
}

impl IntegrationKind {
    /// As stored, and as the sealed secret's associated data names it.
    pub fn as_str(self) -> &'static str {
        match self {
            IntegrationKind::Chatapp => "chatapp",
            IntegrationKind::Social => "social",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            IntegrationKind::Chatapp => "chat-app bot",
            IntegrationKind::Social => "social account",
        }
    }
}

/// Stores the account: `secret` sealed, `public` as is, enabled.
pub async fn save(
    services: &Services,
    agent_id: &str,
    kind: IntegrationKind,
    secret: &impl Serialize,
    public: &impl Serialize,
) -> Result<(), ServiceError> {
    save_as(services, agent_id, kind.as_str(), kind.describe(), secret, public).await
}

/// `save` for a kind named at run time (a remote MCP server's credential, `mcp_server:NAME`);
/// `describe` says what it is in an error.
pub async fn save_as(
    services: &Services,
    agent_id: &str,
    kind: &str,
    describe: &str,
    secret: &impl Serialize,
    public: &impl Serialize,
) -> Result<(), ServiceError> {
    let unreadable = |what: &str| ServiceError::SecretUnusable(format!("the {describe} {what} cannot be written"));
    let secret = serde_json::to_vec(secret).map_err(|_| unreadable("secret"))?;
    let public = serde_json::to_value(public).map_err(|_| unreadable("details"))?;
    let sealed = services.secrets.seal_for_agent(agent_id, kind, &secret);
    let integration = Integration {
        agent_id: agent_id.to_string(),
        kind: kind.to_string(),
        enabled: true,
        secret: sealed,
        public,
    };
    Ok(services
        .store
        .put_integration(integration, services.sealing_key_check())
        .await?)
}

/// The secret of a stored account; a record that does not open is a 500 saying why.
pub fn open<T: DeserializeOwned>(services: &Services, integration: &Integration) -> Result<T, ServiceError> {
    let opened = services
        .secrets
        .open_for_agent(&integration.agent_id, &integration.kind, &integration.secret)
        .map_err(|e| ServiceError::SecretUnusable(e.to_string()))?;
    serde_json::from_slice(&opened)
        .map_err(|_| ServiceError::SecretUnusable(format!("the stored {} secret is unreadable", integration.kind)))
}

/// What a stored account shows its owner, read back.
pub fn public<T: DeserializeOwned>(integration: &Integration) -> Result<T, ServiceError> {
    T::deserialize(&integration.public)
        .map_err(|_| ServiceError::SecretUnusable(format!("the stored {} details are unreadable", integration.kind)))
}

/// Lets the agent's `kind` account be used again, or keeps it connected but refused
/// (`chatapp_disabled`, `social_disabled`). `NotFound` if none is connected.
pub async fn set_enabled(
    services: &Services,
    agent_id: &str,
    kind: IntegrationKind,
    enabled: bool,
) -> Result<(), ServiceError> {
    if services
        .store
        .set_integration_enabled(agent_id, kind.as_str(), enabled)
        .await?
    {
        Ok(())
    } else {
        Err(ServiceError::NotFound(format!(
            "The agent has no {} connected; connect one first",
            kind.describe()
        )))
    }
}

/// Forgets the agent's `kind` account and its sealed tokens; false if none was connected.
pub async fn disconnect(services: &Services, agent_id: &str, kind: IntegrationKind) -> Result<bool, ServiceError> {
    Ok(services.store.delete_integration(agent_id, kind.as_str()).await?)
}

/// What the owner may see of the agent's `kind` account: never its secret.
pub async fn connected(
    services: &Services,
    agent_id: &str,
    kind: IntegrationKind,
) -> Result<Option<Integration>, ServiceError> {
    Ok(services.store.integration(agent_id, kind.as_str()).await?)
}
