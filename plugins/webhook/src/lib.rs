//! `webhook`: calls `config.url` with the parameters as a JSON body and answers with the
//! reply. Config: `url`, `method` (POST), `headers` (table), `response_field` (a dotted
//! path into a JSON reply, e.g. `data.text`), `poll_timeout_secs` (120).
//!
//! A remote that answers 202 with `statusUrl` (and `retryAfterSeconds`) is polled until
//! its status record says `succeeded` (→ `response` / `artifactUrl`) or `failed`.

use std::time::{Duration, Instant};

use agent_plugin_sdk::http::{Request, Response};
use agent_plugin_sdk::{Capability, Error, Format, Invocation, Manifest, Output, Plugin, Result, Value, progress};

struct Webhook;

const DEFAULT_POLL_SECS: u64 = 120;

impl Plugin for Webhook {
    fn manifest() -> Manifest {
        Manifest::new("webhook", env!("CARGO_PKG_VERSION"))
            .describe("Calls an external webhook or API")
            .capability(Capability::Http)
            .capability(Capability::Progress)
    }

    fn execute(call: Invocation) -> Result<Output> {
        let url: String = call.config("url")?;
        let method = call
            .opt_config::<String>("method")?
            .unwrap_or_else(|| "POST".into())
            .to_uppercase();
        let headers = call
            .opt_config::<serde_json_map::Headers>("headers")?
            .unwrap_or_default();
        let field = call.opt_config::<String>("response_field")?;
        let poll_limit = Duration::from_secs(
            call.opt_config::<u64>("poll_timeout_secs")?
                .unwrap_or(DEFAULT_POLL_SECS),
        );

        let body = Value::Object(call.parameters.clone());
        let mut request = if method == "GET" {
            Request::get(&url)
        } else {
            Request::post_json(&url, &body)
        };
        request.method = method;
        for (name, value) in headers {
            request = request.header(&name, &value);
        }
        let reply = request.send()?;
        let reply = if reply.status == 202 {
            poll(&reply, poll_limit)?
        } else {
            Reply::Direct(reply)
        };
        match reply {
            Reply::Direct(response) => {
                if !response.is_success() {
                    return Err(Error::failed(format!(
                        "the webhook answered HTTP {}: {}",
                        response.status,
                        excerpt(&response.text())
                    )));
                }
                let text = extract(&response, field.as_deref())?;
                Ok(Output::text(text).with_format(call.format))
            }
            Reply::Finished { response, artifact } => Ok(match artifact {
                Some(url) if matches!(call.format, Format::Image | Format::Video) => Output {
                    response,
                    format: call.format,
                    media_url: Some(url),
                },
                Some(url) => Output::text(if response.is_empty() { url } else { response }).with_format(call.format),
                None => Output::text(response).with_format(call.format),
            }),
        }
    }
}

enum Reply {
    Direct(Response),
    Finished { response: String, artifact: Option<String> },
}

/// Follows a 202's status address until a final state.
fn poll(accepted: &Response, limit: Duration) -> Result<Reply> {
    let body: Value = accepted.json()?;
    let Some(status_url) = body.get("statusUrl").and_then(Value::as_str) else {
        // A 202 without a status address is just an answer.
        return Ok(Reply::Direct(accepted.clone()));
    };
    let mut wait = retry_after(&body);
    let started = Instant::now();
    loop {
        if started.elapsed() + wait > limit {
            return Err(Error::failed(format!(
                "the webhook's job did not finish within {} s",
                limit.as_secs()
            )));
        }
        std::thread::sleep(wait);
        let status: Value = Request::get(status_url).send()?.json()?;
        match status.get("state").and_then(Value::as_str) {
            Some("succeeded") => {
                let text = |k: &str| status.get(k).and_then(Value::as_str).map(str::to_string);
                return Ok(Reply::Finished {
                    response: text("response").unwrap_or_default(),
                    artifact: text("artifactUrl"),
                });
            }
            Some("failed") => {
                let error = status.get("error").and_then(Value::as_str).unwrap_or("no reason given");
                let code = status.get("code").and_then(Value::as_str).unwrap_or("failed");
                return Err(Error::failed(format!("the webhook's job failed ({code}): {error}")));
            }
            Some("processing") | None => {
                if let Some(p) = status.get("progress").and_then(Value::as_u64) {
                    progress::report(p.min(100) as u8, None);
                }
                wait = retry_after(&status).max(Duration::from_millis(100));
            }
            Some(other) => {
                return Err(Error::failed(format!(
                    "the webhook's job reported an unknown state '{other}'"
                )));
            }
        }
    }
}

fn retry_after(body: &Value) -> Duration {
    let secs = body.get("retryAfterSeconds").and_then(Value::as_f64).unwrap_or(2.0);
    Duration::from_millis((secs.clamp(0.0, 60.0) * 1000.0) as u64)
}

/// The reply's text: a JSON field when configured, else the body itself.
fn extract(response: &Response, field: Option<&str>) -> Result<String> {
    let Some(path) = field else { return Ok(response.text()) };
    let json: Value = response.json()?;
    let mut at = &json;
    for part in path.split('.') {
        at = match at {
            Value::Object(map) => map.get(part),
            Value::Array(items) => part.parse::<usize>().ok().and_then(|i| items.get(i)),
            _ => None,
        }
        .ok_or_else(|| Error::failed(format!("the webhook's answer has no '{path}'")))?;
    }
    Ok(match at {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    })
}

fn excerpt(text: &str) -> String {
    let cut: String = text.chars().take(200).collect();
    if cut.len() < text.len() {
        format!("{cut}…")
    } else {
        cut
    }
}

mod serde_json_map {
    /// `headers = { "X-Token" = "..." }` in the manifest.
    pub type Headers = std::collections::BTreeMap<String, String>;
}

agent_plugin_sdk::export_plugin!(Webhook);
