//! Host bindings generated from `wit/`, one module per version of `agent:plugin` this host
//! serves. Host functions are async (they may await the store, HTTP or an LLM) and trappable
//! (only host bugs trap; guest-visible failures are values).
//!
//! The newest version owns the shared records (`types`); older versions reuse them (`with`),
//! so the rest of the host speaks one vocabulary whatever a component was built against.
//! Each version's interfaces have their own traits; `host/` implements them once, for every
//! version, with `for_each_version!`.

/// `agent:plugin@0.4.0`: 0.3.0 plus `meter`, the units of work a run did.
pub mod v0_4_0 {
    wasmtime::component::bindgen!({
        path: "../wit/v0.4.0",
        world: "command-plugin",
        imports: { default: async | trappable },
        exports: { default: async },
        with: {
            "wasi:http": wasmtime_wasi_http::p2::bindings::http,
            "wasi:io": wasmtime_wasi::p2::bindings::io,
            "wasi:clocks": wasmtime_wasi::p2::bindings::clocks,
        },
    });
}

/// `agent:plugin@0.3.0`, frozen: 0.2.0 plus `llm.embed`.
pub mod v0_3_0 {
    wasmtime::component::bindgen!({
        path: "../wit/v0.3.0",
        world: "command-plugin",
        imports: { default: async | trappable },
        exports: { default: async },
        with: {
            "agent:plugin/types": super::v0_4_0::agent::plugin::types,
            "wasi:http": wasmtime_wasi_http::p2::bindings::http,
            "wasi:io": wasmtime_wasi::p2::bindings::io,
            "wasi:clocks": wasmtime_wasi::p2::bindings::clocks,
        },
    });
}

/// `agent:plugin@0.2.0`, frozen: 0.1.0 plus `wasi:http/outgoing-handler`.
pub mod v0_2_0 {
    wasmtime::component::bindgen!({
        path: "../wit/v0.2.0",
        world: "command-plugin",
        imports: { default: async | trappable },
        exports: { default: async },
        with: {
            "agent:plugin/types": super::v0_4_0::agent::plugin::types,
            "wasi:http": wasmtime_wasi_http::p2::bindings::http,
            "wasi:io": wasmtime_wasi::p2::bindings::io,
            "wasi:clocks": wasmtime_wasi::p2::bindings::clocks,
        },
    });
}

/// `agent:plugin@0.1.0`, frozen: components built against it keep working.
pub mod v0_1_0 {
    wasmtime::component::bindgen!({
        path: "../wit/v0.1.0",
        world: "command-plugin",
        imports: { default: async | trappable },
        exports: { default: async },
        with: {
            "agent:plugin/types": super::v0_4_0::agent::plugin::types,
        },
    });
}

pub use v0_4_0::agent::plugin::types;

/// The WIT package versions this host serves, newest first (see wit/README.md).
pub const WIT_VERSIONS: &[&str] = &["0.4.0", "0.3.0", "0.2.0", "0.1.0"];

/// Expands `$imp!(version_module)` once per served version, so one body implements an
/// interface for all of them (their records have the same fields, under different types).
macro_rules! for_each_version {
    ($imp:ident) => {
        $imp!(v0_1_0);
        $imp!(v0_2_0);
        $imp!(v0_3_0);
        $imp!(v0_4_0);
    };
}
pub(crate) use for_each_version;

// The WIT types and the domain's are the same vocabulary; these are the only mappings.

use crate::domain::{ParamSpec, ParamType, ResponseFormat};

impl From<types::ResponseFormat> for ResponseFormat {
    fn from(f: types::ResponseFormat) -> Self {
        match f {
            types::ResponseFormat::Text => ResponseFormat::Text,
            types::ResponseFormat::Markdown => ResponseFormat::Markdown,
            types::ResponseFormat::Image => ResponseFormat::Image,
            types::ResponseFormat::Video => ResponseFormat::Video,
        }
    }
}

impl From<ResponseFormat> for types::ResponseFormat {
    fn from(f: ResponseFormat) -> Self {
        match f {
            ResponseFormat::Text => types::ResponseFormat::Text,
            ResponseFormat::Markdown => types::ResponseFormat::Markdown,
            ResponseFormat::Image => types::ResponseFormat::Image,
            ResponseFormat::Video => types::ResponseFormat::Video,
        }
    }
}

impl From<types::ParamType> for ParamType {
    fn from(k: types::ParamType) -> Self {
        match k {
            types::ParamType::String => ParamType::String,
            types::ParamType::Number => ParamType::Number,
            types::ParamType::Boolean => ParamType::Boolean,
            types::ParamType::Array => ParamType::Array,
            types::ParamType::Object => ParamType::Object,
            types::ParamType::File => ParamType::File,
        }
    }
}

impl From<ParamType> for types::ParamType {
    fn from(k: ParamType) -> Self {
        match k {
            ParamType::String => types::ParamType::String,
            ParamType::Number => types::ParamType::Number,
            ParamType::Boolean => types::ParamType::Boolean,
            ParamType::Array => types::ParamType::Array,
            ParamType::Object => types::ParamType::Object,
            ParamType::File => types::ParamType::File,
        }
    }
}

impl From<types::ParamSpec> for ParamSpec {
    fn from(p: types::ParamSpec) -> Self {
        ParamSpec {
            name: p.name,
            kind: p.kind.into(),
            required: p.required,
            description: p.description,
            values: Vec::new(),
            default: None,
        }
    }
}

impl From<ParamSpec> for types::ParamSpec {
    fn from(p: ParamSpec) -> Self {
        types::ParamSpec {
            name: p.name,
            kind: p.kind.into(),
            required: p.required,
            description: p.description,
        }
    }
}

/// How an origin is written in the store (jobs, plugin runs).
pub fn origin_name(origin: types::Origin) -> &'static str {
    match origin {
        types::Origin::Api => "api",
        types::Origin::ChatTool => "chat_tool",
        types::Origin::X402 => "x402",
        types::Origin::Chatapp => "chatapp",
        types::Origin::Social => "social",
    }
}

pub fn parse_origin(text: &str) -> types::Origin {
    match text {
        "chat_tool" => types::Origin::ChatTool,
        "x402" => types::Origin::X402,
        "chatapp" => types::Origin::Chatapp,
        "social" => types::Origin::Social,
        _ => types::Origin::Api,
    }
}
