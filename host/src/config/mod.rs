//! Settings: defaults, then `agent-host.toml` in the data dir, then `AGENT_HOST_*`
//! environment variables (env wins), then command-line flags. docs/configuration.md lists each one.
//!
//! Each setting is declared once, in `settings!` below: its name, type, default, range and
//! meaning. The struct, the file and environment loader and the reference docs/configuration.md is
//! checked against all come from that one line. A value that does not parse, or lies
//! outside its range, stops the start with a message naming the setting.

mod load;
mod values;

use std::path::PathBuf;

use crate::domain::RateLimits;

pub const SETTINGS_FILE: &str = "agent-host.toml";
pub const ENV_PREFIX: &str = "AGENT_HOST_";

/// A setting as docs/configuration.md documents it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingDoc {
    /// The group it belongs to (`plugins`), a section of docs/configuration.md.
    pub section: &'static str,
    /// The key in `agent-host.toml`; empty for environment-only settings.
    pub file_key: &'static str,
    pub env: String,
    pub default: &'static str,
    pub meaning: &'static str,
}

/// A setting that must never be printed.
#[derive(Clone)]
pub struct Secret(String);

impl Secret {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

use load::Sources;
pub use values::{AddressRange, BaseNetworkName, LogFormat, Ratio, SolanaNetworkName};

#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("{file}: {message}")]
    File { file: String, message: String },
    #[error("{name}: {message}")]
    Env { name: String, message: String },
}

