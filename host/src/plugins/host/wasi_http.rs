//! `wasi:http/outgoing-handler` (WIT 0.2.0), so HTTP clients compiled for WASI work inside a
//! plugin. The bindings are wasmtime-wasi-http's; what leaves the host is decided here: every
//! request goes through the same outbound guard as `agent:plugin/http` (`outbound.rs`), with
//! this command's grants. So the rules are one: granted hosts only, every hop (the guard
//! follows redirects) resolved and checked, private addresses refused, the request and the
//! response bounded in size, the wait bounded in time.
//!
//! Two things are new with wasi:http. A plugin can have many requests in flight at once, so
//! a run gets `MAX_IN_FLIGHT` turns, each held from the request until its response body is
//! read or dropped, and the rest wait. And the guest makes the host hold things for it
//! (fields, bodies, responses): all of it is charged to the run's memory budget (`budget.rs`).
//! A `402` is paid, when the agent's owner allows, as an `http` request's is (`paying.rs`).

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use tokio::sync::OwnedSemaphorePermit;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpCtxView, WasiHttpHooks, WasiHttpView};

use crate::outbound::{HostPattern, Outbound, OutboundError, OutboundRequest, OutboundResponse};
use crate::plugins::budget::{self, BodyCharge, MemoryBudget};
use crate::plugins::paying::{Payer, PayingRun, send_paying};
use crate::plugins::state::HostState;

/// Requests one run may have in flight, or answered but not yet read, through wasi:http;
/// more wait for a turn. Enough for a plugin's fan-out, too few for one run to hold many of
/// the host's connections or responses.
pub const MAX_IN_FLIGHT: usize = 8;

/// A response body is handed to the guest in frames of at most this: what the host holds
/// beyond the charged bytes while the guest reads.
const FRAME_BYTES: usize = 64 * 1024;

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
    budget: Arc<MemoryBudget>,
    /// Pays a `402` when the owner allows (`paying.rs`).
    payer: Option<(Arc<dyn Payer>, PayingRun)>,
}

type BoxedFuture<T> = Box<dyn Future<Output = T> + Send>;

impl WasiHttpHooks for GuardedHttp {
    // What an outgoing body holds on the host before it is sent: small, and charged.
    fn p2_outgoing_body_buffer_chunks(&mut self) -> usize {
        budget::OUTGOING_BUFFER_CHUNKS
    }

