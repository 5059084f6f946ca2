//! The tools of the remote MCP servers an agent names (`[[mcp_servers]]`), offered to its
//! chat beside its own commands as `SERVER__TOOL`. A server's tool list (and the session it
//! was read in) is kept for a minute per agent and server, so chats do not list it again
//! each time. Every request goes through the outbound guard to the server's own host alone,
//! with its owner's credential when it needs one, under the server's time limit, the
//! operator's size limit and a number of calls per chat; a failure is a tool error the model
//! reads, never the chat's failure.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{ServiceError, Services};
use crate::clients::mcp::{McpError, Remote, RemoteTool, Session};
use crate::domain::Agent;
use crate::domain::remote_mcp::McpServerDef;
use crate::llm::ToolSpec;

/// How long a server's tool list is trusted.
const LISTING_TTL: Duration = Duration::from_secs(60);
/// Most tools one server offers the chat, and how much of each one's description and schema.
const MAX_TOOLS_PER_SERVER: usize = 32;
const MAX_DESCRIPTION_CHARS: usize = 1_024;
const MAX_SCHEMA_BYTES: usize = 16 * 1024;
/// Bytes all remote tools of one chat add to the prompt, at most.
const MAX_SPECS_BYTES: usize = 64 * 1024;
/// Characters of a remote tool's answer the model reads.
const MAX_RESULT_CHARS: usize = 8_000;

/// A server's tools as last listed, and the session they were listed in.
#[derive(Clone)]
struct Listing {
    session: Session,
    tools: Vec<RemoteTool>,
    at: Instant,
}

/// Listings kept across chats, by agent, server and address.
#[derive(Default)]
pub struct ListingCache {
    entries: Mutex<HashMap<String, Listing>>,
}

impl ListingCache {
    fn get(&self, key: &str) -> Option<Listing> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.get(key).filter(|l| l.at.elapsed() < LISTING_TTL).cloned()
    }

    fn put(&self, key: String, listing: Listing) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.retain(|_, l| l.at.elapsed() < LISTING_TTL);
        entries.insert(key, listing);
    }

    fn forget(&self, key: &str) {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).remove(key);
    }
}

/// One server, connected for one chat.
struct Connected {
    def: McpServerDef,
    remote: Remote,
    key: String,
    listing: Listing,
    calls: AtomicU32,
}

/// The remote tools of one chat.
#[derive(Default)]
pub struct RemoteTools {
    servers: Vec<Connected>,
}

impl RemoteTools {
    /// Connects to each of the agent's servers (or finds its listing kept); a server that
    /// cannot be reached or listed is left out of this chat, and the log says why.
    pub async fn load(services: &Services, agent: &Agent) -> RemoteTools {
        // All at once, each within its own time: a slow server delays the chat by its limit
        // at most, not by the sum of them.
        let connecting = agent.def.mcp_servers.iter().map(|def| async move {
            // `initialize`, its notification and a few pages of tools, each within the limit.
            let within = Duration::from_millis(def.timeout_ms).saturating_mul(3);
            let connected = tokio::time::timeout(within, connect(services, agent, def))
                .await
                .unwrap_or_else(|_| {
                    Err(ServiceError::Execution(format!(
                        "{}: no tool list within {within:?}",
                        def.name
                    )))
                });
            (def, connected)
        });
        let mut servers = Vec::new();
        for (def, connected) in futures_util::future::join_all(connecting).await {
            match connected {
                Ok(connected) => servers.push(connected),
                Err(e) => {
                    tracing::warn!(agent = %agent.id, server = %def.name, error = %e, "a remote MCP server's tools are left out")
                }
            }
        }
        RemoteTools { servers }
    }

