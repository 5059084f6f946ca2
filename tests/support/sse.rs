//! A reader of server-sent events, event by event as they arrive, so a test can see a
//! stream's pieces come apart and can hang up in the middle of one.

use serde_json::Value;

#[derive(Debug, Clone)]
pub struct SseEvent {
    /// The `event:` field, when the event has one.
    pub name: Option<String>,
    pub data: String,
}

impl SseEvent {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data).unwrap_or_else(|e| panic!("event data is not JSON ({e}): {}", self.data))
    }
}

pub struct SseReader {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    response: reqwest::Response,
    buffer: String,
}

impl SseReader {
    pub async fn open(request: reqwest::RequestBuilder) -> SseReader {
        let response = request.send().await.expect("request");
        SseReader {
            status: response.status().as_u16(),
            headers: response.headers().clone(),
            response,
            buffer: String::new(),
        }
    }

    pub fn content_type(&self) -> &str {
        self.headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    /// The next event with data (comments and keep-alives skipped), or `None` at the end.
    pub async fn next(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let raw: String = self.buffer.drain(..end + 2).collect();
                let mut event = SseEvent {
                    name: None,
                    data: String::new(),
                };
                let mut lines = Vec::new();
                for line in raw.lines() {
                    if let Some(name) = line.strip_prefix("event:") {
                        event.name = Some(name.trim().to_string());
                    } else if let Some(data) = line.strip_prefix("data:") {
                        lines.push(data.strip_prefix(' ').unwrap_or(data).to_string());
                    }
                }
                if lines.is_empty() {
                    continue;
                }
                event.data = lines.join("\n");
                return Some(event);
            }
            let chunk = self.response.chunk().await.expect("stream read")?;
            self.buffer.push_str(&String::from_utf8_lossy(&chunk).replace('\r', ""));
        }
    }

    /// Every event left, to the stream's end.
    pub async fn rest(mut self) -> Vec<SseEvent> {
        let mut events = Vec::new();
        while let Some(event) = self.next().await {
            events.push(event);
        }
        events
    }

    /// The whole body, when the answer is not a stream.
    pub async fn text(self) -> String {
        self.buffer + &self.response.text().await.expect("body")
    }
}
