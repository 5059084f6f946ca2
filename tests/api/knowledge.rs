//! Knowledge found by meaning: an agent with more knowledge than fits a prompt, and a set of
//! questions labelled with the entry that answers each, most of them sharing no word with it.
//! Ranked by words alone (BM25) and by words and meaning (with the embedding model), the
//! answering entry must be in the first three far more often with meaning; and a chat's
//! prompt carries what the ranking chose.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::api::response_text;
use crate::support::fake_llm::{fake_openai, text};
use crate::support::*;

const FRONTDESK: &str = include_str!("../../examples/frontdesk.toml");

/// Questions a visitor of examples/frontdesk.toml asks, and the entry (by index) answering
/// each: most in other words than the entry's, as visitors ask.
const LABELLED: &[(&str, usize)] = &[
    ("When can I come in on a Saturday?", 0),
    ("How do I get into the building on my first morning?", 1),
    ("What does a flexible seat cost for a single day?", 2),
    ("Can my team of five have its own room?", 3),
    ("How do I reserve a conference space?", 4),
    ("Where could we throw a party for 100 people?", 5),
    ("What's the internet password?", 6),
    ("Can I make copies of documents?", 7),
    ("Is there something to drink?", 8),
    ("Where can I grab a bite at noon?", 9),
    ("May I bring my puppy?", 10),
    ("Where do I leave my bike?", 11),
    ("Where can I leave my car?", 12),
    ("How do I get there by train?", 13),
    ("Is there somewhere to keep my belongings safe overnight?", 14),
    ("Can you accept deliveries for me?", 15),
    ("Can I use your address to register my startup?", 16),
    ("Can I just try it out for one day?", 17),
    ("How do I end my contract?", 18),
    ("When is my bill due?", 19),
    ("Can I pay in cash?", 20),
    ("Is there a discount for people at university?", 21),
    ("Where can I take a private call?", 22),
    ("Where can I work in complete silence?", 23),
    ("Can I freshen up after cycling to work?", 24),
    ("Is there an outdoor space?", 25),
    ("Can a friend visit me?", 26),
    ("Can I get there in a wheelchair?", 27),
    ("What should I do if someone collapses?", 28),
    ("I forgot my umbrella yesterday, where is it?", 30),
    ("Are there any networking evenings?", 31),
    ("It's too cold at my desk, who do I tell?", 32),
    ("Can I smoke on the roof?", 34),
    // Some name what they ask about in the entry's own words.
    ("How far is Quay Garage?", 12),
    ("Which network is HarborWorks-Members?", 6),
    ("What does the podcast studio cost?", 41),
    ("Where is the defibrillator?", 28),
    ("Do you take direct debit?", 20),
    ("When is the newsletter sent?", 42),
    ("Is there a family room?", 45),
];

/// The share of questions whose entry is among the first three, and the misses.
fn hits_at_3(env: &TestEnv) -> (f64, Vec<&'static str>) {
    let mut args = vec!["agent", "knowledge", "frontdesk", "--top", "3"];
    args.extend(LABELLED.iter().map(|(q, _)| *q));
    let out = env.cli_json(&args);
    let asked = out["messages"].as_array().unwrap();
    assert_eq!(asked.len(), LABELLED.len());
    let misses: Vec<&str> = LABELLED
        .iter()
        .zip(asked)
        .filter(|((_, answer), ranking)| {
            !ranking["entries"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["index"] == json!(answer))
        })
        .map(|((q, _), _)| *q)
        .collect();
    (1.0 - misses.len() as f64 / LABELLED.len() as f64, misses)
}

