// The web console in a real browser (Debian's chromium, driven by playwright-core), against
// a running agent-host that tests/api/console.rs set up. Walks what an account holder does
// with only a browser, checks each step as they would see it, and checks with the API
// itself that what the page did took effect. Exits 1 with the failure on stderr.
//
// env: CONSOLE_BASE (http://127.0.0.1:PORT), MANAGE_KEY, SELLER (the paid agent's id),
//      PAID_TX (the x402 payment's transaction), PAYER (its payer), NOTES_WASM (the example
//      plugin), CHROMIUM (default /usr/bin/chromium), SCREENSHOTS (a directory, optional),
//      WEBHOOK_URL (a receiver to register), EXPECT_REVENUE, EXPECT_PAID, EXPECT_RUNS, EXPECT_CHATS (what
//      the scripted load did, which the dashboard must show).
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import jsQR from "jsqr";
import { chromium } from "playwright-core";

const env = (name, fallback) => {
  const value = process.env[name] ?? fallback;
  if (value === undefined) throw new Error(`${name} is not set`);
  return value;
};
const base = env("CONSOLE_BASE");
const manageKey = env("MANAGE_KEY");
const seller = env("SELLER");
const paidTx = env("PAID_TX");
const payer = env("PAYER");
const notesWasm = env("NOTES_WASM");
const shots = process.env.SCREENSHOTS;
if (shots) mkdirSync(shots, { recursive: true });

const api = async (path, key) => {
  const response = await fetch(base + path, { headers: { "x-api-key": key } });
  return { status: response.status, body: await response.json() };
};

