#![doc = include_str!("../README.md")]

extern crate self as agent_plugin_sdk;

#[cfg(all(
    feature = "arena",
    target_arch = "wasm32",
    target_os = "unknown",
    not(target_feature = "atomics")
))]
mod arena;
mod capabilities;
mod invocation;
mod manifest;
pub mod template;

pub use capabilities::{agent, http, kv, llm, log, meter, progress};
pub use invocation::{Invocation, Origin};
pub use manifest::{Capability, Manifest, Param, ParamType};
pub use serde_json::{Map, Value, json};

/// The generated bindings. Plugins use the types re-exported above instead.
#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../wit/v0.4.0",
        world: "command-plugin",
        // The world lets a plugin import wasi:http; its bindings are the `wasip2` crate's,
        // which HTTP clients for WASI (wstd, waki) use too, so they are not made twice.
        with: {
            "wasi:http/types@0.2.12": wasip2::http::types,
            "wasi:http/outgoing-handler@0.2.12": wasip2::http::outgoing_handler,
            "wasi:io/error@0.2.12": wasip2::io::error,
            "wasi:io/poll@0.2.12": wasip2::io::poll,
            "wasi:io/streams@0.2.12": wasip2::io::streams,
            "wasi:clocks/monotonic-clock@0.2.12": wasip2::clocks::monotonic_clock,
        },
        pub_export_macro: true,
        export_macro_name: "__export_command_plugin",
        default_bindings_module: "agent_plugin_sdk::bindings",
        runtime_path: "agent_plugin_sdk::__wit_bindgen::rt",
    });
}

#[doc(hidden)]
pub use wit_bindgen as __wit_bindgen;

#[cfg(all(
    feature = "arena",
    target_arch = "wasm32",
    target_os = "unknown",
    not(target_feature = "atomics")
))]
#[global_allocator]
static ARENA: arena::Arena = arena::Arena::new();

use bindings::agent::plugin::types as wit;

/// The result formats a command can answer in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Markdown,
    Image,
    Video,
}

impl From<wit::ResponseFormat> for Format {
    fn from(f: wit::ResponseFormat) -> Self {
        match f {
            wit::ResponseFormat::Text => Format::Text,
            wit::ResponseFormat::Markdown => Format::Markdown,
            wit::ResponseFormat::Image => Format::Image,
            wit::ResponseFormat::Video => Format::Video,
        }
    }
}

impl From<Format> for wit::ResponseFormat {
    fn from(f: Format) -> Self {
        match f {
            Format::Text => wit::ResponseFormat::Text,
            Format::Markdown => wit::ResponseFormat::Markdown,
            Format::Image => wit::ResponseFormat::Image,
            Format::Video => wit::ResponseFormat::Video,
        }
    }
}

/// What a run produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    pub response: String,
    pub format: Format,
    pub media_url: Option<String>,
}

impl Output {
    pub fn text(response: impl Into<String>) -> Output {
        Output {
            response: response.into(),
            format: Format::Text,
            media_url: None,
        }
    }

    pub fn markdown(response: impl Into<String>) -> Output {
        Output {
            response: response.into(),
            format: Format::Markdown,
            media_url: None,
        }
    }

    /// An image result: its URL, with a caption or description as the response.
    pub fn image(url: impl Into<String>, caption: impl Into<String>) -> Output {
        Output {
            response: caption.into(),
            format: Format::Image,
            media_url: Some(url.into()),
        }
    }

    pub fn video(url: impl Into<String>, caption: impl Into<String>) -> Output {
        Output {
            response: caption.into(),
            format: Format::Video,
            media_url: Some(url.into()),
        }
    }

    /// The same text in the given format (e.g. the one the agent manifest declares).
    pub fn with_format(mut self, format: Format) -> Output {
        self.format = format;
        self
    }
}

/// Why a run did not produce an output.
#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// The caller's input is wrong; the message says how.
    InvalidInput(String),
    /// The command ran and failed.
    Failed(String),
    /// Something it depends on is down or not configured.
    Unavailable(String),
}

impl Error {
    pub fn invalid(message: impl Into<String>) -> Error {
        Error::InvalidInput(message.into())
    }

    pub fn failed(message: impl Into<String>) -> Error {
        Error::Failed(message.into())
    }

    pub fn unavailable(message: impl Into<String>) -> Error {
        Error::Unavailable(message.into())
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::InvalidInput(m) => write!(f, "invalid input: {m}"),
            Error::Failed(m) => write!(f, "{m}"),
            Error::Unavailable(m) => write!(f, "unavailable: {m}"),
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A command plugin: what it is, and what it does with one invocation.
pub trait Plugin {
    fn manifest() -> Manifest;
    fn execute(call: Invocation) -> Result<Output>;
}

/// Exports a [`Plugin`] as the component's `command` interface.
#[macro_export]
macro_rules! export_plugin {
    ($plugin:ty) => {
        #[doc(hidden)]
        struct __AgentPluginExport;

        impl $crate::bindings::exports::agent::plugin::command::Guest for __AgentPluginExport {
            fn manifest() -> $crate::bindings::agent::plugin::types::PluginManifest {
                $crate::__private::manifest::<$plugin>()
            }

            fn execute(
                invocation: $crate::bindings::agent::plugin::types::Invocation,
            ) -> ::core::result::Result<
                $crate::bindings::agent::plugin::types::Output,
                $crate::bindings::agent::plugin::types::CommandError,
            > {
                $crate::__private::execute::<$plugin>(invocation)
            }
        }

        $crate::bindings::__export_command_plugin!(__AgentPluginExport with_types_in $crate::bindings);
    };
}

#[doc(hidden)]
pub mod __private {
    use super::*;

    pub fn manifest<P: Plugin>() -> wit::PluginManifest {
        P::manifest().into_wit()
    }

    pub fn execute<P: Plugin>(invocation: wit::Invocation) -> Result<wit::Output, wit::CommandError> {
        let call = Invocation::from_wit(invocation).map_err(to_wit_error)?;
        match P::execute(call) {
            Ok(out) => Ok(wit::Output {
                response: out.response,
                format: out.format.into(),
                media_url: out.media_url,
            }),
            Err(err) => Err(to_wit_error(err)),
        }
    }

    fn to_wit_error(err: Error) -> wit::CommandError {
        match err {
            Error::InvalidInput(m) => wit::CommandError::InvalidInput(m),
            Error::Failed(m) => wit::CommandError::Failed(m),
            Error::Unavailable(m) => wit::CommandError::Unavailable(m),
        }
    }
}
