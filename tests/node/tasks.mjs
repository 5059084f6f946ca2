// A client of MCP's tasks extension (io.modelcontextprotocol/tasks), as the official
// TypeScript SDK v2 (@modelcontextprotocol/client) and the extension's own package
// (@modelcontextprotocol/ext-tasks) run it against a 2026-07-28 server: a long-running
// tool call answered as a task, followed to its end, or cancelled while it runs.
//
//   node tasks.mjs '<request JSON>'
//
// request: { url, key?: API key sent as "Authorization: Bearer", calls: [call] }
// call:    { name, arguments?, cancelAfterMs?: cancels the task that long after it started,
//            pay?: as in mcp.mjs: the unpaid call's PaymentRequired is paid with the x402
//            packages and the call made again with _meta["x402/payment"] }
// Prints one JSON line: { era, results: [{ kind, taskId, status, result, error, events,
//   createdMeta }] } where events are the task states seen on the way.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createTaskSessionFromClient } from "@modelcontextprotocol/ext-tasks/client";
import { payer } from "./x402_payer.mjs";

const request = JSON.parse(process.argv[2]);
const url = new URL(request.url);
const headers = request.key ? { Authorization: `Bearer ${request.key}` } : {};
const TASKS = "io.modelcontextprotocol/tasks";
const protocolVersion = "2026-07-28";
const clientInfo = { name: "agent-host-tasks-tests", version: "1.0.0" };
const clientCapabilities = { extensions: { [TASKS]: {} } };

const client = new Client(clientInfo, { capabilities: clientCapabilities, versionNegotiation: { mode: { pin: protocolVersion } } });
await client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers } }));

// The extension's requests on the 2026-07-28 wire, as its adapter asks a host to send them:
// one POST each, framed as JSON-RPC here, with the revision's headers.
let nextId = 1;
const byTask = (p) => p?.taskId;
const named = {
  "tools/call": (p) => p?.name,
  "resources/read": (p) => p?.uri,
  "prompts/get": (p) => p?.name,
  "tasks/get": byTask,
  "tasks/update": byTask,
  "tasks/cancel": byTask,
};
let createdMeta = null;
async function rawDispatch(request) {
  const message = { jsonrpc: "2.0", id: nextId++, ...request };
  const name = named[message.method]?.(message.params);
  const response = await fetch(url, {
    method: "POST",
    headers: {
      ...headers,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": protocolVersion,
      "mcp-method": message.method,
      ...(name ? { "mcp-name": String(name) } : {}),
    },
    body: JSON.stringify(message),
  });
  const answer = await response.json();
  if (message.method === "tools/call" && answer.result?.resultType === "task") createdMeta = answer.result._meta ?? null;
  return answer;
}

const session = createTaskSessionFromClient(client, {
  endpointId: `agent-host:${url}`,
  rawDispatch,
  v2RequestFraming: { protocolVersion, clientInfo, clientCapabilities },
});

const results = [];
for (const call of request.calls) {
  createdMeta = null;
  let metadata;
  if (call.pay) {
    const unpaid = await session.callTool(call.name, call.arguments ?? {});
    const { outcome } = await unpaid.settle();
    const required = outcome.result.structuredContent;
    metadata = { "x402/payment": await (await payer(call.pay)).createPaymentPayload(required) };
  }
  const execution = await session.callTool(call.name, call.arguments ?? {}, { metadata, requestTimeoutMs: 60000 });
  const events = [];
  if (call.cancelAfterMs !== undefined) {
    setTimeout(() => execution.cancel().catch((e) => events.push(`cancel failed: ${e.message}`)), call.cancelAfterMs);
  }
  const started = Date.now();
  const { outcome } = await execution.settle({
    onEvent: (event) => {
      if (event.type === "task") events.push(event.task.status);
    },
  });
  results.push({
    kind: execution.kind,
    taskId: execution.handle?.taskId ?? null,
    status: outcome.status,
    result: outcome.status === "completed" ? outcome.result : null,
    error: outcome.status === "failed" ? { message: outcome.error.message, code: outcome.error.code } : null,
    events,
    createdMeta,
    tookMs: Date.now() - started,
  });
}
console.log(JSON.stringify({ era: client.getProtocolEra?.() ?? null, results }));
await session.close();
await client.close();
