//! One run's memory budget. Its linear memories count against it (through the store's
//! limiter), and so does everything it makes the host hold for it: `wasi:http` header
//! fields, buffered request and response bodies, and resource handles. The per-instance cap
//! of the pooling allocator sees only the first; without the rest a plugin could grow host
//! memory through resources while its own memory stayed small.
//!
//! Host-side bytes come in two ways. Bodies are charged as they are read (`BodyCharge`,
//! given back when the body is gone), from tasks outside the store, hence the atomics.
//! Resources in the store's table are measured (`measure_resources`) each time the guest
//! calls into `wasi:http`, the only interface that makes large ones.
//!
//! A refused host-side allocation overdraws the budget: the run is stopped at its next epoch
//! tick and fails as a run out of linear memory does, with the same `memory` failure.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use wasmtime::component::ResourceTable;
use wasmtime_wasi_http::FieldMap;
use wasmtime_wasi_http::p2::types::{HostIncomingResponse, HostOutgoingRequest, HostOutgoingResponse};

use crate::outbound::ByteBudget;

/// Handles a run may hold at once, of every kind (streams, pollables, fields, requests).
/// wasmtime allows a million; each costs the host memory whatever it holds.
pub const MAX_HANDLES: usize = 4_096;

/// What one handle costs the host at least: its table slot and its boxed value.
const HANDLE_BYTES: usize = 256;

/// Most bytes one `fields` resource may hold (names and values): HTTP servers refuse
/// header sections much smaller than this (8–16 KiB is usual).
pub const FIELD_BYTES: usize = 64 * 1024;

/// Largest write to an outgoing body's stream, and chunks buffered behind it: what an
/// outgoing body not yet sent can hold on the host.
pub const OUTGOING_CHUNK_BYTES: usize = 64 * 1024;
pub const OUTGOING_BUFFER_CHUNKS: usize = 1;
const OUTGOING_BODY_BYTES: usize = OUTGOING_CHUNK_BYTES * (OUTGOING_BUFFER_CHUNKS + 1);

/// Per header value in a `HeaderMap`, beyond its bytes.
const FIELD_ENTRY_BYTES: usize = 32;

pub struct MemoryBudget {
    max: usize,
    linear: AtomicUsize,
    /// The table's resources, as last measured.
    resources: AtomicUsize,
    /// Request and response bodies the host holds for the run.
    bodies: AtomicUsize,
    /// A host-side allocation was refused: the run is to stop.
    overdrawn: AtomicBool,
    /// Which limit was hit first, in words.
    exceeded: Mutex<Option<String>>,
}

impl MemoryBudget {
    pub fn new(max: usize) -> Arc<MemoryBudget> {
        Arc::new(MemoryBudget {
            max,
            linear: AtomicUsize::new(0),
            resources: AtomicUsize::new(0),
            bodies: AtomicUsize::new(0),
            overdrawn: AtomicBool::new(false),
            exceeded: Mutex::new(None),
        })
    }

    /// The run's linear memories: they only grow, so at its end this is their peak.
    pub fn linear_bytes(&self) -> usize {
        self.linear.load(Ordering::Relaxed)
    }

    pub fn max(&self) -> usize {
        self.max
    }

    /// Linear memory, resources and bodies together.
    pub fn in_use(&self) -> usize {
        self.linear.load(Ordering::Relaxed) + self.host_bytes()
    }

    /// What the host holds for the run: resources and bodies.
    pub fn host_bytes(&self) -> usize {
        self.resources.load(Ordering::Relaxed) + self.bodies.load(Ordering::Relaxed)
    }

