//! What the plugin benches share: a runtime as the server builds it (a store in a temp
//! dir, the outbound guard letting only a loopback webhook through, an instant LLM).

// Each bench is its own crate and uses part of this.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use agent_host::llm::{Completion, CompletionRequest, LlmFuture, LlmProvider};
use agent_host::outbound::{HostPattern, Outbound, OutboundPolicy};
use agent_host::plugins::{HostServices, PluginRuntime, RuntimeLimits};
use agent_host::store::Store;

/// An LLM that answers at once, so the prompt bench measures the host, not a model.
struct InstantLlm;

impl LlmProvider for InstantLlm {
    fn name(&self) -> String {
        "instant".into()
    }
    fn complete(&self, _: CompletionRequest) -> LlmFuture<'_> {
        Box::pin(async {
            Ok(Completion {
                content: "A short poem.".into(),
                ..Completion::default()
            })
        })
    }
}

pub struct Setup {
    pub runtime: Arc<PluginRuntime>,
    pub webhook_url: String,
    pub store: Store,
    _dir: tempfile::TempDir,
}

/// An account and an agent in the store, for runs that touch what belongs to an agent (its
/// key-value store): the agent's id.
pub fn bench_agent(rt: &tokio::runtime::Runtime, store: &Store) -> String {
    use agent_host::domain::{AgentDef, Plan, X402Settings};
    rt.block_on(async {
        let account = agent_host::services::accounts::create(store, "bench", Plan::Free, None, None)
            .await
            .unwrap();
        let def = AgentDef {
            username: "bench".into(),
            name: "Bench".into(),
            personality: String::new(),
            knowledge: Vec::new(),
            x402: X402Settings {
                enabled: false,
                default_price: None,
                networks: Vec::new(),
                chat_by_use: None,
            },
            mcp_open: false,
            mcp: Default::default(),
            a2a: Default::default(),
            mcp_servers: Vec::new(),
            payments: None,
        };
        store
            .apply_agent(&account.id, def, Vec::new(), u64::MAX)
            .await
            .unwrap()
            .agent_id
    })
}

pub fn setup(rt: &tokio::runtime::Runtime) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("bench.db"), Duration::from_secs(5)).unwrap();
    let webhook_url = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let router = axum::Router::new().route("/hook", axum::routing::post(|| async { "hooked" }));
        tokio::spawn(async move { axum::serve(listener, router).await });
        format!("http://127.0.0.1:{port}/hook")
    });
    let port = webhook_url.split(':').nth(2).unwrap().split('/').next().unwrap();
    let outbound = Outbound::new(OutboundPolicy {
        allowed_hosts: vec![HostPattern::parse("*").unwrap()],
        private_exceptions: vec![HostPattern::parse(&format!("127.0.0.1:{port}")).unwrap()],
        allowed_ports: vec![80, 443],
        own_addresses: vec![],
        own_names: vec![],
        max_response_bytes: 1 << 20,
        max_timeout: Duration::from_secs(5),
        max_redirects: 5,
        marker: None,
    })
    .expect("the outbound client");
    let limits = RuntimeLimits {
        default_timeout: Duration::from_secs(5),
        max_memory_bytes: 128 << 20,
        max_output_bytes: 1 << 20,
        max_concurrency: 64,
        max_concurrency_per_account: 64,
        max_component_bytes: 32 << 20,
        max_compiles: 1,
        max_loaded_bytes: 64 << 20,
    };
    let services = HostServices {
        store: store.clone(),
        outbound,
        llm: Arc::new(InstantLlm),
        llm_max_tokens: 1024,
        kv_max_account_bytes: u64::MAX,
        payer: None,
        llm_run_limits: agent_host::plugins::LlmRunLimits {
            calls: 1000,
            prompt_chars: u64::MAX,
            tokens: u64::MAX,
        },
        llm_budget: Arc::new(agent_host::plugins::UnlimitedLlm),
        embedder: None,
    };
    let runtime = Arc::new(PluginRuntime::new(&dir.path().join("cache"), limits, services).unwrap());
    Setup {
        runtime,
        webhook_url,
        store,
        _dir: dir,
    }
}

pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}
