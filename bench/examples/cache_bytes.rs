//! Bytes the read cache holds per agent, counted by the allocator (not RSS): a figure that
//! does not drift with the machine, so commits compare across days.
//!
//! Applies AGENTS agents of ten `simple_text` commands (the shape `bench/growth.sh` seeds) to
//! a SQLite store, reads each once through the cache as the keyed path does (its agent, its
//! commands and its rendered command listing), and prints the live heap before and after
//! and what the cache says it holds.
//!
//! Usage: cargo run --release -p agent-host-bench --example cache_bytes [AGENTS]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Duration;

use agent_host::domain::{Plan, RateLimits};
use agent_host::manifest::{self, PluginSource};
use agent_host::store::{NewAccount, Store};
use agent_host::views;

/// The system allocator, counting the bytes it has handed out and not yet been given back.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as isize - layout.size() as isize, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn agent_toml(i: usize) -> String {
    let mut text = format!("username = \"g{i:05}\"\nname = \"Agent {i}\"\n");
    for c in 0..10 {
        let name = if c == 0 { "hello".to_string() } else { format!("c{c}") };
        text += &format!(
            "[[commands]]\ncommand = \"{name}\"\nhandler_type = \"simple_text\"\n\
             parameters = [{{ name = \"name\", type = \"string\", required = true }}]\n\
             config = {{ text = \"Hello, {{{{name}}}}!\" }}\n"
        );
    }
    text
}

#[tokio::main]
async fn main() {
    let agents: usize = std::env::args()
        .nth(1)
        .map_or(2_000, |n| n.parse().expect("AGENTS is a number"));
    let dir = tempfile::tempdir().expect("a temp dir");
    let store = Store::open(&dir.path().join("bench.db"), Duration::from_secs(5)).expect("the store");
    let account = store
        .create_account(NewAccount {
            name: "bench".into(),
            plan: Plan::Enterprise,
            custom_limits: Some(RateLimits {
                per_minute: 1_000_000,
                per_day: 1_000_000,
            }),
        })
        .await
        .expect("the account");
    for i in 0..agents {
        let parsed = manifest::parse(&agent_toml(i), "bench.toml", PluginSource::Uploaded).expect("the manifest");
        store
            .apply_agent(&account.id, parsed.agent, parsed.commands, u64::MAX)
            .await
            .expect("the agent");
    }
    let _watcher = store.watch_for_changes(Duration::from_millis(20), 4 << 30);
    tokio::time::sleep(Duration::from_millis(200)).await;

    let before = LIVE.load(Ordering::Relaxed);
    let mut found = Vec::with_capacity(agents);
    for i in 0..agents {
        found.push(
            store
                .agent_with_commands(&format!("g{i:05}"))
                .await
                .expect("a read")
                .expect("the agent"),
        );
    }
    let read = LIVE.load(Ordering::Relaxed);
    for found in &found {
        // What `GET .../commands` keeps with the agent once it listed it.
        store.command_listing(found, None, || {
            views::success_body(views::command_listing(found, None, "http://127.0.0.1:8080"))
        });
    }
    let listed = LIVE.load(Ordering::Relaxed);
    // The vector above is not the cache's.
    let vector = (agents * std::mem::size_of::<usize>()) as isize;
    let per_agent = |bytes: isize| bytes as f64 / agents as f64;
    println!("agents                   {agents}");
    println!(
        "held by the cache        {:.1} MiB",
        (listed - before - vector) as f64 / 1048576.0
    );
    println!(
        "per agent                {:.0} bytes",
        per_agent(listed - before - vector)
    );
    println!(
        "  agent and commands     {:.0} bytes",
        per_agent(read - before - vector)
    );
    println!("  rendered listing       {:.0} bytes", per_agent(listed - read));
    println!(
        "the cache's own count    {:.0} bytes per agent",
        per_agent(store.read_cache_bytes() as isize)
    );
}
