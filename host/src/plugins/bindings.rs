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
