//! The X API v2: `GET /2/users/me`, `POST /2/oauth2/token` (refresh), media upload (one
//! request for images; `initialize` / `append` / `finalize` / `STATUS` for GIF and video),
//! and `POST /2/tweets`. Errors are problem documents (`title`, `detail`, `status`) or
//! `errors[]`; rate limits carry `x-rate-limit-reset`.

use std::time::Duration;

use bytes::Bytes;
use reqwest::multipart::{Form, Part};
use serde::Serialize;
use serde_json::{Value, json};

#[derive(Clone)]
pub struct X {
    http: reqwest::Client,
    base: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum XError {
    Status {
        status: u16,
        detail: String,
        reset_at: Option<i64>,
    },
    Transport(String),
}

const CHUNK_BYTES: usize = 4 * 1024 * 1024;
/// Longest wait for X to process an uploaded video or GIF.
const PROCESSING_LIMIT: Duration = Duration::from_secs(120);

impl X {
    pub fn new(base: &str, timeout: Duration) -> X {
        X {
            http: crate::outbound::operator_client(Some(timeout)),
            base: base.trim_end_matches('/').to_string(),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> Result<Value, XError> {
        super::measured("x", self.send_unmeasured(request)).await
    }

    async fn send_unmeasured(&self, request: reqwest::RequestBuilder) -> Result<Value, XError> {
        let response = crate::telemetry::traces::propagate(request)
            .send()
            .await
            .map_err(|e| XError::Transport(e.without_url().to_string()))?;
        let status = response.status().as_u16();
        let reset_at = response
            .headers()
            .get("x-rate-limit-reset")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok());
        let text = response
            .text()
            .await
            .map_err(|e| XError::Transport(e.without_url().to_string()))?;
        let body: Value = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        if status >= 400 {
            let detail = body["detail"]
                .as_str()
                .or_else(|| body["errors"][0]["message"].as_str())
                .or_else(|| body["error_description"].as_str())
                .or_else(|| body["title"].as_str())
                .or_else(|| body.as_str())
                .unwrap_or("no detail")
                .to_string();
            return Err(XError::Status {
                status,
                detail,
                reset_at,
            });
        }
        Ok(body)
    }

    pub async fn me(&self, token: &str) -> Result<Value, XError> {
        self.send(self.http.get(self.url("/2/users/me")).bearer_auth(token))
            .await
    }

    /// Exchanges a refresh token (a confidential client authenticates with HTTP Basic).
    pub async fn refresh(
        &self,
        client_id: &str,
        client_secret: Option<&str>,
        refresh_token: &str,
    ) -> Result<Value, XError> {
        let mut request = self.http.post(self.url("/2/oauth2/token")).form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh_token),
            ("client_id", client_id),
        ]);
        if let Some(secret) = client_secret {
            request = request.basic_auth(client_id, Some(secret));
        }
        self.send(request).await
    }

    /// Uploads one image; returns its media id.
    pub async fn upload_image(&self, token: &str, bytes: Bytes, mime: &str) -> Result<String, XError> {
        let length = bytes.len() as u64;
        let part = Part::stream_with_length(bytes, length)
            .file_name("media")
            .mime_str(mime)
            .map_err(|e| XError::Transport(e.to_string()))?;
        let form = Form::new().part("media", part).text("media_category", "tweet_image");
        let body = self
            .send(
                self.http
                    .post(self.url("/2/media/upload"))
                    .bearer_auth(token)
                    .multipart(form),
            )
            .await?;
        media_id(&body)
    }

    /// Uploads a video or GIF in chunks and waits for X to finish processing it.
    pub async fn upload_chunked(
        &self,
        token: &str,
        bytes: Bytes,
        mime: &str,
        category: &str,
    ) -> Result<String, XError> {
        let init = json!({ "media_type": mime, "total_bytes": bytes.len(), "media_category": category });
        let body = self
            .send(
                self.http
                    .post(self.url("/2/media/upload/initialize"))
                    .bearer_auth(token)
                    .json(&init),
            )
            .await?;
        let id = media_id(&body)?;
        for (index, start) in (0..bytes.len()).step_by(CHUNK_BYTES).enumerate() {
            // A view of the same bytes, not a copy.
            let chunk = bytes.slice(start..(start + CHUNK_BYTES).min(bytes.len()));
            let length = chunk.len() as u64;
            let form = Form::new()
                .text("segment_index", index.to_string())
                .part("media", Part::stream_with_length(chunk, length).file_name("chunk"));
            self.send(
                self.http
                    .post(self.url(&format!("/2/media/upload/{id}/append")))
                    .bearer_auth(token)
                    .multipart(form),
            )
            .await?;
        }
        let mut body = self
            .send(
                self.http
                    .post(self.url(&format!("/2/media/upload/{id}/finalize")))
                    .bearer_auth(token),
            )
            .await?;
        let started = std::time::Instant::now();
        loop {
            let info = &body["data"]["processing_info"];
            match info["state"].as_str() {
                None | Some("succeeded") => return Ok(id),
                Some("failed") => {
                    let reason = info["error"]["message"].as_str().unwrap_or("processing failed");
                    return Err(XError::Status {
                        status: 422,
                        detail: format!("X could not process the media: {reason}"),
                        reset_at: None,
                    });
                }
                Some(_) if started.elapsed() > PROCESSING_LIMIT => {
                    return Err(XError::Transport(format!(
                        "X did not finish processing the media in {} s",
                        PROCESSING_LIMIT.as_secs()
                    )));
                }
                Some(_) => {
                    let wait = info["check_after_secs"].as_u64().unwrap_or(1).clamp(1, 10);
                    tokio::time::sleep(Duration::from_secs(wait)).await;
                    let status = self
                        .http
                        .get(self.url("/2/media/upload"))
                        .bearer_auth(token)
                        .query(&[("command", "STATUS"), ("media_id", id.as_str())]);
                    body = self.send(status).await?;
                }
            }
        }
    }

    pub async fn post(&self, token: &str, body: &NewPost<'_>) -> Result<Value, XError> {
        self.send(self.http.post(self.url("/2/tweets")).bearer_auth(token).json(body))
            .await
    }
}

/// `POST /2/tweets`'s body, named as X names it.
#[derive(Serialize, Clone)]
pub struct NewPost<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub media: Option<PostMedia<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply: Option<PostReply<'a>>,
}

#[derive(Serialize, Clone)]
pub struct PostMedia<'a> {
    pub media_ids: &'a [String],
}

#[derive(Serialize, Clone)]
pub struct PostReply<'a> {
    pub in_reply_to_tweet_id: &'a str,
}

fn media_id(body: &Value) -> Result<String, XError> {
    body["data"]["id"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| XError::Transport("X's media answer has no data.id".into()))
}