// An OAuth client's whole sign-in without the browser: registered, allowed with the
// account's key through the consent page's own call, its code exchanged with PKCE
// (RFC 7636's example verifier). Its tokens.
async function signInWithOAuth(resource) {
  const redirect = "http://127.0.0.1:9/callback";
  const registered = await fetch(`${base}/oauth/register`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ redirect_uris: [redirect], token_endpoint_auth_method: "none", client_name: "Console test client" }),
  });
  const { client_id } = await registered.json();
  const query = new URLSearchParams({
    response_type: "code", client_id, redirect_uri: redirect, resource, code_challenge_method: "S256",
    code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
  }).toString();
  const decided = await fetch(`${base}/oauth/authorize/decision`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": manageKey },
    body: JSON.stringify({ query, allow: true }),
  });
  const code = new URL((await decided.json()).redirect).searchParams.get("code");
  const tokens = await fetch(`${base}/oauth/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ grant_type: "authorization_code", client_id, code, redirect_uri: redirect,
      code_verifier: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk" }),
  });
  assert.equal(tokens.status, 200, await tokens.clone().text());
  return tokens.json();
}

const browser = await chromium.launch({ executablePath: env("CHROMIUM", "/usr/bin/chromium") });
const page = await browser.newPage({ viewport: { width: 1200, height: 860 } });
const problems = [];
page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
// The API's refusals the flows provoke (a bad key, a bad manifest) are answers, not faults;
// anything else the page logs as an error (a script error, a CSP refusal) is.
page.on("console", (m) => m.type() === "error" && !m.text().startsWith("Failed to load resource") && problems.push(`console: ${m.text()}`));
page.on("requestfailed", (r) => problems.push(`request failed: ${r.url()}`));
const shot = async (name) => shots && page.screenshot({ path: `${shots}/${name}.png`, fullPage: true });
const step = (name) => console.log(`console: ${name}`);

/** Every form control has a name a screen reader can say. */
async function everyControlIsLabelled() {
  const unlabelled = await page.evaluate(() =>
    [...document.querySelectorAll("input, select, textarea")]
      .filter((el) => el.type !== "hidden" && !el.labels?.length && !el.getAttribute("aria-label"))
      .map((el) => el.outerHTML),
  );
  assert.deepEqual(unlabelled, [], "controls without a label");
}

try {
  step("sign in, by keyboard");
  const first = await page.goto(`${base}/console`);
  const csp = first.headers()["content-security-policy"];
  assert.match(csp, /default-src 'none'/);
  assert.match(csp, /script-src 'self'/);
  await page.getByLabel("API key").waitFor();
  await shot("sign-in");
  await page.keyboard.type("ahk_not-a-key");
  await page.keyboard.press("Enter");
  await page.getByText("This key is not valid, or it was revoked.").waitFor();
  await page.getByLabel("API key").fill(manageKey);
  await page.keyboard.press("Enter");
  await page.getByRole("heading", { name: "Overview", level: 1 }).waitFor();
  // The page moves the focus once it has drawn: waited for, not looked at once.
  await page
    .waitForFunction(() => document.activeElement?.tagName === "H1", null, { timeout: 10_000 })
    .catch(() => {});
  assert.equal(await page.evaluate(() => document.activeElement?.tagName), "H1", "focus moves to the page heading");
  assert.equal(await page.evaluate(() => document.cookie), "", "no cookie");
  assert.ok(!page.url().includes(manageKey), "the key never goes in the address");

  step("the overview shows what the scripted load did");
  const kpi = (id) => page.locator(`#${id} strong`).textContent();
  await page.locator("#kpi-revenue strong").waitFor();
  assert.equal(await kpi("kpi-revenue"), env("EXPECT_REVENUE"));
  assert.equal(await kpi("kpi-paid"), env("EXPECT_PAID"));
  assert.equal(await kpi("kpi-calls"), env("EXPECT_RUNS"));
  // Each chart is an image with a description a screen reader says, and its numbers as a table.
  const revenueChart = page.getByRole("img", { name: /Revenue by day \(UTC\), by network/ });
  await revenueChart.waitFor();
  assert.match(await revenueChart.locator("desc").textContent(), new RegExp(`^${env("EXPECT_REVENUE")} in ${env("EXPECT_PAID")} payments: base ${env("EXPECT_REVENUE")}`));
  const revenueFigure = page.locator("figure", { has: revenueChart });
  await revenueFigure.getByText("Show as table").click();
  const thisDay = new Date().toISOString().slice(5, 10);
  await revenueFigure.getByRole("row").filter({ hasText: thisDay }).filter({ hasText: env("EXPECT_REVENUE") }).waitFor();
  assert.equal(await revenueChart.locator("rect.series-0").count(), 1, "one day of base revenue drawn");
  await page.getByRole("img", { name: "Runs and failures by command" }).waitFor();
  await page.locator("#plan-usage").getByRole("row").filter({ hasText: "Agents" }).filter({ hasText: "1 of 100" }).waitFor();
  await everyControlIsLabelled();
  await shot("overview");
  await page.getByLabel("Range").selectOption("24h");
  await page.getByRole("img", { name: /Revenue by hour \(UTC\)/ }).waitFor();
  assert.equal(await kpi("kpi-revenue"), env("EXPECT_REVENUE"), "the same within the last 24 hours");

  step("the agent's usage: each command's runs, channels and run time");
  await page.getByRole("link", { name: "seller" }).click();
  await page.getByRole("heading", { name: "Agent seller", level: 1 }).waitFor();
  const commandsTable = page.getByRole("table", { name: /Commands: runs by channel/ });
  await commandsTable.getByRole("row").filter({ hasText: "/hello" }).filter({ hasText: "api 3" }).waitFor();
  await commandsTable.getByRole("row").filter({ hasText: "/forecast" }).filter({ hasText: "x402 1" }).filter({ hasText: "0.01 USDC" }).waitFor();
  await shot("usage");

  await page.getByRole("link", { name: "Agents" }).first().click();
  await page.getByRole("heading", { name: "Agents", level: 1 }).waitFor();
  await page.getByRole("link", { name: "seller" }).waitFor();
  await everyControlIsLabelled();
  await shot("agents");

  step("create a key; use it against the API");
  await page.getByRole("link", { name: "API keys" }).click();
  await page.getByRole("heading", { name: "API keys" }).waitFor();
  await page.getByLabel("Name (optional)").fill("Telegram bot");
  await page.getByLabel("Scope").selectOption("use");
  await page.getByLabel("Expires").selectOption("in 30 days");
  await page.getByRole("button", { name: "Create key" }).click();
  const secretBox = page.getByLabel("The new key");
  await secretBox.waitFor();
  await page.getByText("Copy this key now: it is shown only once.").waitFor();
  await page.getByRole("button", { name: "Copy key" }).waitFor();
  const newKey = await secretBox.inputValue();
  assert.ok(newKey.length > 20, newKey);
  const used = await api(`/v1/agents/${seller}/commands`, newKey);
  assert.equal(used.status, 200, JSON.stringify(used.body));
  assert.equal(used.body.data.agent_username, "seller");
  const managing = await api("/v1/account/keys", newKey);
  assert.equal(managing.status, 403, "a use key cannot manage");
  await everyControlIsLabelled();
  await shot("keys");

  step("the key's name and end; rename it and drop the end");
  const keys = (await api("/v1/account/keys", manageKey)).body.data.keys;
  const made = keys.find((k) => k.scope === "use" && k.active);
  assert.equal(made.name, "Telegram bot");
  const days = (Date.parse(made.expires_at) - Date.now()) / 86_400_000;
  assert.ok(days > 29.9 && days <= 30, made.expires_at);
  const keyRow = page.getByRole("row").filter({ hasText: made.id });
  await keyRow.getByText("active until").waitFor();
  await page.getByRole("button", { name: `Edit ${made.id}` }).click();
  const editing = page.getByRole("dialog");
  await editing.getByLabel("Name").fill("Telegram bot (old)");
  await editing.getByLabel("Expires").selectOption("never");
  await editing.getByRole("button", { name: "Save" }).click();
  await page.getByText(`Key ${made.id} is updated.`).waitFor();
  const edited = (await api("/v1/account/keys", manageKey)).body.data.keys.find((k) => k.id === made.id);
  assert.deepEqual([edited.name, edited.expires_at], ["Telegram bot (old)", null]);
  await keyRow.getByRole("cell", { name: "Telegram bot (old)" }).waitFor();

  step("revoke it (Escape first: nothing happens); the API refuses it");
  const revokeButton = page.getByRole("button", { name: `Revoke ${made.id}` });
  await revokeButton.click();
  await page.getByRole("dialog").waitFor();
  await page.keyboard.press("Escape");
  await page.getByRole("dialog").waitFor({ state: "detached" });
  assert.equal((await api(`/v1/agents/${seller}/commands`, newKey)).status, 200, "cancelled: still valid");
  await revokeButton.click();
  await page.getByRole("dialog").getByRole("button", { name: "Revoke" }).click();
  await page.getByText(`Key ${made.id} is revoked.`).waitFor();
  const refused = await api(`/v1/agents/${seller}/commands`, newKey);
  assert.equal(refused.status, 401, JSON.stringify(refused.body));
  assert.equal(refused.body.error.code, "unauthorized");

  step("a signed webhook endpoint: a private address refused, a delivery, send it again");
  await page.getByRole("link", { name: "Webhooks" }).click();
  await page.getByRole("heading", { name: "Webhooks", level: 1 }).waitFor();
  await page.getByLabel("Endpoint URL").fill("http://169.254.169.254/latest");
  await page.getByRole("button", { name: "Add endpoint" }).click();
  await page.getByText("this server may not call it", { exact: false }).waitFor();
  await page.getByLabel("Endpoint URL").fill(env("WEBHOOK_URL"));
  await page.getByLabel("Description (optional)").fill("Our ops channel");
  await page.getByRole("button", { name: "Add endpoint" }).click();
  assert.match(await page.getByLabel("Signing secret").inputValue(), /^whsec_[A-Za-z0-9+/=]{40,}$/);
  await everyControlIsLabelled();
  const another = await fetch(base + "/v1/account/keys", {
    method: "POST", headers: { "x-api-key": manageKey, "content-type": "application/json" }, body: JSON.stringify({ name: "ci" }),
  });
  assert.equal(another.status, 201);
  const delivered = page.getByRole("row").filter({ hasText: "key.created" }).filter({ hasText: "succeeded" });
  for (let i = 0; i < 50 && !(await delivered.count()); i++) {
    await new Promise((r) => setTimeout(r, 200));
    await page.reload();
    await page.getByRole("heading", { name: "Webhooks", level: 1 }).waitFor();
  }
  await delivered.waitFor();
  await shot("webhooks");
  await delivered.getByRole("button", { name: /^Send .* again$/ }).click();
  await page.getByText(/Delivery of msg_\w+ will be sent again\./).waitFor();

  step("upload the example plugin and run its command from the page");
  await page.getByRole("link", { name: "Plugins" }).click();
  await page.getByLabel("Component (.wasm)").setInputFiles(notesWasm);
  await page.getByRole("button", { name: "Upload" }).click();
  const line = await page.locator(".once code.uri").textContent();
  assert.match(line, /^plugin = "sha256:[0-9a-f]{64}"$/);
  await page.getByRole("cell", { name: "notes" }).waitFor();
  await everyControlIsLabelled();
  await shot("plugins");
  await page.getByRole("link", { name: "Agents" }).click();
  const manifest = `username = "notebook"\nname = "Notebook"\n\n[[commands]]\ncommand = "notes"\nhandler_type = "custom"\n${line}\n`;
  await page.getByLabel("Manifest (TOML or JSON)").fill("username = \"notebook\"\n[[commands]\n");
  await page.getByRole("button", { name: "Apply manifest" }).click();
  await page.getByText("manifest:2: unclosed array table").waitFor(); // the CLI's message, with its line
  await page.getByLabel("Manifest (TOML or JSON)").fill(manifest);
  await page.getByRole("button", { name: "Apply manifest" }).click();
  await page.getByRole("link", { name: "notebook" }).first().click();
  await page.getByRole("heading", { name: "Notebook", level: 1 }).waitFor();
  await page.getByLabel("Command", { exact: true }).selectOption("notes");
  await page.getByLabel("action (required)").fill("add");
  await page.getByLabel("text", { exact: true }).fill("Buy milk");
  await page.getByRole("button", { name: "Run command" }).click();
  await page.locator("pre.response", { hasText: "Noted (1 in all)." }).waitFor();
  await page.getByLabel("action (required)").fill("list");
  await page.getByLabel("text", { exact: true }).fill("");
  await page.getByRole("button", { name: "Run command" }).click();
  await page.locator("pre.response", { hasText: "Buy milk" }).waitFor();
  // A refused run shows its reason, and is kept in the agent's logs.
  await page.getByLabel("action (required)").fill("burn");
  await page.getByRole("button", { name: "Run command" }).click();
  await page.getByText("unknown action 'burn'", { exact: false }).first().waitFor();
  await everyControlIsLabelled();
  await shot("commands");

  await page.getByRole("link", { name: "Logs" }).click();
  await page.getByRole("row").filter({ hasText: "/notes" }).filter({ hasText: "invalid_input" }).waitFor();
  await page.getByText("error: unknown action 'burn'", { exact: false }).waitFor();
  await shot("logs");

  // The agent's MCP server, with a client's line ready to paste.
  await page.getByRole("link", { name: "MCP" }).click();
  const mcpUrl = await page.locator("#mcp-url").textContent();
  assert.ok(/\/mcp\/[0-9a-f-]{36}$/.test(mcpUrl), `the MCP address: ${mcpUrl}`);
  await page.getByText(`claude mcp add --transport http`, { exact: false }).waitFor();
  await page.getByText("No client has signed in to this agent.").waitFor();
  await everyControlIsLabelled();

  // A client signs in with OAuth (as the consent page would allow it), and is revoked here.
  const oauthClient = await signInWithOAuth(mcpUrl);
  await page.reload();
  const grantRow = page.getByRole("row").filter({ hasText: "Console test client" });
  await grantRow.waitFor();
  await grantRow.getByRole("button", { name: "Revoke Console test client" }).click();
  await page.getByRole("dialog").getByRole("button", { name: "Revoke" }).click();
  await page.getByText("The client's access is revoked.").waitFor();
  await page.getByText("No client has signed in to this agent.").waitFor();
  const revokedCall = await fetch(mcpUrl, {
    method: "POST",
    headers: { authorization: `Bearer ${oauthClient.access_token}`, "content-type": "application/json",
      accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }),
  });
  assert.equal(revokedCall.status, 401, "the revoked client's token is refused");

  // The agent as an A2A server: its card, the SDKs' lines, and the skills its card lists.
  await page.getByRole("link", { name: "A2A" }).click();
  const cardUrl = await page.locator("#a2a-card-url").textContent();
  assert.ok(/\/a2a\/[0-9a-f-]{36}\/\.well-known\/agent-card\.json$/.test(cardUrl), `the A2A card: ${cardUrl}`);
  await page.getByText("A2ACardResolver(http", { exact: false }).waitFor();
  await page.getByRole("table", { name: "The skills this account's key may use" }).getByText("chat", { exact: true }).waitFor();
  await everyControlIsLabelled();

  // The seller's chat: the address OpenAI's clients use, and the tokens of today's chat.
  await page.goto(`${base}/console#/agents/${seller}/chat`);
  const openaiUrl = await page.locator("#openai-url").textContent();
  assert.ok(/\/v1\/agents\/[0-9a-f-]{36}\/openai\/v1$/.test(openaiUrl), `the OpenAI base URL: ${openaiUrl}`);
  const today = new Date().toISOString().slice(0, 10);
  const tokens = (n) => Number(n).toLocaleString("en");
  await page
    .getByRole("row")
    .filter({ hasText: today })
    .filter({ hasText: tokens(env("PROMPT_TOKENS")) })
    .filter({ hasText: tokens(env("COMPLETION_TOKENS")) })
    .waitFor();
  await page.getByText(`${env("EXPECT_CHATS")},`, { exact: false }).waitFor();
  await everyControlIsLabelled();
  await shot("chat");

  step("the x402 payment, with its receipt and explorer link");
  await page.goto(`${base}/console#/agents/${seller}/payments`);
  const row = page.getByRole("row").filter({ hasText: "0.01 USDC" }).first();
  await row.waitFor();
  const explorer = row.getByRole("link", { name: /Explorer/ });
  assert.ok((await explorer.getAttribute("href")).includes(paidTx), "the explorer link names the transaction");
  await row.getByText("Receipt").click();
  await row.getByText(payer).waitFor();
  await row.getByText(paidTx).waitFor();
  // The message paid by use: what it charged of its maximum, and the tokens it used.
  const byUse = page.getByRole("row").filter({ hasText: "by use, of at most 0.05 USDC" }).first();
  await byUse.getByText("0.000072 USDC").first().waitFor();
  await byUse.getByText("Receipt").click();
  await byUse.getByText("21 input and 5 output tokens").waitFor();
  await shot("payments");

  step("wallets: address, balance, QR code");
  await page.getByRole("link", { name: "Wallets" }).click();
  await page.getByRole("heading", { name: "Base wallet" }).waitFor();
  await page.getByText(/^Balance: [0-9.]+ USDC/).waitFor();
  const qr = page.getByRole("img", { name: /QR code to fund/ });
  await qr.waitFor();
  await page.waitForFunction(() => document.querySelector("img.qr")?.naturalWidth > 0);
  // The QR code, read as a phone's camera would, is the wallet's USDC payment request.
  const image = await page.evaluate(() => {
    const img = document.querySelector("img.qr");
    const canvas = document.createElement("canvas");
    [canvas.width, canvas.height] = [img.naturalWidth, img.naturalHeight];
    const context = canvas.getContext("2d");
    context.drawImage(img, 0, 0);
    return { width: canvas.width, height: canvas.height, data: [...context.getImageData(0, 0, canvas.width, canvas.height).data] };
  });
  const read = jsQR(Uint8ClampedArray.from(image.data), image.width, image.height);
  const [baseWallet] = (await api(`/v1/account/agents/${seller}/wallets`, manageKey)).body.data.wallets;
  assert.equal(read?.data, baseWallet.funding_uri, "the QR code holds the funding request");
  assert.match(baseWallet.funding_uri, new RegExp(`^ethereum:0x[0-9a-fA-F]{40}@\\d+/transfer\\?address=${baseWallet.address}$`));
  await page.getByRole("button", { name: "Create a Solana wallet" }).waitFor();
  await everyControlIsLabelled();
  await shot("wallets");

  step("a long-running command: its progress, on the command page and in the jobs");
  await page.getByRole("link", { name: "Commands" }).click();
  await page.getByLabel("Command", { exact: true }).selectOption("nap");
  await page.getByLabel("mode (required)").fill("sleep");
  await page.getByLabel("n", { exact: true }).fill("6000");
  await page.getByRole("button", { name: "Run command" }).click();
  await page.getByRole("progressbar", { name: "Progress of the command" }).waitFor();
  await page.getByRole("link", { name: "Jobs" }).click();
  const napping = page.getByRole("row").filter({ hasText: "/nap" });
  await napping.getByRole("progressbar").waitFor();
  // The page refreshes itself: the bar moves as the plugin reports progress.
  await page.waitForFunction(() => [...document.querySelectorAll("tbody progress")].some((p) => p.value > 0));
  await shot("jobs");
  await napping.filter({ hasText: "succeeded" }).waitFor({ timeout: 20000 });
  assert.equal(await napping.getByRole("progressbar").count(), 0);
  await page.getByRole("row").filter({ hasText: "/report" }).filter({ hasText: "succeeded" }).waitFor();

  step("a daily post, scheduled in the console");
  await page.getByRole("link", { name: "Schedules" }).click();
  await page.getByLabel("Name", { exact: true }).fill("daily-post");
  await page.getByLabel("When", { exact: true }).selectOption("daily");
  await page.getByLabel("Time of day").fill("09:00");
  await page.getByLabel("Time zone").fill("Europe/Paris");
  await page.getByLabel("Prompt", { exact: true }).fill("Write today's tip for our followers.");
  await page.getByLabel("Send the answer to").selectOption("social");
  await page.getByRole("button", { name: "Add schedule" }).click();
  const daily = page.getByRole("row").filter({ hasText: "daily-post" });
  await daily.filter({ hasText: "0 9 * * * (Europe/Paris)" }).filter({ hasText: "active" }).waitFor();
  const [scheduled] = (await api(`/v1/account/agents/${seller}/schedules`, manageKey)).body.data.schedules;
  assert.deepEqual([scheduled.cron, scheduled.timezone, scheduled.deliver, scheduled.prompt], ["0 9 * * *", "Europe/Paris", { to: "social" }, "Write today's tip for our followers."]);
  // 09:00 in Paris: 08:00 UTC in winter, 07:00 in summer.
  assert.match(scheduled.next_run_at, /T0[78]:00:00\.000Z$/);
  await everyControlIsLabelled();
  await shot("schedules");
  await daily.getByRole("button", { name: "Pause" }).click();
  await daily.filter({ hasText: "paused" }).waitFor();
  await daily.getByRole("button", { name: "Resume" }).click();
  await daily.filter({ hasText: "active" }).waitFor();

  step("a remote MCP server's credential");
  await page.getByRole("link", { name: "MCP" }).click();
  // A remote MCP server its manifest names: unreachable here, its credential set all the same.
  await page.getByRole("heading", { name: "docs" }).waitFor();
  await page.getByText("Not set: its tools are left out.").waitFor();
  await page.getByLabel("Authorization header sent to docs").fill("Bearer console-secret");
  await page.getByRole("button", { name: "Save credential" }).click();
  await page.getByText("Set. A new value replaces it.").waitFor();
  await everyControlIsLabelled();

  step("chat-app and social");
  await page.getByRole("link", { name: "Chat-app and social" }).click();
  await page.getByRole("heading", { name: "Chat-app bot (Telegram)" }).waitFor();
  await everyControlIsLabelled();
  await shot("integrations");

  step("try the agent: a streamed answer, and the command it called");
  await page.getByRole("link", { name: "Try it" }).click();
  await page.getByLabel("Message").fill("Greet Ann");
  await page.keyboard.press("Enter");
  await page.locator(".calls li", { hasText: "/hello" }).filter({ hasText: "Called" }).waitFor();
  await page.locator(".answer", { hasText: "Hello from the agent." }).waitFor();
  // Two rounds of the model (the call, then the answer), 21 and 5 tokens each.
  await page.getByText("42 prompt and 10 completion tokens", { exact: false }).first().waitFor();
  await everyControlIsLabelled();
  await shot("try");

  assert.deepEqual(problems, [], "the page logged no errors (a CSP refusal would show here)");
  console.log("console: all flows passed");
} catch (e) {
  // What the reader saw when it failed, for whoever reads the test's log.
  const seen = await page.locator("main").innerText().catch(() => "(no page)");
  console.error(`console: failed at ${page.url()}; the page said:\n${seen}`);
  throw e;
} finally {
  await browser.close();
}
