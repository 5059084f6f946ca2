//! One at a time per key: a wallet's transfers, a payer's settlements, whoever is moving
//! one payment forward. Inside this process an async mutex per key (entries disappear when
//! nobody holds or waits); when the store is shared by several hosts, the holder then also
//! takes the key's turn in the database (store/locks.rs), so it is one at a time across
//! hosts too.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

use crate::domain::Network;
use crate::store::{SharedTurn, Store, StoreError};

/// How a key is named in the database's turns.
pub trait TurnName {
    fn turn_name(&self) -> String;
}

impl TurnName for String {
    fn turn_name(&self) -> String {
        self.clone()
    }
}

impl TurnName for (String, Network) {
    fn turn_name(&self) -> String {
        format!("{}:{}", self.1, self.0)
    }
}

impl TurnName for (Network, String) {
    fn turn_name(&self) -> String {
        format!("{}:{}", self.0, self.1)
    }
}

pub struct KeyedLocks<K> {
    locks: Mutex<HashMap<K, Arc<AsyncMutex<()>>>>,
    /// The store whose turns are taken too, and the namespace of these keys there.
    shared: Option<(Store, &'static str)>,
}

impl<K> Default for KeyedLocks<K> {
    fn default() -> Self {
        KeyedLocks {
            locks: Mutex::new(HashMap::new()),
            shared: None,
        }
    }
}

impl<K> KeyedLocks<K> {
    /// Locks that also hold across the processes serving from `store`, named
    /// `namespace:key` there.
    pub fn across(store: &Store, namespace: &'static str) -> Self {
        KeyedLocks {
            locks: Mutex::new(HashMap::new()),
            shared: store.is_shared().then(|| (store.clone(), namespace)),
        }
    }
}

/// Held while the key's work goes on; dropping it lets the next one in.
pub struct KeyGuard<K: Eq + Hash + Clone> {
    // Given back before the in-process turn, so a waiter here finds the shared one free.
    shared: Option<SharedTurn>,
    guard: Option<OwnedMutexGuard<()>>,
    key: K,
    owner: Arc<KeyedLocks<K>>,
}

impl<K: Eq + Hash + Clone> Drop for KeyGuard<K> {
    fn drop(&mut self) {
        self.shared.take();
        self.guard.take();
        // The map's own reference is the last one: nobody holds or waits.
        let mut locks = self.owner.locks.lock().unwrap_or_else(|p| p.into_inner());
        if locks.get(&self.key).is_some_and(|l| Arc::strong_count(l) == 1) {
            locks.remove(&self.key);
        }
    }
}

impl<K: Eq + Hash + Clone + TurnName> KeyedLocks<K> {
    fn entry(&self, key: &K) -> Arc<AsyncMutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
        locks.entry(key.clone()).or_default().clone()
    }

    fn held(self: &Arc<Self>, key: K, guard: OwnedMutexGuard<()>) -> KeyGuard<K> {
        KeyGuard {
            shared: None,
            guard: Some(guard),
            key,
            owner: self.clone(),
        }
    }

    /// Takes the key's shared turn for a guard already held here, waiting until `deadline`
    /// (`None`: as long as it takes; `Some(now)`: not at all). `None` when it stayed taken.
    async fn share(&self, mut held: KeyGuard<K>, deadline: Option<Instant>) -> Result<Option<KeyGuard<K>>, StoreError> {
        let Some((store, namespace)) = &self.shared else {
            return Ok(Some(held));
        };
        let name = format!("{namespace}:{}", held.key.turn_name());
        let wait = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        let turn = match wait {
            Some(wait) if wait.is_zero() => store.try_turn(&name).await?,
            wait => store.turn(&name, wait).await?,
        };
        Ok(turn.map(|turn| {
            held.shared = Some(turn);
            held
        }))
    }

    /// Waits for the key.
    pub async fn lock(self: &Arc<Self>, key: K) -> Result<KeyGuard<K>, StoreError> {
        let guard = self.entry(&key).lock_owned().await;
        let held = self.held(key, guard);
        // Without a deadline the shared turn is waited for until it comes.
        self.share(held, None)
            .await?
            .ok_or_else(|| StoreError::Task("a turn waited for without a deadline was not taken".into()))
    }

    /// Waits for the key at most `wait`; `None` when it stayed taken.
    pub async fn lock_within(self: &Arc<Self>, key: K, wait: Duration) -> Result<Option<KeyGuard<K>>, StoreError> {
        let deadline = Instant::now() + wait;
        let Ok(guard) = tokio::time::timeout(wait, self.entry(&key).lock_owned()).await else {
            return Ok(None);
        };
        let held = self.held(key, guard);
        self.share(held, Some(deadline)).await
    }

    /// The key if nobody has it now.
    pub async fn try_lock(self: &Arc<Self>, key: K) -> Result<Option<KeyGuard<K>>, StoreError> {
        let guard = self.entry(&key).try_lock_owned().ok();
        let Some(guard) = guard else {
            // A failed attempt cleans up its map entry.
            let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
            if locks.get(&key).is_some_and(|l| Arc::strong_count(l) == 1) {
                locks.remove(&key);
            }
            return Ok(None);
        };
        let held = self.held(key, guard);
        self.share(held, Some(Instant::now())).await
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
        let a = locks.lock("a".into()).await.unwrap();
        assert!(locks.try_lock("a".into()).await.unwrap().is_none(), "taken");
        let b = locks.try_lock("b".into()).await.unwrap().expect("another key is free");
        assert!(
            locks
                .lock_within("a".into(), Duration::from_millis(20))
                .await
                .unwrap()
                .is_none(),
            "still taken after the wait"
        );
        drop(a);
        assert!(locks.try_lock("a".into()).await.unwrap().is_some(), "released");
        drop(b);
        assert_eq!(locks.len(), 0, "entries go when nobody holds or waits");
    }
}
