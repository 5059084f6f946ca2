//! agent-host: the agent interaction service. Flow runs one way:
//! {routes, cli} → services → {store, plugins, chains, llm, clients}; both entry points show records through `views`.

pub mod app;
#[cfg(test)]
mod architecture;
pub mod chains;
pub mod cli;
pub mod clients;
pub mod clock;
pub mod config;
pub mod domain;
pub mod error;
pub mod faults;
pub mod jws;
pub mod llm;
pub mod manifest;
pub mod marker;
pub mod money;
pub mod outbound;
pub mod plugins;
pub mod random;
pub mod rate_window;
pub mod routes;
pub mod scaffold;
pub mod schema;
pub mod secrets;
pub mod services;
pub mod store;
pub mod telemetry;
pub mod views;
pub mod x402;