    /// The tools as the model is offered them, but for names `taken` (the agent's commands).
    pub fn specs(&self, taken: &[&str]) -> Vec<ToolSpec> {
        let mut specs = Vec::new();
        let mut room = MAX_SPECS_BYTES;
        for server in &self.servers {
            let offered = server.listing.tools.iter().filter(|t| server.def.offers(&t.name));
            for tool in offered.take(MAX_TOOLS_PER_SERVER) {
                let Some(name) = server.def.tool_name(&tool.name) else {
                    continue;
                };
                if taken.contains(&name.as_str()) || tool.input_schema.to_string().len() > MAX_SCHEMA_BYTES {
                    continue;
                }
                let description = match tool.description.is_empty() {
                    true => format!("{} (from {})", tool.name, server.def.name),
                    false => tool.description.chars().take(MAX_DESCRIPTION_CHARS).collect(),
                };
                // What the tools add to every round's prompt stays bounded, whatever they say.
                let size = name.len() + description.len() + tool.input_schema.to_string().len();
                if size > room {
                    continue;
                }
                room -= size;
                specs.push(ToolSpec {
                    name,
                    description,
                    parameters: tool.input_schema.clone(),
                });
            }
        }
        specs
    }

    /// Whether `name` is one of these tools.
    pub fn owns(&self, name: &str) -> bool {
        self.find(name).is_some()
    }

    fn find(&self, name: &str) -> Option<(&Connected, &RemoteTool)> {
        self.servers.iter().find_map(|server| {
            let tool = server
                .listing
                .tools
                .iter()
                .find(|t| server.def.offers(&t.name) && server.def.tool_name(&t.name).as_deref() == Some(name))?;
            Some((server, tool))
        })
    }

    /// Calls the tool `name` and says what happened, for the model, and whether it went well.
    pub async fn call(&self, services: &Services, name: &str, arguments: Value) -> (String, bool) {
        let Some((server, tool)) = self.find(name) else {
            return (format!("Error: there is no tool named '{name}'."), false);
        };
        if server.calls.fetch_add(1, Ordering::Relaxed) >= server.def.max_calls {
            return (
                format!(
                    "Error: this chat has called {}'s tools {} times, as many as its owner allows. Answer with what you have.",
                    server.def.name, server.def.max_calls
                ),
                false,
            );
        }
        let outbound = &services.outbound;
        let mut answer = server
            .remote
            .call_tool(outbound, &server.listing.session, &tool.name, arguments.clone())
            .await;
        // A session the server forgot (it restarted, or timed it out): once more, in a new one.
        if let Err(McpError::Refused(why)) = &answer
            && why.starts_with("HTTP 404")
        {
            services.remote_listings.forget(&server.key);
            if let Ok(session) = server.remote.initialize(outbound).await {
                answer = server.remote.call_tool(outbound, &session, &tool.name, arguments).await;
            }
        }
        match answer {
            Ok(result) => {
                let text: String = result.text.chars().take(MAX_RESULT_CHARS).collect();
                match result.is_error {
                    true => (format!("Error: {text}"), false),
                    false => (text, true),
                }
            }
            Err(e) => (format!("Error: {} ({e})", server.def.name), false),
        }
    }
}

async fn connect(services: &Services, agent: &Agent, def: &McpServerDef) -> Result<Connected, ServiceError> {
    let mut headers = Vec::new();
    if let Some(header) = &def.header {
        headers.push((header.clone(), credential(services, agent, def).await?));
    }
    let remote = Remote {
        url: def.url.clone(),
        headers,
        timeout: Duration::from_millis(def.timeout_ms),
        max_bytes: services.settings.mcp.mcp_remote_max_response_bytes,
    };
    let key = listing_key(agent, def);
    let listing = match services.remote_listings.get(&key) {
        Some(listing) => listing,
        None => {
            let outbound = &services.outbound;
            let fail = |e: McpError| ServiceError::Execution(format!("{}: {e}", def.name));
            let session = remote.initialize(outbound).await.map_err(fail)?;
            let tools = remote.list_tools(outbound, &session).await.map_err(fail)?;
            let listing = Listing {
                session,
                tools,
                at: Instant::now(),
            };
            services.remote_listings.put(key.clone(), listing.clone());
            listing
        }
    };
    Ok(Connected {
        def: def.clone(),
        remote,
        key,
        listing,
        calls: AtomicU32::new(0),
    })
}

