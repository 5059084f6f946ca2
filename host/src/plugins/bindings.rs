//! Host bindings generated from `wit/v0.1.0`. Host functions are async (they may await
//! the store, HTTP or an LLM) and trappable (only host bugs trap; guest-visible failures
//! are values).

wasmtime::component::bindgen!({
    path: "../wit/v0.1.0",
    world: "command-plugin",
    imports: { default: async | trappable },
    exports: { default: async },
});

pub use agent::plugin::types;

/// The WIT package version these bindings serve.
pub const WIT_VERSION: &str = "0.1.0";

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
