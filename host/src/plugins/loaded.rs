//! The compiled components held ready in memory, within a budget of bytes.
//!
//! A held component costs its compiled image: hundreds of KiB for a small Rust plugin, tens
//! of MiB for a JavaScript or Python one, which carries its language's engine. Held without
//! a bound, every component ever run would stay. Past the budget the least recently run is
//! dropped; its next run loads it from the disk cache (milliseconds, not a compile), and a
//! run holding it keeps it alive meanwhile. The built-in handlers are pinned: a tenant
//! cycling through many components never makes everyone's `simple_text` reload.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use tokio::sync::OnceCell;

use super::engine::Pre;

pub(super) type Cell = Arc<OnceCell<Arc<Pre>>>;

pub(super) struct Loaded {
    entries: HashMap<String, Entry>,
    /// Counts lookups, so an entry's `used` orders entries by recency.
    clock: u64,
    /// Bytes of the counted images, and the most to count.
    bytes: usize,
    max_bytes: usize,
    pinned: HashSet<String>,
}

struct Entry {
    cell: Cell,
    used: u64,
    /// Its image's bytes once loaded and counted; 0 while loading, and for a pinned one.
    bytes: usize,
}

impl Loaded {
    pub(super) fn new(max_bytes: usize) -> Loaded {
        Loaded {
            entries: HashMap::new(),
            clock: 0,
            bytes: 0,
            max_bytes,
            pinned: HashSet::new(),
        }
    }

    /// The cell `hash` is (or will be) loaded into, marked as just used.
    pub(super) fn cell(&mut self, hash: &str) -> Cell {
        self.clock += 1;
        let used = self.clock;
        let entry = self.entries.entry(hash.to_string()).or_insert_with(|| Entry {
            cell: Cell::default(),
            used,
            bytes: 0,
        });
        entry.used = used;
        entry.cell.clone()
    }

    /// `cell` now holds `hash`'s component, of `bytes`: counted, then the least recently
    /// used others dropped until the held images fit the budget. A scan, but only after a
    /// load, which costs far more.
    pub(super) fn count(&mut self, hash: &str, cell: &Cell, bytes: usize) {
        if self.pinned.contains(hash) {
            return;
        }
        match self.entries.get_mut(hash) {
            Some(entry) if Arc::ptr_eq(&entry.cell, cell) && entry.bytes == 0 => entry.bytes = bytes,
            // Dropped or replaced while it loaded: nothing of it is held here.
            _ => return,
        }
        self.bytes += bytes;
        while self.bytes > self.max_bytes {
            let oldest = self
                .entries
                .iter()
                .filter(|(h, e)| e.bytes > 0 && h.as_str() != hash)
                .min_by_key(|(_, e)| e.used)
                .map(|(h, _)| h.clone());
            match oldest {
                Some(oldest) => self.forget(&oldest),
                // Only this one is held: it stays, whatever its size.
                None => break,
            }
        }
    }

    /// A load into `cell` failed: the next run tries afresh.
    pub(super) fn drop_failed(&mut self, hash: &str, cell: &Cell) {
        if self
            .entries
            .get(hash)
            .is_some_and(|e| Arc::ptr_eq(&e.cell, cell) && e.bytes == 0)
        {
            self.entries.remove(hash);
        }
    }

    pub(super) fn forget(&mut self, hash: &str) {
        if let Some(entry) = self.entries.remove(hash) {
            self.bytes -= entry.bytes;
        }
    }

    pub(super) fn pin(&mut self, hash: &str) {
        self.pinned.insert(hash.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(loaded: &Loaded) -> Vec<&str> {
        let mut held: Vec<&str> = loaded.entries.keys().map(String::as_str).collect();
        held.sort();
        held
    }

    fn load(loaded: &mut Loaded, hash: &str, bytes: usize) {
        let cell = loaded.cell(hash);
        loaded.count(hash, &cell, bytes);
    }

    #[test]
    fn the_least_recently_run_are_dropped_until_the_images_fit() {
        let mut loaded = Loaded::new(100);
        load(&mut loaded, "a", 60);
        load(&mut loaded, "b", 30);
        // "a" runs again: now "b" is the least recent.
        let a = loaded.cell("a");
        assert!(Arc::ptr_eq(&a, &loaded.cell("a")), "the same cell while held");
        load(&mut loaded, "c", 40);
        assert_eq!(held(&loaded), ["a", "c"]);
        assert_eq!(loaded.bytes, 100);
        // One image over the whole budget is still held, alone.
        load(&mut loaded, "huge", 500);
        assert_eq!(held(&loaded), ["huge"]);
        assert_eq!(loaded.bytes, 500);
    }

    #[test]
    fn pinned_and_loading_components_are_never_dropped() {
        let mut loaded = Loaded::new(100);
        loaded.pin("simple_text");
        load(&mut loaded, "simple_text", 80);
        let loading = loaded.cell("loading");
        load(&mut loaded, "a", 90);
        load(&mut loaded, "b", 90);
        assert_eq!(held(&loaded), ["b", "loading", "simple_text"]);
        // A load that failed leaves nothing behind; one dropped meanwhile is not counted.
        loaded.drop_failed("loading", &loading);
        let stale = loaded.cell("c");
        loaded.forget("c");
        loaded.count("c", &stale, 50);
        assert_eq!(held(&loaded), ["b", "simple_text"]);
        assert_eq!(loaded.bytes, 90);
    }
}
