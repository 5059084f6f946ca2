//! `plugin inspect` / `agent apply` on arbitrary bytes: the component checks, compiling it,
//! and calling its `manifest()` under the limits, with the real plugin runtime.
//! Invariants: never panics; bytes that are not one of our components are refused with a
//! message; an accepted component's manifest passes the same checks again.

#![no_main]

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use agent_host::llm::NoProvider;
use agent_host::outbound::{Outbound, OutboundPolicy};
use agent_host::plugins::{HostServices, PluginKind, PluginRuntime, RuntimeLimits};
use libfuzzer_sys::fuzz_target;

struct Fixture {
    runtime: PluginRuntime,
    tokio: tokio::runtime::Runtime,
    _dir: tempfile::TempDir,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = agent_host::store::Store::open(&dir.path().join("fuzz.db"), Duration::from_secs(5)).expect("store");
        let services = HostServices {
            embedder: None,
            store,
            outbound: Outbound::new(OutboundPolicy {
                allowed_hosts: vec![],
                private_exceptions: vec![],
                allowed_ports: vec![80, 443],
                own_addresses: vec![],
                own_names: vec![],
                max_response_bytes: 1024,
                max_timeout: Duration::from_millis(100),
                max_redirects: 0,
                marker: None,
            })
            .expect("the outbound client"),
            llm: Arc::new(NoProvider),
            llm_max_tokens: 16,
            kv_max_account_bytes: 1 << 20,
            payer: None,
            llm_run_limits: agent_host::plugins::LlmRunLimits {
                calls: 1000,
                prompt_chars: u64::MAX,
                tokens: u64::MAX,
            },
            llm_budget: Arc::new(agent_host::plugins::UnlimitedLlm),
        };
        let limits = RuntimeLimits {
            default_timeout: Duration::from_millis(500),
            max_memory_bytes: 16 << 20,
            max_output_bytes: 1 << 16,
            max_concurrency: 4,
            max_concurrency_per_account: 4,
            max_component_bytes: 1 << 20,
            max_compiles: 1,
            max_loaded_bytes: 64 << 20,
        };
        let runtime = PluginRuntime::new(&dir.path().join("cache"), limits, services).expect("runtime");
        let tokio = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio");
        Fixture {
            runtime,
            tokio,
            _dir: dir,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let fixture = fixture();
    let inspected = fixture
        .tokio
        .block_on(fixture.runtime.inspect(data.to_vec(), PluginKind::Custom));
    match inspected {
        Ok(inspection) => {
            assert_eq!(inspection.size, data.len());
            agent_host::plugins::check_manifest(&inspection.manifest, PluginKind::Custom)
                .expect("checked once already");
        }
        Err(err) => assert!(!err.to_string().is_empty()),
    }
});