    /// Which limit was hit, if one was.
    pub fn exceeded(&self) -> Option<String> {
        self.exceeded.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Whether a host-side allocation was refused (the run is to stop).
    pub fn overdrawn(&self) -> bool {
        self.overdrawn.load(Ordering::Relaxed)
    }

    fn note(&self, message: String) {
        let mut exceeded = self.exceeded.lock().unwrap_or_else(|p| p.into_inner());
        exceeded.get_or_insert(message);
    }

    fn refuse_host(&self, what: &str) {
        self.note(format!(
            "the memory limit of {} MiB (its memories and what it had the host hold: {what})",
            self.max >> 20
        ));
        self.overdrawn.store(true, Ordering::Relaxed);
    }

    /// A linear memory grows from `current` to `desired` bytes, if the budget allows. A
    /// refusal is the guest's to handle (`memory.grow` returns -1); it does not stop the run.
    pub fn grow_linear(&self, current: usize, desired: usize) -> bool {
        let linear = self.linear.load(Ordering::Relaxed);
        let total = linear - current.min(linear) + desired;
        if total + self.host_bytes() > self.max {
            self.note(format!(
                "the memory limit of {} MiB (all of the instance's memories together)",
                self.max >> 20
            ));
            return false;
        }
        self.linear.store(total, Ordering::Relaxed);
        true
    }

    /// Records what the run's resources hold now; false (and the run overdrawn) if that
    /// no longer fits beside its memories and bodies.
    fn set_resources(&self, bytes: usize) -> bool {
        self.resources.store(bytes, Ordering::Relaxed);
        if self.in_use() > self.max {
            self.refuse_host("wasi:http fields and resources");
            return false;
        }
        true
    }

    fn take_body(&self, bytes: usize) -> bool {
        let before = self.bodies.fetch_add(bytes, Ordering::Relaxed);
        if self.linear.load(Ordering::Relaxed) + self.resources.load(Ordering::Relaxed) + before + bytes > self.max {
            self.bodies.fetch_sub(bytes, Ordering::Relaxed);
            self.refuse_host("wasi:http bodies");
            return false;
        }
        true
    }

    fn give_back_body(&self, bytes: usize) {
        self.bodies.fetch_sub(bytes, Ordering::Relaxed);
    }
}

/// Body bytes held for a run, charged to its budget and given back when dropped (or as
/// they are handed to the guest).
pub struct BodyCharge {
    budget: Arc<MemoryBudget>,
    bytes: AtomicUsize,
}

impl BodyCharge {
    pub fn new(budget: &Arc<MemoryBudget>) -> Arc<BodyCharge> {
        Arc::new(BodyCharge {
            budget: budget.clone(),
            bytes: AtomicUsize::new(0),
        })
    }

    /// Gives back `bytes` the host no longer holds.
    pub fn release(&self, bytes: usize) {
        let held = self
            .bytes
            .fetch_sub(bytes.min(self.bytes.load(Ordering::Relaxed)), Ordering::Relaxed);
        self.budget.give_back_body(bytes.min(held));
    }
}

impl ByteBudget for BodyCharge {
    fn take(&self, bytes: usize) -> bool {
        if !self.budget.take_body(bytes) {
            return false;
        }
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        true
    }

    fn give_back(&self, bytes: usize) {
        self.release(bytes);
    }
}

impl Drop for BodyCharge {
    fn drop(&mut self) {
        self.budget.give_back_body(*self.bytes.get_mut());
    }
}

/// Measuring walks the whole table, so a guest holding many handles is measured every so
/// many calls rather than at each: every `handles / MEASURE_STRIDE` calls. Between two
/// measurements a call adds at most one field map (`FIELD_BYTES`), so a run may hold at most
/// `MAX_HANDLES / MEASURE_STRIDE * FIELD_BYTES` (4 MiB) past its budget before it is stopped,
/// and measuring costs a few visits per call however many handles it holds.
const MEASURE_STRIDE: usize = 64;

/// When the run's resources are next measured.
#[derive(Default)]
pub struct ResourceMeter {
    calls_left: usize,
}

impl ResourceMeter {
    /// Called at each wasi:http call: measures what the table's resources hold when it is
    /// time, and records it in the budget. Past the budget the table takes nothing more (a
    /// new handle traps) and the run is overdrawn.
    pub fn tick(&mut self, table: &mut ResourceTable, budget: &MemoryBudget) {
        if self.calls_left > 0 {
            self.calls_left -= 1;
            return;
        }
        let handles = measure_resources(table, budget);
        self.calls_left = handles / MEASURE_STRIDE;
    }
}

/// A set of addresses, hashed as themselves.
type Addresses = HashSet<usize, std::hash::BuildHasherDefault<AddressHasher>>;

#[derive(Default)]
struct AddressHasher(u64);

impl std::hash::Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8) | u64::from(*b);
        }
    }

    fn write_usize(&mut self, n: usize) {
        // Addresses are aligned: the low bits say nothing.
        self.0 = (n as u64) >> 3;
    }
}

