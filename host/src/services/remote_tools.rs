//! The tools of the remote MCP servers an agent names (`[[mcp_servers]]`), offered to its
//! owner's chats beside its own commands as `SERVER__TOOL`. A server's tool list (and the
//! session it was read in) is kept for a minute per agent and server, cut to what a chat may
//! be offered, so chats do not list it again each time. Every request goes through the
//! outbound guard to the server's own host alone, with its owner's credential (only to the
//! address it was set for) when it needs one, under the server's time limit, the operator's
//! size limit and a number of calls per chat; a failure is a tool error the model reads,
//! never the chat's failure. A paid tool (x402's MCP transport) is bought from the agent's
//! wallet when its owner allows it (`spending.rs`), and called again with the payment.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::spending::Decision;
use super::{ServiceError, Services};
use crate::clients::mcp::{CallResult, McpError, Remote, RemoteTool, Session};
use crate::domain::Agent;
use crate::domain::remote_mcp::McpServerDef;
use crate::llm::ToolSpec;
use crate::plugins::PayingRun;
use crate::store::SpendState;
use crate::x402::payer::Offered;
use crate::x402::wire::{MCP_PAYMENT_META, MCP_PAYMENT_RESPONSE_META};

/// How long a server's tool list is trusted.
const LISTING_TTL: Duration = Duration::from_secs(60);
/// Listings one host keeps at most; past it the oldest go.
const MAX_LISTINGS: usize = 1_024;
/// Most tools one server offers the chat, and how much of each one's description and schema.
const MAX_TOOLS_PER_SERVER: usize = 32;
const MAX_DESCRIPTION_CHARS: usize = 1_024;
const MAX_SCHEMA_BYTES: usize = 16 * 1024;
/// Bytes all remote tools of one chat add to the prompt, at most.
const MAX_SPECS_BYTES: usize = 64 * 1024;
/// Characters of a remote tool's answer the model reads.
const MAX_RESULT_CHARS: usize = 8_000;

/// A server's tools as last listed (only those a chat may be offered), and the session they
/// were listed in.
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
        while entries.len() >= MAX_LISTINGS {
            let Some(oldest) = entries.iter().min_by_key(|(_, l)| l.at).map(|(k, _)| k.clone()) else {
                break;
            };
            entries.remove(&oldest);
        }
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

/// The remote tools of one chat: what it was offered, and where each name leads.
#[derive(Default)]
pub struct RemoteTools {
    /// Who pays for a paid tool: the agent, for its owner's chat.
    buyer: Option<(String, String)>,
    servers: Vec<Connected>,
    specs: Vec<ToolSpec>,
    /// Each offered name: its server (an index into `servers`) and the tool's own name.
    routes: HashMap<String, (usize, String)>,
}

impl RemoteTools {
    /// Connects to each of the agent's servers (or finds its listing kept), together, each
    /// within three times its limit; a server that cannot be reached or listed is left out of
    /// this chat, and the log says why. Names in `taken` (the agent's commands) stay theirs.
    pub async fn load(services: &Services, agent: &Agent, taken: &[&str]) -> RemoteTools {
        let mut servers = Vec::new();
        for (def, connected) in connect_all(services, agent).await {
            match connected {
                Ok(connected) => servers.push(connected),
                Err(e) => {
                    tracing::warn!(agent = %agent.id, server = %def.name, error = %e, "a remote MCP server's tools are left out")
                }
            }
        }
        let mut tools = RemoteTools {
            buyer: Some((agent.account_id.clone(), agent.id.clone())),
            servers,
            ..Default::default()
        };
        tools.offer(taken);
        tools
    }

    /// Decides what the model is offered: each tool once, under a name no command and no
    /// other tool has, within the prompt's room.
    fn offer(&mut self, taken: &[&str]) {
        let mut room = MAX_SPECS_BYTES;
        for (index, server) in self.servers.iter().enumerate() {
            for tool in &server.listing.tools {
                let Some(name) = server.def.tool_name(&tool.name) else {
                    continue;
                };
                if taken.contains(&name.as_str()) || self.routes.contains_key(&name) {
                    continue;
                }
                let description = match tool.description.is_empty() {
                    true => format!("{} (from {})", tool.name, server.def.name),
                    false => tool.description.clone(),
                };
                // What the tools add to every round's prompt stays bounded, whatever they say.
                let size = name.len() + description.len() + tool.input_schema.to_string().len();
                if size > room {
                    continue;
                }
                room -= size;
                self.routes.insert(name.clone(), (index, tool.name.clone()));
                self.specs.push(ToolSpec {
                    name,
                    description,
                    parameters: tool.input_schema.clone(),
                });
            }
        }
    }

