//! The read cache of a serving process: API keys (with their accounts) and agents (with
//! their commands and open breakers), which every keyed request reads, and the agents for
//! sale over x402 and their wallets' addresses, which discovery and every paid request
//! read, kept in memory.
//!
//! It is as fresh as the database to within a stated bound. Every write to the cached
//! tables, by any process (this one, the CLI on the same SQLite file, another host on the
//! same PostgreSQL database), bumps `cache_version` through triggers (migration 0012). A
//! watcher reads that number every check interval and empties the cache when it moved. An
//! entry is served only while the last check that found nothing new started less than
//! `max_age` ago: if checks stall or fail, reads go to the database, so a write is never
//! missed for longer than `max_age`, however the process is doing. This process's own
//! writes that change a held entry (`revoke_key`, `apply_agent`, through `write_cached`)
//! empty the cache at once; new keys, accounts and agents need nothing, since only what
//! exists is held.
//!
//! Why a polled number rather than LISTEN/NOTIFY: it works the same on both backends, and
//! NOTIFY would still need a poll behind it, since notifications sent while a host is
//! reconnecting are lost. Ten tiny reads a second per host cost nothing measurable.
//!
//! Without a watcher (the CLI, tests calling the store directly) the cache is off and
//! every read goes to the database.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::{Duration, Instant};

use super::Store;
use super::bounded_map::{BoundedMap, Weigh, vec_bytes};
use super::breakers::Breaker;
use super::keys::KeyRecord;
use super::sql::args;
use super::wallets::Listing;
use bytes::Bytes;

use crate::domain::{Account, Agent, ApiKeyInfo, Command, Integration};

/// An agent as the keyed path needs it: itself and its commands in manifest order.
#[derive(Debug)]
pub struct AgentWithCommands {
    pub agent: Agent,
    pub commands: Vec<Command>,
    /// Its paid commands' open breakers (paused for sale), by command name.
    pub open_breakers: Vec<Breaker>,
    /// Its command listings as served (all commands, and per integration), rendered on
    /// first use and dropped with the entry, so they are exactly as fresh as it is. Those per
    /// integration are rarer: their room is made when the first is.
    listing: OnceLock<Bytes>,
    listings_by_integration: OnceLock<Box<[OnceLock<Bytes>; 5]>>,
}

impl AgentWithCommands {
    pub fn new(agent: Agent, commands: Vec<Command>, open_breakers: Vec<Breaker>) -> AgentWithCommands {
        AgentWithCommands {
            agent,
            commands,
            open_breakers,
            listing: OnceLock::new(),
            listings_by_integration: OnceLock::new(),
        }
    }

    /// The listing of the commands offered on `integration` (all, for none), rendered by
    /// `render` once.
    fn listing(&self, integration: Option<Integration>, render: impl FnOnce() -> Bytes) -> Bytes {
        let slot = match integration {
            None => return self.listing.get_or_init(render).clone(),
            Some(Integration::Chatapp) => 0,
            Some(Integration::Social) => 1,
            Some(Integration::X402) => 2,
            Some(Integration::Mcp) => 3,
            Some(Integration::A2a) => 4,
        };
        let slots = self.listings_by_integration.get_or_init(Default::default);
        slots[slot].get_or_init(render).clone()
    }
}

/// What the cache may hold when no bound is set (the CLI, tests), in bytes.
const DEFAULT_MAX_BYTES: usize = 64 << 20;

pub struct ReadCache {
    /// Bumped whenever the cache is emptied: a read that started before cannot fill it.
    generation: AtomicU64,
    on: AtomicBool,
    /// The database's `cache_version` at the last check.
    seen_version: AtomicI64,
    /// When the last check that found the cache current started, in ms since `epoch`.
    checked_at_ms: AtomicU64,
    epoch: Instant,
    max_age_ms: AtomicU64,
    keys: RwLock<BoundedMap<KeyRecord>>,
    /// By id, and by username as its alias.
    agents: RwLock<BoundedMap<AgentWithCommands>>,
    /// The x402 discovery list's agents (its wallets are watched too).
    listings: RwLock<Option<Arc<Vec<Listing>>>>,
    /// Wallets' addresses, by `agent id/network` (never their sealed keys: resealing them
    /// bumps no version).
    wallet_addresses: RwLock<BoundedMap<String>>,
}

