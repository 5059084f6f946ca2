//! Settings: defaults, then `agent-host.toml` in the data dir, then `AGENT_HOST_*`
//! environment variables (env wins), then command-line flags. The README lists each one.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::Deserialize;

use crate::domain::RateLimits;

pub const SETTINGS_FILE: &str = "agent-host.toml";
pub const ENV_PREFIX: &str = "AGENT_HOST_";

/// Every setting: (name in agent-host.toml, environment variable, default, meaning).
/// The README's reference is checked against this list by a test.
pub const REFERENCE: &[(&str, &str, &str, &str)] = &[
    (
        "",
        "AGENT_HOST_DATA_DIR",
        "./data",
        "the data directory (also --data-dir)",
    ),
    (
        "",
        "AGENT_HOST_MASTER_KEY",
        "generated into DATA_DIR/master.key",
        "32-byte master key, hex or base64; encrypts secrets at rest",
    ),
    (
        "listen",
        "AGENT_HOST_LISTEN",
        "127.0.0.1:8080",
        "addresses to serve on; comma-separated in env (also --listen, repeatable)",
    ),
    (
        "max_body_bytes",
        "AGENT_HOST_MAX_BODY_BYTES",
        "1048576",
        "largest request body accepted; more answers 413",
    ),
    (
        "db_busy_timeout_ms",
        "AGENT_HOST_DB_BUSY_TIMEOUT_MS",
        "5000",
        "how long a database write waits for another process's lock",
    ),
    (
        "rate_limit_flush_secs",
        "AGENT_HOST_RATE_LIMIT_FLUSH_SECS",
        "10",
        "how often rate-limit counters are saved (also saved at shutdown)",
    ),
    (
        "shutdown_grace_secs",
        "AGENT_HOST_SHUTDOWN_GRACE_SECS",
        "30",
        "how long shutdown waits for requests in flight",
    ),
    (
        "public_base_url",
        "AGENT_HOST_PUBLIC_BASE_URL",
        "http://<first listen address>",
        "absolute base URL of this server, used in status addresses",
    ),
    (
        "plugin_timeout_ms",
        "AGENT_HOST_PLUGIN_TIMEOUT_MS",
        "5000",
        "default deadline of one command run (a command's timeout_ms overrides)",
    ),
    (
        "plugin_memory_mib",
        "AGENT_HOST_PLUGIN_MEMORY_MIB",
        "128",
        "linear memory cap of one plugin instance",
    ),
    (
        "plugin_max_output_bytes",
        "AGENT_HOST_PLUGIN_MAX_OUTPUT_BYTES",
        "1048576",
        "largest command output accepted",
    ),
    (
        "plugin_max_concurrency",
        "AGENT_HOST_PLUGIN_MAX_CONCURRENCY",
        "64",
        "command runs at once; more wait",
    ),
    (
        "job_timeout_ms",
        "AGENT_HOST_JOB_TIMEOUT_MS",
        "300000",
        "default deadline of a long-running command",
    ),
    (
        "job_retention_hours",
        "AGENT_HOST_JOB_RETENTION_HOURS",
        "24",
        "how long a job's status stays readable",
    ),
    (
        "outbound_allowed_hosts",
        "AGENT_HOST_OUTBOUND_ALLOWED_HOSTS",
        "*",
        "hosts plugins may reach at all (commands must also grant them)",
    ),
    (
        "outbound_allow_private",
        "AGENT_HOST_OUTBOUND_ALLOW_PRIVATE",
        "(none)",
        "hosts allowed to resolve to private or loopback addresses, e.g. 127.0.0.1:9000",
    ),
    (
        "outbound_max_response_bytes",
        "AGENT_HOST_OUTBOUND_MAX_RESPONSE_BYTES",
        "5242880",
        "largest outbound HTTP response body",
    ),
    (
        "outbound_timeout_ms",
        "AGENT_HOST_OUTBOUND_TIMEOUT_MS",
        "10000",
        "longest outbound HTTP request",
    ),
    (
        "llm_base_url",
        "AGENT_HOST_LLM_BASE_URL",
        "(none)",
        "OpenAI-compatible API base, e.g. https://api.openai.com/v1",
    ),
    (
        "llm_model",
        "AGENT_HOST_LLM_MODEL",
        "(none)",
        "model name for the LLM provider",
    ),
    (
        "llm_api_key",
        "AGENT_HOST_LLM_API_KEY",
        "(none)",
        "API key for the LLM provider (prefer the environment)",
    ),
    (
        "llm_timeout_ms",
        "AGENT_HOST_LLM_TIMEOUT_MS",
        "60000",
        "longest LLM request",
    ),
    (
        "embedded_model_path",
        "AGENT_HOST_EMBEDDED_MODEL_PATH",
        "DATA_DIR/models/smollm2-135m-instruct.gguf",
        "GGUF chat model run in-process when no remote LLM is configured",
    ),
    (
        "embedded_max_tokens",
        "AGENT_HOST_EMBEDDED_MAX_TOKENS",
        "200",
        "longest reply of the embedded model, in tokens",
    ),
    (
        "chatapp_api_base",
        "AGENT_HOST_CHATAPP_API_BASE",
        "https://api.telegram.org",
        "Telegram Bot API base URL",
    ),
    (
        "social_api_base",
        "AGENT_HOST_SOCIAL_API_BASE",
        "https://api.x.com",
        "X API base URL",
    ),
    (
        "social_client_id",
        "AGENT_HOST_SOCIAL_CLIENT_ID",
        "(none)",
        "the server's X app OAuth 2.0 client id; posting needs it",
    ),
    (
        "social_client_secret",
        "AGENT_HOST_SOCIAL_CLIENT_SECRET",
        "(none)",
        "the X app's client secret (confidential clients)",
    ),
    (
        "social_media_max_bytes",
        "AGENT_HOST_SOCIAL_MEDIA_MAX_BYTES",
        "67108864",
        "largest media file fetched for a post",
    ),
    (
        "chain_rpc_timeout_ms",
        "AGENT_HOST_CHAIN_RPC_TIMEOUT_MS",
        "15000",
        "longest JSON-RPC request to a chain node",
    ),
    (
        "solana_rpc_url",
        "AGENT_HOST_SOLANA_RPC_URL",
        "https://api.mainnet-beta.solana.com",
        "Solana JSON-RPC endpoint",
    ),
    (
        "solana_usdc_mint",
        "AGENT_HOST_SOLANA_USDC_MINT",
        "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v",
        "USDC mint on Solana (mainnet's)",
    ),
    (
        "solana_commitment",
        "AGENT_HOST_SOLANA_COMMITMENT",
        "confirmed",
        "when a Solana transfer counts as done: processed, confirmed or finalized",
    ),
    (
        "solana_cluster",
        "AGENT_HOST_SOLANA_CLUSTER",
        "mainnet-beta",
        "the cluster named in Solana explorer links ({cluster})",
    ),
    (
        "solana_explorer_address_url",
        "AGENT_HOST_SOLANA_EXPLORER_ADDRESS_URL",
        "https://explorer.solana.com/address/{address}?cluster={cluster}",
        "Solana explorer link to a wallet",
    ),
    (
        "solana_explorer_tx_url",
        "AGENT_HOST_SOLANA_EXPLORER_TX_URL",
        "https://explorer.solana.com/tx/{signature}?cluster={cluster}",
        "Solana explorer link to a transaction",
    ),
    (
        "base_rpc_url",
        "AGENT_HOST_BASE_RPC_URL",
        "https://mainnet.base.org",
        "Base JSON-RPC endpoint",
    ),
    (
        "base_chain_id",
        "AGENT_HOST_BASE_CHAIN_ID",
        "8453",
        "Base chain id (signed into every transaction)",
    ),
    (
        "base_usdc_address",
        "AGENT_HOST_BASE_USDC_ADDRESS",
        "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
        "USDC contract on Base (mainnet's)",
    ),
    (
        "base_usdc_eip712_name",
        "AGENT_HOST_BASE_USDC_EIP712_NAME",
        "USD Coin",
        "the USDC contract's EIP-712 domain name (Base Sepolia's is USDC)",
    ),
    (
        "base_usdc_eip712_version",
        "AGENT_HOST_BASE_USDC_EIP712_VERSION",
        "2",
        "the USDC contract's EIP-712 domain version",
    ),
    (
        "base_confirmations",
        "AGENT_HOST_BASE_CONFIRMATIONS",
        "1",
        "blocks (counting its own) before a Base transfer counts as done",
    ),
    (
        "base_explorer_address_url",
        "AGENT_HOST_BASE_EXPLORER_ADDRESS_URL",
        "https://basescan.org/address/{address}",
        "Base explorer link to a wallet",
    ),
    (
        "base_explorer_tx_url",
        "AGENT_HOST_BASE_EXPLORER_TX_URL",
        "https://basescan.org/tx/{signature}",
        "Base explorer link to a transaction",
    ),
    (
        "x402_client_limit_per_minute",
        "AGENT_HOST_X402_CLIENT_LIMIT_PER_MINUTE",
        "60",
        "x402 requests one client address may make per minute (paid or not)",
    ),
    (
        "x402_client_limit_per_day",
        "AGENT_HOST_X402_CLIENT_LIMIT_PER_DAY",
        "5000",
        "x402 requests one client address may make per UTC day",
    ),
    (
        "x402_payer_limit_per_minute",
        "AGENT_HOST_X402_PAYER_LIMIT_PER_MINUTE",
        "20",
        "signed payments one payer may present per minute, counted before any chain call",
    ),
    (
        "x402_payer_limit_per_day",
        "AGENT_HOST_X402_PAYER_LIMIT_PER_DAY",
        "2000",
        "signed payments one payer may present per UTC day",
    ),
    (
        "client_ip_header",
        "AGENT_HOST_CLIENT_IP_HEADER",
        "",
        "behind a proxy only: the header it sets with the client's address (its last entry counts); unset: the connection's address",
    ),
    (
        "log",
        "AGENT_HOST_LOG",
        "info",
        "log filter (tracing EnvFilter syntax), written to stderr",
    ),
];

