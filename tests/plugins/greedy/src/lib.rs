//! A hostile upload: its `manifest()`, which the host calls when the component is applied
//! or uploaded, hoards wasi:http header fields. The host must stop it within the run's
//! memory budget and refuse the component.

use agent_plugin_sdk::{Invocation, Manifest, Output, Plugin, Result};

#[path = "../../probe/src/hoard.rs"]
#[allow(dead_code)]
mod hoard;

struct Greedy;

impl Plugin for Greedy {
    fn manifest() -> Manifest {
        hoard::fields()
    }

    fn execute(_call: Invocation) -> Result<Output> {
        Ok(Output::text("never applied"))
    }
}

agent_plugin_sdk::export_plugin!(Greedy);
