//! A map of shared values bounded by the bytes they hold, for the read cache.
//!
//! Past its bound, entries go in the order they were kept (a clock hand over a queue of
//! names), except that one read since the hand last passed it gets a second chance: it goes
//! to the back and loses its mark. Each insert past the bound drops just enough, and the hand
//! gives at most `SECOND_CHANCES` a call, so no insert walks the whole map under its lock. A
//! read marks its entry with one relaxed store (skipped when the mark is already set), so
//! reads keep sharing the map's read lock.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// What a value holds in memory: its own size and what it owns on the heap, as near as it
/// can be told without asking the allocator.
pub trait Weigh {
    fn bytes(&self) -> usize;
}

/// Read entries the hand sends back at most in one call before it drops whatever it meets.
const SECOND_CHANCES: usize = 1024;

struct Entry<T> {
    value: Arc<T>,
    /// What this entry is counted for: its value, its names, and what was charged later.
    bytes: usize,
    /// Its other name (an agent's username), in `aliases`.
    alias: Option<Box<str>>,
    read: AtomicBool,
    /// Which keeping of its name this is: the queue's older notes of the name are stale.
    kept: u64,
}

pub struct BoundedMap<T> {
    entries: HashMap<Box<str>, Entry<T>>,
    /// Another name of an entry, to its name in `entries`.
    aliases: HashMap<Box<str>, Box<str>>,
    /// Names in the order they were kept (or sent back), with the keeping they note.
    queue: VecDeque<(Box<str>, u64)>,
    kept: u64,
    bytes: usize,
    max_bytes: usize,
}

impl<T: Weigh> BoundedMap<T> {
    pub fn new(max_bytes: usize) -> BoundedMap<T> {
        BoundedMap {
            entries: HashMap::new(),
            aliases: HashMap::new(),
            queue: VecDeque::new(),
            kept: 0,
            bytes: 0,
            max_bytes,
        }
    }

    /// The value under `name` or under an alias of it.
    pub fn get(&self, name: &str) -> Option<Arc<T>> {
        let entry = match self.entries.get(name) {
            Some(entry) => entry,
            None => self.entries.get(self.aliases.get(name)?)?,
        };
        if !entry.read.load(Ordering::Relaxed) {
            entry.read.store(true, Ordering::Relaxed);
        }
        Some(entry.value.clone())
    }

    /// Whether the entry under `name` is `value` itself.
    pub fn holds(&self, name: &str, value: &Arc<T>) -> bool {
        self.entries
            .get(name)
            .is_some_and(|entry| Arc::ptr_eq(&entry.value, value))
    }

    /// Keeps `value` under `name` (and `alias`), replacing what either named.
    pub fn insert(&mut self, name: &str, alias: Option<&str>, value: Arc<T>) {
        self.remove(name);
        if let Some(alias) = alias {
            self.remove(alias);
        }
        // A hash table's slot is a pair and a control byte, with half as much again spare
        // room on average (it doubles when seven eighths full); the queue notes the name too.
        let slot = (size_of::<(Box<str>, Entry<T>)>() + 1) * 3 / 2 + size_of::<(Box<str>, u64)>();
        let alias_slot = (size_of::<(Box<str>, Box<str>)>() + 1) * 3 / 2;
        // The name is held twice (its key, the queue's note), the alias twice (its key, the
        // entry's note of it) with the name once more.
        let names = 2 * name.len() + alias.map_or(0, |a| alias_slot + 2 * a.len() + name.len());
        // The value's own `Arc` counters, beside it.
        let bytes = value.bytes() + 2 * size_of::<usize>() + slot + names;
        if bytes > self.max_bytes {
            return;
        }
        if let Some(alias) = alias {
            self.aliases.insert(alias.into(), name.into());
        }
        self.kept += 1;
        self.entries.insert(
            name.into(),
            Entry {
                value,
                bytes,
                alias: alias.map(Into::into),
                read: AtomicBool::new(false),
                kept: self.kept,
            },
        );
        self.queue.push_back((name.into(), self.kept));
        self.bytes += bytes;
        self.shrink();
    }

    /// Counts `bytes` more for the entry under `name` if it still holds `value` (what it
    /// rendered since it was kept): false when it is gone, so nothing is counted.
    pub fn charge(&mut self, name: &str, value: &Arc<T>, bytes: usize) -> bool {
        let Some(entry) = self.entries.get_mut(name) else {
            return false;
        };
        if !Arc::ptr_eq(&entry.value, value) {
            return false;
        }
        entry.bytes += bytes;
        self.bytes += bytes;
        self.shrink();
        true
    }

    fn remove(&mut self, name: &str) {
        let primary = self.aliases.get(name).cloned();
        self.drop_entry(primary.as_deref().unwrap_or(name));
    }

    fn drop_entry(&mut self, name: &str) {
        if let Some(entry) = self.entries.remove(name) {
            self.bytes -= entry.bytes;
            if let Some(alias) = entry.alias {
                self.aliases.remove(&alias);
            }
        }
    }

    /// Drops entries from the front of the queue until the bound holds: a read one goes to
    /// the back instead, unmarked, up to `SECOND_CHANCES` times a call.
    fn shrink(&mut self) {
        let mut chances = SECOND_CHANCES;
        while self.bytes > self.max_bytes {
            let Some((name, kept)) = self.queue.pop_front() else {
                break;
            };
            let Some(entry) = self.entries.get(&name) else { continue };
            if entry.kept != kept {
                continue;
            }
            if chances > 0 && entry.read.swap(false, Ordering::Relaxed) {
                chances -= 1;
                self.queue.push_back((name, kept));
                continue;
            }
            self.drop_entry(&name);
        }
        // Notes of names dropped or kept again pile up only when the bound is never reached.
        if self.queue.len() > 2 * self.entries.len() + 1024 {
            self.queue
                .retain(|(name, kept)| self.entries.get(name).is_some_and(|e| e.kept == *kept));
        }
    }

