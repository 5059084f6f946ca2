//! `wasi:http/outgoing-handler` (WIT 0.2.0), so HTTP clients compiled for WASI work inside a
//! plugin. The bindings are wasmtime-wasi-http's; what leaves the host is decided here: every
//! request goes through the same outbound guard as `agent:plugin/http` (`outbound.rs`), with
//! this command's grants. So the rules are one: granted hosts only, every hop (the guard
//! follows redirects) resolved and checked, private addresses refused, the request and the
//! response bounded in size, the wait bounded in time. One thing is new with wasi:http: a
//! plugin can have many requests in flight at once, so a run gets `MAX_IN_FLIGHT` of them and
//! the rest wait their turn.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpCtxView, WasiHttpHooks, WasiHttpView};

use crate::outbound::{HostPattern, Outbound, OutboundError, OutboundRequest, OutboundResponse};
use crate::plugins::state::HostState;

/// Requests one run may have in flight through wasi:http; more wait until one is answered.
/// Enough for a plugin's fan-out, too few for one run to hold many of the host's connections.
pub const MAX_IN_FLIGHT: usize = 8;

/// Refusals told in one run's log; a plugin that keeps knocking is told no more.
const MAX_NOTES: usize = 16;

/// The `wasi:http` side of one run: what it may reach, and why requests were refused.
pub struct GuardedHttp {
    outbound: Outbound,
    /// The hosts granted to this command, or why it has none.
    allowed: Result<Vec<HostPattern>, String>,
    /// Refusals and failures in words, for the run's log: the guest's `error-code` is only a
    /// code (`HTTP-request-denied`), and its author needs the reason.
    notes: Arc<Mutex<Vec<String>>>,
    in_flight: Arc<tokio::sync::Semaphore>,
}

type BoxedFuture<T> = Box<dyn Future<Output = T> + Send>;

impl WasiHttpHooks for GuardedHttp {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _response_errors: BoxedFuture<Result<(), Error>>,
    ) -> BoxedFuture<Result<(http::Response<WasiBody>, BoxedFuture<Result<(), Error>>), Error>> {
        let (outbound, allowed, notes) = (self.outbound.clone(), self.allowed.clone(), self.notes.clone());
        let in_flight = self.in_flight.clone();
        Box::new(async move {
            // Held until the response is read whole (the guard returns it so).
            let _turn = in_flight
                .acquire_owned()
                .await
                .map_err(|_| Error::InternalError(Some("the run is over".into())))?;
            let url = shown_url(request.uri());
            let result = match allowed {
                Ok(allowed) => send(&outbound, &allowed, request, options).await,
                Err(reason) => Err(SendError::Outbound(OutboundError::Denied(reason))),
            };
            match result {
                Ok(response) => {
                    let done: BoxedFuture<Result<(), Error>> = Box::new(async { Ok(()) });
                    Ok((to_http_response(response), done))
                }
                Err(SendError::Body(e)) => Err(e),
                Err(SendError::Outbound(e)) => {
                    let mut notes = notes.lock().unwrap_or_else(|p| p.into_inner());
                    if notes.len() < MAX_NOTES {
                        notes.push(format!("wasi:http request to {url}: {e}"));
                    }
                    Err(to_wasi_error(e))
                }
            }
        })
    }
}

/// A URL as a log line shows it: without its query, which may carry a key.
fn shown_url(uri: &http::Uri) -> String {
    let scheme = uri.scheme_str().unwrap_or("https");
    let authority = uri.authority().map_or("", |a| a.as_str());
    format!("{scheme}://{authority}{}", uri.path())
}

enum SendError {
    /// Reading the guest's request body failed, or it was too large.
    Body(Error),
    Outbound(OutboundError),
}