#[tokio::test(flavor = "multi_thread")]
async fn meaning_finds_the_answering_entry_where_words_miss_it() {
    let by_words = TestEnv::new().with_env("AGENT_HOST_EMBEDDING_MODEL_PATH", "/nonexistent/model");
    let by_meaning = TestEnv::new().with_env("AGENT_HOST_EMBEDDING_MODEL_PATH", &minilm_dir());
    for env in [&by_words, &by_meaning] {
        env.create_account("acme", "free");
        env.apply_agent(FRONTDESK, "acme");
    }
    let (words, words_missed) = hits_at_3(&by_words);
    let (hybrid, hybrid_missed) = hits_at_3(&by_meaning);
    println!("hits@3 over {} labelled questions", LABELLED.len());
    println!("| ranking | hits@3 |\n|---|---|");
    println!("| BM25 alone | {words:.2} |\n| 0.85 cosine + 0.15 BM25 | {hybrid:.2} |");
    println!("missed with meaning: {hybrid_missed:?}");
    assert!(
        hybrid >= 0.75,
        "meaning finds most answers: {hybrid:.2}, missed {hybrid_missed:?}"
    );
    assert!(
        hybrid >= words + 0.3,
        "meaning adds what words miss: {hybrid:.2} against {words:.2} (words missed {words_missed:?})"
    );
}

