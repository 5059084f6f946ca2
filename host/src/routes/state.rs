//! What every route handler is given: the services, and when the server started. Cheap to
//! clone (each request's extractors do).

use std::sync::Arc;
use std::time::Instant;

use crate::services::Services;

#[derive(Clone)]
pub struct AppState {
    /// Shared, not copied.
    pub services: Arc<Services>,
    pub started: Instant,
}
