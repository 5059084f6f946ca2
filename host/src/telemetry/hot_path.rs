//! The series every request touches, resolved once per thread. A request then pays one
//! cheap hash of its route or command name, instead of the label caps' lock and the metric
//! family's lock and SipHash. Each thread's cache is bounded: past its size it starts over.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;

/// FxHash's mixing step: plenty for a few short names chosen by operators and authors,
/// and the cache is bounded (and never shared) so nobody can make it grow.
#[derive(Default)]
pub(super) struct FastHasher(u64);

impl Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(byte)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type Fast<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;
/// A handle per index (method × class, or outcome), filled as they are first used.
type Slots<M> = Vec<Option<M>>;

/// Entries one thread keeps at most in each cache.
const MAX_ENTRIES: usize = 1024;

/// Methods × status classes, as indexes.
pub(super) const METHODS: [&str; 8] = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "_OTHER"];
pub(super) const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];
/// A plugin run's outcomes, as indexes.
pub(super) const OUTCOMES: [&str; 7] = [
    "succeeded",
    "invalid_input",
    "failed",
    "unavailable",
    "timeout",
    "limit_exceeded",
    "crashed",
];

pub(super) fn index_of(list: &[&str], value: &str) -> usize {
    list.iter().position(|v| *v == value).unwrap_or(list.len() - 1)
}

thread_local! {
    /// By route template: one histogram per method and status class.
    static HTTP: RefCell<Fast<String, Slots<Histogram>>> = RefCell::default();
    /// By agent, then command: one counter per outcome.
    static RUNS: RefCell<Fast<String, Fast<String, Slots<Counter>>>> = RefCell::default();
}

/// The request-duration histogram of this route, method and class; `resolve` finds it the
/// first time on this thread.
pub(super) fn http(route: &str, method: usize, class: usize, resolve: impl FnOnce() -> Histogram) -> Histogram {
    HTTP.with(|cache| {
        let mut cache = cache.borrow_mut();
        if cache.len() >= MAX_ENTRIES && !cache.contains_key(route) {
            cache.clear();
        }
        let slots = match cache.get_mut(route) {
            Some(slots) => slots,
            None => cache
                .entry(route.to_string())
                .or_insert_with(|| vec![None; METHODS.len() * CLASSES.len()]),
        };
        slots[method * CLASSES.len() + class]
            .get_or_insert_with(resolve)
            .clone()
    })
}

/// The run counter of this agent, command and outcome; `resolve` finds it the first time
/// on this thread.
pub(super) fn runs(agent: &str, command: &str, outcome: usize, resolve: impl FnOnce() -> Counter) -> Counter {
    RUNS.with(|cache| {
        let mut cache = cache.borrow_mut();
        if cache.len() >= MAX_ENTRIES && !cache.contains_key(agent) {
            cache.clear();
        }
        let commands = match cache.get_mut(agent) {
            Some(commands) => commands,
            None => cache.entry(agent.to_string()).or_default(),
        };
        if commands.len() >= MAX_ENTRIES && !commands.contains_key(command) {
            commands.clear();
        }
        let slots = match commands.get_mut(command) {
            Some(slots) => slots,
            None => commands
                .entry(command.to_string())
                .or_insert_with(|| vec![None; OUTCOMES.len()]),
        };
        slots[outcome].get_or_insert_with(resolve).clone()
    })
}
