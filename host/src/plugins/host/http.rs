use std::time::Duration;

use crate::outbound::{OutboundError, OutboundRequest};
use crate::plugins::bindings::agent::plugin::http::{Host, HttpError, Request, Response};
use crate::plugins::state::HostState;

impl Host for HostState {
    async fn fetch(&mut self, request: Request) -> wasmtime::Result<Result<Response, HttpError>> {
        let allowed = match self.call.grants.check_http() {
            Ok(hosts) => hosts.to_vec(),
            Err(e) => return Ok(Err(HttpError::Denied(e))),
        };
        let outbound = OutboundRequest {
            method: request.method,
            url: request.url,
            headers: request.headers,
            body: request.body,
            timeout: request.timeout_ms.map(|ms| Duration::from_millis(ms as u64)),
            max_bytes: None,
        };
        let result = self.call.services.outbound.send(outbound, &allowed).await;
        Ok(match result {
            Ok(r) => Ok(Response {
                status: r.status,
                headers: r.headers,
                body: r.body,
            }),
            Err(OutboundError::Denied(m)) => Err(HttpError::Denied(m)),
            Err(OutboundError::InvalidRequest(m)) => Err(HttpError::InvalidRequest(m)),
            Err(OutboundError::Timeout) => Err(HttpError::Timeout),
            Err(OutboundError::TooLarge(n)) => Err(HttpError::TooLarge(n)),
            Err(OutboundError::Transport(m)) => Err(HttpError::Transport(m)),
        })
    }
}
