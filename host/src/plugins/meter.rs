//! The units of work a run reports through `meter.add` (WIT 0.4.0): what a command sold by
//! use charges its payer for. The count is shared with whoever started the run, so it is
//! read after the run whatever its end (a timeout, a trap), and it only ever grows.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// One run's count of units, shared by the run and its caller.
#[derive(Debug, Clone, Default)]
pub struct Meter(Arc<AtomicU64>);

impl Meter {
    pub fn new() -> Meter {
        Meter::default()
    }

    /// Adds `units`, stopping at `u64::MAX`, and returns the count so far.
    pub fn add(&self, units: u64) -> u64 {
        let before = self
            .0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| Some(n.saturating_add(units)))
            .unwrap_or_else(|n| n);
        before.saturating_add(units)
    }

    /// The units reported so far.
    pub fn units(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_is_shared_and_stops_at_the_largest_u64() {
        let meter = Meter::new();
        let caller = meter.clone();
        assert_eq!(meter.add(3), 3);
        assert_eq!(meter.add(4), 7);
        assert_eq!(caller.units(), 7);
        assert_eq!(meter.add(u64::MAX), u64::MAX);
        assert_eq!(meter.add(1), u64::MAX);
        assert_eq!(caller.units(), u64::MAX);
    }
}