    pub fn clear(&mut self) {
        self.entries.clear();
        self.aliases.clear();
        self.queue.clear();
        self.bytes = 0;
    }

    /// Bytes counted for what is held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }
}

impl Weigh for String {
    fn bytes(&self) -> usize {
        size_of::<String>() + self.capacity()
    }
}

/// Heap bytes of a vector's buffer and of what its items own.
pub fn vec_bytes<T>(items: &[T], capacity: usize, owned: impl Fn(&T) -> usize) -> usize {
    capacity * size_of::<T>() + items.iter().map(owned).sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(bytes: usize) -> Arc<String> {
        Arc::new("x".repeat(bytes))
    }

    #[test]
    fn it_never_holds_more_than_its_bound() {
        let mut map = BoundedMap::new(10_000);
        for i in 0..1_000 {
            map.insert(&format!("k{i}"), None, text(100));
            assert!(map.bytes() <= 10_000, "{} bytes after {i} inserts", map.bytes());
        }
        assert!(map.len() > 20, "it still holds most of what fits: {}", map.len());
        assert!(map.get("k999").is_some(), "the newest entry stays");
    }

    #[test]
    fn the_oldest_unread_entry_goes_first() {
        let mut map = BoundedMap::new(2_000);
        let mut i = 0;
        while map.bytes() + 300 < 2_000 {
            map.insert(&format!("k{i}"), None, text(100));
            i += 1;
        }
        let held = map.len();
        map.get("k0");
        map.insert("one more", None, text(100));
        assert!(map.get("k0").is_some(), "read: sent back, not dropped");
        assert!(map.get("k1").is_none(), "the oldest unread goes");
        assert!(map.get("one more").is_some());
        assert!(map.len() <= held);
    }

    #[test]
    fn a_cold_entry_goes_however_many_are_read_around_it() {
        let mut map = BoundedMap::new(20_000);
        for i in 0..40 {
            map.insert(&format!("hot{i}"), None, text(100));
        }
        map.insert("cold", None, text(100));
        for i in 0..200 {
            for h in 0..40 {
                map.get(&format!("hot{h}"));
            }
            map.insert(&format!("new{i}"), None, text(100));
        }
        assert!(map.get("cold").is_none());
        assert!(
            (0..40).all(|h| map.get(&format!("hot{h}")).is_some()),
            "the read ones stay"
        );
    }

    #[test]
    fn notes_of_names_kept_again_do_not_pile_up() {
        let mut map = BoundedMap::new(1_000_000);
        for _ in 0..5_000 {
            map.insert("same", None, text(10));
        }
        assert_eq!(map.len(), 1);
        assert!(map.queue.len() <= 1_026, "{} notes", map.queue.len());
    }

    #[test]
    fn an_entry_read_between_passes_of_the_hand_outlives_unread_ones() {
        let mut map = BoundedMap::new(20_000);
        map.insert("hot", None, text(100));
        for i in 0..2_000 {
            assert!(map.get("hot").is_some(), "dropped after {i} inserts of cold entries");
            map.insert(&format!("cold{i}"), None, text(100));
        }
    }

    #[test]
    fn an_alias_finds_the_entry_and_goes_with_it() {
        let mut map = BoundedMap::new(1_000_000);
        map.insert("id1", Some("alice"), text(10));
        assert!(Arc::ptr_eq(&map.get("id1").unwrap(), &map.get("alice").unwrap()));
        let before = map.bytes();
        // The same agent read again under its other name replaces it, counted once.
        map.insert("id1", Some("alice"), text(10));
        assert_eq!(map.bytes(), before);
        assert_eq!(map.len(), 1);
        map.clear();
        assert!(map.get("alice").is_none());
        assert_eq!(map.bytes(), 0);
    }

    #[test]
    fn a_renamed_entry_frees_its_old_alias() {
        let mut map = BoundedMap::new(1_000_000);
        map.insert("id1", Some("alice"), text(10));
        map.insert("id1", Some("alicia"), text(10));
        assert!(map.get("alice").is_none());
        assert!(map.get("alicia").is_some());
        assert_eq!(map.aliases.len(), 1);
    }

    #[test]
    fn charges_count_only_for_the_entry_still_held() {
        let mut map = BoundedMap::new(1_000_000);
        let first = text(10);
        map.insert("id1", None, first.clone());
        let before = map.bytes();
        assert!(map.charge("id1", &first, 500));
        assert_eq!(map.bytes(), before + 500);
        // Replaced meanwhile: what the old value rendered is not counted for the new one.
        map.insert("id1", None, text(10));
        assert!(!map.charge("id1", &first, 500));
        assert_eq!(map.bytes(), before);
    }

    #[test]
    fn an_entry_larger_than_the_bound_is_not_kept() {
        let mut map = BoundedMap::new(1_000);
        map.insert("big", None, text(5_000));
        assert!(map.get("big").is_none());
        assert_eq!(map.bytes(), 0);
    }

    #[test]
    fn swept_aliases_go_with_their_entries() {
        let mut map = BoundedMap::new(5_000);
        for i in 0..500 {
            map.insert(&format!("id{i}"), Some(&format!("name{i}")), text(50));
        }
        assert_eq!(map.aliases.len(), map.len());
        assert!(map.bytes() <= 5_000);
    }
}
