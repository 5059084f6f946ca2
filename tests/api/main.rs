//! End-to-end tests: the real `agent-host` binary over real HTTP on 127.0.0.1, with a
//! real SQLite file in a temp data dir. One test binary, one module per area.

// Test code: a failed unwrap is a failed test, and tests talk to servers with their own
// HTTP clients, outside the agent's guarded egress.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

#[path = "../support/mod.rs"]
mod support;

mod a2a;
mod a2a_paid;
mod account;
mod auth;
mod chat;
mod chat_stream;
mod chatapp;
mod cli;
mod connections;
mod console;
mod errors;
mod freshness;
mod jobs;
mod knowledge;
mod logs;
mod maintenance;
mod mcp;
mod mcp_oauth;
mod meta;
mod metrics;
mod migrations;
mod openai;
mod paid_load;
mod paid_traces;
mod pay_page;
mod plugin_abuse;
mod plugin_run;
mod plugins;
mod quotas;
mod rate_limits;
mod remote_mcp;
mod sandbox;
mod schedules;
mod schema;
mod settings;
mod several_hosts;
mod shutdown;
mod social;
mod spending;
mod tenancy;
mod traces;
mod uploads;
mod usage;
mod wallets;
mod webhooks;
mod x402;
mod x402_abuse;
mod x402_breaker;
mod x402_clients;
mod x402_edges;
mod x402_edges_solana;
mod x402_facilitator;
mod x402_guards;
mod x402_recovery;
mod x402_sign_in;
mod x402_smart_wallets;
mod x402_upto;
mod x402_v2;