macro_rules! settings {
    ($(
        $(#[doc = $title:literal])*
        $group:ident: $group_ty:ident {$(
            $field:ident: $ty:ty = $default:literal $([$min:literal ..= $max:literal])?, $meaning:literal;
        )*}
    )*) => {
        /// Every setting, grouped by the subsystem it configures. A setting keeps its one
        /// name everywhere: the file's key, the variable, and the field in its group.
        #[derive(Debug, Clone)]
        pub struct Settings {
            pub data_dir: PathBuf,
            $(pub $group: $group_ty,)*
        }

        $(
            $(#[doc = $title])*
            #[derive(Debug, Clone)]
            pub struct $group_ty {
                $(pub $field: $ty,)*
            }
        )*

        /// Every setting, as docs/configuration.md lists it (checked by a test).
        pub fn reference() -> Vec<SettingDoc> {
            let mut docs = vec![
                SettingDoc {
                    section: "server",
                    file_key: "",
                    env: "AGENT_HOST_DATA_DIR".into(),
                    default: "./data",
                    meaning: "the data directory (also --data-dir)",
                },
                SettingDoc {
                    section: "server",
                    file_key: "",
                    env: "AGENT_HOST_MASTER_KEY".into(),
                    default: "generated into DATA_DIR/master.key",
                    meaning: "32-byte master key, hex or base64; encrypts secrets at rest",
                },
            ];
            $($(docs.push(SettingDoc {
                section: stringify!($group),
                file_key: stringify!($field),
                env: format!("{ENV_PREFIX}{}", stringify!($field).to_ascii_uppercase()),
                default: $default,
                meaning: $meaning,
            });)*)*
            docs
        }

        impl Settings {
            fn read(data_dir: PathBuf, sources: &Sources) -> Result<Settings, SettingsError> {
                let known = [$($(stringify!($field)),*),*];
                if let Some(unknown) = sources.file.keys().find(|k| !known.contains(&k.as_str())) {
                    return Err(sources.file_error(unknown, "unknown setting".into()));
                }
                Ok(Settings {
                    data_dir,
                    $($group: $group_ty {
                        $($field: sources.get(stringify!($field), $default, None $(.or(Some(($min, $max))))?)?,)*
                    },)*
                })
            }
        }
    };
}

settings! {
    /// The server: addresses, requests, shutdown, recovery, browsers and proxies, failed keys.
    server: ServerSettings {
        listen: Vec<String> = "127.0.0.1:8080",
            "addresses to serve on; a list in the file, comma-separated in env (also --listen, repeatable)";
        max_body_bytes: usize = "1048576" [1 ..= 1073741824], "largest request body accepted; more answers 413";
        log: String = "info", "log filter (tracing EnvFilter syntax), written to stderr";
        log_format: LogFormat = "text", "how log lines are written: text, or json (one object per line, with the request id)";
        public_base_url: Option<String> = "", "absolute base URL of this server, used in status addresses (unset: http:// + the first listen address)";
        shutdown_delay_secs: u64 = "0" [0 ..= 600],
            "on SIGTERM, how long the server keeps serving with /ready answering 503 before it stops accepting (time for a load balancer to take it out)";
        shutdown_grace_secs: u64 = "30" [0 ..= 3600], "how long shutdown waits for requests in flight and the work they started";
        recovery_interval_secs: u64 = "30" [1 ..= 3600],
            "how often stuck or cut-off payments, refunds and transfers are taken up again";
        cors_allowed_origins: Vec<String> = "",
            "browser origins allowed to call the keyed API (CORS), e.g. https://app.example.com; * for any; unset: none";
        client_ip_header: Option<String> = "",
            "behind a proxy only: the header it sets with the client's address (its last entry counts); unset: the connection's address";
        auth_failure_limit_per_minute: u32 = "20" [1 ..= 1000000],
            "wrong API keys or webhook secrets one client address may present per minute; past it, refused before any lookup";
        auth_failure_limit_per_day: u32 = "500" [1 ..= 100000000], "wrong API keys or webhook secrets one client address may present per UTC day";
        max_connections: usize = "16384" [1 ..= 10000000],
            "connections served at once, all clients together (held under the open-file limit); past it a new connection is closed at once";
        max_connections_per_address: usize = "256" [1 ..= 10000000],
            "connections one client address (an IPv6 client: its /64) may hold open; past it its new connections are closed at once";
        connection_shared_addresses: Vec<AddressRange> = "",
            "addresses or CIDR ranges that many clients share (a proxy, a NAT): not held to max_connections_per_address";
        header_read_timeout_secs: u64 = "20" [1 ..= 3600],
            "how long a connection may take to send a request's headers, from when it opened or its previous answer ended (so also how long an idle keep-alive connection stays open)";
        body_read_timeout_secs: u64 = "30" [1 ..= 3600], "how long a request's body may take to arrive; later is answered 408";
        response_stall_timeout_secs: u64 = "30" [1 ..= 3600],
            "how long an answer may wait on a client that takes less than 1 KiB of it before the connection is closed (streams that flow are never cut)";
        http2_cleartext: bool = "false",
            "whether clients may speak HTTP/2 without TLS (prior knowledge): at most 32 requests at once per connection; off, every connection is HTTP/1.1 and bound by its timers (a TLS proxy in front speaks HTTP/2 to browsers either way)";
        http2_keep_alive_secs: u64 = "20" [1 ..= 3600],
            "with http2_cleartext: how often an HTTP/2 connection is pinged; one that does not answer within as long again is closed";
    }
    /// What the service tells its operator besides its logs: Prometheus metrics, OTLP traces.
    telemetry: TelemetrySettings {
        metrics_listen: Option<String> = "",
            "address to serve Prometheus metrics on, at /metrics, e.g. 127.0.0.1:9464; its own listener, never the public one (unset: no metrics, and nothing is measured)";
        metrics_allow_remote: bool = "false",
            "whether metrics_listen may be an address other than loopback (then set metrics_token too); false: such an address stops the start";
        metrics_token: Option<Secret> = "",
            "a bearer token every scrape must send (Authorization: Bearer <token>); unset: none asked";
        metrics_agents: Vec<String> = "",
            "the agents (usernames) named in metric labels, the others counted together as other (unset: the first metrics_max_agents seen)";
        metrics_max_agents: usize = "50" [1 ..= 100000], "agents named in metric labels; the others are counted together as other";
        metrics_max_commands: usize = "500" [1 ..= 1000000], "agent commands named in metric labels; the others are counted together as other";
        otlp_endpoint: Option<String> = "",
            "an OpenTelemetry collector's OTLP/HTTP address, e.g. http://127.0.0.1:4318: request spans are sent to its /v1/traces (unset: no traces)";
        otlp_sample_ratio: Ratio = "1",
            "share of requests traced, from 0 to 1, when no trusted caller's traceparent decides";
        otlp_trusted_peers: Vec<AddressRange> = "",
            "addresses or CIDR ranges (a proxy, the operator's own services) whose traceparent is followed; another caller's request is sampled by the ratio and starts its own trace, linked to the caller's";
    }
    /// The database: SQLite or PostgreSQL, and how fresh each host keeps its view.
    database: DatabaseSettings {
        database_url: Option<Secret> = "",
            "PostgreSQL database shared by several hosts, postgres://user:password@host:port/name (unset: SQLite in the data dir)";
        database_pool_size: usize = "32" [2 ..= 1000], "PostgreSQL connections this host opens at most";
        db_busy_timeout_ms: u64 = "5000" [0 ..= 600000], "how long a database write waits for another process's lock";
        cache_check_ms: u64 = "100" [10 ..= 1000],
            "how often a server checks the database for writes made elsewhere; every process sees a write within 3 × this";
        cache_max_mib: u64 = "64" [1 ..= 65536],
            "memory for keys, agents and their commands kept read (counted by their bytes); past it those not read lately are read from the database again";
        rate_limit_flush_secs: u64 = "10" [1 ..= 3600], "how often rate-limit counters are saved (also saved at shutdown)";
    }
    /// The plugin runtime: time, memory, output, concurrency, components and a plugin's LLM use.
    plugins: PluginSettings {
        plugin_cache_dir: Option<String> = "", "where compiled components are kept (unset: DATA_DIR/cache)";
        plugin_timeout_ms: u64 = "5000" [1 ..= 3600000], "default deadline of one command run (a command's timeout_ms overrides)";
        plugin_memory_mib: u64 = "128" [1 ..= 4096], "memory cap of one plugin instance: all its linear memories together";
        plugin_max_output_bytes: usize = "1048576" [1 ..= 1073741824], "largest command output accepted";
        plugin_max_concurrency: usize = "64" [2 ..= 1000], "command runs at once, all accounts together; more wait";
        plugin_max_concurrency_per_account: usize = "8" [1 ..= 1000],
            "command runs one account's agents may have at once; more wait";
        plugin_max_component_bytes: usize = "33554432" [1024 ..= 1073741824], "largest plugin component accepted";
        plugin_max_compiles: usize = "1" [1 ..= 64],
            "components compiled at once (each takes every core for up to seconds); uploads beyond a short queue answer 503";
        plugin_loaded_components_mib: u64 = "256" [16 ..= 1048576],
            "memory for compiled components kept ready (their compiled images); past it the least recently run are loaded again from the disk cache";
        plugin_collect_after_secs: u64 = "3600" [1 ..= 31536000],
            "a component no account keeps and no command runs is deleted (bytes, record, compiled artifact) once unused this long";
        plugin_llm_max_tokens: u32 = "1024" [1 ..= 1000000], "most tokens a plugin's LLM completion may ask for";
        plugin_llm_calls_per_run: u32 = "16" [1 ..= 100000], "LLM completions one plugin run may ask for";
        plugin_llm_prompt_chars_per_run: u64 = "400000" [1 ..= 1000000000], "characters of prompts one plugin run may send the LLM, all its calls together";
        plugin_llm_tokens_per_run: u64 = "16384" [1 ..= 1000000000], "tokens one plugin run may ask the LLM for, all its calls together";
        account_plugin_llm_tokens_per_minute: u32 = "50000" [1 ..= 4000000000],
            "LLM tokens one account's plugins may use per minute (each call counted at its worst case: prompt and answer limit)";
        account_plugin_llm_tokens_per_day: u32 = "2000000" [1 ..= 4000000000], "LLM tokens one account's plugins may use per UTC day";
        account_plugin_uploads_per_minute: u32 = "10" [1 ..= 1000000],
            "components one account may upload per minute (each is compiled, which takes a core for up to seconds); past it 429";
        account_plugin_uploads_per_day: u32 = "200" [1 ..= 100000000], "components one account may upload per UTC day";
    }
    /// What one account may keep.
    quotas: QuotaSettings {
        account_max_agents: u64 = "100" [1 ..= 1000000], "agents one account may have";
        agent_max_commands: u64 = "100" [1 ..= 10000], "commands one agent may have";
        account_max_kv_bytes: u64 = "268435456" [1024 ..= 1099511627776],
            "bytes all of one account's plugins may keep in their key-value stores, together";
        account_max_plugins: u64 = "50" [1 ..= 1000000], "components one account may keep";
        account_max_plugin_bytes: u64 = "268435456" [1024 ..= 1099511627776], "bytes of components one account may keep, all together";
    }
    /// Long-running commands.
    jobs: JobSettings {
        job_timeout_ms: u64 = "300000" [1 ..= 86400000], "default deadline of a long-running command";
        job_retention_hours: u64 = "24" [1 ..= 8760], "how long a job's status stays readable";
        job_lease_secs: u64 = "30" [3 ..= 3600],
            "a running job's lease, renewed by its host; once it runs out (the host died) the job is failed, not run twice";
    }
    /// Signed webhooks: how deliveries are retried, when an endpoint is disabled, what is watched.
    webhooks: WebhookSettings {
        webhook_retry_schedule_secs: Vec<u32> = "5,300,1800,7200,18000,28800,28800" [1 ..= 604800],
            "waits between a delivery's attempts (each ±10 % jitter); after the last, it has failed. The default: 8 attempts over about 24 hours";
        webhook_disable_after_failures: u64 = "20" [1 ..= 1000000],
            "failed attempts in a row after which an endpoint is disabled, once it has also failed for webhook_disable_after_secs";
        webhook_disable_after_secs: u64 = "86400" [0 ..= 31536000],
            "how long an endpoint must have failed (since its last success) before it is disabled";
        webhook_poll_ms: u64 = "500" [10 ..= 60000], "how often a host looks for deliveries due";
        webhook_timeout_ms: u64 = "10000" [100 ..= 600000],
            "longest wait for a receiver's answer (at most outbound_timeout_ms); slower is a failed attempt";
        webhook_max_endpoints: u64 = "20" [1 ..= 10000], "endpoints one account may register";
        webhook_allow_private: Vec<String> = "",
            "hosts (host or host:port) webhook endpoints may be at though private, loopback or this server's own (outbound_allow_private is the plugins' alone); their answers are not shown to the owner";
        webhook_retention_days: u64 = "30" [1 ..= 3650], "how long events and their deliveries are kept";
        webhook_failing_min_runs: u64 = "5" [1 ..= 1000000],
            "runs of a command in one hour on one host before its failure rate can raise command.failing";
        webhook_failing_percent: u64 = "50" [1 ..= 100], "share of a command's runs in one hour that failed to raise command.failing";
        wallet_check_secs: u64 = "300" [5 ..= 86400], "how often wallets with a low-balance alert are checked";
    }
    /// Schedules: work agents do on their own (docs/schedules.md).
    schedules: ScheduleSettings {
        schedule_max_per_account: u64 = "20" [0 ..= 100000], "schedules one account may keep, over all its agents";
        schedule_poll_ms: u64 = "1000" [10 ..= 60000], "how often a host looks for schedules due";
        schedule_run_timeout_secs: u64 = "300" [1 ..= 3600],
            "longest a scheduled run may take, its delivery included; a longer one fails";
        schedule_late_after_secs: u64 = "60" [1 ..= 86400],
            "how late a run may start and still be on time; a later one was missed, and runs or is skipped as its schedule says";
        schedule_stop_after_failures: u64 = "5" [1 ..= 1000],
            "failed runs in a row after which a schedule stops (and schedule.stopped is raised) until its owner resumes it";
    }
    /// What the owners' dashboards show: usage counters per agent and hour.
    usage: UsageSettings {
        usage_flush_ms: u64 = "2000" [10 ..= 3600000],
            "how often a host adds the runs and price lists it counted to the database (also at shutdown); payments are counted at once";
        usage_retention_days: u64 = "400" [1 ..= 36500], "how long hourly usage counters are kept";
    }
    /// Outbound HTTP from plugins and webhooks.
    outbound: OutboundSettings {
        outbound_allowed_hosts: Vec<String> = "*", "hosts plugins may reach at all (commands must also grant them)";
        outbound_allow_private: Vec<String> = "",
            "hosts plugins may reach though they resolve to private or loopback addresses, e.g. 127.0.0.1:9000 (webhooks: webhook_allow_private)";
        outbound_allowed_ports: Vec<u16> = "80,443",
            "ports plugins may reach on public hosts; another port needs its host:port in outbound_allowed_hosts or outbound_allow_private";
        outbound_max_response_bytes: u64 = "5242880" [1 ..= 1073741824], "largest outbound HTTP response body";
        outbound_timeout_ms: u64 = "10000" [1 ..= 600000], "longest outbound HTTP request";
        outbound_ca_file: Option<PathBuf> = "",
            "a PEM file of CA certificates that outbound HTTPS (plugins, webhooks, OAuth client documents) trusts besides the system's, e.g. a private CA";
    }
    /// The chat model: a remote OpenAI-compatible provider or the embedded one.
    llm: LlmSettings {
        llm_base_url: Option<String> = "", "OpenAI-compatible API base, e.g. https://api.openai.com/v1";
        llm_model: Option<String> = "", "model name for the LLM provider";
        llm_api_key: Option<Secret> = "", "API key for the LLM provider (prefer the environment)";
        llm_timeout_ms: u64 = "60000" [1 ..= 3600000], "longest LLM request";
        chat_max_tokens: u32 = "1024" [1 ..= 1000000],
            "most tokens one chat round may ask the model for, whatever the caller asks (max_tokens), on every chat surface";
        account_chat_tokens_per_minute: u32 = "100000" [1 ..= 4000000000],
            "model tokens one account's chats may use per minute, every surface together (each round counted at its worst case before it runs)";
        account_chat_tokens_per_day: u32 = "2000000" [1 ..= 4000000000], "model tokens one account's chats may use per UTC day";
        embedded_model_path: Option<PathBuf> = "",
            "GGUF chat model run in-process when no remote LLM is configured (unset: DATA_DIR/models/smollm2-135m-instruct.gguf)";
        embedded_max_tokens: u32 = "200" [1 ..= 4096], "longest reply of the embedded model, in tokens";
        account_embeddings_per_minute: u32 = "2000" [1 ..= 4000000000],
            "knowledge entries one account's applies may have embedded per minute (entries kept already are free); past it the agent's chats rank by words";
        account_embeddings_per_day: u32 = "20000" [1 ..= 4000000000], "knowledge entries one account's applies may have embedded per UTC day";
        embedding_model_path: Option<PathBuf> = "",
            "directory of the sentence-embedding model (BERT: config.json, model.safetensors, tokenizer.json) that finds knowledge by meaning (unset: DATA_DIR/models/all-MiniLM-L6-v2; missing: knowledge is ranked by words alone)";
    }
    /// The chat-app bots (Telegram Bot API).
    chatapp: ChatappSettings {
        chatapp_api_base: String = "https://api.telegram.org", "Telegram Bot API base URL";
        chatapp_chat_limit_per_minute: u32 = "20" [1 ..= 1000000],
            "messages one chat may send an agent's bot per minute (the owner's plan limits count them too); past it the chat is told to slow down";
        chatapp_chat_limit_per_day: u32 = "500" [1 ..= 100000000], "messages one chat may send an agent's bot per UTC day";
    }
    /// The social accounts (X API).
    social: SocialSettings {
        social_api_base: String = "https://api.x.com", "X API base URL";
        social_client_id: Option<String> = "", "the server's X app OAuth 2.0 client id; posting needs it";
        social_client_secret: Option<Secret> = "", "the X app's client secret (confidential clients)";
        social_timeout_ms: u64 = "30000" [1 ..= 600000],
            "longest request to the X API (media uploads are slower than other calls)";
        social_media_max_bytes: u64 = "67108864" [1 ..= 1073741824], "largest media file fetched for a post";
    }
    /// The chains: which networks, their nodes, tokens and explorers.
    chains: ChainSettings {
        chain_rpc_timeout_ms: u64 = "15000" [1 ..= 600000], "longest JSON-RPC request to a chain node";
        solana_network: SolanaNetworkName = "mainnet",
            "the Solana network: mainnet, devnet or testnet set every value below (the RPC and explorers may still be set); custom: each is set alone";
        solana_rpc_url: Option<String> = "", "Solana JSON-RPC endpoint (unset: the network's public one)";
        solana_usdc_mint: Option<String> = "", "USDC mint on Solana (unset: the network's; custom: mainnet's)";
        solana_commitment: String = "confirmed", "when a Solana transfer counts as done: processed, confirmed or finalized";
        solana_cluster: Option<String> = "", "the cluster named in Solana explorer links ({cluster}; unset: the network's)";
        solana_network_id: Option<String> = "",
            "custom only: the Solana chain's CAIP-2 id in x402 v2 (unset: solana: and the first 32 characters of its genesis hash, asked of the RPC); set it for a fork standing in for another chain";
        solana_explorer_address_url: Option<String> = "", "Solana explorer link to a wallet (unset: explorer.solana.com)";
        solana_explorer_tx_url: Option<String> = "", "Solana explorer link to a transaction (unset: explorer.solana.com)";
        base_network: BaseNetworkName = "mainnet",
            "the Base network: mainnet or sepolia set every value below (the RPC and explorers may still be set); custom: each is set alone";
        base_rpc_url: Option<String> = "", "Base JSON-RPC endpoint (unset: the network's public one)";
        base_chain_id: Option<u64> = "" [1 ..= 18446744073709551615], "Base chain id, signed into every transaction (unset: the network's; custom: 8453)";
        base_usdc_address: Option<String> = "", "USDC contract on Base (unset: the network's; custom: mainnet's)";
        base_usdc_eip712_name: Option<String> = "", "the USDC contract's EIP-712 domain name (unset: the network's; custom: USD Coin)";
        base_usdc_eip712_version: Option<String> = "", "the USDC contract's EIP-712 domain version (unset: the network's; custom: 2)";
        base_confirmations: u64 = "1" [1 ..= 1000], "blocks (counting its own) before a Base transfer counts as done";
        base_max_gas: u64 = "300000" [21000 ..= 30000000],
            "most gas one Base settlement or refund of an agent's may use (its gas limit); a larger estimate is refused before anything is sent";
        base_max_fee_per_gas_wei: u64 = "20000000000" [1 ..= 18446744073709551615],
            "most an agent's Base transaction pays per gas; while the base fee and tip are over it, nothing is sent";
        base_max_priority_fee_wei: u64 = "2000000000" [0 ..= 18446744073709551615],
            "most tip per gas an agent's Base transaction offers (a node's suggestion above it is cut)";
        base_max_fee_wei: u64 = "1000000000000000" [1 ..= 18446744073709551615],
            "most one Base settlement or refund may cost an agent in fees, at its gas limit, the L1 data fee included";
        base_explorer_address_url: Option<String> = "", "Base explorer link to a wallet (unset: the network's Basescan)";
        base_explorer_tx_url: Option<String> = "", "Base explorer link to a transaction (unset: the network's Basescan)";
    }
    /// x402 payments: limits, settlement, fees and the paid-command breaker.
    x402: X402Settings {
        x402_client_limit_per_minute: u32 = "60" [1 ..= 1000000],
            "x402 requests one client address may make per minute (paid or not)";
        x402_client_limit_per_day: u32 = "5000" [1 ..= 100000000], "x402 requests one client address may make per UTC day";
        x402_payer_limit_per_minute: u32 = "20" [1 ..= 1000000],
            "signed payments one payer may present per minute, counted before any chain call";
        x402_payer_limit_per_day: u32 = "2000" [1 ..= 100000000], "signed payments one payer may present per UTC day";
        x402_payer_cooloff_secs: u64 = "600" [0 ..= 604800],
            "how long a payer whose settlement failed on chain (the agent paid its fee) is refused";
        x402_refund_cooloff_secs: u64 = "30" [0 ..= 86400],
            "how long a payer whose paid call was refunded (the agent paid the refund's fee) is refused";
        x402_failed_settlement_weight: u32 = "10" [1 ..= 10000],
            "payments (against the payer's limits) and requests (against the client address's) one settlement that failed on chain counts as: the agent paid its fee";
        x402_refund_max_attempts: u32 = "4" [1 ..= 100],
            "transfers of one refund that may go out and fail (each costs a fee) before it is handed to the operator";
        x402_refund_max_fee_lamports: u64 = "40000" [5000 ..= 100000000000],
            "most the failed transfers of one Solana refund may cost in fees before it is handed to the operator";
        x402_refund_max_fee_wei: u64 = "2000000000000000" [1 ..= 9000000000000000000],
            "most the failed transfers of one Base refund may cost in fees before it is handed to the operator";
        x402_settle_timeout_secs: u64 = "60" [1 ..= 3600],
            "how long a paid request waits for its settlement to confirm; recovery finishes it after";
        x402_base_deploy_min_micro_usdc: u64 = "50000" [0 ..= 18446744073709551615],
            "least price (micro-USDC) of a Base request paid by a smart wallet not deployed yet (ERC-6492), which the agent's wallet deploys as it settles";
        x402_base_wallet_factories: Vec<String> = "0x0BA5ED0c6AA8c49038F819E587E2633c4A9F428a,0xBA5ED110eFDBa3D005bfC882d75358ACBbB85842",
            "factories (ERC-6492) through which the agent's wallet deploys a payer's smart wallet as it settles (Coinbase Smart Wallet's by default); * for any";
        x402_solana_max_fee_lamports: u64 = "20000" [5000 ..= 100000000],
            "most a Solana payment may make the agent's wallet pay as fee payer (signatures and priority fee)";
        x402_breaker_failures: u32 = "5" [1 ..= 100000],
            "failed paid calls of one command (each refunded) within x402_breaker_window_secs that pause its paid calls";
        x402_breaker_window_secs: u64 = "600" [1 ..= 604800], "the window in which a paid command's failures are counted";
        x402_breaker_cooldown_secs: u64 = "60" [1 ..= 86400],
            "how long a paused paid command refuses payments before one trial call may test it";
        x402_answer_retention_hours: u64 = "24" [1 ..= 8760],
            "how long a paid answer is kept for the payer's retry (same payment, or same payment-identifier id)";
        x402_kept_answer_max_bytes: usize = "2097152" [1024 ..= 1073741824],
            "largest paid answer kept for a retry; a larger one is answered once only";
        x402_base_facilitator_url: Option<String> = "",
            "an x402 facilitator (its /verify and /settle) that settles Base payments instead of the agent's wallet; unset: the agent's wallet settles them";
        x402_base_facilitator_auth: Option<Secret> = "",
            "the Authorization header sent to that facilitator, e.g. Bearer <token> (prefer the environment)";
        x402_solana_facilitator_url: Option<String> = "",
            "an x402 facilitator that settles Solana payments (its fee payer signs them and pays the fee) instead of the agent's wallet; unset: the agent's wallet settles them";
        x402_solana_facilitator_auth: Option<Secret> = "",
            "the Authorization header sent to the Solana facilitator (prefer the environment)";
    }
    /// The agents' MCP endpoints.
    mcp: McpSettings {
        mcp_tools_per_page: usize = "50" [1 ..= 1000], "tools one tools/list answer holds; more are paged with a cursor";
        mcp_allowed_hosts: Vec<String> = "",
            "host names MCP clients may reach this server by (a DNS-rebinding guard); the public base URL's host and loopback always may; * for any";
        mcp_oauth: bool = "false",
            "whether the MCP endpoints take OAuth sign-ins: their metadata is published and the authorization server answers (docs/mcp.md); keys work either way";
        mcp_oauth_access_token_minutes: u64 = "60" [5 ..= 1440], "how long an OAuth access token works";
        mcp_oauth_refresh_token_days: u64 = "30" [1 ..= 365],
            "how long an OAuth refresh token works unused (each use gives a new one)";
        mcp_oauth_allow_private: Vec<String> = "",
            "hosts (host or host:port) OAuth client metadata documents may be at though private or loopback";
        mcp_remote_max_response_bytes: u64 = "1048576" [1024 ..= 67108864],
            "largest answer read from a remote MCP server an agent uses as tools; a larger one is cut and the call fails";
    }
    /// The agents' A2A endpoints.
    a2a: A2aServerSettings {
        a2a_card_signing_key_file: Option<PathBuf> = "",
            "a file holding the operator's Ed25519 key (32 bytes, hex or base64) that signs every agent's A2A card; unset: cards are not signed";
    }
}

impl Settings {
    pub fn database_path(&self) -> PathBuf {
        self.data_dir.join("agent-host.db")
    }

    /// The embedded model's file: the setting, else its place in the data dir.
    pub fn embedded_model_file(&self) -> PathBuf {
        self.llm
            .embedded_model_path
            .clone()
            .unwrap_or_else(|| self.data_dir.join("models/smollm2-135m-instruct.gguf"))
    }

    /// The embedding model's directory: the setting, else its place in the data dir.
    pub fn embedding_model_dir(&self) -> PathBuf {
        self.llm
            .embedding_model_path
            .clone()
            .unwrap_or_else(|| self.data_dir.join("models/all-MiniLM-L6-v2"))
    }
}

impl X402Settings {
    pub fn client_limits(&self) -> RateLimits {
        RateLimits {
            per_minute: self.x402_client_limit_per_minute,
            per_day: self.x402_client_limit_per_day,
        }
    }

    pub fn payer_limits(&self) -> RateLimits {
        RateLimits {
            per_minute: self.x402_payer_limit_per_minute,
            per_day: self.x402_payer_limit_per_day,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sources(text: &str) -> Sources {
        Sources {
            file_path: PathBuf::from("agent-host.toml"),
            file: toml::from_str(text).unwrap(),
        }
    }

    #[test]
    fn defaults_parse_and_every_setting_is_documented_once() {
        let settings = Settings::read(PathBuf::from("d"), &sources("")).unwrap();
        assert_eq!(settings.server.max_body_bytes, 1 << 20);
        assert_eq!(settings.server.listen, ["127.0.0.1:8080"]);
        assert_eq!(settings.outbound.outbound_allow_private, Vec::<String>::new());
        assert!(settings.llm.llm_api_key.is_none());
        let docs = reference();
        let mut envs: Vec<&str> = docs.iter().map(|d| d.env.as_str()).collect();
        envs.sort();
        envs.dedup();
        assert_eq!(envs.len(), docs.len());
        assert!(docs.iter().any(|d| d.env == "AGENT_HOST_X402_SOLANA_MAX_FEE_LAMPORTS"));
    }

    #[test]
    fn the_file_is_read_and_checked() {
        let settings = Settings::read(
            PathBuf::from("d"),
            &sources("max_body_bytes = 1000\nlisten = [\"a:1\", \"b:2\"]\nllm_model = \"m\""),
        )
        .unwrap();
        assert_eq!(settings.server.max_body_bytes, 1000);
        assert_eq!(settings.server.listen, ["a:1", "b:2"]);
        assert_eq!(settings.llm.llm_model.as_deref(), Some("m"));

        let message = |text: &str| {
            Settings::read(PathBuf::from("d"), &sources(text))
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            message("max_body_bytez = 5"),
            "agent-host.toml: max_body_bytez: unknown setting"
        );
        assert!(message("max_body_bytes = \"lots\"").contains("max_body_bytes: 'lots' is not a whole number"));
        assert_eq!(
            message("plugin_memory_mib = 0"),
            "agent-host.toml: plugin_memory_mib: 0 is outside 1..=4096"
        );
        assert!(message("plugin_max_concurrency = -3").contains("plugin_max_concurrency"));
    }
}
