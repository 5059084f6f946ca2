//! `/jobs/{jobId}`: a long-running job's status. No key: the id (128 random bits) is the
//! capability. Always HTTP 200, as the spec's polling pattern requires.

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use serde_json::Value;

use super::AppState;
use crate::error::{ApiError, ApiPath};
use crate::services::jobs;

pub fn routes() -> Router<AppState> {
    Router::new().route("/jobs/{job_id}", get(status))
}

async fn status(
    State(state): State<AppState>,
    ApiPath(job_id): ApiPath<String>,
) -> Result<axum::Json<Value>, ApiError> {
    Ok(axum::Json(jobs::status(&state.services, &job_id).await?))
}
