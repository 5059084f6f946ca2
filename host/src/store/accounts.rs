use super::sql::{Row, args};
use super::{Store, StoreError};
use crate::domain::{Account, Plan, RateLimits};

pub struct NewAccount {
    pub name: String,
    pub plan: Plan,
    /// Limits of their own (enterprise); `None` means the plan's.
    pub custom_limits: Option<RateLimits>,
}

pub(super) const ACCOUNT_COLUMNS: &str = "a.id, a.name, a.plan, a.rpm, a.rpd, a.created_at";

/// Reads an account from the six columns of `ACCOUNT_COLUMNS`, starting at `at`.
pub(super) fn account_from_row(row: &Row, at: usize) -> Result<Account, StoreError> {
    let id: String = row.get(at)?;
    let plan_text: String = row.get(at + 2)?;
    let rpm: Option<u32> = row.get(at + 3)?;
    let rpd: Option<u32> = row.get(at + 4)?;
    let Some(plan) = Plan::parse(&plan_text) else {
        return Err(StoreError::Corrupt(format!(
            "account {id} has unknown plan {plan_text}"
        )));
    };
    let limits = match (rpm, rpd, plan.default_limits()) {
        (Some(per_minute), Some(per_day), _) => RateLimits { per_minute, per_day },
        (_, _, Some(defaults)) => defaults,
        _ => return Err(StoreError::Corrupt(format!("enterprise account {id} has no limits"))),
    };
    Ok(Account {
        id,
        name: row.get(at + 1)?,
        plan,
        limits,
        created_at: row.get(at + 5)?,
    })
}

impl Store {
    pub async fn create_account(&self, new: NewAccount) -> Result<Account, StoreError> {
        let account = Account {
            id: uuid::Uuid::new_v4().to_string(),
            limits: match (new.custom_limits, new.plan.default_limits()) {
                (Some(limits), _) | (None, Some(limits)) => limits,
                (None, None) => {
                    return Err(StoreError::Conflict(
                        "an enterprise account needs its own limits".into(),
                    ));
                }
            },
            name: new.name,
            plan: new.plan,
            created_at: crate::clock::now_ms(),
        };
        let custom = new.custom_limits;
        let row = account.clone();
        self.write(move |db| {
            db.execute(
                "INSERT INTO accounts (id, name, plan, rpm, rpd, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                args![
                    &row.id,
                    &row.name,
                    row.plan.as_str(),
                    custom.map(|l| l.per_minute),
                    custom.map(|l| l.per_day),
                    row.created_at
                ],
            )
            .map_err(|e| {
                if e.is_unique_violation() {
                    StoreError::Conflict(format!("an account named '{}' already exists", row.name))
                } else {
                    e
                }
            })?;
            Ok(())
        })
        .await?;
        Ok(account)
    }

    pub async fn account_by_name(&self, name: &str) -> Result<Option<Account>, StoreError> {
        let name = name.to_string();
        self.read(move |db| {
            let sql = format!("SELECT {ACCOUNT_COLUMNS} FROM accounts a WHERE a.name = ?1");
            db.query_opt(&sql, args![name])?
                .map(|row| account_from_row(&row, 0))
                .transpose()
        })
        .await
    }

    pub async fn account_by_id(&self, id: &str) -> Result<Option<Account>, StoreError> {
        let id = id.to_string();
        self.read(move |db| {
            let sql = format!("SELECT {ACCOUNT_COLUMNS} FROM accounts a WHERE a.id = ?1");
            db.query_opt(&sql, args![id])?
                .map(|row| account_from_row(&row, 0))
                .transpose()
        })
        .await
    }

    /// What the account keeps, counted against its quotas.
    pub async fn account_usage(&self, account_id: &str) -> Result<AccountUsage, StoreError> {
        let account_id = account_id.to_string();
        self.read(move |db| {
            let count = |sql: &str| -> Result<u64, StoreError> {
                Ok(db.query_one(sql, args![&account_id])?.get::<i64>(0)? as u64)
            };
            Ok(AccountUsage {
                agents: count("SELECT COUNT(*) FROM agents WHERE account_id = ?1")?,
                most_commands: count(
                    "SELECT COALESCE(MAX(n), 0) FROM (SELECT COUNT(*) AS n FROM commands c
                     JOIN agents g ON g.id = c.agent_id WHERE g.account_id = ?1 GROUP BY c.agent_id) per_agent",
                )?,
                plugins: count("SELECT COUNT(*) FROM account_plugins WHERE account_id = ?1")?,
                plugin_bytes: count(
                    "SELECT CAST(COALESCE(SUM(p.size), 0) AS BIGINT) FROM account_plugins ap JOIN plugins p ON p.hash = ap.hash
                     WHERE ap.account_id = ?1",
                )?,
                kv_bytes: count(
                    "SELECT CAST(COALESCE(SUM(k.size), 0) AS BIGINT) FROM plugin_kv k JOIN agents g ON g.id = k.agent_id
                     WHERE g.account_id = ?1",
                )?,
            })
        })
        .await
    }
}

/// What an account keeps, as its quotas count it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AccountUsage {
    pub agents: u64,
    /// Commands of its agent that has the most.
    pub most_commands: u64,
    pub plugins: u64,
    pub plugin_bytes: u64,
    pub kv_bytes: u64,
}