    fn p2_outgoing_body_chunk_size(&mut self) -> usize {
        budget::OUTGOING_CHUNK_BYTES
    }

    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _response_errors: BoxedFuture<Result<(), Error>>,
    ) -> BoxedFuture<Result<(http::Response<WasiBody>, BoxedFuture<Result<(), Error>>), Error>> {
        let (outbound, allowed, notes) = (self.outbound.clone(), self.allowed.clone(), self.notes.clone());
        let (in_flight, budget) = (self.in_flight.clone(), self.budget.clone());
        let payer = self.payer.clone();
        Box::new(async move {
            // Held until the response body is read whole or dropped (`HeldBody`).
            let turn = in_flight
                .acquire_owned()
                .await
                .map_err(|_| Error::InternalError(Some("the run is over".into())))?;
            let url = shown_url(request.uri());
            let response_charge = BodyCharge::new(&budget);
            let result = send(
                &outbound,
                allowed,
                payer,
                request,
                options,
                &budget,
                response_charge.clone(),
            )
            .await;
            match result {
                Ok(response) => {
                    let done: BoxedFuture<Result<(), Error>> = Box::new(async { Ok(()) });
                    Ok((to_http_response(response, response_charge, turn), done))
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
/// than it may download, charged to its budget until sent) and sends it through the guard,
/// the response charged to `response_charge`. The body is read even for a request that is
/// refused: a guest still writing it would otherwise see its stream break and report that
/// instead of the refusal.
async fn send(
    outbound: &Outbound,
    allowed: Result<Vec<HostPattern>, String>,
    payer: Option<(Arc<dyn Payer>, PayingRun)>,
    request: http::Request<WasiBody>,
    options: Option<RequestOptions>,
    budget: &Arc<MemoryBudget>,
    response_charge: Arc<BodyCharge>,
) -> Result<OutboundResponse, SendError> {
    let limit = outbound.policy().max_response_bytes;
    let (parts, mut body) = request.into_parts();
    let request_charge = BodyCharge::new(budget);
    let mut bytes = Vec::new();
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.map_err(SendError::Body)?.into_data() {
            if (bytes.len() + data.len()) as u64 > limit {
                return Err(SendError::Body(Error::HttpRequestBodySize(Some(limit))));
            }
            if !crate::outbound::ByteBudget::take(&*request_charge, data.len()) {
                return Err(SendError::Outbound(OutboundError::OverBudget));
            }
            bytes.extend_from_slice(&data);
        }
    }
    let allowed = allowed.map_err(|reason| SendError::Outbound(OutboundError::Denied(reason)))?;
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
        budget: Some(response_charge),
        follow_redirects: true,
        truncate_body: false,
    };
    // The request's bytes are charged until it has gone (`request_charge` lives till then).
    let sent = send_paying(outbound, &allowed, payer, request)
        .await
        .map_err(SendError::Outbound);
    drop(request_charge);
    sent
}

/// A response body as the guest reads it: in frames, each given back to the run's budget
/// as it is handed over; the run's turn is held until the body is read whole or dropped, so
/// unread responses count against `MAX_IN_FLIGHT` as well as the budget.
struct HeldBody {
    data: Bytes,
    charge: Arc<BodyCharge>,
    turn: Option<OwnedSemaphorePermit>,
}

impl Body for HeldBody {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let this = &mut *self;
        if this.data.is_empty() {
            this.turn = None;
            return Poll::Ready(None);
        }
        let frame = this.data.split_to(this.data.len().min(FRAME_BYTES));
        this.charge.release(frame.len());
        Poll::Ready(Some(Ok(Frame::data(frame))))
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.data.len() as u64)
    }
}

fn to_http_response(
    response: OutboundResponse,
    charge: Arc<BodyCharge>,
    turn: OwnedSemaphorePermit,
) -> http::Response<WasiBody> {
    let mut builder = http::Response::builder().status(response.status);
    for (name, value) in &response.headers {
        // The body comes whole: how it was framed on the wire is no longer true.
        if !matches!(name.as_str(), "transfer-encoding" | "connection" | "keep-alive") {
            builder = builder.header(name, value);
        }
    }
    let body = HeldBody {
        data: Bytes::from(response.body),
        charge,
        turn: Some(turn),
    };
    builder.body(body.boxed_unsync()).unwrap_or_else(|_| {
        // The guard returned a status and headers it had parsed; this cannot fail.
        let empty = http_body_util::Empty::new()
            .map_err(|never| match never {})
            .boxed_unsync();
        let mut fallback = http::Response::new(empty);
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
        OutboundError::OverBudget => Error::InternalError(Some(err.to_string())),
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
    // Called at every wasi:http call: the moment to measure what the guest's resources hold.
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        self.resources.tick(&mut self.table, &self.budget);
        let call = &self.call;
        // Made on first use: a plugin that never calls wasi:http pays nothing for it.
        let hooks = self.http_hooks.get_or_insert_with(|| GuardedHttp {
            outbound: call.services.outbound.clone(),
            allowed: call.grants.check_http().map(<[HostPattern]>::to_vec),
            notes: Arc::default(),
            in_flight: Arc::new(tokio::sync::Semaphore::new(MAX_IN_FLIGHT)),
            budget: self.budget.clone(),
            payer: match call.grants.pays {
                true => call.services.payer.clone().map(|payer| (payer, call.paying_run())),
                false => None,
            },
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
