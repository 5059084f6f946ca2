//! The rules of the service. Routes and the CLI call these; these call the store (and,
//! later, the plugin runtime, chains, LLM providers and third-party clients).

pub mod a2a;
pub mod accounts;
pub mod agents;
pub mod chat;
pub mod chat_budget;
pub mod chat_tokens;
pub mod chatapp;
pub mod commands;
pub mod integrations;
pub mod jobs;
pub mod keys;
pub mod knowledge;
pub mod lifecycle;
pub mod local_run;
pub mod locks;
pub mod master_key;
pub mod mcp;
pub mod oauth;
pub mod params;
pub mod payments;
pub mod plugin_cases;
pub mod plugins;
pub mod purchase;
pub mod rate_limit;
pub mod recovery;
pub mod remote_oauth;
pub mod remote_tools;
pub mod runs;
pub mod schedules;
pub mod sign_in;
pub mod social;
pub mod social_text;
pub mod spending;
pub mod usage;
pub mod usage_report;
pub mod vitals;
pub mod wallet_alerts;
pub mod wallets;
pub mod webhooks;

use std::sync::Arc;

use crate::chains::Chains;
use crate::clients::telegram::Telegram;
use crate::clients::x::X;
use crate::config::Settings;
use crate::llm::{LlmError, LlmProvider};
use crate::marker::MarkerKey;
use crate::outbound::Outbound;
use crate::plugins::PluginRuntime;
use crate::secrets::MasterKey;
use crate::store::{Store, StoreError};

/// The edges and settings every service reaches. Cheap to clone.
#[derive(Clone)]
pub struct Services {
    pub store: Store,
    pub plugins: Arc<PluginRuntime>,
    pub llm: Arc<dyn LlmProvider>,
    /// Finds knowledge by meaning; without it, by words alone.
    pub embedder: Option<Arc<dyn crate::llm::Embedder>>,
    /// Verifies the recursion-guard marker on chat requests.
    pub marker: MarkerKey,
    /// Issues and recognises the nonces of sign-in challenges (x402's sign-in-with-x).
    pub sign_in_nonces: crate::x402::sign_in::NonceKey,
    /// Seals and opens secrets at rest.
    pub secrets: Arc<MasterKey>,
    /// The operator's key that signs the agents' A2A cards, when one is configured.
    pub card_key: Option<Arc<crate::jws::DocumentKey>>,
    pub telegram: Telegram,
    pub x: X,
    /// The guarded client for URLs third parties give us (media to post), under the
    /// plugins' rules.
    pub outbound: Outbound,
    /// The guarded client for the accounts' webhook endpoints, with its own private exceptions.
    pub webhook_outbound: Outbound,
    /// The guarded client that fetches OAuth clients' metadata documents
    /// (`mcp_oauth_allow_private`).
    pub client_documents: Outbound,
    pub settings: Arc<Settings>,
    /// Absolute base URL for status addresses (no trailing `/`).
    pub public_base_url: String,
    pub chains: Arc<Chains>,
    /// The x402 facilitators the operator settles through instead of the agents' wallets.
    pub facilitators: crate::clients::facilitator::Facilitators,
    pub wallet_locks: Arc<wallets::WalletLocks>,
    /// One settlement per payer, one worker per payment.
    pub payment_locks: Arc<payments::PaymentLocks>,
    /// Abuse limits of the unkeyed x402 endpoints.
    pub x402_limiter: Arc<rate_limit::X402Limiter>,
    /// Each account's plan limits (keyed requests, and its bots' inbound updates).
    pub account_limiter: Arc<rate_limit::Limiter>,
    /// An account's budgets of metered work, by key (`chat_tokens:`, `uploads:`,
    /// `embeddings:` and the account's id): shared by the hosts on PostgreSQL; a single
    /// host's start afresh when it restarts (only the plan's request counts are saved).
    pub budgets: Arc<rate_limit::Limiter>,
    /// Where applied agents' knowledge waits to be embedded.
    pub embedding: Arc<knowledge::Embedding>,
    /// Failed authentications per client address, checked before any key is looked up.
    pub auth_throttle: Arc<rate_limit::AuthThrottle>,
    /// What the agents' bots receive: updates seen lately, and each chat's limits.
    pub chatapp_inbound: Arc<chatapp::Inbound>,
    /// Whether the host is stopping, and the background work it lets finish first.
    pub lifecycle: Arc<lifecycle::Lifecycle>,
    /// Runs and price lists counted for the owners' dashboards, until they are flushed.
    pub usage: Arc<usage::Recorder>,
    /// The remote MCP servers' tool lists, kept a minute between chats.
    pub remote_listings: Arc<remote_tools::ListingCache>,
    /// Pays the x402 services agents' commands and remote tools ask to be paid, within their
    /// owners' limits (the plugin runtime holds the same one).
    pub payer: Arc<spending::AgentPayer>,
    /// One refresh of a remote MCP server's OAuth grant at a time, across hosts.
    pub oauth_refreshes: Arc<locks::KeyedLocks<String>>,
}