    /// The tools as the model is offered them.
    pub fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }

    /// Whether `name` is one of the tools offered.
    pub fn owns(&self, name: &str) -> bool {
        self.routes.contains_key(name)
    }

    /// Calls the offered tool `name` and says what happened, for the model, and whether it
    /// went well.
    pub async fn call(&self, services: &Services, name: &str, arguments: Value) -> (String, bool) {
        let Some((index, tool)) = self.routes.get(name) else {
            return (format!("Error: there is no tool named '{name}'."), false);
        };
        let server = &self.servers[*index];
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
            .call_tool(outbound, &server.listing.session, tool, arguments.clone(), None)
            .await;
        // A session the server forgot (it restarted, or timed it out): once more, in a new one.
        let mut session = server.listing.session.clone();
        if let Err(McpError::Refused(why)) = &answer
            && why.starts_with("HTTP 404")
        {
            services.remote_listings.forget(&server.key);
            if let Ok(new) = server.remote.initialize(outbound).await {
                answer = server
                    .remote
                    .call_tool(outbound, &new, tool, arguments.clone(), None)
                    .await;
                session = new;
            }
        }
        // A paid tool (x402's MCP transport): paid, when the owner allows, and called again.
        if let Ok(result) = &answer
            && result.is_error
            && let Some(offers) = crate::x402::payer::offers_of(&result.structured)
        {
            answer = match self.pay(services, server, name, offers).await {
                Decision::PassOn => answer,
                Decision::Refused(reason) => return (format!("Error: {reason}"), false),
                Decision::Pay(signed) => {
                    let meta = json!({ MCP_PAYMENT_META: signed.envelope });
                    let (remote, tool, outbound) = (server.remote.clone(), tool.clone(), outbound.clone());
                    let payer = services.payer.clone();
                    // Runs to its end, and is recorded, even when the chat is cut off meanwhile.
                    let paid = tokio::spawn(async move {
                        let paid = remote
                            .call_tool(&outbound, &session, &tool, arguments, Some(meta))
                            .await;
                        let (state, transaction, error) = paid_outcome(&paid);
                        payer.ended(&signed.id, state, transaction, error).await;
                        paid
                    });
                    paid.await
                        .unwrap_or_else(|e| Err(McpError::Unreachable(format!("the paid call failed: {e}"))))
                }
            };
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

    /// Whether the agent pays for `name`, a tool of `server` its owner's chat called.
    async fn pay(&self, services: &Services, server: &Connected, name: &str, offers: Vec<Offered>) -> Decision {
        let Some((account_id, agent_id)) = &self.buyer else {
            return Decision::PassOn;
        };
        let run = PayingRun {
            account_id: account_id.clone(),
            agent_id: agent_id.clone(),
            command: name.to_string(),
            mcp_server: Some(server.def.name.clone()),
        };
        services.payer.consider(&run, &server.def.url, offers).await
    }
}

/// How a paid tool call ended: settled (the result's `x402/payment-response` says so, or it
/// simply answered), refused (payment required again), or unknown.
fn paid_outcome(paid: &Result<CallResult, McpError>) -> (SpendState, Option<String>, Option<String>) {
    let result = match paid {
        Ok(result) => result,
        Err(e) => return (SpendState::Unknown, None, Some(e.to_string())),
    };
    let settled = &result.meta[MCP_PAYMENT_RESPONSE_META];
    let text = |v: &Value| {
        v.as_str()
            .filter(|t| !t.is_empty())
            .map(|t| t.chars().take(200).collect::<String>())
    };
    if result.is_error && crate::x402::payer::offers_of(&result.structured).is_some() {
        let why = text(&result.structured["error"]).unwrap_or_else(|| "payment required again".into());
        return (SpendState::Refused, None, Some(why));
    }
    match settled["success"].as_bool() {
        Some(false) => (
            SpendState::Unknown,
            text(&settled["transaction"]),
            text(&settled["errorReason"]),
        ),
        _ if result.is_error && settled.is_null() => {
            (SpendState::Unknown, None, Some(result.text.chars().take(200).collect()))
        }
        _ => (SpendState::Settled, text(&settled["transaction"]), None),
    }
}

/// Every server of the agent's, connected together, each within three times its limit
/// (`initialize`, its notification and the pages of tools).
async fn connect_all<'a>(
    services: &Services,
    agent: &'a Agent,
) -> Vec<(&'a McpServerDef, Result<Connected, ServiceError>)> {
    let connecting = agent.def.mcp_servers.iter().map(|def| async move {
        let within = Duration::from_millis(def.timeout_ms).saturating_mul(3);
        let connected = tokio::time::timeout(within, connect(services, agent, def))
            .await
            .unwrap_or_else(|_| {
                Err(ServiceError::Execution(format!(
                    "{}: no tool list within {} ms",
                    def.name,
                    within.as_millis()
                )))
            });
        (def, connected)
    });
    futures_util::future::join_all(connecting).await
}

