use crate::plugins::state::HostState;

// Since 0.4.0 only. Counting needs no grant: it reaches nothing, and only a run sold by use
// charges for it.
impl crate::plugins::bindings::v0_4_0::agent::plugin::meter::Host for HostState {
    async fn add(&mut self, units: u64) -> wasmtime::Result<u64> {
        Ok(self.call.meter.add(units))
    }
}
