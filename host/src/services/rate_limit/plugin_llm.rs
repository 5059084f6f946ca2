//! The language-model budget of an account's plugins, counted as rate limits are.

use std::future::Future;

use super::Limiter;
use crate::domain::RateLimits;
use crate::store::Store;

/// The language-model tokens each account's plugins may ask for per minute and per day,
/// counted at each call's worst case (see `plugins/host/llm.rs`), across hosts.
pub struct PluginLlmBudget {
    tokens: Limiter,
    limits: RateLimits,
}

impl PluginLlmBudget {
    pub fn new(store: &Store, limits: RateLimits) -> PluginLlmBudget {
        PluginLlmBudget {
            tokens: Limiter::new(store, "plugin_llm_tokens"),
            limits,
        }
    }
}

impl crate::plugins::LlmBudget for PluginLlmBudget {
    fn charge<'a>(
        &'a self,
        account: &'a str,
        tokens: u32,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'a>> {
        Box::pin(async move {
            let decision = self
                .tokens
                .check_n(account, self.limits, crate::clock::now_ms(), tokens)
                .await
                .map_err(|e| {
                    tracing::error!(error = %e, "could not count a plugin's language-model tokens");
                    "the language-model budget cannot be checked now; try again".to_string()
                })?;
            if decision.allowed {
                return Ok(());
            }
            Err(format!(
                "this account's plugins have used their language-model budget ({} tokens a minute, {} a day: account_plugin_llm_tokens_per_minute/_per_day); retry in {} s",
                self.limits.per_minute, self.limits.per_day, decision.retry_after_secs
            ))
        })
    }
}
