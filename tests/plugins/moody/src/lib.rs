//! A hostile plugin for the sandbox tests: its `manifest()` answers in even 3-second
//! windows of the clock and hangs in odd ones, as a component could once it has been
//! applied. The host must never call `manifest()` on a request path.

use agent_plugin_sdk::{Invocation, Manifest, Output, Plugin, Result};

/// Whether `manifest()` hangs now.
fn moody_now() -> bool {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    (secs / 3) % 2 == 1
}

struct Moody;

impl Plugin for Moody {
    fn manifest() -> Manifest {
        if moody_now() {
            let mut x: u64 = 0;
            loop {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        }
        Manifest::new("moody", "0.1.0").describe("Answers, whatever its manifest() does")
    }

    fn execute(_: Invocation) -> Result<Output> {
        Ok(Output::text("moody but working"))
    }
}

agent_plugin_sdk::export_plugin!(Moody);