/// A read about to go to the database, to be kept if nothing changed meanwhile.
#[derive(Clone, Copy)]
pub struct Ticket(Option<u64>);

impl ReadCache {
    pub fn new() -> ReadCache {
        let cache = ReadCache {
            generation: AtomicU64::new(0),
            on: AtomicBool::new(false),
            seen_version: AtomicI64::new(i64::MIN),
            checked_at_ms: AtomicU64::new(0),
            epoch: Instant::now(),
            max_age_ms: AtomicU64::new(0),
            keys: RwLock::new(BoundedMap::new(0)),
            agents: RwLock::new(BoundedMap::new(0)),
            listings: RwLock::default(),
            wallet_addresses: RwLock::new(BoundedMap::new(0)),
        };
        cache.bound(DEFAULT_MAX_BYTES);
        cache
    }

    /// Holds at most `max_bytes` (as counted by `Weigh`): 13/16 for agents, which every
    /// keyed and paid request reads (about 8 KB each once listed); 1/8 for keys with their
    /// accounts (about 600 bytes each); 1/16 for wallet addresses (about 150 bytes each). The
    /// x402 discovery list is one entry beside them, not counted.
    pub fn bound(&self, max_bytes: usize) {
        let sixteenth = max_bytes / 16;
        *self.keys.write().unwrap_or_else(|p| p.into_inner()) = BoundedMap::new(2 * sixteenth);
        *self.wallet_addresses.write().unwrap_or_else(|p| p.into_inner()) = BoundedMap::new(sixteenth);
        *self.agents.write().unwrap_or_else(|p| p.into_inner()) = BoundedMap::new(max_bytes - 3 * sixteenth);
    }

