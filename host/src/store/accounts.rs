use rusqlite::{OptionalExtension, Row, params};

use super::{Store, StoreError, is_unique_violation};
use crate::domain::{Account, Plan, RateLimits};

pub struct NewAccount {
    pub name: String,
    pub plan: Plan,
    /// Limits of their own (enterprise); `None` means the plan's.
    pub custom_limits: Option<RateLimits>,
}

pub(super) const ACCOUNT_COLUMNS: &str = "a.id, a.name, a.plan, a.rpm, a.rpd, a.created_at";

/// Reads an account from the six columns of `ACCOUNT_COLUMNS`, starting at `at`.
pub(super) fn account_from_row(row: &Row<'_>, at: usize) -> rusqlite::Result<Result<Account, StoreError>> {
    let plan_text: String = row.get(at + 2)?;
    let rpm: Option<u32> = row.get(at + 3)?;
    let rpd: Option<u32> = row.get(at + 4)?;
    let id: String = row.get(at)?;
    let name: String = row.get(at + 1)?;
    let created_at: i64 = row.get(at + 5)?;
    let Some(plan) = Plan::parse(&plan_text) else {
        return Ok(Err(StoreError::Corrupt(format!(
            "account {id} has unknown plan {plan_text}"
        ))));
    };
    let limits = match (rpm, rpd, plan.default_limits()) {
        (Some(per_minute), Some(per_day), _) => RateLimits { per_minute, per_day },
        (_, _, Some(defaults)) => defaults,
        _ => {
            return Ok(Err(StoreError::Corrupt(format!(
                "enterprise account {id} has no limits"
            ))));
        }
    };
    Ok(Ok(Account {
        id,
        name,
        plan,
        limits,
        created_at,
    }))
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
        self.write(move |tx| {
            tx.execute(
                "INSERT INTO accounts (id, name, plan, rpm, rpd, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    row.id,
                    row.name,
                    row.plan.as_str(),
                    custom.map(|l| l.per_minute),
                    custom.map(|l| l.per_day),
                    row.created_at
                ],
            )
            .map_err(|e| {
                if is_unique_violation(&e) {
                    StoreError::Conflict(format!("an account named '{}' already exists", row.name))
                } else {
                    e.into()
                }
            })?;
            Ok(())
        })
        .await?;
        Ok(account)
    }

    pub async fn account_by_name(&self, name: &str) -> Result<Option<Account>, StoreError> {
        let name = name.to_string();
        self.read(move |conn| {
            let sql = format!("SELECT {ACCOUNT_COLUMNS} FROM accounts a WHERE a.name = ?1");
            conn.prepare_cached(&sql)?
                .query_row([name], |row| account_from_row(row, 0))
                .optional()?
                .transpose()
        })
        .await
    }

    pub async fn account_by_id(&self, id: &str) -> Result<Option<Account>, StoreError> {
        let id = id.to_string();
        self.read(move |conn| {
            let sql = format!("SELECT {ACCOUNT_COLUMNS} FROM accounts a WHERE a.id = ?1");
            conn.prepare_cached(&sql)?
                .query_row([id], |row| account_from_row(row, 0))
                .optional()?
                .transpose()
        })
        .await
    }
}