impl Services {
    /// What a write storing a secret this host sealed checks, in its transaction: that this
    /// host's master key is still the deployment's (see `store::sealed`).
    pub fn sealing_key_check(&self) -> crate::store::KeyCheck {
        let key = self.secrets.clone();
        Arc::new(move |check: &[u8]| key.open(crate::store::KEY_CHECK, check).is_ok())
    }
}

/// What a service can refuse or fail with. Services say *what* happened; only `error.rs`
/// (and the x402 route, for its own envelope) decide the status, code and words a client
/// sees. Upstream detail (a node's URL, a provider's text) stays in the log.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("{0}")]
    Validation(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Unauthorized(String),
    /// The key checked out but its scope does not reach this.
    #[error("{0}")]
    Forbidden(String),
    /// A command ran and failed, or could not run.
    #[error("{0}")]
    Execution(String),
    /// The language model failed or is not there.
    #[error(transparent)]
    Model(LlmError),
    /// Too many requests from one caller (client address, payer, account).
    #[error("rate limit of {} requests exceeded; retry in {} s", .0.limit, .0.retry_after_secs)]
    RateLimited(rate_limit::RateDecision),
    /// An account's budget of something metered (its chats' tokens) is spent for now; the
    /// message says which budget.
    #[error("{message}")]
    OverBudget {
        message: String,
        decision: rate_limit::RateDecision,
    },
    /// The caller's share of plugin runs is taken: it may retry shortly.
    #[error("{0}")]
    Busy(String),
    /// The server cannot take this now (compiles queued, a command cooling off); the caller
    /// may retry after the given seconds.
    #[error("{message}")]
    Unavailable { message: String, retry_after_secs: u64 },
    /// The account keeps as much of something as its quota allows.
    #[error("{0}")]
    QuotaExceeded(String),
    /// A sealed secret (bot token, wallet key) does not open, or opens to nothing usable.
    #[error("{0}")]
    SecretUnusable(String),
    #[error(transparent)]
    Wallet(#[from] wallets::WalletError),
    #[error(transparent)]
    Chatapp(#[from] chatapp::ChatappError),
    #[error(transparent)]
    Social(#[from] social::SocialError),
    #[error(transparent)]
    X402(#[from] payments::X402Error),
    #[error(transparent)]
    Store(StoreError),
}

impl ServiceError {
    /// What may be told of a failure where it outlives our log (a refund's memo, the
    /// reason a command is paused), in the words a client is given (error.rs): the kind of
    /// failure, never an upstream's own words. Errors that may carry them, and any kind
    /// not listed, are told as an internal error.
    pub fn public_text(&self) -> String {
        use ServiceError as E;
        match self {
            E::Validation(m) | E::NotFound(m) | E::Conflict(m) | E::Execution(m) | E::Busy(m) => m.clone(),
            E::QuotaExceeded(m) | E::Unauthorized(m) | E::Forbidden(m) => m.clone(),
            E::Unavailable { message, .. } | E::OverBudget { message, .. } => message.clone(),
            E::RateLimited(_) => self.to_string(),
            E::Model(e) => capitalized(e.public_text()),
            E::Wallet(wallets::WalletError::ChainUnavailable { network, .. }) => wallets::node_failed(*network),
            // As the keyed API tells the agent's owner (error.rs), without a transport's detail.
            E::Chatapp(chatapp::ChatappError::Unreachable(_)) => {
                "Telegram could not be reached; try again later".into()
            }
            E::Chatapp(e) => capitalized(e),
            E::Social(social::SocialError::Unreachable(_)) => "X could not be reached; try again later".into(),
            E::Social(e) => capitalized(e),
            _ => "Internal server error".into(),
        }
    }
}

/// A service's words as the start of a sentence a client reads.
pub(crate) fn capitalized(text: impl std::fmt::Display) -> String {
    let text = text.to_string();
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => text,
    }
}

impl From<StoreError> for ServiceError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::Conflict(message) => ServiceError::Conflict(message),
            StoreError::NotFound(message) => ServiceError::NotFound(message),
            StoreError::QuotaExceeded(message) => ServiceError::QuotaExceeded(message),
            StoreError::KeyRetired => ServiceError::Unavailable {
                message: StoreError::KeyRetired.to_string(),
                retry_after_secs: 60,
            },
            other => ServiceError::Store(other),
        }
    }
}