    /// Bytes held, as counted by `Weigh`: keys, agents (with their rendered listings) and
    /// wallet addresses.
    pub fn bytes(&self) -> usize {
        self.keys.read().unwrap_or_else(|p| p.into_inner()).bytes()
            + self.agents.read().unwrap_or_else(|p| p.into_inner()).bytes()
            + self.wallet_addresses.read().unwrap_or_else(|p| p.into_inner()).bytes()
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Entries may be served: a watcher runs and its last check is recent enough.
    fn current(&self) -> bool {
        self.on.load(Ordering::Acquire)
            && self.now_ms().saturating_sub(self.checked_at_ms.load(Ordering::Acquire))
                < self.max_age_ms.load(Ordering::Relaxed)
    }

    /// Entries will be served once a check succeeded, while the last one is under `max_age`.
    fn enable(&self, max_age: Duration) {
        self.max_age_ms.store(max_age.as_millis() as u64, Ordering::Relaxed);
    }

    /// A check that started at `started` (ms) read `version`: empties the cache if it
    /// moved, then counts the cache current as of `started`.
    fn checked(&self, started: u64, version: i64) {
        if self.seen_version.swap(version, Ordering::AcqRel) != version {
            self.clear();
        }
        self.checked_at_ms.fetch_max(started, Ordering::AcqRel);
        self.on.store(true, Ordering::Release);
    }

    /// Something cached may have changed: drop everything.
    pub fn clear(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.keys.write().unwrap_or_else(|p| p.into_inner()).clear();
        self.agents.write().unwrap_or_else(|p| p.into_inner()).clear();
        *self.listings.write().unwrap_or_else(|p| p.into_inner()) = None;
        self.wallet_addresses.write().unwrap_or_else(|p| p.into_inner()).clear();
    }

    pub fn listings(&self) -> Option<Arc<Vec<Listing>>> {
        if !self.current() {
            return None;
        }
        self.listings.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn keep_listings(&self, ticket: Ticket, listings: &Arc<Vec<Listing>>) {
        let Ticket(Some(generation)) = ticket else { return };
        let mut slot = self.listings.write().unwrap_or_else(|p| p.into_inner());
        // Checked under the slot's lock: `clear` bumps the generation before taking it.
        if self.generation.load(Ordering::Acquire) == generation {
            *slot = Some(listings.clone());
        }
    }

    /// Taken before a database read whose result may be kept.
    pub fn ticket(&self) -> Ticket {
        Ticket(self.current().then(|| self.generation.load(Ordering::Acquire)))
    }

    pub fn key(&self, id: &str) -> Option<Arc<KeyRecord>> {
        self.get(&self.keys, id)
    }

    pub fn keep_key(&self, ticket: Ticket, record: &Arc<KeyRecord>) {
        self.keep(ticket, &self.keys, &record.info.id, None, record);
    }

    pub fn agent(&self, id_or_username: &str) -> Option<Arc<AgentWithCommands>> {
        self.get(&self.agents, id_or_username)
    }

    pub fn wallet_address(&self, agent_and_network: &str) -> Option<Arc<String>> {
        self.get(&self.wallet_addresses, agent_and_network)
    }

    /// What `map` holds under `name`, while entries may be served.
    fn get<T: Weigh>(&self, map: &RwLock<BoundedMap<T>>, name: &str) -> Option<Arc<T>> {
        if !self.current() {
            return None;
        }
        map.read().unwrap_or_else(|p| p.into_inner()).get(name)
    }

    pub fn keep_wallet_address(&self, ticket: Ticket, agent_and_network: &str, address: &Arc<String>) {
        self.keep(ticket, &self.wallet_addresses, agent_and_network, None, address);
    }

    pub fn keep_agent(&self, ticket: Ticket, found: &Arc<AgentWithCommands>) {
        let username = Some(found.agent.def.username.as_str());
        self.keep(ticket, &self.agents, &found.agent.id, username, found);
    }

    /// `found`'s listing for `integration`, rendered by `render` the first time and then
    /// counted against the bound while `found` is held.
    pub fn listing(
        &self,
        found: &Arc<AgentWithCommands>,
        integration: Option<Integration>,
        render: impl FnOnce() -> Bytes,
    ) -> Bytes {
        let first_by_integration = integration.is_some() && found.listings_by_integration.get().is_none();
        let mut rendered = false;
        let listing = found.listing(integration, || {
            rendered = true;
            render()
        });
        if rendered {
            self.charge_listing(found, &listing, first_by_integration);
        }
        listing
    }

    /// Counts a listing `found` rendered after it was kept, if the cache still holds it.
    fn charge_listing(&self, found: &Arc<AgentWithCommands>, listing: &Bytes, first_by_integration: bool) {
        // The bytes, and the shared header a kept `Bytes` gets once it is cloned.
        let mut bytes = listing.len() + 4 * size_of::<usize>();
        if first_by_integration {
            bytes += size_of::<[OnceLock<Bytes>; 4]>();
        }
        // Most renders whose agent is not held (checks stalled, or it was too large) are
        // told so under the read lock, so list requests do not queue on the write lock.
        if !self.current()
            || !self
                .agents
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .holds(&found.agent.id, found)
        {
            return;
        }
        let mut agents = self.agents.write().unwrap_or_else(|p| p.into_inner());
        agents.charge(&found.agent.id, found, bytes);
    }

    /// Keeps `value` under `name` (and `alias`), unless the cache was emptied since `ticket`
    /// was taken: then the read may predate a write, and is not kept.
    fn keep<T: Weigh>(
        &self,
        ticket: Ticket,
        map: &RwLock<BoundedMap<T>>,
        name: &str,
        alias: Option<&str>,
        value: &Arc<T>,
    ) {
        let Ticket(Some(generation)) = ticket else { return };
        let mut map = map.write().unwrap_or_else(|p| p.into_inner());
        // Checked under the map's lock: `clear` bumps the generation before taking it.
        if self.generation.load(Ordering::Acquire) != generation {
            return;
        }
        map.insert(name, alias, value.clone());
    }
}

impl Weigh for AgentWithCommands {
    /// The agent, its commands and breakers; its listings are charged once rendered.
    fn bytes(&self) -> usize {
        let agent = &self.agent;
        let def = &agent.def;
        size_of::<AgentWithCommands>()
            + agent.id.capacity()
            + agent.account_id.capacity()
            + def.username.capacity()
            + def.name.capacity()
            + def.personality.capacity()
            + vec_bytes(&def.knowledge, def.knowledge.capacity(), String::capacity)
            + vec_bytes(&def.x402.networks, def.x402.networks.capacity(), |_| 0)
            + vec_bytes(&self.commands, self.commands.capacity(), command_bytes)
            + vec_bytes(&self.open_breakers, self.open_breakers.capacity(), breaker_bytes)
    }
}

/// Heap bytes a command owns.
fn command_bytes(command: &Command) -> usize {
    let def = &command.def;
    command.id.capacity()
        + def.name.capacity()
        + def.description.capacity()
        + vec_bytes(&def.parameters, def.parameters.capacity(), |p| {
            p.name.capacity() + p.description.capacity()
        })
        + vec_bytes(&def.integrations, def.integrations.capacity(), |_| 0)
        + def.config.json().len()
        + def.plugin.as_ref().map_or(0, String::capacity)
        + vec_bytes(&def.allowed_hosts, def.allowed_hosts.capacity(), String::capacity)
}

fn breaker_bytes(breaker: &Breaker) -> usize {
    breaker.agent_id.capacity()
        + breaker.command.capacity()
        + breaker.reason.capacity()
        + vec_bytes(&breaker.payers, breaker.payers.capacity(), String::capacity)
}

impl Weigh for KeyRecord {
    /// The key and its account (one per key: keys of one account each hold their own).
    fn bytes(&self) -> usize {
        size_of::<KeyRecord>()
            + key_info_bytes(&self.info)
            + self.secret_hash.capacity()
            + 2 * size_of::<usize>()
            + account_bytes(&self.account)
    }
}

fn key_info_bytes(info: &ApiKeyInfo) -> usize {
    info.id.capacity() + info.account_id.capacity() + info.name.as_ref().map_or(0, String::capacity)
}

fn account_bytes(account: &Account) -> usize {
    size_of::<Account>() + account.id.capacity() + account.name.capacity()
}

impl Store {
    /// Serves keys and agents from memory from now on, at most `max_bytes` of them, for as
    /// long as the returned task runs: it reads `cache_version` every `every`, and entries are served only while the
    /// last successful check started less than `3 × every` ago. That is the bound on how
    /// late any process sees a write made elsewhere.
    pub fn watch_for_changes(&self, every: Duration, max_bytes: usize) -> tokio::task::JoinHandle<()> {
        let store = self.clone();
        store.cache.bound(max_bytes);
        store.cache.enable(every * 3);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                let started = store.cache.now_ms();
                let version = store
                    .read(|db| {
                        db.query_one("SELECT version FROM cache_version WHERE id = 1", args![])?
                            .get::<i64>(0)
                    })
                    .await;
                match version {
                    Ok(version) => store.cache.checked(started, version),
                    // Entries age out on their own: reads go to the database until a check works.
                    Err(e) => tracing::warn!(error = %e, "cannot check the database for changes"),
                }
            }
        })
    }
}

