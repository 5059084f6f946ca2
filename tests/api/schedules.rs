//! Schedules (docs/schedules.md): an agent's work that starts on its own. The hosts read
//! schedules against a test clock (`AGENT_HOST_TEST_CLOCK`, debug builds only) that each
//! test moves, so "09:00 in Paris" comes when the test says, on every host at once.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::chatapp::{TOKEN, fake_telegram};
use crate::support::clock::Clock;
use crate::support::fake_llm::{fake_openai, text};
use crate::support::webhooks::Receiver;
use crate::support::*;

const MASTER: &str = "0303030303030303030303030303030303030303030303030303030303030303";

/// Messages the stand-in for Telegram was asked to send to `chat`.
fn sent_to(sent: &Arc<Mutex<Vec<Value>>>, chat: i64) -> Vec<String> {
    sent.lock()
        .unwrap()
        .iter()
        .filter(|m| m["chat_id"] == chat)
        .map(|m| m["text"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Waits (at most 20 s) until `done` holds.
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not after 20 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Long enough for several passes of every host (they look every 50 ms): what has not
/// happened by then is not going to.
async fn a_few_passes() {
    tokio::time::sleep(Duration::from_millis(600)).await;
}

fn schedules_url(server: &TestServer, agent: &str) -> String {
    server.url(&format!("/v1/account/agents/{agent}/schedules"))
}

async fn schedule(server: &TestServer, key: &str, agent: &str, name: &str) -> Value {
    let reply = get(&format!("{}/{name}", schedules_url(server, agent)), Some(key)).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.json()["data"].clone()
}

async fn runs(server: &TestServer, key: &str, agent: &str, name: &str) -> Vec<Value> {
    let reply = get(&format!("{}/{name}/runs", schedules_url(server, agent)), Some(key)).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.json()["data"]["runs"].as_array().unwrap().clone()
}

async fn create(server: &TestServer, key: &str, agent: &str, body: Value) -> Value {
    let reply = post_json(&schedules_url(server, agent), Some(key), &body).await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    reply.json()["data"].clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cron_schedule_runs_on_its_minute_once_and_catches_up_after_a_restart() {
    let sent = Arc::new(Mutex::new(Vec::new()));
    let telegram = fake_telegram(sent.clone()).await;
    // 08:59:30 in Paris.
    let clock = Clock::at("2026-12-01T07:59:30Z");
    let env = TestEnv::new()
        .with_env("AGENT_HOST_CHATAPP_API_BASE", &telegram.base)
        .with_env("AGENT_HOST_MASTER_KEY", MASTER)
        .with_env("AGENT_HOST_USAGE_FLUSH_MS", "100")
        .with_envs(clock.env());
    let key = env.account_with_key("alice", "free");
    env.apply_agent(&manifest("alpha"), "alice");
    env.cli_json(&["chatapp", "connect", "--agent", "alpha", "--token", TOKEN]);
    let server = env.serve();

    let morning = create(
        &server,
        &key,
        "alpha",
        json!({
            "name": "morning", "cron": "0 9 * * *", "timezone": "Europe/Paris",
            "command": "hello", "parameters": { "name": "team" },
            "deliver": { "to": "telegram", "chat_id": 4242 },
        }),
    )
    .await;
    assert_eq!(
        (&morning["status"], &morning["source"], &morning["next_run_at"]),
        (&json!("active"), &json!("api"), &json!("2026-12-01T08:00:00.000Z")),
        "{morning}"
    );
    let half_past = create(
        &server,
        &key,
        "alpha",
        json!({
            "name": "half-past", "cron": "30 9 * * *", "timezone": "Europe/Paris",
            "command": "hello", "parameters": { "name": "late" }, "missed": "skip",
        }),
    )
    .await;
    assert_eq!(half_past["next_run_at"], "2026-12-01T08:30:00.000Z");

    // Not before its minute...
    clock.set("2026-12-01T07:59:58Z");
    a_few_passes().await;
    assert!(sent_to(&sent, 4242).is_empty());
    assert!(runs(&server, &key, "alpha", "morning").await.is_empty());
    // ...then at it, once, however many passes see it.
    clock.set("2026-12-01T08:00:01Z");
    until("the 09:00 message", || sent_to(&sent, 4242).len() == 1).await;
    assert_eq!(sent_to(&sent, 4242), ["Hello, team!"]);
    clock.set("2026-12-01T08:00:40Z");
    a_few_passes().await;
    assert_eq!(sent_to(&sent, 4242).len(), 1);
    let ran = runs(&server, &key, "alpha", "morning").await;
    assert_eq!(ran.len(), 1, "{ran:?}");
    assert_eq!(
        (&ran[0]["state"], &ran[0]["due_at"], &ran[0]["output"]),
        (
            &json!("succeeded"),
            &json!("2026-12-01T08:00:00.000Z"),
            &json!("Hello, team!")
        )
    );
    let after = schedule(&server, &key, "alpha", "morning").await;
    assert_eq!(
        (&after["next_run_at"], &after["last_outcome"]),
        (&json!("2026-12-02T08:00:00.000Z"), &json!("succeeded"))
    );
    // The dashboards count the run under its own channel.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let usage = get(&server.url("/v1/account/usage"), Some(&key)).await.json();
        if usage.to_string().contains(r#""schedule":{"succeeded":1}"#) {
            break;
        }
        assert!(Instant::now() < deadline, "no scheduled run counted: {usage}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Down for two days: the missed 09:00s run once, late; the 09:30 that skips is skipped.
    server.stop();
    clock.set("2026-12-03T10:00:00Z");
    let server = env.serve();
    until("the late message", || sent_to(&sent, 4242).len() == 2).await;
    a_few_passes().await;
    assert_eq!(sent_to(&sent, 4242).len(), 2, "one catch-up for all the missed times");
    let ran = runs(&server, &key, "alpha", "morning").await;
    assert_eq!(ran.len(), 2);
    assert_eq!(
        (&ran[0]["state"], &ran[0]["due_at"]),
        (&json!("succeeded"), &json!("2026-12-02T08:00:00.000Z"))
    );
    let after = schedule(&server, &key, "alpha", "morning").await;
    assert_eq!(after["next_run_at"], "2026-12-04T08:00:00.000Z");
    let skipped = runs(&server, &key, "alpha", "half-past").await;
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert_eq!(skipped[0]["state"], "skipped");
    assert!(
        skipped[0]["error"].as_str().unwrap().contains("missed"),
        "{}",
        skipped[0]
    );
    let after = schedule(&server, &key, "alpha", "half-past").await;
    assert_eq!(
        (&after["next_run_at"], &after["last_outcome"]),
        (&json!("2026-12-04T08:30:00.000Z"), &json!("skipped"))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn three_hosts_run_each_time_once() {
    let sent = Arc::new(Mutex::new(Vec::new()));
    let telegram = fake_telegram(sent.clone()).await;
    let clock = Clock::at("2026-12-01T12:00:00Z");
    let mut settings = clock.env();
    settings.push(("AGENT_HOST_CHATAPP_API_BASE", telegram.base.clone()));
    settings.push(("AGENT_HOST_SCHEDULE_POLL_MS", "10".into()));
    let Some((a, b, c)) = crate::several_hosts::three_hosts(settings) else {
        return;
    };
    let key = a.account_with_key("alice", "pro");
    a.apply_agent(&manifest("alpha"), "alice");
    a.cli_json(&["chatapp", "connect", "--agent", "alpha", "--token", TOKEN]);
    let hosts = [a.serve(), b.serve(), c.serve()];
    create(
        &hosts[1],
        &key,
        "alpha",
        json!({
            "name": "minutely", "every_seconds": 60, "command": "hello", "parameters": { "name": "all" },
            "deliver": { "to": "telegram", "chat_id": 777 },
        }),
    )
    .await;
    for minute in 1..=5 {
        clock.set(&format!("2026-12-01T12:0{minute}:00Z"));
        until(&format!("run {minute}"), || sent_to(&sent, 777).len() == minute).await;
    }
    a_few_passes().await;
    assert_eq!(
        sent_to(&sent, 777).len(),
        5,
        "each minute sent once, by one of three hosts"
    );
    let ran = runs(&hosts[2], &key, "alpha", "minutely").await;
    let due: Vec<&str> = ran.iter().map(|r| r["due_at"].as_str().unwrap()).collect();
    assert_eq!(
        due,
        [
            "2026-12-01T12:05:00.000Z",
            "2026-12-01T12:04:00.000Z",
            "2026-12-01T12:03:00.000Z",
            "2026-12-01T12:02:00.000Z",
            "2026-12-01T12:01:00.000Z"
        ]
    );
    assert!(ran.iter().all(|r| r["state"] == "succeeded"), "{ran:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_schedule_stops_and_an_answer_goes_by_webhook() {
    let sent = Arc::new(Mutex::new(Vec::new()));
    let telegram = fake_telegram(sent.clone()).await;
    let llm = fake_openai(
        Arc::new(|_, _| text("Tip: drink water.")),
        Arc::new(Mutex::new(Vec::new())),
    )
    .await;
    let receiver = Receiver::start().await;
    let clock = Clock::at("2026-12-01T12:00:00Z");
    let env = TestEnv::new()
        .with_env("AGENT_HOST_CHATAPP_API_BASE", &telegram.base)
        .with_env("AGENT_HOST_MASTER_KEY", MASTER)
        .with_env("AGENT_HOST_LLM_BASE_URL", &llm.url("/v1"))
        .with_env("AGENT_HOST_LLM_MODEL", "fake-model")
        .with_env("AGENT_HOST_WEBHOOK_ALLOW_PRIVATE", "127.0.0.1")
        .with_env("AGENT_HOST_WEBHOOK_POLL_MS", "50")
        .with_env("AGENT_HOST_SCHEDULE_STOP_AFTER_FAILURES", "2")
        .with_envs(clock.env());
    let key = env.account_with_key("alice", "pro");
    env.apply_agent(&manifest("alpha"), "alice");
    env.cli_json(&["chatapp", "connect", "--agent", "alpha", "--token", TOKEN]);
    let server = env.serve();
    let endpoint = post_json(
        &server.url("/v1/account/webhooks"),
        Some(&key),
        &json!({ "url": receiver.url(), "events": ["schedule.ran", "schedule.stopped"] }),
    )
    .await;
    assert_eq!(endpoint.status, 201, "{}", endpoint.text);
    // Telegram says this chat does not exist: every run fails.
    create(
        &server,
        &key,
        "alpha",
        json!({
            "name": "broken", "every_seconds": 60, "command": "hello", "parameters": { "name": "x" },
            "deliver": { "to": "telegram", "chat_id": 404404 },
        }),
    )
    .await;
    create(
        &server,
        &key,
        "alpha",
        json!({
            "name": "tips", "every_seconds": 60, "prompt": "Give one tip.", "deliver": { "to": "webhook" },
        }),
    )
    .await;

    clock.set("2026-12-01T12:01:00Z");
    receiver
        .until("the first tip", |got| {
            got.iter().filter(|r| r.event_type() == "schedule.ran").count() == 1
        })
        .await;
    until_outcome(&server, &key, "broken", "failed").await;
    let broken = schedule(&server, &key, "alpha", "broken").await;
    assert_eq!(
        (&broken["status"], &broken["consecutive_failures"]),
        (&json!("active"), &json!(1))
    );
    clock.set("2026-12-01T12:02:00Z");
    let got = receiver
        .until("the stop", |got| {
            got.iter().any(|r| r.event_type() == "schedule.stopped")
        })
        .await;
    let stopped = got
        .iter()
        .find(|r| r.event_type() == "schedule.stopped")
        .unwrap()
        .event();
    assert_eq!(
        (&stopped["data"]["schedule"], &stopped["data"]["failures"]),
        (&json!("broken"), &json!(2))
    );
    let tip = got.iter().find(|r| r.event_type() == "schedule.ran").unwrap().event();
    assert_eq!(
        (&tip["data"]["schedule"], &tip["data"]["output"]),
        (&json!("tips"), &json!("Tip: drink water."))
    );

    let broken = schedule(&server, &key, "alpha", "broken").await;
    assert_eq!(broken["status"], "stopped");
    let reason = broken["stopped_reason"].as_str().unwrap();
    assert!(reason.contains("chat not found"), "{reason}");
    let failed = runs(&server, &key, "alpha", "broken").await;
    assert!(
        failed
            .iter()
            .all(|r| r["state"] == "failed" && r["error"].as_str().unwrap().contains("chat not found")),
        "{failed:?}"
    );
    // Stopped, it is not run again...
    clock.set("2026-12-01T12:03:00Z");
    receiver
        .until("the third tip", |got| {
            got.iter().filter(|r| r.event_type() == "schedule.ran").count() == 3
        })
        .await;
    a_few_passes().await;
    assert_eq!(runs(&server, &key, "alpha", "broken").await.len(), 2);
    // ...until its owner resumes it, from now, its failures forgotten.
    let resumed = keyed(
        reqwest::Method::PATCH,
        &format!("{}/broken", schedules_url(&server, "alpha")),
        &key,
        Some(&json!({ "enabled": true })),
    )
    .await;
    assert_eq!(resumed.status, 200, "{}", resumed.text);
    let resumed = resumed.json()["data"].clone();
    assert_eq!(
        (
            &resumed["status"],
            &resumed["consecutive_failures"],
            &resumed["next_run_at"]
        ),
        (&json!("active"), &json!(0), &json!("2026-12-01T12:04:00.000Z"))
    );
}

async fn until_outcome(server: &TestServer, key: &str, name: &str, outcome: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let now = schedule(server, key, "alpha", name).await;
        if now["last_outcome"] == outcome {
            return;
        }
        assert!(Instant::now() < deadline, "{name} never {outcome}: {now}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn schedules_are_checked_owned_and_bounded() {
    let clock = Clock::at("2026-12-01T12:00:00Z");
    let env = TestEnv::new()
        .with_env("AGENT_HOST_SCHEDULE_MAX_PER_ACCOUNT", "2")
        .with_envs(clock.env());
    let key = env.account_with_key("alice", "free");
    env.apply_agent(&manifest("alpha"), "alice");
    let other = env.account_with_key("bob", "free");
    let server = env.serve();
    let url = schedules_url(&server, "alpha");
    let refused = |body: Value, code: &'static str, words: &'static str| {
        let (url, key) = (url.clone(), key.clone());
        async move {
            let reply = post_json(&url, Some(&key), &body).await;
            assert_eq!(reply.error_code(), code, "{body}: {}", reply.text);
            assert!(reply.error_message().contains(words), "{body}: {}", reply.text);
        }
    };
    refused(
        json!({ "name": "a", "cron": "0 25 * * *", "prompt": "x" }),
        "validation_error",
        "hour",
    )
    .await;
    refused(
        json!({ "name": "a", "cron": "0 9 * * *", "timezone": "Mars/Base", "prompt": "x" }),
        "validation_error",
        "time zone",
    )
    .await;
    refused(
        json!({ "name": "a", "every_seconds": 10, "prompt": "x" }),
        "validation_error",
        "every_seconds",
    )
    .await;
    refused(
        json!({ "name": "a", "at": "2026-11-30T12:00:00Z", "prompt": "x" }),
        "validation_error",
        "'at'",
    )
    .await;
    refused(
        json!({ "name": "a", "every_seconds": 60, "cron": "@daily", "prompt": "x" }),
        "validation_error",
        "one of",
    )
    .await;
    refused(
        json!({ "name": "a", "every_seconds": 60, "command": "nope" }),
        "validation_error",
        "no command 'nope'",
    )
    .await;
    refused(
        json!({ "name": "a", "every_seconds": 60, "command": "hello", "prompt": "x" }),
        "validation_error",
        "one of them",
    )
    .await;
    refused(
        json!({ "name": "A b", "every_seconds": 60, "prompt": "x" }),
        "validation_error",
        "'name'",
    )
    .await;
    refused(
        json!({ "name": "a", "every_seconds": 60, "prompt": "x", "colour": "red" }),
        "validation_error",
        "colour",
    )
    .await;
    refused(
        json!({ "name": "a", "every_seconds": 60, "prompt": "x", "deliver": { "to": "fax" } }),
        "validation_error",
        "deliver",
    )
    .await;

    let soon = create(
        &server,
        &key,
        "alpha",
        json!({ "name": "soon", "after_seconds": 90, "prompt": "Remind me." }),
    )
    .await;
    assert_eq!(soon["next_run_at"], "2026-12-01T12:01:30.000Z");
    let dup = post_json(
        &url,
        Some(&key),
        &json!({ "name": "soon", "every_seconds": 60, "prompt": "x" }),
    )
    .await;
    assert_eq!(dup.error_code(), "conflict", "{}", dup.text);
    create(
        &server,
        &key,
        "alpha",
        json!({ "name": "second", "every_seconds": 3600, "prompt": "x" }),
    )
    .await;
    let third = post_json(
        &url,
        Some(&key),
        &json!({ "name": "third", "every_seconds": 3600, "prompt": "x" }),
    )
    .await;
    assert_eq!(
        (third.status, third.error_code()),
        (403, "quota_exceeded".to_string()),
        "{}",
        third.text
    );

    // Another account's key sees no agent, and no schedule.
    let theirs = get(&url, Some(&other)).await;
    assert_eq!(theirs.status, 404, "{}", theirs.text);
    let paused = keyed(
        reqwest::Method::PATCH,
        &format!("{url}/soon"),
        &other,
        Some(&json!({ "enabled": false })),
    )
    .await;
    assert_eq!(paused.status, 404, "{}", paused.text);
    // Its owner pauses it: it does not run when its time comes.
    let paused = keyed(
        reqwest::Method::PATCH,
        &format!("{url}/soon"),
        &key,
        Some(&json!({ "enabled": false })),
    )
    .await;
    assert_eq!(paused.json()["data"]["status"], "paused", "{}", paused.text);
    clock.set("2026-12-01T12:05:00Z");
    a_few_passes().await;
    assert!(runs(&server, &key, "alpha", "soon").await.is_empty());
    let gone = keyed(reqwest::Method::DELETE, &format!("{url}/soon"), &key, None).await;
    assert_eq!(gone.json()["data"]["deleted"], true, "{}", gone.text);
    assert_eq!(get(&format!("{url}/soon"), Some(&key)).await.status, 404);
    let list = get(&url, Some(&key)).await.json();
    assert_eq!(list["data"]["schedules"].as_array().unwrap().len(), 1, "{list}");
}

#[tokio::test]
async fn a_manifests_schedules_follow_it_and_the_cli_manages_them() {
    let clock = Clock::at("2026-12-01T12:00:00Z");
    let env = TestEnv::new().with_envs(clock.env());
    let key = env.account_with_key("alice", "free");
    let with = |schedules: &str| format!("{}{schedules}", manifest("alpha"));
    let daily = "\n[[schedules]]\nname = \"daily\"\ncron = \"0 9 * * *\"\ntimezone = \"Europe/Paris\"\nprompt = \"Post the tip.\"\ndeliver = { to = \"social\" }\n";
    env.apply_agent(&with(daily), "alice");
    let added = env.cli_json(&[
        "schedule",
        "add",
        "--agent",
        "alpha",
        "--name",
        "by-hand",
        "--every",
        "3600",
        "--command",
        "hello",
        "--parameters",
        "{\"name\": \"Ada\"}",
        "--deliver",
        "telegram:42",
    ]);
    assert_eq!(
        (&added["next_run_at"], &added["deliver"]),
        (
            &json!("2026-12-01T13:00:00.000Z"),
            &json!({ "to": "telegram", "chat_id": 42 })
        ),
        "{added}"
    );
    let named = |list: &Value, name: &str| {
        list["schedules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .cloned()
            .unwrap_or_default()
    };
    let list = env.cli_json(&["schedule", "list", "--agent", "alpha"]);
    let first = named(&list, "daily");
    assert_eq!(
        (
            &first["name"],
            &first["source"],
            &first["next_run_at"],
            &first["deliver"]
        ),
        (
            &json!("daily"),
            &json!("manifest"),
            &json!("2026-12-02T08:00:00.000Z"),
            &json!({ "to": "social" })
        ),
        "{list}"
    );
    // Applied again unchanged, it keeps its id; changed, it takes the change; dropped, it goes
    // (and the one made by hand stays).
    env.apply_agent(&with(daily), "alice");
    assert_eq!(
        named(&env.cli_json(&["schedule", "list", "--agent", "alpha"]), "daily")["id"],
        first["id"]
    );
    env.apply_agent(&with(&daily.replace("0 9", "30 7")), "alice");
    let changed = env.cli_json(&["schedule", "list", "--agent", "alpha"]);
    assert_eq!(
        named(&changed, "daily")["next_run_at"],
        "2026-12-02T06:30:00.000Z",
        "{changed}"
    );
    // An interval and a one-off: applied again later, the interval keeps its times and the
    // one-off whose time passed is still a manifest that applies.
    let more = format!(
        "{daily}\n[[schedules]]\nname = \"hourly\"\nevery_seconds = 3600\nprompt = \"Tick.\"\n\n[[schedules]]\nname = \"once\"\nat = \"2026-12-01T12:10:00Z\"\nprompt = \"Once.\"\n"
    );
    env.apply_agent(&with(&more), "alice");
    let listed = env.cli_json(&["schedule", "list", "--agent", "alpha"]);
    assert_eq!(
        named(&listed, "hourly")["next_run_at"],
        "2026-12-01T13:00:00.000Z",
        "{listed}"
    );
    clock.set("2026-12-01T12:30:00Z");
    env.apply_agent(&with(&more), "alice");
    let listed = env.cli_json(&["schedule", "list", "--agent", "alpha"]);
    assert_eq!(
        named(&listed, "hourly")["next_run_at"],
        "2026-12-01T13:00:00.000Z",
        "{listed}"
    );
    assert_eq!(named(&listed, "once")["at"], "2026-12-01T12:10:00.000Z", "{listed}");
    // A scheduled command's parameters are checked when the manifest is applied.
    let bad_params = with(
        "\n[[schedules]]\nname = \"x\"\nevery_seconds = 60\ncommand = \"hello\"\nparameters = { nom = \"Ada\" }\n",
    );
    let path = env.path("params.toml");
    std::fs::write(&path, bad_params).unwrap();
    let out = env.cli(&["agent", "apply", path.to_str().unwrap()]);
    assert!(
        out.stderr.contains("schedule 'x': invalid parameters"),
        "{}",
        out.stderr
    );
    env.apply_agent(&manifest("alpha"), "alice");
    let left = env.cli_json(&["schedule", "list", "--agent", "alpha"]);
    let names: Vec<&str> = left["schedules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["by-hand"]);
    // A manifest naming a command it lacks says where.
    let bad = env.path("bad.toml");
    std::fs::write(
        &bad,
        with("\n[[schedules]]\nname = \"x\"\nevery_seconds = 60\ncommand = \"nope\"\n"),
    )
    .unwrap();
    let out = env.cli(&["agent", "apply", bad.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        out.stderr.contains("schedules[0].command") && out.stderr.contains("no command 'nope'"),
        "{}",
        out.stderr
    );

    let paused = env.cli_json(&["schedule", "pause", "--agent", "alpha", "by-hand"]);
    assert_eq!(paused["status"], "paused");
    let resumed = env.cli_json(&["schedule", "resume", "--agent", "alpha", "by-hand"]);
    assert_eq!(resumed["status"], "active");
    let runs = env.cli_json(&["schedule", "runs", "--agent", "alpha", "by-hand"]);
    assert_eq!(runs["runs"], json!([]));
    let removed = env.cli_json(&["schedule", "remove", "--agent", "alpha", "by-hand"]);
    assert_eq!(removed["deleted"], true);
    let bad_deliver = env.cli(&[
        "schedule",
        "add",
        "--agent",
        "alpha",
        "--name",
        "z",
        "--every",
        "60",
        "--prompt",
        "x",
        "--deliver",
        "fax",
    ]);
    assert!(bad_deliver.stderr.contains("--deliver"), "{}", bad_deliver.stderr);
    // The server reads the same schedules the CLI wrote.
    let server = env.serve();
    assert!(
        get(&schedules_url(&server, "alpha"), Some(&key)).await.json()["data"]["schedules"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn runs_count_against_the_owners_plan() {
    let clock = Clock::at("2026-12-01T12:00:00Z");
    let env = TestEnv::new().with_envs(clock.env());
    env.cli_json(&[
        "account",
        "create",
        "tiny",
        "--plan",
        "enterprise",
        "--rpm",
        "1",
        "--rpd",
        "100",
    ]);
    env.apply_agent(&manifest("alpha"), "tiny");
    for name in ["first", "second"] {
        env.cli_json(&[
            "schedule",
            "add",
            "--agent",
            "alpha",
            "--name",
            name,
            "--every",
            "60",
            "--command",
            "hello",
            "--parameters",
            "{\"name\": \"Ada\"}",
        ]);
    }
    let _server = env.serve();
    clock.set("2026-12-01T12:01:00Z");
    let deadline = Instant::now() + Duration::from_secs(20);
    let list = loop {
        let list = env.cli_json(&["schedule", "list", "--agent", "alpha"]);
        if list["schedules"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| !s["last_outcome"].is_null())
        {
            break list;
        }
        assert!(Instant::now() < deadline, "the runs never ended: {list}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // One request a minute: one of the two runs had it, the other was refused.
    let errors: Vec<Value> = ["first", "second"]
        .iter()
        .map(|n| env.cli_json(&["schedule", "runs", "--agent", "alpha", n]))
        .collect();
    let mut outcomes: Vec<&str> = list["schedules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["last_outcome"].as_str().unwrap())
        .collect();
    outcomes.sort();
    assert_eq!(outcomes, ["failed", "succeeded"], "{list} {errors:?}");
    let refused = list["schedules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["last_outcome"] == "failed")
        .unwrap();
    let runs = env.cli_json(&[
        "schedule",
        "runs",
        "--agent",
        "alpha",
        refused["name"].as_str().unwrap(),
    ]);
    let error = runs["runs"][0]["error"].as_str().unwrap();
    assert!(error.contains("requests its plan allows"), "{error}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_cut_off_by_a_crash_is_failed_not_run_again() {
    let clock = Clock::at("2026-12-01T12:00:00Z");
    // On PostgreSQL another host may be running it: its lease must run out first.
    let env = TestEnv::new()
        .with_env("AGENT_HOST_JOB_LEASE_SECS", "3")
        .with_env("AGENT_HOST_RECOVERY_INTERVAL_SECS", "1")
        .with_envs(clock.env());
    let key = env.account_with_key("alice", "free");
    let manifest = format!(
        "username = \"sleepy\"\nname = \"Sleepy\"\n\n[[commands]]\ncommand = \"nap\"\nhandler_type = \"custom\"\nplugin = \"{}\"\ntimeout_ms = 30000\n",
        plugin_path("probe")
    );
    env.apply_agent(&manifest, "alice");
    let mut server = env.serve();
    create(
        &server,
        &key,
        "sleepy",
        json!({
            "name": "long-nap", "every_seconds": 3600, "command": "nap", "parameters": { "mode": "sleep", "n": 20000 },
        }),
    )
    .await;
    clock.set("2026-12-01T13:00:00Z");
    let deadline = Instant::now() + Duration::from_secs(20);
    while runs(&server, &key, "sleepy", "long-nap")
        .await
        .first()
        .is_none_or(|r| r["state"] != "running")
    {
        assert!(Instant::now() < deadline, "the nap never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Killed mid-run: the run was recorded before its work, and is found after the restart.
    server.crash();
    let server = env.serve();
    let deadline = Instant::now() + Duration::from_secs(20);
    let ran = loop {
        let ran = runs(&server, &key, "sleepy", "long-nap").await;
        if ran.first().is_some_and(|r| r["state"] != "running") {
            break ran;
        }
        assert!(Instant::now() < deadline, "the cut-off run was never failed: {ran:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(ran.len(), 1, "{ran:?}");
    assert_eq!(ran[0]["state"], "failed", "{ran:?}");
    assert!(
        ran[0]["error"].as_str().unwrap().contains("stopped before it finished"),
        "{ran:?}"
    );
    a_few_passes().await;
    assert_eq!(
        runs(&server, &key, "sleepy", "long-nap").await.len(),
        1,
        "not run again"
    );
    assert_eq!(
        schedule(&server, &key, "sleepy", "long-nap").await["next_run_at"],
        "2026-12-01T14:00:00.000Z"
    );
}

/// A prompt's answer posted on X at its minute (the X API stand-in of `social.rs`); then the
/// account's chat token budget no longer covers the next prompt: its run fails, saying so,
/// and the model is not asked.
#[tokio::test(flavor = "multi_thread")]
async fn a_prompt_posts_on_x_and_the_chat_budget_holds_for_schedules() {
    let x_log = Arc::new(Mutex::new(crate::social::XLog::default()));
    let x = crate::social::fake_x(x_log.clone()).await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let llm = fake_openai(Arc::new(|_, _| text("Tip: drink water.")), seen.clone()).await;
    let clock = Clock::at("2026-12-01T08:59:30Z");
    let env = TestEnv::new()
        .with_env("AGENT_HOST_SOCIAL_API_BASE", &x.base)
        .with_env("AGENT_HOST_SOCIAL_CLIENT_ID", "client-1")
        .with_env("AGENT_HOST_SOCIAL_CLIENT_SECRET", "shh")
        .with_env("AGENT_HOST_LLM_BASE_URL", &llm.url("/v1"))
        .with_env("AGENT_HOST_LLM_MODEL", "fake-model")
        .with_env("AGENT_HOST_CHAT_MAX_TOKENS", "600")
        .with_env("AGENT_HOST_ACCOUNT_CHAT_TOKENS_PER_DAY", "1000")
        .with_envs(clock.env());
    let key = env.account_with_key("alice", "pro");
    env.apply_agent(&manifest("alpha"), "alice");
    let connected = env.cli_json(&[
        "social",
        "connect",
        "--agent",
        "alpha",
        "--access-token",
        "good-access",
        "--refresh-token",
        "good-refresh",
    ]);
    assert_eq!(connected["username"], "helper_x");
    let server = env.serve();
    create(
        &server,
        &key,
        "alpha",
        json!({ "name": "tip", "cron": "0 9 * * *", "timezone": "UTC", "prompt": "Post today's tip.",
                "deliver": { "to": "social" } }),
    )
    .await;
    create(
        &server,
        &key,
        "alpha",
        json!({ "name": "another", "cron": "1 9 * * *", "timezone": "UTC", "prompt": "One more tip." }),
    )
    .await;

    clock.set("2026-12-01T09:00:00Z");
    let deadline = Instant::now() + Duration::from_secs(20);
    while runs(&server, &key, "alpha", "tip")
        .await
        .iter()
        .all(|r| r["state"] == "running")
    {
        assert!(Instant::now() < deadline, "the tip never ran");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ran = runs(&server, &key, "alpha", "tip").await;
    assert_eq!(ran[0]["state"], "succeeded", "{ran:?}");
    until("the tip is posted on X", || x_log.lock().unwrap().posts.len() == 1).await;
    let (token, post) = x_log.lock().unwrap().posts[0].clone();
    assert_eq!(
        (token.as_str(), post["text"].as_str()),
        ("good-access", Some("Tip: drink water."))
    );
    until_outcome(&server, &key, "tip", "succeeded").await;

    // The first prompt's worst case took most of the day's 1000 tokens: the next does not fit.
    clock.set("2026-12-01T09:01:00Z");
    until_outcome(&server, &key, "another", "failed").await;
    let failed = &runs(&server, &key, "alpha", "another").await[0];
    assert!(failed["error"].as_str().unwrap().contains("token budget"), "{failed}");
    assert_eq!(seen.lock().unwrap().len(), 1, "the model was asked once");
    assert_eq!(x_log.lock().unwrap().posts.len(), 1);
}
