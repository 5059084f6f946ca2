//! The rules of the service. Routes and the CLI call these; these call the store (and,
//! later, the plugin runtime, chains, LLM providers and third-party clients).

pub mod accounts;
pub mod agents;
pub mod keys;
pub mod rate_limit;

use crate::store::StoreError;

/// What a service can refuse or fail with; each surface maps it to its own envelope.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("{0}")]
    Validation(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Unauthorized(String),
    #[error(transparent)]
    Store(StoreError),
}

impl From<StoreError> for ServiceError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::Conflict(message) => ServiceError::Conflict(message),
            StoreError::NotFound(message) => ServiceError::NotFound(message),
            other => ServiceError::Store(other),
        }
    }
}
