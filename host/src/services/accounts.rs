use super::ServiceError;
use crate::domain::{Account, Plan, RateLimits};
use crate::store::{NewAccount, Store};

/// Creates an account. Free and pro take the API's limits; enterprise needs its own.
pub async fn create(
    store: &Store,
    name: &str,
    plan: Plan,
    per_minute: Option<u32>,
    per_day: Option<u32>,
) -> Result<Account, ServiceError> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 64 || name.chars().any(char::is_control) {
        return Err(ServiceError::Validation(
            "an account name must be 1 to 64 printable characters".into(),
        ));
    }
    let custom_limits = match (plan, per_minute, per_day) {
        (Plan::Enterprise, Some(per_minute), Some(per_day)) => {
            if per_minute == 0 || per_day == 0 {
                return Err(ServiceError::Validation("--rpm and --rpd must be positive".into()));
            }
            Some(RateLimits { per_minute, per_day })
        }
        (Plan::Enterprise, _, _) => {
            return Err(ServiceError::Validation(
                "an enterprise account needs both --rpm and --rpd".into(),
            ));
        }
        (_, None, None) => None,
        (other, _, _) => {
            return Err(ServiceError::Validation(format!(
                "--rpm and --rpd are for enterprise accounts; the {} plan has fixed limits",
                other.as_str()
            )));
        }
    };
    Ok(store
        .create_account(NewAccount {
            name: name.to_string(),
            plan,
            custom_limits,
        })
        .await?)
}

/// One quota: how much the account uses of what it may.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quota {
    pub used: u64,
    pub limit: u64,
}

/// The account's quotas, each with its use.
#[derive(Debug, Clone, PartialEq)]
pub struct Quotas {
    pub agents: Quota,
    /// The most commands one of its agents has.
    pub commands_per_agent: Quota,
    pub plugins: Quota,
    pub plugin_bytes: Quota,
    pub kv_bytes: Quota,
}

/// The account's quotas (from settings) and how much of each it uses.
pub async fn quotas(
    store: &Store,
    settings: &crate::config::Settings,
    account_id: &str,
) -> Result<Quotas, ServiceError> {
    let used = store.account_usage(account_id).await?;
    let quota = |used, limit| Quota { used, limit };
    Ok(Quotas {
        agents: quota(used.agents, settings.quotas.account_max_agents),
        commands_per_agent: quota(used.most_commands, settings.quotas.agent_max_commands),
        plugins: quota(used.plugins, settings.quotas.account_max_plugins),
        plugin_bytes: quota(used.plugin_bytes, settings.quotas.account_max_plugin_bytes),
        kv_bytes: quota(used.kv_bytes, settings.quotas.account_max_kv_bytes),
    })
}

pub async fn by_name(store: &Store, name: &str) -> Result<Account, ServiceError> {
    store
        .account_by_name(name)
        .await?
        .ok_or_else(|| ServiceError::NotFound(format!("no account named '{name}'")))
}