/// What a server's listing is kept under: a change of its address or header is another.
fn listing_key(agent: &Agent, def: &McpServerDef) -> String {
    format!("{}\n{}\n{}\n{:?}", agent.id, def.name, def.url, def.header)
}

/// The value of the server's credential header, as its owner set it.
async fn credential(services: &Services, agent: &Agent, def: &McpServerDef) -> Result<String, ServiceError> {
    let Some(stored) = services.store.integration(&agent.id, &def.credential_kind()).await? else {
        return Err(ServiceError::Validation(format!(
            "{} needs its '{}' value: set it with `agent-host mcp-server credential` or the account API",
            def.name,
            def.header.as_deref().unwrap_or_default()
        )));
    };
    let secret: Credential = super::integrations::open(services, &stored)?;
    Ok(secret.value)
}

/// A server's credential, sealed among the agent's integrations.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Credential {
    pub value: String,
}

/// The agent's server named `name`, as its manifest names it.
fn server<'a>(agent: &'a Agent, name: &str) -> Result<&'a McpServerDef, ServiceError> {
    agent
        .def
        .mcp_servers
        .iter()
        .find(|s| s.name == name)
        .ok_or_else(|| ServiceError::NotFound(format!("the agent's manifest names no MCP server '{name}'")))
}

/// Keeps the value of the server's credential header, sealed (`agent-host mcp-server
/// credential`, the account API).
pub async fn set_credential(services: &Services, agent: &Agent, name: &str, value: &str) -> Result<(), ServiceError> {
    let def = server(agent, name)?;
    let Some(header) = &def.header else {
        return Err(ServiceError::Validation(format!(
            "server '{name}' takes no credential: its manifest names no 'header'"
        )));
    };
    let value = value.trim();
    if value.is_empty() || value.chars().count() > 8192 || value.chars().any(|c| c.is_control()) {
        return Err(ServiceError::Validation(
            "Invalid field 'value': 1 to 8192 characters, no control characters".into(),
        ));
    }
    let public = serde_json::json!({ "header": header });
    let secret = Credential {
        value: value.to_string(),
    };
    super::integrations::save_as(
        services,
        &agent.id,
        &def.credential_kind(),
        "MCP server credential",
        &secret,
        &public,
    )
    .await?;
    // The next chat connects with it.
    services.remote_listings.forget(&listing_key(agent, def));
    Ok(())
}

/// Forgets it; false when none was set.
pub async fn remove_credential(services: &Services, agent: &Agent, name: &str) -> Result<bool, ServiceError> {
    let def = server(agent, name)?;
    Ok(services
        .store
        .delete_integration(&agent.id, &def.credential_kind())
        .await?)
}

/// A server as its owner sees it: its manifest entry, whether its credential is set, and
/// the tools the chat is offered now (or why none).
pub struct ServerStatus {
    pub def: McpServerDef,
    pub credential_set: bool,
    pub tools: Result<Vec<String>, String>,
}

/// Every server the agent names, each listed now.
pub async fn status(services: &Services, agent: &Agent) -> Result<Vec<ServerStatus>, ServiceError> {
    let mut out = Vec::new();
    for def in &agent.def.mcp_servers {
        let credential_set = services
            .store
            .integration(&agent.id, &def.credential_kind())
            .await?
            .is_some();
        let tools = match connect(services, agent, def).await {
            Ok(connected) => Ok(RemoteTools {
                servers: vec![connected],
            }
            .specs(&[])
            .into_iter()
            .map(|spec| spec.name)
            .collect()),
            Err(e) => Err(e.public_text()),
        };
        out.push(ServerStatus {
            def: def.clone(),
            credential_set,
            tools,
        });
    }
    Ok(out)
}
