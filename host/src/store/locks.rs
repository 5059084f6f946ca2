//! Turns that hold across every process serving from the store. On PostgreSQL a turn is a
//! session advisory lock, so hosts sharing the database take turns, and a host that dies
//! frees its turns with its connection. SQLite has one serving process, whose in-process
//! locks (services/locks.rs) are the whole story: its turns are always free.

use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use super::postgres::AdvisoryLock;
use super::{Backend, Store, StoreError};

/// A turn held across hosts; given back when dropped.
pub struct SharedTurn {
    _lock: Option<AdvisoryLock>,
}

/// How often a waiting turn asks again, at first and at most.
const FIRST_POLL: Duration = Duration::from_millis(5);
const LONGEST_POLL: Duration = Duration::from_millis(100);

impl Store {
    /// True when other processes may serve from this store at the same time.
    pub fn is_shared(&self) -> bool {
        matches!(&*self.backend, Backend::Postgres(_))
    }

    /// The turn named `name` if nobody holds it now.
    pub async fn try_turn(&self, name: &str) -> Result<Option<SharedTurn>, StoreError> {
        match &*self.backend {
            Backend::Sqlite(_) => Ok(Some(SharedTurn { _lock: None })),
            Backend::Postgres(db) => Ok(db
                .try_lock(lock_key(name))
                .await?
                .map(|lock| SharedTurn { _lock: Some(lock) })),
        }
    }

    /// Waits for the turn named `name`, at most `wait` (`None`: as long as it takes).
    pub async fn turn(&self, name: &str, wait: Option<Duration>) -> Result<Option<SharedTurn>, StoreError> {
        let deadline = wait.map(|w| Instant::now() + w);
        let mut poll = FIRST_POLL;
        loop {
            if let Some(turn) = self.try_turn(name).await? {
                return Ok(Some(turn));
            }
            if deadline.is_some_and(|d| Instant::now() + poll > d) {
                return Ok(None);
            }
            tokio::time::sleep(poll).await;
            poll = (poll * 2).min(LONGEST_POLL);
        }
    }
}

/// The 64-bit advisory lock key of a turn's name.
pub(super) fn lock_key(name: &str) -> i64 {
    let digest = Sha256::digest(name.as_bytes());
    i64::from_be_bytes(digest[..8].try_into().unwrap_or_default())
}
