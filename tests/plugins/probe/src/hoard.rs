//! Ways to make the host hold memory through wasi:http without growing the plugin's own:
//! each keeps what it makes and asks for more until the host stops it. Shared with the
//! `greedy` fixture, which does it in `manifest()`.

use wasip2::http::outgoing_handler;
use wasip2::http::types::{ErrorCode, Fields, IncomingResponse, OutgoingRequest, Scheme};

/// Header fields of 60 KB each, kept.
pub fn fields() -> ! {
    let value = vec![b'f'; 60_000];
    let mut kept = Vec::new();
    loop {
        let fields = Fields::new();
        let _ = fields.append("x-hoard", &value);
        kept.push(fields);
    }
}

/// Requests never sent, each with a body written as far as the host lets it.
pub fn bodies() -> ! {
    let chunk = vec![b'b'; 64 * 1024];
    let mut kept = Vec::new();
    loop {
        let request = OutgoingRequest::new(Fields::new());
        let body = request.body().expect("a new request has a body");
        let stream = body.write().expect("a new body has a stream");
        if let Ok(room) = stream.check_write() {
            let _ = stream.write(&chunk[..(room as usize).min(chunk.len())]);
        }
        kept.push((request, body, stream));
    }
}

/// Responses of `url` (http://host:port/path), kept unread.
pub fn responses(url: &str) -> Result<(), ErrorCode> {
    let rest = url.strip_prefix("http://").unwrap_or(url);
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let mut kept: Vec<IncomingResponse> = Vec::new();
    loop {
        let request = OutgoingRequest::new(Fields::new());
        let _ = request.set_scheme(Some(&Scheme::Http));
        let _ = request.set_authority(Some(authority));
        let _ = request.set_path_with_query(Some(if path.is_empty() { "/" } else { path }));
        let future = outgoing_handler::handle(request, None)?;
        future.subscribe().block();
        match future.get() {
            Some(Ok(Ok(response))) => kept.push(response),
            Some(Ok(Err(code))) => return Err(code),
            _ => return Err(ErrorCode::InternalError(Some("no response".into()))),
        }
    }
}