/// The chat of a host with the embedding model brings the answering entry into the prompt,
/// though the question shares no word with it; a host without says it ranks by words.
#[tokio::test(flavor = "multi_thread")]
async fn a_chat_brings_in_what_the_question_means() {
    let seen = Arc::new(Mutex::new(Vec::<Value>::new()));
    let llm = fake_openai(Arc::new(|_, _| text("From 9:00.")), seen.clone()).await;
    let env = TestEnv::new()
        .with_env("AGENT_HOST_EMBEDDING_MODEL_PATH", &minilm_dir())
        .with_env("AGENT_HOST_LLM_BASE_URL", &llm.url("/v1"))
        .with_env("AGENT_HOST_LLM_MODEL", "fake-model");
    let key = env.account_with_key("acme", "free");
    env.apply_agent(FRONTDESK, "acme");
    let server = env.serve();
    assert!(
        server.ready["knowledge"]
            .as_str()
            .unwrap()
            .starts_with("by meaning and words"),
        "{}",
        server.ready
    );
    let reply = post_json(
        &server.url("/v1/agents/frontdesk/chat"),
        Some(&key),
        &json!({"message": "When can I come in on a Saturday?"}),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let prompt = seen.lock().unwrap()[0]["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(prompt.contains("on weekends the doors open at 9:00"), "{prompt}");
    assert!(!prompt.contains("podcast studio"), "not everything: {prompt}");

    let without = TestEnv::new().with_env("AGENT_HOST_EMBEDDING_MODEL_PATH", "/nonexistent/model");
    let plain = without.serve();
    assert_eq!(
        plain.ready["knowledge"],
        "by words alone (no embedding model in /nonexistent/model)"
    );
}

fn probe_agent(username: &str, allow_llm: bool) -> String {
    format!(
        "username = \"{username}\"\nname = \"Probe\"\n\n[[commands]]\ncommand = \"probe\"\nhandler_type = \"custom\"\nplugin = \"{}\"\nallow_llm = {allow_llm}\n",
        plugin_path("probe")
    )
}

/// `llm.embed` (WIT 0.3.0): a plugin granted the model compares texts by meaning; one not
/// granted it, or on a host without the model, is told so.
#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_granted_the_model_compares_texts_by_meaning() {
    let texts = json!([
        "When can I come in?",
        "The office opens at 9:00.",
        "Bananas are yellow."
    ]);
    let embed = |server: &TestServer, key: &str, agent: &str| {
        let (url, key) = (
            server.url(&format!("/v1/agents/{agent}/commands/probe/execute")),
            key.to_string(),
        );
        let body = json!({"parameters": {"mode": "embed", "texts": texts}});
        async move { post_json(&url, Some(&key), &body).await }
    };
    let env = TestEnv::new().with_env("AGENT_HOST_EMBEDDING_MODEL_PATH", &minilm_dir());
    let key = env.account_with_key("acme", "pro");
    env.apply_agent(&probe_agent("granted", true), "acme");
    env.apply_agent(&probe_agent("refused", false), "acme");
    let server = env.serve();

    let granted = embed(&server, &key, "granted").await;
    assert_eq!(granted.status, 200, "{}", granted.text);
    let out: Value = serde_json::from_str(&response_text(&granted)).unwrap();
    assert_eq!(out["dimensions"], 384);
    let cosines: Vec<f64> = out["cosines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_f64().unwrap())
        .collect();
    assert!(
        (cosines[0] - 1.0).abs() < 1e-4,
        "a text is its own neighbour: {cosines:?}"
    );
    assert!(
        cosines[1] > cosines[2] + 0.2,
        "opening hours nearer than bananas: {cosines:?}"
    );

    let refused = embed(&server, &key, "refused").await;
    assert_eq!(refused.status, 500, "{}", refused.text);
    assert!(refused.error_message().contains("allow_llm"), "{}", refused.text);

    let without = TestEnv::new().with_env("AGENT_HOST_EMBEDDING_MODEL_PATH", "/nonexistent/model");
    let key = without.account_with_key("acme", "pro");
    without.apply_agent(&probe_agent("granted", true), "acme");
    let bare = without.serve();
    let missing = embed(&bare, &key, "granted").await;
    assert!(
        missing.error_message().contains("no embedding model"),
        "{}",
        missing.text
    );
}

/// A manifest of agent `username` with `n` knowledge entries of its own (`set` tells sets
/// apart), more than a prompt holds: its knowledge is embedded when it is applied.
fn knowing(username: &str, set: &str, n: usize) -> String {
    let entries: Vec<String> = (0..n)
        .map(|i| format!("Note {set}-{i}: shelf {i} in aisle {set} holds {} boxes.", i * 7 % 50))
        .collect();
    format!(
        "username = \"{username}\"\nname = \"Keeper\"\nknowledge = {}\n",
        serde_json::to_string(&entries).unwrap()
    )
}

fn vectors_kept(env: &TestEnv) -> usize {
    env.sql("SELECT COUNT(*) FROM knowledge_vectors")[0][0]
        .as_deref()
        .unwrap()
        .parse()
        .unwrap()
}

/// Vectors are kept by the entry's hash, shared by every agent with that entry; the ones
/// no agent has any more are collected, as unused components are. 600 entries a set: past
/// the 500 hashes one lookup asks for (each one embedded in a debug build costs time: three
/// sets of 1,000 took this test 165 s).
#[tokio::test(flavor = "multi_thread")]
async fn vectors_of_knowledge_no_agent_has_are_collected() {
    let env = TestEnv::new()
        .with_env("AGENT_HOST_EMBEDDING_MODEL_PATH", &minilm_dir())
        .with_env("AGENT_HOST_ACCOUNT_EMBEDDINGS_PER_MINUTE", "100000")
        .with_env("AGENT_HOST_PLUGIN_COLLECT_AFTER_SECS", "1");
    env.create_account("acme", "free");
    for set in ["a", "b"] {
        env.apply_agent(&knowing("keeper", set, 600), "acme");
    }
    assert_eq!(vectors_kept(&env), 1_200, "each apply embedded its entries");
    let _server = env.serve();
    time_until(Duration::from_secs(60), "the collector", || async {
        vectors_kept(&env) <= 600
    })
    .await;
    assert_eq!(vectors_kept(&env), 600, "the agent's own entries stay");
}

/// A server embeds an applied agent's knowledge in the background, within the account's
/// embedding budget: past it the agent is applied all the same and its chats rank by words.
#[tokio::test(flavor = "multi_thread")]
async fn an_accounts_embedding_work_is_budgeted() {
    let env = TestEnv::new()
        .with_env("AGENT_HOST_EMBEDDING_MODEL_PATH", &minilm_dir())
        .with_env("AGENT_HOST_ACCOUNT_EMBEDDINGS_PER_DAY", "150");
    let key = env.account_with_key("acme", "pro");
    let server = env.serve();
    let apply = |manifest: String| {
        let (url, key) = (server.url("/v1/account/agents"), key.clone());
        async move { post_body(&url, &key, "application/toml", manifest.into_bytes()).await }
    };
    let first = apply(knowing("first", "x", 100)).await;
    assert!(first.status < 300, "{}", first.text);
    time_until(
        Duration::from_secs(60),
        "the first agent's knowledge embedded",
        || async { vectors_kept(&env) == 100 },
    )
    .await;
    let second = apply(knowing("second", "y", 100)).await;
    assert!(second.status < 300, "applied all the same: {}", second.text);
    time_until(Duration::from_secs(60), "the budget's refusal", || async {
        server.log().contains("embedding budget is spent")
    })
    .await;
    assert_eq!(vectors_kept(&env), 100, "100 more do not fit the 50 left");
}
