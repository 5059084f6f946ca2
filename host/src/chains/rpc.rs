//! JSON-RPC 2.0 over HTTP: the one wire both chains speak. Kept small on purpose: a
//! request, a bounded wait, and errors that say which node and which method failed.

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tracing::Instrument;

use crate::telemetry::traces::{part_span, propagate};

#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    /// The node could not be reached or answered something that is not JSON-RPC.
    #[error("{method}: {message}")]
    Transport { method: String, message: String },
    /// The node answered with a JSON-RPC error object.
    #[error("{method}: {message} (code {code})")]
    Node {
        method: String,
        code: i64,
        message: String,
        data: Option<Value>,
    },
}

impl RpcError {
    /// The node's own error text and data, for callers that interpret refusals.
    pub fn node_error(&self) -> Option<(i64, &str, Option<&Value>)> {
        match self {
            RpcError::Node {
                code, message, data, ..
            } => Some((*code, message, data.as_ref())),
            RpcError::Transport { .. } => None,
        }
    }
}

#[derive(Clone)]
pub struct JsonRpc {
    http: reqwest::Client,
    url: String,
    /// The chain, as its calls are measured.
    network: &'static str,
}

impl JsonRpc {
    pub fn new(url: &str, timeout: Duration, network: &'static str) -> JsonRpc {
        let http = crate::outbound::operator_client(Some(timeout));
        JsonRpc {
            http,
            url: url.to_string(),
            network,
        }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Calls `method`; its duration and outcome are measured by network and method.
    pub async fn call<T: DeserializeOwned>(&self, method: &'static str, params: Value) -> Result<T, RpcError> {
        let started = std::time::Instant::now();
        let span = part_span!(
            "rpc",
            "otel.kind" = "client",
            "otel.name" = method,
            "rpc.system" = "jsonrpc",
            "rpc.method" = method,
            network = self.network,
        );
        let result = self.send(method, params).instrument(span).await;
        if let Some(metrics) = crate::telemetry::metrics::metrics() {
            let outcome = match &result {
                Ok(_) => "ok",
                Err(RpcError::Node { .. }) => "node_error",
                Err(RpcError::Transport { .. }) => "unreachable",
            };
            metrics.rpc_call(self.network, method, outcome, started.elapsed().as_secs_f64());
        }
        result
    }

    async fn send<T: DeserializeOwned>(&self, method: &str, params: Value) -> Result<T, RpcError> {
        let transport = |message: String| RpcError::Transport {
            method: method.to_string(),
            message,
        };
        let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
        let response = propagate(self.http.post(&self.url).json(&body))
            .send()
            .await
            .map_err(|e| transport(describe(e)))?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(|e| transport(describe(e)))?;
        let reply: Value = serde_json::from_slice(&bytes).map_err(|_| {
            transport(format!(
                "HTTP {status}, not a JSON-RPC answer: {}",
                String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
            ))
        })?;
        if let Some(error) = reply.get("error").filter(|e| !e.is_null()) {
            return Err(RpcError::Node {
                method: method.to_string(),
                code: error["code"].as_i64().unwrap_or(0),
                message: error["message"].as_str().unwrap_or("unknown error").to_string(),
                data: error.get("data").cloned(),
            });
        }
        let result = reply.get("result").cloned().unwrap_or(Value::Null);
        serde_json::from_value(result).map_err(|e| transport(format!("unexpected result: {e}")))
    }
}

/// reqwest's top-level message hides the cause (connection refused, timeout). The URL
/// is left out: a provider's API key is often part of it.
fn describe(err: reqwest::Error) -> String {
    if err.is_timeout() {
        return "the node did not answer in time".into();
    }
    let err = err.without_url();
    let mut text = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(cause) = source {
        text = format!("{text}: {cause}");
        source = cause.source();
    }
    text
}
