//! An agent's third-party account secrets, sealed at rest: one place that names what a
//! secret belongs to (`agent:<id>:<kind>`, the associated data) and seals or opens it.

use serde_json::Value;

use super::{ServiceError, Services};
use crate::store::Integration;

fn purpose(agent_id: &str, kind: &str) -> String {
    format!("agent:{agent_id}:{kind}")
}

/// Stores the account: `secret` sealed, `public` as is, enabled.
pub async fn save(
    services: &Services,
    agent_id: &str,
    kind: &'static str,
    secret: &Value,
    public: Value,
) -> Result<(), ServiceError> {
    let sealed = services
        .secrets
        .seal(&purpose(agent_id, kind), secret.to_string().as_bytes());
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
    let opened = services
        .secrets
        .open(&purpose(&integration.agent_id, integration.kind), &integration.secret)
        .map_err(|e| ServiceError::Api {
            status: 500,
            code: "internal_error",
            message: e.to_string(),
            retry_after: None,
        })?;
    serde_json::from_slice(&opened).map_err(|_| ServiceError::Api {
        status: 500,
        code: "internal_error",
        message: format!("the stored {} secret is unreadable", integration.kind),
        retry_after: None,
    })
}
