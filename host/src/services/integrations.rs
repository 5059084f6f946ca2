//! An agent's secrets (third-party accounts, wallet keys), sealed at rest: one place that names what a
//! secret belongs to (`agent:<id>:<kind>`, the associated data) and seals or opens it.

use serde_json::Value;

use super::{ServiceError, Services};
use crate::store::Integration;

fn purpose(agent_id: &str, kind: &str) -> String {
    format!("agent:{agent_id}:{kind}")
}

/// Seals `secret` as the agent's `kind` secret (a fresh nonce each time).
pub fn seal(services: &Services, agent_id: &str, kind: &str, secret: &[u8]) -> Vec<u8> {
    services.secrets.seal(&purpose(agent_id, kind), secret)
}

/// Opens what [`seal`] made for the same agent and kind; anything else is a 500 saying so.
pub fn unseal(services: &Services, agent_id: &str, kind: &str, sealed: &[u8]) -> Result<Vec<u8>, ServiceError> {
    services
        .secrets
        .open(&purpose(agent_id, kind), sealed)
        .map_err(|e| ServiceError::SecretUnusable(e.to_string()))
}

/// Stores the account: `secret` sealed, `public` as is, enabled.
pub async fn save(
    services: &Services,
    agent_id: &str,
    kind: &'static str,
    secret: &Value,
    public: Value,
) -> Result<(), ServiceError> {
    let sealed = seal(services, agent_id, kind, secret.to_string().as_bytes());
    let integration = Integration {
        agent_id: agent_id.to_string(),
        kind,
        enabled: true,
        secret: sealed,
        public,
    };
    Ok(services.store.put_integration(integration).await?)
}

/// The secret JSON of a stored account; a record that does not open is a 500 saying why.
pub fn open(services: &Services, integration: &Integration) -> Result<Value, ServiceError> {
    let opened = unseal(services, &integration.agent_id, integration.kind, &integration.secret)?;
    serde_json::from_slice(&opened)
        .map_err(|_| ServiceError::SecretUnusable(format!("the stored {} secret is unreadable", integration.kind)))
}

/// Lets the agent's `kind` account be used again, or keeps it connected but refused
/// (`chatapp_disabled`, `social_disabled`). `NotFound` if none is connected.
pub async fn set_enabled(
    services: &Services,
    agent_id: &str,
    kind: &'static str,
    enabled: bool,
) -> Result<(), ServiceError> {
    if services.store.set_integration_enabled(agent_id, kind, enabled).await? {
        Ok(())
    } else {
        Err(ServiceError::NotFound(format!(
            "The agent has no {} connected; connect one first",
            describe(kind)
        )))
    }
}

/// Forgets the agent's `kind` account and its sealed tokens; false if none was connected.
pub async fn disconnect(services: &Services, agent_id: &str, kind: &'static str) -> Result<bool, ServiceError> {
    Ok(services.store.delete_integration(agent_id, kind).await?)
}

/// What the owner may see of the agent's `kind` account: never its secret.
pub async fn connected(
    services: &Services,
    agent_id: &str,
    kind: &'static str,
) -> Result<Option<Integration>, ServiceError> {
    Ok(services.store.integration(agent_id, kind).await?)
}

fn describe(kind: &str) -> &str {
    match kind {
        super::chatapp::KIND => "chat-app bot",
        super::social::KIND => "social account",
        other => other,
    }
}
