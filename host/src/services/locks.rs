//! One at a time per key, inside this process: a wallet's transfers, a payer's settlements,
//! whoever is moving one payment forward. Entries disappear when nobody holds or waits.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

pub struct KeyedLocks<K> {
    locks: Mutex<HashMap<K, Arc<AsyncMutex<()>>>>,
}

impl<K> Default for KeyedLocks<K> {
    fn default() -> Self {
        KeyedLocks {
            locks: Mutex::new(HashMap::new()),
        }
    }
}

/// Held while the key's work goes on; dropping it lets the next one in.
pub struct KeyGuard<K: Eq + Hash + Clone> {
    guard: Option<OwnedMutexGuard<()>>,
    key: K,
    owner: Arc<KeyedLocks<K>>,
}

impl<K: Eq + Hash + Clone> Drop for KeyGuard<K> {
    fn drop(&mut self) {
        self.guard.take();
        // The map's own reference is the last one: nobody holds or waits.
        let mut locks = self.owner.locks.lock().unwrap_or_else(|p| p.into_inner());
        if locks.get(&self.key).is_some_and(|l| Arc::strong_count(l) == 1) {
            locks.remove(&self.key);
        }
    }
}

impl<K: Eq + Hash + Clone> KeyedLocks<K> {
    fn entry(&self, key: &K) -> Arc<AsyncMutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
        locks.entry(key.clone()).or_default().clone()
    }

    /// Waits for the key.
    pub async fn lock(self: &Arc<Self>, key: K) -> KeyGuard<K> {
        let guard = self.entry(&key).lock_owned().await;
        KeyGuard {
            guard: Some(guard),
            key,
            owner: self.clone(),
        }
    }

    /// Waits for the key at most `wait`; `None` when it stayed taken.
    pub async fn lock_within(self: &Arc<Self>, key: K, wait: Duration) -> Option<KeyGuard<K>> {
        let guard = tokio::time::timeout(wait, self.entry(&key).lock_owned()).await.ok()?;
        Some(KeyGuard {
            guard: Some(guard),
            key,
            owner: self.clone(),
        })
    }

    /// The key if nobody has it now.
    pub fn try_lock(self: &Arc<Self>, key: K) -> Option<KeyGuard<K>> {
        let guard = self.entry(&key).try_lock_owned().ok();
        let held = KeyGuard {
            guard,
            key,
            owner: self.clone(),
        };
        // A failed attempt still cleans up its map entry on drop.
        held.guard.is_some().then_some(held)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.locks.lock().unwrap().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_holder_per_key_and_no_leftovers() {
        let locks: Arc<KeyedLocks<String>> = Arc::default();
        let a = locks.lock("a".into()).await;
        assert!(locks.try_lock("a".into()).is_none(), "taken");
        let b = locks.try_lock("b".into()).expect("another key is free");
        assert!(
            locks.lock_within("a".into(), Duration::from_millis(20)).await.is_none(),
            "still taken after the wait"
        );
        drop(a);
        assert!(locks.try_lock("a".into()).is_some(), "released");
        drop(b);
        assert_eq!(locks.len(), 0, "entries go when nobody holds or waits");
    }
}