/// Reads the guest's request (the body up to the response limit: a plugin uploads no more
/// than it may download) and sends it through the guard.
async fn send(
    outbound: &Outbound,
    allowed: &[HostPattern],
    request: http::Request<WasiBody>,
    options: Option<RequestOptions>,
) -> Result<OutboundResponse, SendError> {
    let limit = outbound.policy().max_response_bytes;
    let (parts, mut body) = request.into_parts();
    let mut bytes = Vec::new();
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.map_err(SendError::Body)?.into_data() {
            if (bytes.len() + data.len()) as u64 > limit {
                return Err(SendError::Body(Error::HttpRequestBodySize(Some(limit))));
            }
            bytes.extend_from_slice(&data);
        }
    }
    let headers = parts
        .headers
        .iter()
        .filter_map(|(name, value)| Some((name.as_str().to_string(), value.to_str().ok()?.to_string())))
        .collect();
    let request = OutboundRequest {
        method: parts.method.as_str().to_string(),
        url: parts.uri.to_string(),
        headers,
        body: (!bytes.is_empty()).then_some(bytes),
        // Capped by the operator's limit in `Outbound::send`.
        timeout: options.and_then(|o| o.first_byte_timeout.or(o.connect_timeout)),
        max_bytes: None,
    };
    outbound.send(request, allowed).await.map_err(SendError::Outbound)
}

fn to_http_response(response: OutboundResponse) -> http::Response<WasiBody> {
    let mut builder = http::Response::builder().status(response.status);
    for (name, value) in &response.headers {
        // The body comes whole: how it was framed on the wire is no longer true.
        if !matches!(name.as_str(), "transfer-encoding" | "connection" | "keep-alive") {
            builder = builder.header(name, value);
        }
    }
    let body = Full::new(Bytes::from(response.body))
        .map_err(|never| match never {})
        .boxed_unsync();
    builder.body(body).unwrap_or_else(|_| {
        // The guard returned a status and headers it had parsed; this cannot fail.
        let mut fallback = http::Response::new(Full::new(Bytes::new()).map_err(|never| match never {}).boxed_unsync());
        *fallback.status_mut() = http::StatusCode::BAD_GATEWAY;
        fallback
    })
}

/// The guard's answer as a `wasi:http` error code.
fn to_wasi_error(err: OutboundError) -> Error {
    match err {
        OutboundError::Denied(_) => Error::HttpRequestDenied,
        OutboundError::InvalidRequest(_) => Error::HttpRequestUriInvalid,
        OutboundError::Timeout => Error::HttpResponseTimeout,
        OutboundError::TooLarge(limit) => Error::HttpResponseBodySize(Some(limit)),
        OutboundError::Transport(message) => Error::InternalError(Some(message)),
    }
}

impl HostState {
    /// Why wasi:http requests of this run were refused or failed, in order, once.
    pub(crate) fn take_http_notes(&mut self) -> Vec<String> {
        match &self.http_hooks {
            Some(hooks) => std::mem::take(&mut *hooks.notes.lock().unwrap_or_else(|p| p.into_inner())),
            None => Vec::new(),
        }
    }
}

impl WasiHttpView for HostState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        let call = &self.call;
        // Made on first use: a plugin that never calls wasi:http pays nothing for it.
        let hooks = self.http_hooks.get_or_insert_with(|| GuardedHttp {
            outbound: call.services.outbound.clone(),
            allowed: call.grants.check_http().map(<[HostPattern]>::to_vec),
            notes: Arc::default(),
            in_flight: Arc::new(tokio::sync::Semaphore::new(MAX_IN_FLIGHT)),
        });
        WasiHttpCtxView {
            hooks,
            table: &mut self.table,
            ctx: &mut self.http_ctx,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::shown_url;

    #[test]
    fn a_logged_url_keeps_no_query() {
        let uri: http::Uri = "https://api.example.com/v1/forecast?key=s3cret&q=x".parse().unwrap();
        assert_eq!(shown_url(&uri), "https://api.example.com/v1/forecast");
        let uri: http::Uri = "http://127.0.0.1:8080/".parse().unwrap();
        assert_eq!(shown_url(&uri), "http://127.0.0.1:8080/");
    }
}