impl Store {
    /// The listing of `found`'s commands offered on `integration`, rendered by `render`
    /// once and kept with it (counted against the cache's bound).
    pub fn command_listing(
        &self,
        found: &Arc<AgentWithCommands>,
        integration: Option<Integration>,
        render: impl FnOnce() -> Bytes,
    ) -> Bytes {
        self.cache.listing(found, integration, render)
    }

    /// Bytes the read cache holds, as it counts them.
    pub fn read_cache_bytes(&self) -> usize {
        self.cache.bytes()
    }
}

impl Default for ReadCache {
    fn default() -> Self {
        ReadCache::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Account, ApiKeyInfo, KeyScope, Plan, RateLimits};

    fn key(id: &str) -> Arc<KeyRecord> {
        let info = ApiKeyInfo {
            id: id.into(),
            account_id: "acc".into(),
            scope: KeyScope::Use,
            name: None,
            created_at: 0,
            last_used_at: None,
            revoked_at: None,
            expires_at: None,
        };
        let account = Account {
            id: "acc".into(),
            name: "acme".into(),
            plan: Plan::Free,
            limits: RateLimits {
                per_minute: 60,
                per_day: 1000,
            },
            created_at: 0,
        };
        Arc::new(KeyRecord::new(info, vec![0; 32], account))
    }

    fn watched() -> ReadCache {
        let cache = ReadCache::new();
        cache.enable(Duration::from_secs(60));
        cache.checked(cache.now_ms(), 1);
        cache
    }

    #[test]
    fn nothing_is_kept_or_served_before_a_check_succeeded() {
        let cache = ReadCache::new();
        cache.enable(Duration::from_secs(60));
        cache.keep_key(cache.ticket(), &key("k1"));
        assert!(cache.key("k1").is_none());
        cache.checked(cache.now_ms(), 1);
        cache.keep_key(cache.ticket(), &key("k1"));
        assert!(cache.key("k1").is_some());
    }

