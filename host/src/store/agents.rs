use super::sql::{Db, Row, args};
use std::sync::Arc;

use super::cache::AgentWithCommands;
use super::{Store, StoreError, json_column, to_json};
use crate::domain::{
    Agent, AgentDef, Command, CommandConfig, CommandDef, HandlerType, ResponseFormat, SignInTerms, UnitRates,
    X402Settings,
};
use crate::money::MicroUsdc;

#[derive(Debug, Clone)]
pub struct ApplyOutcome {
    pub agent_id: String,
    pub created: bool,
    pub command_ids: Vec<(String, String)>,
    pub removed_commands: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct AgentSummary {
    pub agent: Agent,
    pub account_name: String,
    pub command_count: u32,
}

/// A list column, with no spare room: agents and their commands are held by the read
/// cache, and a list read item by item keeps room for four.
fn json_list<T: serde::de::DeserializeOwned>(text: &str, what: &str) -> Result<Vec<T>, StoreError> {
    let mut list: Vec<T> = json_column(text, what)?;
    list.shrink_to_fit();
    Ok(list)
}

const AGENT_COLUMNS: &str = "g.id, g.account_id, g.username, g.name, g.personality, g.knowledge, \
     g.x402_enabled, g.x402_default_price, g.x402_networks, g.created_at, g.updated_at, g.mcp_open, g.mcp_exposed, g.a2a, \
     g.x402_chat_by_use, g.mcp_servers, g.payments";
/// How many columns `AGENT_COLUMNS` holds: a query that selects more reads them after.
const AGENT_COLUMN_COUNT: usize = 17;

fn agent_from_row(row: &Row) -> Result<Agent, StoreError> {
    let price: Option<i64> = row.get(7)?;
    Ok(Agent {
        id: row.get(0)?,
        account_id: row.get(1)?,
        def: AgentDef {
            username: row.get(2)?,
            name: row.get(3)?,
            personality: row.get(4)?,
            knowledge: json_list(&row.get::<String>(5)?, "agent knowledge")?,
            x402: X402Settings {
                enabled: row.get(6)?,
                default_price: price.map(|p| MicroUsdc(p as u64)),
                networks: json_list(&row.get::<String>(8)?, "agent x402 networks")?,
                chat_by_use: row
                    .get::<Option<String>>(14)?
                    .map(|text| json_column(&text, "agent x402_chat_by_use"))
                    .transpose()?,
            },
            mcp_open: row.get(11)?,
            mcp: serde_json::from_str(&row.get::<String>(12)?)
                .map_err(|e| StoreError::Corrupt(format!("agent mcp_exposed: {e}")))?,
            a2a: json_column(&row.get::<String>(13)?, "agent a2a")?,
            mcp_servers: json_list(&row.get::<String>(15)?, "agent mcp_servers")?,
            payments: row
                .get::<Option<String>>(16)?
                .map(|text| json_column(&text, "agent payments").map(Box::new))
                .transpose()?,
        },
        created_at: row.get(9)?,
        updated_at: row.get(10)?,
    })
}

const COMMAND_COLUMNS: &str = "id, agent_id, name, description, handler_type, parameters, response_format, \
     enabled, integrations, price, config, plugin, allowed_hosts, long_running, timeout_ms, allow_llm, sign_in, by_use";

fn command_from_row(row: &Row) -> Result<Command, StoreError> {
    let handler: String = row.get(4)?;
    let format: String = row.get(6)?;
    let price: Option<i64> = row.get(9)?;
    let timeout: Option<i64> = row.get(14)?;
    Ok(Command {
        id: row.get(0)?,
        def: CommandDef {
            name: row.get(2)?,
            description: row.get(3)?,
            handler_type: json_column::<HandlerType>(&format!("\"{handler}\""), "command handler_type")?,
            parameters: json_list(&row.get::<String>(5)?, "command parameters")?,
            response_format: json_column::<ResponseFormat>(&format!("\"{format}\""), "command response_format")?,
            enabled: row.get(7)?,
            integrations: json_list(&row.get::<String>(8)?, "command integrations")?,
            price: price.map(|p| MicroUsdc(p as u64)),
            config: CommandConfig::from_json(&row.get::<String>(10)?)
                .map_err(|e| StoreError::Corrupt(format!("command config: {e}")))?,
            plugin: row.get(11)?,
            allowed_hosts: json_list(&row.get::<String>(12)?, "command allowed_hosts")?,
            long_running: row.get(13)?,
            timeout_ms: timeout.map(|t| t as u64),
            allow_llm: row.get(15)?,
            sign_in: row
                .get::<Option<String>>(16)?
                .map(|terms| json_column::<SignInTerms>(&terms, "command sign_in"))
                .transpose()?,
            by_use: row
                .get::<Option<String>>(17)?
                .map(|rates| json_column::<UnitRates>(&rates, "command by_use"))
                .transpose()?,
        },
    })
}

fn find_agent(db: &dyn Db, id_or_username: &str) -> Result<Option<Agent>, StoreError> {
    let sql = format!("SELECT {AGENT_COLUMNS} FROM agents g WHERE g.id = ?1 OR g.username = ?1");
    db.query_opt(&sql, args![id_or_username])?
        .map(|row| agent_from_row(&row))
        .transpose()
}

fn commands_of(db: &dyn Db, agent_id: &str) -> Result<Vec<Command>, StoreError> {
    let sql = format!("SELECT {COMMAND_COLUMNS} FROM commands WHERE agent_id = ?1 ORDER BY position");
    let rows = db.query(&sql, args![agent_id])?;
    let mut commands = Vec::with_capacity(rows.len());
    for row in &rows {
        commands.push(command_from_row(row)?);
    }
    Ok(commands)
}

fn json_enum<T: serde::Serialize>(value: &T) -> String {
    to_json(value).trim_matches('"').to_string()
}

impl Store {
    /// Creates the agent or updates it in place (matched by username), and makes its
    /// commands exactly the given list: existing ones keep their ids, missing ones go. A new
    /// agent is refused once the account has `max_agents`.
    pub async fn apply_agent(
        &self,
        account_id: &str,
        def: AgentDef,
        commands: Vec<CommandDef>,
        max_agents: u64,
    ) -> Result<ApplyOutcome, StoreError> {
        let account_id = account_id.to_string();
        self.write_cached(move |db| {
            // Two applies of one username at once (two hosts): the second sees the first;
            // two new agents of one account: the second counts the first.
            db.serialize(&format!("agent:{}", def.username))?;
            db.serialize(&format!("account-agents:{account_id}"))?;
            let now = crate::clock::now_ms();
            let existing = find_agent(db, &def.username)?;
            let (agent_id, created) = match existing {
                Some(agent) if agent.account_id != account_id => {
                    return Err(StoreError::Conflict(format!(
                        "agent '{}' belongs to another account",
                        def.username
                    )));
                }
                Some(agent) => (agent.id, false),
                None => {
                    let count: i64 = db
                        .query_one("SELECT COUNT(*) FROM agents WHERE account_id = ?1", args![&account_id])?
                        .get(0)?;
                    if count as u64 >= max_agents {
                        return Err(StoreError::QuotaExceeded(format!(
                            "this account has {count} agents, its quota (account_max_agents); delete one first"
                        )));
                    }
                    (uuid::Uuid::new_v4().to_string(), true)
                }
            };
            let price = def.x402.default_price.map(|p| p.0 as i64);
            let chat_by_use = def.x402.chat_by_use.as_ref().map(to_json);
            let payments = def.payments.as_ref().map(to_json);
            if created {
                db.execute(
                    "INSERT INTO agents (id, account_id, username, name, personality, knowledge,
                        x402_enabled, x402_default_price, x402_networks, created_at, updated_at, mcp_open, mcp_exposed, a2a,
                        x402_chat_by_use, mcp_servers, payments)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
                    args![
                        &agent_id,
                        &account_id,
                        &def.username,
                        &def.name,
                        &def.personality,
                        to_json(&def.knowledge),
                        def.x402.enabled,
                        price,
                        to_json(&def.x402.networks),
                        now,
                        def.mcp_open,
                        to_json(&def.mcp),
                        to_json(&def.a2a),
                        chat_by_use,
                        to_json(&def.mcp_servers),
                        payments.clone()
                    ],
                )
                .map_err(|e| {
                    if e.is_unique_violation() {
                        StoreError::Conflict(format!("the username '{}' is taken", def.username))
                    } else {
                        e
                    }
                })?;
            } else {
                db.execute(
                    "UPDATE agents SET name = ?2, personality = ?3, knowledge = ?4, x402_enabled = ?5,
                        x402_default_price = ?6, x402_networks = ?7, updated_at = ?8, mcp_open = ?9,
                        mcp_exposed = ?10, a2a = ?11, x402_chat_by_use = ?12, mcp_servers = ?13,
                        payments = ?14 WHERE id = ?1",
                    args![
                        &agent_id,
                        &def.name,
                        &def.personality,
                        to_json(&def.knowledge),
                        def.x402.enabled,
                        price,
                        to_json(&def.x402.networks),
                        now,
                        def.mcp_open,
                        to_json(&def.mcp),
                        to_json(&def.a2a),
                        chat_by_use,
                        to_json(&def.mcp_servers),
                        payments
                    ],
                )?;
            }

            let mut command_ids = Vec::with_capacity(commands.len());
            for (position, cmd) in commands.iter().enumerate() {
                let id: Option<String> = db
                    .query_opt(
                        "SELECT id FROM commands WHERE agent_id = ?1 AND name = ?2",
                        args![&agent_id, &cmd.name],
                    )?
                    .map(|r| r.get(0))
                    .transpose()?;
                let id = id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
                db.execute(
                    "INSERT INTO commands (id, agent_id, name, position, description, handler_type, parameters,
                        response_format, enabled, integrations, price, config, plugin, allowed_hosts,
                        long_running, timeout_ms, allow_llm, sign_in, by_use, created_at, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?18, ?19, ?20, ?17, ?17)
                     ON CONFLICT (id) DO UPDATE SET position = ?4, description = ?5, handler_type = ?6,
                        parameters = ?7, response_format = ?8, enabled = ?9, integrations = ?10, price = ?11,
                        config = ?12, plugin = ?13, allowed_hosts = ?14, long_running = ?15, timeout_ms = ?16,
                        allow_llm = ?18, sign_in = ?19, by_use = ?20, updated_at = ?17",
                    args![
                        &id,
                        &agent_id,
                        &cmd.name,
                        position as i64,
                        &cmd.description,
                        cmd.handler_type.as_str(),
                        to_json(&cmd.parameters),
                        json_enum(&cmd.response_format),
                        cmd.enabled,
                        to_json(&cmd.integrations),
                        cmd.price.map(|p| p.0 as i64),
                        cmd.config.json(),
                        &cmd.plugin,
                        to_json(&cmd.allowed_hosts),
                        cmd.long_running,
                        cmd.timeout_ms.map(|t| t as i64),
                        now,
                        cmd.allow_llm,
                        cmd.sign_in.as_ref().map(to_json),
                        cmd.by_use.as_ref().map(to_json)
                    ],
                )?;
                command_ids.push((cmd.name.clone(), id));
            }

            let mut removed_commands = Vec::new();
            for row in db.query(
                "SELECT name FROM commands WHERE agent_id = ?1 ORDER BY position",
                args![&agent_id],
            )? {
                let name: String = row.get(0)?;
                if !commands.iter().any(|c| c.name == name) {
                    removed_commands.push(name);
                }
            }
            for name in &removed_commands {
                db.execute(
                    "DELETE FROM commands WHERE agent_id = ?1 AND name = ?2",
                    args![&agent_id, name],
                )?;
            }
            Ok(ApplyOutcome {
                agent_id,
                created,
                command_ids,
                removed_commands,
            })
        })
        .await
    }

    /// The agent with this id or username, whoever owns it.
    pub async fn agent(&self, id_or_username: &str) -> Result<Option<Agent>, StoreError> {
        Ok(self
            .agent_with_commands(id_or_username)
            .await?
            .map(|found| found.agent.clone()))
    }

    /// Every agent, or one account's, by username.
    pub async fn list_agents(&self, account_id: Option<&str>) -> Result<Vec<AgentSummary>, StoreError> {
        let account_id = account_id.map(str::to_string);
        self.read(move |db| {
            let select = format!(
                "SELECT {AGENT_COLUMNS}, a.name, (SELECT COUNT(*) FROM commands c WHERE c.agent_id = g.id)
                 FROM agents g JOIN accounts a ON a.id = g.account_id"
            );
            let rows = match account_id {
                Some(id) => db.query(
                    &format!("{select} WHERE g.account_id = ?1 ORDER BY g.username"),
                    args![id],
                )?,
                None => db.query(&format!("{select} ORDER BY g.username"), args![])?,
            };
            rows.iter()
                .map(|row| {
                    Ok(AgentSummary {
                        agent: agent_from_row(row)?,
                        account_name: row.get(AGENT_COLUMN_COUNT)?,
                        command_count: row.get(AGENT_COLUMN_COUNT + 1)?,
                    })
                })
                .collect()
        })
        .await
    }

    /// The agents whose owners list them for A2A clients (`[a2a] listed`), by username: a
    /// page of at most `limit` after `after`.
    pub async fn a2a_listed_agents(&self, after: Option<&str>, limit: u32) -> Result<Vec<Agent>, StoreError> {
        let after = after.unwrap_or_default().to_string();
        self.read(move |db| {
            // The column is written by serde as compact JSON: the flag reads as this text.
            db.query(
                &format!(
                    "SELECT {AGENT_COLUMNS} FROM agents g WHERE g.a2a LIKE '%\"listed\":true%' AND g.username > ?1
                     ORDER BY g.username LIMIT ?2"
                ),
                args![after, i64::from(limit)],
            )?
            .iter()
            .map(agent_from_row)
            .collect()
        })
        .await
    }

    /// Deletes the agent unless it holds a wallet (checked in the same statement, so a
    /// wallet made meanwhile is never lost); its commands, integrations and key-value data go
    /// with it (the schema cascades). Jobs, transfers and payments keep their rows. False when
    /// nothing was deleted.
    pub async fn delete_agent_without_wallets(&self, agent_id: &str) -> Result<bool, StoreError> {
        let agent_id = agent_id.to_string();
        self.write_cached(move |db| {
            let deleted = db.execute(
                "DELETE FROM agents WHERE id = ?1 AND NOT EXISTS (SELECT 1 FROM wallets WHERE agent_id = ?1)",
                args![agent_id],
            )?;
            Ok(deleted > 0)
        })
        .await
    }

    /// The agent and its commands (in manifest order), in one read, from the read cache
    /// when it has them.
    pub async fn agent_with_commands(
        &self,
        id_or_username: &str,
    ) -> Result<Option<Arc<AgentWithCommands>>, StoreError> {
        if let Some(found) = self.cache.agent(id_or_username) {
            return Ok(Some(found));
        }
        let ticket = self.cache.ticket();
        let key = id_or_username.to_string();
        let found = self
            .read(move |db| {
                let Some(agent) = find_agent(db, &key)? else {
                    return Ok(None);
                };
                let commands = commands_of(db, &agent.id)?;
                let open_breakers = super::breakers::open_breakers_of(db, &agent.id)?;
                Ok(Some(Arc::new(AgentWithCommands::new(agent, commands, open_breakers))))
            })
            .await?;
        if let Some(found) = &found {
            self.cache.keep_agent(ticket, found);
        }
        Ok(found)
    }

    /// The agent's commands in manifest order.
    pub async fn commands(&self, agent_id: &str) -> Result<Vec<Command>, StoreError> {
        Ok(self
            .agent_with_commands(agent_id)
            .await?
            .map(|found| found.commands.clone())
            .unwrap_or_default())
    }
}
