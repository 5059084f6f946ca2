//! A webhook receiver on loopback: it keeps every delivery as it arrived (the signature
//! headers and the raw body) and answers with the status a test sets, and its deliveries
//! are verified as docs/webhooks.md tells receivers to (`tests/python/verify_webhooks.py`).

use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};

use super::FakeServer;

#[derive(Debug, Clone)]
pub struct Received {
    pub id: String,
    pub timestamp: String,
    pub signature: String,
    pub body: String,
    /// A2A push notifications' headers: the client's token, and its credentials.
    pub token: String,
    pub authorization: String,
}

impl Received {
    pub fn event(&self) -> Value {
        serde_json::from_str(&self.body).unwrap()
    }

    pub fn event_type(&self) -> String {
        self.event()["type"].as_str().unwrap_or_default().to_string()
    }
}

pub struct Receiver {
    pub server: FakeServer,
    status: Arc<AtomicU16>,
    received: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    pub async fn start() -> Receiver {
        let status = Arc::new(AtomicU16::new(200));
        let received = Arc::new(Mutex::new(Vec::new()));
        let (answer, kept) = (status.clone(), received.clone());
        let router = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |headers: HeaderMap, body: String| {
                let (answer, kept) = (answer.clone(), kept.clone());
                async move {
                    let header = |name: &str| {
                        headers
                            .get(name)
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default()
                            .to_string()
                    };
                    kept.lock().unwrap().push(Received {
                        id: header("webhook-id"),
                        timestamp: header("webhook-timestamp"),
                        signature: header("webhook-signature"),
                        body,
                        token: header("x-a2a-notification-token"),
                        authorization: header("authorization"),
                    });
                    let status = StatusCode::from_u16(answer.load(Ordering::SeqCst)).unwrap();
                    (status, "received")
                }
            }),
        );
        Receiver {
            server: FakeServer::start(router).await,
            status,
            received,
        }
    }

    pub fn url(&self) -> String {
        self.server.url("/hook")
    }

    /// What it answers from now on.
    pub fn answer(&self, status: u16) {
        self.status.store(status, Ordering::SeqCst);
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    /// Waits until `done` holds for what arrived (at most 20 s), and gives it.
    pub async fn until(&self, what: &str, done: impl Fn(&[Received]) -> bool) -> Vec<Received> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let received = self.received();
            if done(&received) {
                return received;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: not after 20 s; received {:?}",
                received.iter().map(Received::event_type).collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// How many deliveries of `event_type` arrived.
    pub fn count(&self, event_type: &str) -> usize {
        self.received().iter().filter(|r| r.event_type() == event_type).count()
    }
}

/// Verifies `deliveries` with the documented recipes (Python and Node.js) and with the
/// reference library: the ids each accepted, and every refusal. `documented` holds the ids
/// both recipes accepted.
pub async fn verify(secret: &str, deliveries: &[Received]) -> Value {
    let request = json!({
        "secret": secret,
        "deliveries": deliveries.iter().map(|d| json!({
            "headers": { "webhook-id": d.id, "webhook-timestamp": d.timestamp, "webhook-signature": d.signature },
            "body": d.body,
        })).collect::<Vec<_>>(),
    });
    let mut python = super::client_script(
        &super::python(),
        "python/verify_webhooks.py",
        &request,
        "the webhook verifier",
    )
    .await;
    let node = super::client_script(
        "node",
        "node/verify_webhooks.mjs",
        &request,
        "the Node.js webhook verifier",
    )
    .await;
    let by_node: Vec<Value> = node["documented"].as_array().cloned().unwrap_or_default();
    if let Some(ids) = python["documented"].as_array_mut() {
        ids.retain(|id| by_node.contains(id));
    }
    if let (Some(refused), Some(more)) = (python["refused"].as_array_mut(), node["refused"].as_array()) {
        refused.extend(
            more.iter()
                .map(|e| json!(format!("node: {}", e.as_str().unwrap_or_default()))),
        );
    }
    python
}