    #[test]
    fn a_read_that_began_before_a_change_is_not_kept() {
        let cache = watched();
        let before = cache.ticket();
        // A change lands while the read is on its way to the database.
        cache.checked(cache.now_ms(), 2);
        cache.keep_key(before, &key("k1"));
        assert!(cache.key("k1").is_none(), "it may hold what the change replaced");
        cache.keep_key(cache.ticket(), &key("k1"));
        assert!(cache.key("k1").is_some());
    }

    #[test]
    fn a_moved_version_empties_the_cache_and_the_same_one_keeps_it() {
        let cache = watched();
        cache.keep_key(cache.ticket(), &key("k1"));
        cache.checked(cache.now_ms(), 1);
        assert!(cache.key("k1").is_some());
        cache.checked(cache.now_ms(), 2);
        assert!(cache.key("k1").is_none());
    }

    fn agent(i: usize) -> Arc<AgentWithCommands> {
        let def = crate::domain::AgentDef {
            username: format!("agent{i}"),
            name: "An agent".into(),
            personality: "p".repeat(500),
            knowledge: vec![],
            x402: crate::domain::X402Settings {
                enabled: false,
                default_price: None,
                networks: vec![],
                chat_by_use: None,
            },
            mcp_open: false,
            mcp: Default::default(),
            a2a: Default::default(),
            mcp_servers: Vec::new(),
            payments: None,
        };
        let agent = Agent {
            id: format!("id{i}"),
            account_id: "acc".into(),
            def,
            created_at: 0,
            updated_at: 0,
        };
        Arc::new(AgentWithCommands::new(agent, vec![], vec![]))
    }

    #[test]
    fn the_cache_holds_no_more_bytes_than_its_bound_and_keeps_the_latest() {
        let cache = watched();
        cache.bound(256 * 1024);
        for i in 0..2_000 {
            cache.keep_agent(cache.ticket(), &agent(i));
        }
        assert!(cache.bytes() <= 256 * 1024, "{} bytes held", cache.bytes());
        assert!(
            cache.bytes() > 100 * 1024,
            "most of the room is used: {} bytes",
            cache.bytes()
        );
        assert!(cache.agent("id1999").is_some());
        assert!(cache.agent("agent1999").is_some(), "found by username too");
    }

    #[test]
    fn a_rendered_listing_is_counted_while_its_agent_is_held() {
        let cache = watched();
        let found = agent(1);
        cache.keep_agent(cache.ticket(), &found);
        let before = cache.bytes();
        cache.listing(&found, None, || Bytes::from(vec![b'x'; 4_000]));
        let listed = cache.bytes();
        assert!(listed >= before + 4_000);
        // Served again: not rendered, not counted again.
        cache.listing(&found, None, || unreachable!("kept"));
        assert_eq!(cache.bytes(), listed);
        // The room for listings per integration is counted with the first of them only.
        cache.listing(&found, Some(Integration::Mcp), || Bytes::from(vec![b'x'; 100]));
        let one = cache.bytes() - listed;
        cache.listing(&found, Some(Integration::X402), || Bytes::from(vec![b'x'; 100]));
        let two = cache.bytes() - listed - one;
        assert!(one > two && two >= 100, "{one} then {two}");
        // Once the agent was dropped (a write elsewhere), what it renders is not counted.
        cache.clear();
        cache.listing(&found, Some(Integration::Chatapp), || Bytes::from(vec![b'x'; 100]));
        assert_eq!(cache.bytes(), 0);
    }

    #[test]
    fn entries_are_not_served_once_checks_stop() {
        let cache = ReadCache::new();
        cache.enable(Duration::from_millis(30));
        cache.checked(cache.now_ms(), 1);
        cache.keep_key(cache.ticket(), &key("k1"));
        assert!(cache.key("k1").is_some());
        std::thread::sleep(Duration::from_millis(40));
        assert!(
            cache.key("k1").is_none(),
            "no check for longer than the bound: ask the database"
        );
        cache.checked(cache.now_ms(), 1);
        assert!(cache.key("k1").is_some());
    }
}
