// An MCP client that signs in with OAuth, as Claude.ai's and ChatGPT's connectors do: the
// official TypeScript SDK's OAuth client provider (@modelcontextprotocol/sdk) discovers the
// server's metadata from its 401, registers (dynamic registration, or a Client ID Metadata
// Document this script serves over HTTPS), sends the person to the consent page, where
// Debian's chromium (playwright-core) signs in with the account's key and allows; the
// SDK then exchanges the code (PKCE), calls a tool, refreshes its tokens, and revokes them.
//
//   node oauth.mjs '<request JSON>'
//
// request: { url: the agent's MCP endpoint, key: a key that manages the account,
//            registration: "dcr" | "document", tls?: { cert, key } (PEM files, for the
//            document's HTTPS server), deny?: true (the person declines) }
// Prints one JSON line: { consent: {client, agent, allowAsleep}, refusedStays, tools, hello,
//   tokens: {first, refreshed}, afterRevoke: HTTP status of a call with the revoked token,
//   clientId, documentWithoutRedirect?, declined? }
import { createServer as createHttpServer } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { auth, UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { chromium } from "playwright-core";

const request = JSON.parse(process.argv[2]);

function listen(server) {
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server.address().port)));
}

// Where the browser brings the code back: a native client's loopback listener.
let codeArrived;
const code = new Promise((resolve) => (codeArrived = resolve));
const callback = createHttpServer((req, res) => {
  const url = new URL(req.url, "http://127.0.0.1");
  codeArrived(Object.fromEntries(url.searchParams));
  res.end("You can close this window.");
});
const redirectUrl = `http://127.0.0.1:${await listen(callback)}/callback`;

const clientMetadata = {
  client_name: "agent-host OAuth test client",
  redirect_uris: [redirectUrl],
  grant_types: ["authorization_code", "refresh_token"],
  response_types: ["code"],
  token_endpoint_auth_method: "none",
};

// A Client ID Metadata Document: the client's metadata at an HTTPS URL that is its id.
let documentServer;
let clientMetadataUrl;
if (request.registration === "document") {
  documentServer = createHttpsServer(
    { cert: readFileSync(request.tls.cert), key: readFileSync(request.tls.key) },
    (req, res) => {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ client_id: clientMetadataUrl, ...clientMetadata }));
    },
  );
  clientMetadataUrl = `https://127.0.0.1:${await listen(documentServer)}/oauth/client.json`;
}

// The SDK's OAuthClientProvider, kept in memory.
const provider = {
  stored: {},
  get redirectUrl() { return redirectUrl; },
  get clientMetadata() { return clientMetadata; },
  clientMetadataUrl,
  clientInformation() { return this.stored.client; },
  saveClientInformation(info) { this.stored.client = info; },
  tokens() { return this.stored.tokens; },
  saveTokens(tokens) { this.stored.tokens = tokens; },
  redirectToAuthorization(url) { this.stored.authorizationUrl = url; },
  saveCodeVerifier(verifier) { this.stored.verifier = verifier; },
  codeVerifier() { return this.stored.verifier; },
};

const url = new URL(request.url);
async function connect() {
  const transport = new StreamableHTTPClientTransport(url, { authProvider: provider });
  const client = new Client({ name: "agent-host-oauth-tests", version: "1.0.0" });
  await client.connect(transport);
  return { client, transport };
}

// 1. Unauthorized: the SDK discovers, registers and asks for the person's consent.
let first;
try {
  await connect();
  throw new Error("the endpoint answered without a sign-in");
} catch (error) {
  if (!(error instanceof UnauthorizedError)) throw error;
  first = new StreamableHTTPClientTransport(url, { authProvider: provider });
}

// 2. The person, in a browser: signs in with the key and allows (or declines).
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium" });
const page = await browser.newPage();
const pageErrors = [];
page.on("pageerror", (e) => pageErrors.push(String(e)));
page.on("console", (m) => m.type() === "error" && pageErrors.push(m.text()));

// A request the client may hear refused (no response_type) is shown, never followed unasked.
const authorizationUrl = new URL(provider.stored.authorizationUrl);
const broken = new URL(authorizationUrl);
broken.searchParams.delete("response_type");
await page.goto(String(broken));
await page.waitForSelector("#return", { timeout: 20000 });
await new Promise((r) => setTimeout(r, 300));
const refusedStays = new URL(page.url()).pathname === "/oauth/authorize";

// A metadata document's client must name its redirect address.
let documentWithoutRedirect;
if (clientMetadataUrl) {
  const asked = new URL(authorizationUrl);
  asked.pathname = "/oauth/authorize/request";
  asked.searchParams.delete("redirect_uri");
  documentWithoutRedirect = (await fetch(asked)).status;
}

await page.goto(String(authorizationUrl));
await page.waitForSelector("#allow", { timeout: 20000 });
const consent = {
  client: await page.textContent("#client"),
  agent: await page.textContent("#agent"),
  framing: (await page.evaluate(async () => (await fetch(location.href)).headers.get("content-security-policy"))) ?? "",
  // Asleep until the person is there: a click meant for another window cannot allow.
  allowAsleep: await page.isDisabled("#allow"),
};
await page.mouse.move(40, 40);
await page.mouse.move(80, 90);
if (request.deny) {
  await page.click("#deny");
} else {
  await page.fill("#key", request.key);
  await page.click("#allow");
}
const answered = await code;
await browser.close();
if (request.deny) {
  console.log(JSON.stringify({ consent, declined: answered, pageErrors }));
  process.exit(0);
}

// 3. The code for tokens (PKCE), then the tools.
await first.finishAuth(answered.code);
const firstTokens = provider.stored.tokens;
const { client } = await connect();
const tools = (await client.listTools()).tools.map((t) => t.name);
const hello = await client.callTool({ name: "hello", arguments: { name: "OAuth" } });
await client.close();

// 4. Refresh: the SDK trades its refresh token for new tokens (the old one is used up).
const refreshed = await auth(provider, { serverUrl: url });
const secondTokens = provider.stored.tokens;
const again = await connect();
const helloAgain = await again.client.callTool({ name: "hello", arguments: { name: "again" } });
await again.client.close();

// 5. Revocation (RFC 7009) at the server's revocation endpoint: the grant ends.
const metadata = await (await fetch(new URL("/.well-known/oauth-authorization-server", url))).json();
const revoked = await fetch(metadata.revocation_endpoint, {
  method: "POST",
  headers: { "content-type": "application/x-www-form-urlencoded" },
  body: new URLSearchParams({ token: secondTokens.access_token, client_id: provider.stored.client.client_id }),
});
const afterRevoke = await fetch(url, {
  method: "POST",
  headers: {
    authorization: `Bearer ${secondTokens.access_token}`,
    "content-type": "application/json",
    accept: "application/json, text/event-stream",
  },
  body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }),
});

console.log(JSON.stringify({
  consent,
  refusedStays,
  documentWithoutRedirect,
  pageErrors,
  clientId: provider.stored.client.client_id,
  tools,
  hello: hello.content?.[0]?.text,
  helloAgain: helloAgain.content?.[0]?.text,
  refreshed,
  tokens: { first: firstTokens, refreshed: secondTokens },
  revokeStatus: revoked.status,
  afterRevoke: afterRevoke.status,
  afterRevokeChallenge: afterRevoke.headers.get("www-authenticate"),
}));
callback.close();
documentServer?.close();