#[derive(Debug, Clone)]
pub struct Settings {
    pub data_dir: PathBuf,
    pub listen: Vec<String>,
    pub max_body_bytes: usize,
    pub db_busy_timeout_ms: u64,
    pub rate_limit_flush_secs: u64,
    pub shutdown_grace_secs: u64,
    pub log: String,
    pub public_base_url: Option<String>,
    pub plugin_timeout_ms: u64,
    pub plugin_memory_mib: u64,
    pub plugin_max_output_bytes: usize,
    pub plugin_max_concurrency: usize,
    pub job_timeout_ms: u64,
    pub job_retention_hours: u64,
    pub outbound_allowed_hosts: Vec<String>,
    pub outbound_allow_private: Vec<String>,
    pub outbound_max_response_bytes: u64,
    pub outbound_timeout_ms: u64,
    pub llm_base_url: Option<String>,
    pub llm_model: Option<String>,
    pub llm_api_key: Option<Secret>,
    pub llm_timeout_ms: u64,
    pub embedded_model_path: PathBuf,
    pub embedded_max_tokens: u32,
    pub chatapp_api_base: String,
    pub social_api_base: String,
    pub social_client_id: Option<String>,
    pub social_client_secret: Option<Secret>,
    pub social_media_max_bytes: u64,
    pub chain_rpc_timeout_ms: u64,
    pub solana_rpc_url: String,
    pub solana_usdc_mint: String,
    pub solana_commitment: String,
    pub solana_cluster: String,
    pub solana_explorer_address_url: String,
    pub solana_explorer_tx_url: String,
    pub base_rpc_url: String,
    pub base_chain_id: u64,
    pub base_usdc_address: String,
    pub base_usdc_eip712_name: String,
    pub base_usdc_eip712_version: String,
    pub base_confirmations: u64,
    pub base_explorer_address_url: String,
    pub base_explorer_tx_url: String,
    pub x402_client_limits: RateLimits,
    pub x402_payer_limits: RateLimits,
    pub client_ip_header: Option<String>,
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

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSettings {
    listen: Option<Vec<String>>,
    max_body_bytes: Option<usize>,
    db_busy_timeout_ms: Option<u64>,
    rate_limit_flush_secs: Option<u64>,
    shutdown_grace_secs: Option<u64>,
    log: Option<String>,
    public_base_url: Option<String>,
    plugin_timeout_ms: Option<u64>,
    plugin_memory_mib: Option<u64>,
    plugin_max_output_bytes: Option<usize>,
    plugin_max_concurrency: Option<usize>,
    job_timeout_ms: Option<u64>,
    job_retention_hours: Option<u64>,
    outbound_allowed_hosts: Option<Vec<String>>,
    outbound_allow_private: Option<Vec<String>>,
    outbound_max_response_bytes: Option<u64>,
    outbound_timeout_ms: Option<u64>,
    llm_base_url: Option<String>,
    llm_model: Option<String>,
    llm_api_key: Option<String>,
    llm_timeout_ms: Option<u64>,
    embedded_model_path: Option<PathBuf>,
    embedded_max_tokens: Option<u32>,
    chatapp_api_base: Option<String>,
    social_api_base: Option<String>,
    social_client_id: Option<String>,
    social_client_secret: Option<String>,
    social_media_max_bytes: Option<u64>,
    chain_rpc_timeout_ms: Option<u64>,
    solana_rpc_url: Option<String>,
    solana_usdc_mint: Option<String>,
    solana_commitment: Option<String>,
    solana_cluster: Option<String>,
    solana_explorer_address_url: Option<String>,
    solana_explorer_tx_url: Option<String>,
    base_rpc_url: Option<String>,
    base_chain_id: Option<u64>,
    base_usdc_address: Option<String>,
    base_usdc_eip712_name: Option<String>,
    base_usdc_eip712_version: Option<String>,
    base_confirmations: Option<u64>,
    base_explorer_address_url: Option<String>,
    base_explorer_tx_url: Option<String>,
    x402_client_limit_per_minute: Option<u32>,
    x402_client_limit_per_day: Option<u32>,
    x402_payer_limit_per_minute: Option<u32>,
    x402_payer_limit_per_day: Option<u32>,
    client_ip_header: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("{file}: {message}")]
    File { file: String, message: String },
    #[error("{name}: {message}")]
    Env { name: String, message: String },
}

