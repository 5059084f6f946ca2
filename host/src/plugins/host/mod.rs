//! One module per WIT interface the host provides. Each function opens with its grant
//! check; refusals and failures go back to the guest as values, never as traps.

mod agent_info;
mod http;
mod kv;
mod llm;
mod log;
mod meter;
mod progress;

mod wasi_http;

pub use wasi_http::GuardedHttp;

use super::bindings::types;
use super::state::HostState;

// `types` has no functions, only the shared records (one set for every version).
impl types::Host for HostState {}