/// Measures what the table's resources hold and records it in the budget; returns how
/// many handles the table holds. Past the budget the table takes nothing more.
fn measure_resources(table: &mut ResourceTable, budget: &MemoryBudget) -> usize {
    let mut bytes = 0;
    let mut handles = 0;
    // Header maps are shared between handles (a response's headers, asked for twice):
    // each is counted once.
    let mut seen = Addresses::default();
    let mut fields = |map: &FieldMap| -> usize {
        let inner: &http::HeaderMap = map;
        if !seen.insert(inner as *const http::HeaderMap as usize) {
            return 0;
        }
        inner
            .iter()
            .map(|(name, value)| name.as_str().len() + value.len() + FIELD_ENTRY_BYTES)
            .sum()
    };
    for entry in table.iter_mut() {
        handles += 1;
        bytes += HANDLE_BYTES;
        if let Some(map) = entry.downcast_ref::<FieldMap>() {
            bytes += fields(map);
        } else if let Some(request) = entry.downcast_ref::<HostOutgoingRequest>() {
            bytes += fields(&request.headers) + if request.body.is_some() { OUTGOING_BODY_BYTES } else { 0 };
        } else if let Some(response) = entry.downcast_ref::<HostOutgoingResponse>() {
            bytes += fields(&response.headers)
                + if response.body.is_some() {
                    OUTGOING_BODY_BYTES
                } else {
                    0
                };
        } else if let Some(response) = entry.downcast_ref::<HostIncomingResponse>() {
            // Its body's bytes are charged as a body (see wasi_http.rs).
            bytes += fields(&response.headers);
        }
    }
    if !budget.set_resources(bytes) {
        table.set_max_capacity(handles);
    }
    handles
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_memory_of_an_instance_counts_against_one_budget() {
        let budget = MemoryBudget::new(100);
        assert!(budget.grow_linear(0, 40), "first memory");
        assert!(budget.grow_linear(0, 40), "second memory: 80 in all");
        assert!(!budget.grow_linear(0, 40), "a third would make 120");
        assert!(budget.exceeded().unwrap().contains("all of the instance's memories"));
        assert!(!budget.overdrawn(), "a refused memory.grow is the guest's to handle");
        assert!(budget.grow_linear(40, 60), "growing one by 20: 100");
        assert!(!budget.grow_linear(60, 61));
    }

    #[test]
    fn bodies_share_the_budget_with_memories_and_come_back_when_dropped() {
        let budget = MemoryBudget::new(1000);
        assert!(budget.grow_linear(0, 600));
        let charge = BodyCharge::new(&budget);
        assert!(charge.take(300));
        assert!(
            !budget.grow_linear(600, 800),
            "memory may not grow into the bodies' share"
        );
        assert!(!charge.take(200), "600 + 300 + 200 is over");
        assert!(budget.overdrawn(), "a refused body stops the run");
        assert!(budget.exceeded().unwrap().contains("memory limit"));
        charge.release(100);
        assert_eq!(budget.in_use(), 800);
        drop(charge);
        assert_eq!(budget.in_use(), 600, "a dropped body gives back the rest");
    }

    #[test]
    fn resources_are_measured_from_the_table_and_fill_it_no_further_past_the_budget() {
        let budget = MemoryBudget::new(64 * 1024);
        let mut table = ResourceTable::new();
        let big = || {
            let mut map = FieldMap::new_mutable(FIELD_BYTES);
            let value = http::HeaderValue::from_bytes(&[b'a'; 20_000]).unwrap();
            map.append_raw(http::HeaderName::from_static("x-big"), value).unwrap();
            map
        };
        let map = big();
        table.push(map.clone()).unwrap();
        measure_resources(&mut table, &budget);
        let one = budget.host_bytes();
        assert!(one > 20_000 && one < 21_000, "{one}");
        // A second handle on the same map (as `headers()` gives) costs only its handle.
        table.push(map).unwrap();
        measure_resources(&mut table, &budget);
        assert_eq!(budget.host_bytes(), one + HANDLE_BYTES);
        table.push(big()).unwrap();
        measure_resources(&mut table, &budget);
        assert!(!budget.overdrawn(), "two maps of 20 KB fit in 64 KiB");
        table.push(big()).unwrap();
        table.push(big()).unwrap();
        measure_resources(&mut table, &budget);
        assert!(budget.overdrawn(), "four do not");
        assert!(budget.exceeded().unwrap().contains("wasi:http fields"));
        assert!(table.push(FieldMap::new_mutable(1)).is_err(), "the table is closed");
    }
}