async fn connect(services: &Services, agent: &Agent, def: &McpServerDef) -> Result<Connected, ServiceError> {
    let mut headers = Vec::new();
    if def.oauth {
        headers.push((
            "Authorization".to_string(),
            super::remote_oauth::bearer(services, agent, def).await?,
        ));
    } else if let Some(header) = &def.header {
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
            let listed = remote.list_tools(outbound, &session).await.map_err(fail)?;
            let listing = Listing {
                session,
                tools: offerable(def, listed),
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

/// What of a server's tools a chat may be offered (kept, so a listing holds no more): those
/// its owner lets through, with a callable name and a schema of bounded size, each
/// description cut, the first few.
fn offerable(def: &McpServerDef, listed: Vec<RemoteTool>) -> Vec<RemoteTool> {
    listed
        .into_iter()
        .filter(|t| def.offers(&t.name) && def.tool_name(&t.name).is_some())
        .filter(|t| t.input_schema.to_string().len() <= MAX_SCHEMA_BYTES)
        .take(MAX_TOOLS_PER_SERVER)
        .map(|t| RemoteTool {
            description: t.description.chars().take(MAX_DESCRIPTION_CHARS).collect(),
            ..t
        })
        .collect()
}

/// What a server's listing is kept under: a change of its address or header is another.
fn listing_key(agent: &Agent, def: &McpServerDef) -> String {
    format!("{}\n{}\n{}\n{:?}", agent.id, def.name, def.url, def.header)
}

/// The value of the server's credential header, as its owner set it, for this address: one
/// set for another (the manifest's `url` changed since) is not sent.
async fn credential(services: &Services, agent: &Agent, def: &McpServerDef) -> Result<String, ServiceError> {
    let header = def.header.as_deref().unwrap_or_default();
    let Some(stored) = services.store.integration(&agent.id, &def.credential_kind()).await? else {
        return Err(ServiceError::Validation(format!(
            "{} needs its '{header}' value: set it with `agent-host mcp-server credential` or the account API",
            def.name
        )));
    };
    let set_for: CredentialPublic = super::integrations::public(&stored)?;
    if Some(&set_for.origin) != crate::outbound::origin_of(&def.url).as_ref() || set_for.header != header {
        return Err(ServiceError::Validation(format!(
            "{}'s credential was set for {} ({}); set it again for {}",
            def.name, set_for.origin, set_for.header, def.url
        )));
    }
    let secret: Credential = super::integrations::open(services, &stored)?;
    Ok(secret.value)
}

/// A server's credential, sealed among the agent's integrations.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Credential {
    pub value: String,
}

/// What is kept in the open beside it: the header and the address it was set for.
#[derive(serde::Serialize, serde::Deserialize)]
struct CredentialPublic {
    header: String,
    origin: String,
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

/// Keeps the value of the server's credential header, sealed, for the server's address as the
/// manifest now gives it (`agent-host mcp-server credential`, the account API).
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
    let public = CredentialPublic {
        header: header.clone(),
        origin: crate::outbound::origin_of(&def.url).unwrap_or_default(),
    };
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

/// Forgets the kept listing of the agent's server `name` (its credential changed: the next
/// chat connects afresh).
pub fn forget_listing(services: &Services, agent: &Agent, name: &str) {
    if let Some(def) = agent.def.mcp_servers.iter().find(|s| s.name == name) {
        services.remote_listings.forget(&listing_key(agent, def));
    }
}

/// Forgets it; false when none was set.
pub async fn remove_credential(services: &Services, agent: &Agent, name: &str) -> Result<bool, ServiceError> {
    let def = server(agent, name)?;
    if def.oauth {
        return super::remote_oauth::forget(services, agent, def).await;
    }
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

/// Every server the agent names, listed now (together, each within its time).
pub async fn status(services: &Services, agent: &Agent) -> Result<Vec<ServerStatus>, ServiceError> {
    let mut out = Vec::new();
    for (def, connected) in connect_all(services, agent).await {
        let credential_set = services
            .store
            .integration(&agent.id, &def.credential_kind())
            .await?
            .is_some();
        let tools = match connected {
            Ok(connected) => {
                let mut one = RemoteTools {
                    servers: vec![connected],
                    ..Default::default()
                };
                one.offer(&[]);
                Ok(one.specs.into_iter().map(|spec| spec.name).collect())
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn server(name: &str, tools: &[(&str, usize)]) -> Connected {
        let def: McpServerDef =
            toml::from_str(&format!("name = \"{name}\"\nurl = \"https://{name}.example\"")).unwrap();
        let listed = tools
            .iter()
            .map(|(tool, schema_bytes)| RemoteTool {
                name: tool.to_string(),
                description: "d".repeat(2_000),
                input_schema: serde_json::json!({ "type": "object", "description": "s".repeat(*schema_bytes) }),
            })
            .collect();
        Connected {
            remote: Remote {
                url: def.url.clone(),
                headers: vec![],
                timeout: Duration::from_secs(1),
                max_bytes: 1,
            },
            key: String::new(),
            listing: Listing {
                session: Session::default(),
                tools: offerable(&def, listed),
                at: Instant::now(),
            },
            calls: AtomicU32::new(0),
            def,
        }
    }

    fn offered(servers: Vec<Connected>, taken: &[&str]) -> RemoteTools {
        let mut tools = RemoteTools {
            buyer: None,
            servers,
            ..Default::default()
        };
        tools.offer(taken);
        tools
    }

    #[test]
    fn each_name_leads_to_one_tool_and_only_offered_ones_are_called() {
        // `a_` + `b` and `a` + `_b` are both `a___b`: the first is offered, once.
        let tools = offered(
            vec![server("a_", &[("b", 10)]), server("a", &[("_b", 10), ("_b", 10)])],
            &[],
        );
        let names: Vec<&str> = tools.specs().iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["a___b"]);
        assert_eq!(tools.routes["a___b"], (0, "b".to_string()));
        // A command's name stays the command's.
        let tools = offered(vec![server("a", &[("x", 10), ("y", 10)])], &["a__x"]);
        assert!(!tools.owns("a__x") && tools.owns("a__y"));
    }

    #[test]
    fn what_a_server_lists_is_cut_to_what_a_chat_may_be_offered() {
        let many: Vec<(String, usize)> = (0..50).map(|i| (format!("t{i}"), 10)).collect();
        let many: Vec<(&str, usize)> = many.iter().map(|(n, b)| (n.as_str(), *b)).collect();
        let big = server("big", &many);
        assert_eq!(big.listing.tools.len(), MAX_TOOLS_PER_SERVER);
        assert!(
            big.listing
                .tools
                .iter()
                .all(|t| t.description.chars().count() == MAX_DESCRIPTION_CHARS)
        );
        // A schema past its bound is never offered, nor callable.
        let fat = offered(vec![server("fat", &[("huge", MAX_SCHEMA_BYTES + 1), ("ok", 10)])], &[]);
        assert!(!fat.owns("fat__huge") && fat.owns("fat__ok"));
        // All the remote tools of a chat fit in their share of the prompt.
        let servers = (0..10)
            .map(|i| server(&format!("s{i}"), &[("a", 15_000), ("b", 15_000)]))
            .collect();
        let tools = offered(servers, &[]);
        let bytes: usize = tools
            .specs()
            .iter()
            .map(|s| s.name.len() + s.description.len() + s.parameters.to_string().len())
            .sum();
        assert!(
            bytes <= MAX_SPECS_BYTES && tools.specs().len() == 4,
            "{bytes} {}",
            tools.specs().len()
        );
    }
}
