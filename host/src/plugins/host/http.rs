use std::time::Duration;

use crate::outbound::{OutboundError, OutboundRequest, OutboundResponse};
use crate::plugins::bindings::for_each_version;
use crate::plugins::budget::BodyCharge;
use crate::plugins::paying::send_paying;
use crate::plugins::state::HostState;

impl HostState {
    /// A request through the outbound guard, to the hosts granted to this command (a `402`
    /// paid when the owner allows: `paying.rs`). The response is charged to the run's memory
    /// until it is handed to the guest.
    async fn http_fetch(&mut self, mut request: OutboundRequest) -> Result<OutboundResponse, OutboundError> {
        let allowed = self.call.grants.check_http().map_err(OutboundError::Denied)?.to_vec();
        let charge = BodyCharge::new(&self.budget);
        request.budget = Some(charge.clone());
        let services = &self.call.services;
        let payer = match self.call.grants.pays {
            true => services.payer.clone().map(|payer| (payer, self.call.paying_run())),
            false => None,
        };
        send_paying(&services.outbound, &allowed, payer, request).await
    }
}

macro_rules! http_host {
    ($v:ident) => {
        impl crate::plugins::bindings::$v::agent::plugin::http::Host for HostState {
            async fn fetch(
                &mut self,
                request: crate::plugins::bindings::$v::agent::plugin::http::Request,
            ) -> wasmtime::Result<
                Result<
                    crate::plugins::bindings::$v::agent::plugin::http::Response,
                    crate::plugins::bindings::$v::agent::plugin::http::HttpError,
                >,
            > {
                use crate::plugins::bindings::$v::agent::plugin::http::{HttpError, Response};
                let request = OutboundRequest {
                    method: request.method,
                    url: request.url,
                    headers: request.headers,
                    body: request.body,
                    timeout: request.timeout_ms.map(|ms| Duration::from_millis(ms as u64)),
                    max_bytes: None,
                    budget: None,
                    follow_redirects: true,
                    truncate_body: false,
                };
                Ok(match self.http_fetch(request).await {
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
                    Err(e @ OutboundError::OverBudget) => Err(HttpError::Transport(e.to_string())),
                })
            }
        }
    };
}
for_each_version!(http_host);