impl Settings {
    /// Resolves the data dir (flag, then env, then `./data`) and loads every setting.
    pub fn load(data_dir_flag: Option<&Path>) -> Result<Settings, SettingsError> {
        let data_dir = data_dir_flag
            .map(Path::to_path_buf)
            .or_else(|| std::env::var_os("AGENT_HOST_DATA_DIR").map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from("./data"));
        let file_path = data_dir.join(SETTINGS_FILE);
        let file: FileSettings = match std::fs::read_to_string(&file_path) {
            Ok(text) => toml::from_str(&text).map_err(|e| SettingsError::File {
                file: file_path.display().to_string(),
                message: e.message().trim().replace('\n', " "),
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => FileSettings::default(),
            Err(e) => {
                return Err(SettingsError::File {
                    file: file_path.display().to_string(),
                    message: e.to_string(),
                });
            }
        };
        warn_unknown_env();
        let listen = match std::env::var("AGENT_HOST_LISTEN") {
            Ok(text) => text
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect(),
            Err(_) => file.listen.unwrap_or_else(|| vec!["127.0.0.1:8080".to_string()]),
        };
        Ok(Settings {
            data_dir: data_dir.clone(),
            listen,
            max_body_bytes: env_parse("AGENT_HOST_MAX_BODY_BYTES")?
                .or(file.max_body_bytes)
                .unwrap_or(1024 * 1024),
            db_busy_timeout_ms: env_parse("AGENT_HOST_DB_BUSY_TIMEOUT_MS")?
                .or(file.db_busy_timeout_ms)
                .unwrap_or(5_000),
            rate_limit_flush_secs: env_parse("AGENT_HOST_RATE_LIMIT_FLUSH_SECS")?
                .or(file.rate_limit_flush_secs)
                .unwrap_or(10)
                .max(1),
            shutdown_grace_secs: env_parse("AGENT_HOST_SHUTDOWN_GRACE_SECS")?
                .or(file.shutdown_grace_secs)
                .unwrap_or(30),
            log: env_string("AGENT_HOST_LOG")
                .or(file.log)
                .unwrap_or_else(|| "info".to_string()),
            public_base_url: env_string("AGENT_HOST_PUBLIC_BASE_URL")
                .or(file.public_base_url)
                .map(|u| u.trim_end_matches('/').to_string()),
            plugin_timeout_ms: env_parse("AGENT_HOST_PLUGIN_TIMEOUT_MS")?
                .or(file.plugin_timeout_ms)
                .unwrap_or(5_000)
                .max(1),
            plugin_memory_mib: env_parse("AGENT_HOST_PLUGIN_MEMORY_MIB")?
                .or(file.plugin_memory_mib)
                .unwrap_or(128)
                .clamp(1, 4096),
            plugin_max_output_bytes: env_parse("AGENT_HOST_PLUGIN_MAX_OUTPUT_BYTES")?
                .or(file.plugin_max_output_bytes)
                .unwrap_or(1024 * 1024),
            plugin_max_concurrency: env_parse("AGENT_HOST_PLUGIN_MAX_CONCURRENCY")?
                .or(file.plugin_max_concurrency)
                .unwrap_or(64)
                .clamp(1, 1000),
            job_timeout_ms: env_parse("AGENT_HOST_JOB_TIMEOUT_MS")?
                .or(file.job_timeout_ms)
                .unwrap_or(300_000)
                .max(1),
            job_retention_hours: env_parse("AGENT_HOST_JOB_RETENTION_HOURS")?
                .or(file.job_retention_hours)
                .unwrap_or(24),
            outbound_allowed_hosts: env_list("AGENT_HOST_OUTBOUND_ALLOWED_HOSTS")
                .or(file.outbound_allowed_hosts)
                .unwrap_or_else(|| vec!["*".to_string()]),
            outbound_allow_private: env_list("AGENT_HOST_OUTBOUND_ALLOW_PRIVATE")
                .or(file.outbound_allow_private)
                .unwrap_or_default(),
            outbound_max_response_bytes: env_parse("AGENT_HOST_OUTBOUND_MAX_RESPONSE_BYTES")?
                .or(file.outbound_max_response_bytes)
                .unwrap_or(5 * 1024 * 1024),
            outbound_timeout_ms: env_parse("AGENT_HOST_OUTBOUND_TIMEOUT_MS")?
                .or(file.outbound_timeout_ms)
                .unwrap_or(10_000),
            llm_base_url: env_string("AGENT_HOST_LLM_BASE_URL").or(file.llm_base_url),
            llm_model: env_string("AGENT_HOST_LLM_MODEL").or(file.llm_model),
            llm_api_key: env_string("AGENT_HOST_LLM_API_KEY").or(file.llm_api_key).map(Secret),
            llm_timeout_ms: env_parse("AGENT_HOST_LLM_TIMEOUT_MS")?
                .or(file.llm_timeout_ms)
                .unwrap_or(60_000)
                .max(1),
            embedded_model_path: env_string("AGENT_HOST_EMBEDDED_MODEL_PATH")
                .map(PathBuf::from)
                .or(file.embedded_model_path)
                .unwrap_or_else(|| data_dir.join("models/smollm2-135m-instruct.gguf")),
            embedded_max_tokens: env_parse("AGENT_HOST_EMBEDDED_MAX_TOKENS")?
                .or(file.embedded_max_tokens)
                .unwrap_or(200)
                .clamp(1, 4096),
            chatapp_api_base: env_string("AGENT_HOST_CHATAPP_API_BASE")
                .or(file.chatapp_api_base)
                .unwrap_or_else(|| "https://api.telegram.org".to_string()),
            social_api_base: env_string("AGENT_HOST_SOCIAL_API_BASE")
                .or(file.social_api_base)
                .unwrap_or_else(|| "https://api.x.com".to_string()),
            social_client_id: env_string("AGENT_HOST_SOCIAL_CLIENT_ID").or(file.social_client_id),
            social_client_secret: env_string("AGENT_HOST_SOCIAL_CLIENT_SECRET")
                .or(file.social_client_secret)
                .map(Secret),
            social_media_max_bytes: env_parse("AGENT_HOST_SOCIAL_MEDIA_MAX_BYTES")?
                .or(file.social_media_max_bytes)
                .unwrap_or(64 * 1024 * 1024),
            chain_rpc_timeout_ms: env_parse("AGENT_HOST_CHAIN_RPC_TIMEOUT_MS")?
                .or(file.chain_rpc_timeout_ms)
                .unwrap_or(15_000),
            solana_rpc_url: env_string("AGENT_HOST_SOLANA_RPC_URL")
                .or(file.solana_rpc_url)
                .unwrap_or_else(|| "https://api.mainnet-beta.solana.com".to_string()),
            solana_usdc_mint: env_string("AGENT_HOST_SOLANA_USDC_MINT")
                .or(file.solana_usdc_mint)
                .unwrap_or_else(|| "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v".to_string()),
            solana_commitment: env_string("AGENT_HOST_SOLANA_COMMITMENT")
                .or(file.solana_commitment)
                .unwrap_or_else(|| "confirmed".to_string()),
            solana_cluster: env_string("AGENT_HOST_SOLANA_CLUSTER")
                .or(file.solana_cluster)
                .unwrap_or_else(|| "mainnet-beta".to_string()),
            solana_explorer_address_url: env_string("AGENT_HOST_SOLANA_EXPLORER_ADDRESS_URL")
                .or(file.solana_explorer_address_url)
                .unwrap_or_else(|| "https://explorer.solana.com/address/{address}?cluster={cluster}".to_string()),
            solana_explorer_tx_url: env_string("AGENT_HOST_SOLANA_EXPLORER_TX_URL")
                .or(file.solana_explorer_tx_url)
                .unwrap_or_else(|| "https://explorer.solana.com/tx/{signature}?cluster={cluster}".to_string()),
            base_rpc_url: env_string("AGENT_HOST_BASE_RPC_URL")
                .or(file.base_rpc_url)
                .unwrap_or_else(|| "https://mainnet.base.org".to_string()),
            base_chain_id: env_parse("AGENT_HOST_BASE_CHAIN_ID")?
                .or(file.base_chain_id)
                .unwrap_or(8453),
            base_usdc_address: env_string("AGENT_HOST_BASE_USDC_ADDRESS")
                .or(file.base_usdc_address)
                .unwrap_or_else(|| "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913".to_string()),
            base_usdc_eip712_name: env_string("AGENT_HOST_BASE_USDC_EIP712_NAME")
                .or(file.base_usdc_eip712_name)
                .unwrap_or_else(|| "USD Coin".to_string()),
            base_usdc_eip712_version: env_string("AGENT_HOST_BASE_USDC_EIP712_VERSION")
                .or(file.base_usdc_eip712_version)
                .unwrap_or_else(|| "2".to_string()),
            base_confirmations: env_parse("AGENT_HOST_BASE_CONFIRMATIONS")?
                .or(file.base_confirmations)
                .unwrap_or(1),
            base_explorer_address_url: env_string("AGENT_HOST_BASE_EXPLORER_ADDRESS_URL")
                .or(file.base_explorer_address_url)
                .unwrap_or_else(|| "https://basescan.org/address/{address}".to_string()),
            base_explorer_tx_url: env_string("AGENT_HOST_BASE_EXPLORER_TX_URL")
                .or(file.base_explorer_tx_url)
                .unwrap_or_else(|| "https://basescan.org/tx/{signature}".to_string()),
            x402_client_limits: RateLimits {
                per_minute: env_parse("AGENT_HOST_X402_CLIENT_LIMIT_PER_MINUTE")?
                    .or(file.x402_client_limit_per_minute)
                    .unwrap_or(60)
                    .max(1),
                per_day: env_parse("AGENT_HOST_X402_CLIENT_LIMIT_PER_DAY")?
                    .or(file.x402_client_limit_per_day)
                    .unwrap_or(5_000)
                    .max(1),
            },
            x402_payer_limits: RateLimits {
                per_minute: env_parse("AGENT_HOST_X402_PAYER_LIMIT_PER_MINUTE")?
                    .or(file.x402_payer_limit_per_minute)
                    .unwrap_or(20)
                    .max(1),
                per_day: env_parse("AGENT_HOST_X402_PAYER_LIMIT_PER_DAY")?
                    .or(file.x402_payer_limit_per_day)
                    .unwrap_or(2_000)
                    .max(1),
            },
            client_ip_header: env_string("AGENT_HOST_CLIENT_IP_HEADER")
                .or(file.client_ip_header)
                .filter(|h| !h.trim().is_empty())
                .map(|h| h.trim().to_ascii_lowercase()),
        })
    }

    pub fn database_path(&self) -> PathBuf {
        self.data_dir.join("agent-host.db")
    }
}

/// A comma-separated list.
fn env_list(name: &str) -> Option<Vec<String>> {
    env_string(name).map(|text| {
        text.split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    })
}

fn env_string(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn env_parse<T: FromStr>(name: &str) -> Result<Option<T>, SettingsError>
where
    T::Err: std::fmt::Display,
{
    match env_string(name) {
        None => Ok(None),
        Some(text) => text.parse().map(Some).map_err(|e| SettingsError::Env {
            name: name.to_string(),
            message: format!("'{text}': {e}"),
        }),
    }
}

/// A misspelt variable would otherwise be silently ignored.
fn warn_unknown_env() {
    for (name, _) in std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v))) {
        if name.starts_with(ENV_PREFIX) && !REFERENCE.iter().any(|(_, env, _, _)| *env == name) {
            eprintln!("warning: unknown setting {name} is ignored");
        }
    }
}
