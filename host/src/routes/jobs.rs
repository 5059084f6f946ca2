//! `/jobs/{jobId}`: a long-running job's status. No key: the id (128 random bits) is the
//! capability. Always HTTP 200, as the API's polling pattern requires.

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use serde_json::{Value, json};

use super::AppState;
use crate::error::{ApiError, ApiPath};
use crate::services::jobs::{self, JobStatus};

pub fn routes() -> Router<AppState> {
    Router::new().route("/jobs/{job_id}", get(status))
}

async fn status(
    State(state): State<AppState>,
    ApiPath(job_id): ApiPath<String>,
) -> Result<axum::Json<Value>, ApiError> {
    let status = jobs::status(&state.services.store, &job_id).await?;
    Ok(axum::Json(status_body(status)))
}

/// The status record the API defines.
fn status_body(status: JobStatus) -> Value {
    match status {
        JobStatus::Missing => {
            json!({ "state": "failed", "error": "No job with this id (it may have expired)", "code": "not_found" })
        }
        JobStatus::Processing { job_id, progress } => {
            let mut body = json!({ "state": "processing", "jobId": job_id });
            if let Some(p) = progress {
                body["progress"] = json!(p);
            }
            body
        }
        JobStatus::Succeeded {
            job_id,
            response,
            format,
            artifact_url,
        } => {
            let mut body = json!({ "state": "succeeded", "jobId": job_id, "response": response });
            if let Some(url) = artifact_url {
                body["artifactUrl"] = json!(url);
            }
            if let Some(format) = format {
                body["format"] = json!(format);
            }
            body
        }
        JobStatus::Failed {
            job_id,
            error,
            code,
            refund_signature,
        } => {
            let mut body = json!({ "state": "failed", "jobId": job_id, "error": error, "code": code });
            if let Some(signature) = refund_signature {
                body["refundTransactionSignature"] = json!(signature);
            }
            body
        }
    }
}
