//! An OpenAI-compatible `POST {base}/chat/completions` client.

use std::time::Duration;

use serde_json::{Value, json};

use super::{Completion, CompletionRequest, LlmError, LlmFuture, LlmProvider};

pub struct OpenAiProvider {
    client: reqwest::Client,
    base_url: String,
    model: String,
    api_key: Option<String>,
    timeout: Duration,
}

impl OpenAiProvider {
    pub fn new(base_url: &str, model: &str, api_key: Option<String>, timeout: Duration) -> OpenAiProvider {
        OpenAiProvider {
            client: reqwest::Client::new(),
            base_url: base_url.trim_end_matches('/').to_string(),
            model: model.to_string(),
            api_key,
            timeout,
        }
    }

    async fn call(&self, request: CompletionRequest) -> Result<Completion, LlmError> {
        let mut body = json!({
            "model": self.model,
            "messages": request.messages.iter().map(|m| json!({ "role": m.role, "content": m.content })).collect::<Vec<_>>(),
        });
        if let Some(max) = request.max_tokens {
            body["max_tokens"] = json!(max);
        }
        if let Some(t) = request.temperature {
            body["temperature"] = json!(t);
        }
        let mut http = self
            .client
            .post(format!("{}/chat/completions", self.base_url))
            .json(&body);
        if let Some(key) = &self.api_key {
            http = http.bearer_auth(key);
        }
        let timeout_ms = self.timeout.as_millis() as u64;
        let response = tokio::time::timeout(self.timeout, http.send())
            .await
            .map_err(|_| LlmError::Timeout(timeout_ms))?
            .map_err(|e| LlmError::Unreachable(e.without_url().to_string()))?;
        let status = response.status().as_u16();
        let text = tokio::time::timeout(self.timeout, response.text())
            .await
            .map_err(|_| LlmError::Timeout(timeout_ms))?
            .map_err(|e| LlmError::Unreachable(e.without_url().to_string()))?;
        let value: Value = serde_json::from_str(&text).map_err(|_| {
            if status >= 400 {
                LlmError::Refused {
                    status,
                    message: text.chars().take(300).collect(),
                }
            } else {
                LlmError::BadAnswer("not JSON".into())
            }
        })?;
        if status >= 400 {
            let message = value["error"]["message"].as_str().unwrap_or("no message").to_string();
            return Err(LlmError::Refused { status, message });
        }
        let content = value["choices"][0]["message"]["content"]
            .as_str()
            .ok_or_else(|| LlmError::BadAnswer("no choices[0].message.content".into()))?;
        Ok(Completion {
            content: content.to_string(),
        })
    }
}

impl LlmProvider for OpenAiProvider {
    fn name(&self) -> String {
        format!("openai-compatible:{}", self.model)
    }

    fn complete(&self, request: CompletionRequest) -> LlmFuture<'_> {
        Box::pin(self.call(request))
    }
}
