// The official A2A JavaScript SDK (@a2a-js/sdk) against an agent's A2A endpoint, for
// tests/api/a2a.rs. Reads one JSON argument: {url, key, legacy?, steps}, each step one of
//   {do: "card"} | {do: "send", text, skill, data, contextId, stream, immediately}
//   {do: "get" | "cancel" | "subscribe", task: "$N"} | {do: "list", contextId}
//   {do: "push", task: "$N", url, token}   CreateTaskPushNotificationConfig, then the list
//   {do: "verify"}   the card's signature checked with the SDK's verifier (the key from its
//                    jku), then a changed copy's
// A paid send (x402's A2A extension) adds to "send" one of
//   pay: {network, key, rpcUrl, networkId}   sign the payment the task asks for (the x402
//                                            packages: @x402/core with @x402/evm or @x402/svm)
//   payload: "$N"                            answer with step N's payment instead
//   decline: true                            answer x402.payment.status: payment-rejected
//   abortAfterMs: N                          (with pay) stop waiting for the answer after N ms
// and gives {asked: the task that asked, payment, task: the task after the answer};
//   {do: "payHttp", url, body, pay | payload: "$N"} pays the x402 HTTP route (version 2) with
// a new payment or step N's: {status, body, payment}.
// Prints {steps: [...]}: each step's outcome as JSON (an SDK error as {error, message}).
import { randomUUID } from "node:crypto";
import { payer } from "./x402_payer.mjs";
import {
  AgentCard,
  ListTaskPushNotificationConfigsResponse,
  ListTasksResponse,
  Role,
  StreamResponse,
  Task,
  TaskPushNotificationConfig,
  verifyAgentCardSignature,
} from "@a2a-js/sdk";
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
} from "@a2a-js/sdk/client";

const request = JSON.parse(process.argv[2]);
const keyed = (input, init = {}) => {
  const headers = new Headers(init.headers);
  if (request.key) headers.set("x-api-key", request.key);
  return fetch(input, { ...init, headers });
};
const factory = new ClientFactory(
  ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    // legacy: the SDK's A2A 0.3 client, for an agent's /v0.3 URL.
    transports: [new JsonRpcTransportFactory({ fetchImpl: keyed, legacyCompat: { enabled: Boolean(request.legacy) } })],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl: keyed, legacyCompat: { enabled: Boolean(request.legacy) } }),
  }),
);

const outcomes = [];
const taskId = (ref) => (typeof ref === "string" && ref.startsWith("$") ? outcomes[Number(ref.slice(1))].task.id : ref);
const paymentOf = (ref) => outcomes[Number(ref.slice(1))].payment;
const part = (text) => ({ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "" });

// The task's answer to its price list: a payment (signed now, or another step's), or a no.
async function answerPayment(client, step, asked) {
  const metadata = asked.status?.message?.metadata ?? {};
  let payment = null;
  let answer;
  if (step.decline) {
    answer = { "x402.payment.status": "payment-rejected" };
  } else {
    payment = step.payload ? paymentOf(step.payload) : await (await payer(step.pay)).createPaymentPayload(metadata["x402.payment.required"]);
    answer = { "x402.payment.status": "payment-submitted", "x402.payment.payload": payment };
  }
  const message = {
    messageId: randomUUID(),
    contextId: asked.contextId,
    taskId: asked.id,
    role: Role.ROLE_USER,
    parts: [part(step.decline ? "No, thank you." : "Here is the payment.")],
    metadata: answer,
    extensions: [],
    referenceTaskIds: [],
  };
  // abortAfterMs: the payer goes away while its paid task runs.
  const options = step.abortAfterMs ? { signal: AbortSignal.timeout(step.abortAfterMs) } : undefined;
  try {
    const configuration = step.immediately ? { returnImmediately: true } : undefined;
    const result = await client.sendMessage({ tenant: "", message, configuration, metadata: undefined }, options);
    return { asked: Task.toJSON(asked), payment, task: Task.toJSON(result) };
  } catch (err) {
    if (!step.abortAfterMs) throw err;
    return { asked: Task.toJSON(asked), payment, aborted: String(err?.message ?? err) };
  }
}

// The x402 HTTP route paid as @x402/fetch pays it: the 402's PAYMENT-REQUIRED, then the
// payment in PAYMENT-SIGNATURE.
async function payHttp(step) {
  const post = (headers) => fetch(step.url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(step.body) });
  const unpaid = await post({});
  const required = JSON.parse(Buffer.from(unpaid.headers.get("payment-required"), "base64").toString());
  const payment = step.payload ? paymentOf(step.payload) : await (await payer(step.pay)).createPaymentPayload(required);
  const paid = await post({ "payment-signature": Buffer.from(JSON.stringify(payment)).toString("base64") });
  return { status: paid.status, body: await paid.json(), payment };
}
const kindOf = (event) => event.payload?.$case;

async function run(client, step) {
  switch (step.do) {
    case "card":
      return { card: AgentCard.toJSON(await client.getAgentCard()) };
    case "payHttp":
      return payHttp(step);
    case "send": {
      const parts = [];
      if (step.text != null) parts.push({ content: { $case: "text", value: step.text }, metadata: undefined, filename: "", mediaType: "" });
      if (step.data != null) parts.push({ content: { $case: "data", value: step.data }, metadata: undefined, filename: "", mediaType: "" });
      const message = {
        messageId: randomUUID(),
        contextId: step.contextId ?? "",
        taskId: "",
        role: Role.ROLE_USER,
        parts,
        metadata: step.skill ? { skill: step.skill } : undefined,
        extensions: [],
        referenceTaskIds: [],
      };
      const params = { tenant: "", message, configuration: step.immediately ? { returnImmediately: true } : undefined, metadata: undefined };
      if (step.stream) {
        const events = [];
        let task = null;
        for await (const event of client.sendMessageStream(params)) {
          events.push({ kind: kindOf(event), event: StreamResponse.toJSON(event) });
          if (kindOf(event) === "task") task = Task.toJSON(event.payload.value);
        }
        return { events, task };
      }
      const result = await client.sendMessage(params);
      if (step.pay || step.payload || step.decline) return answerPayment(client, step, result);
      return { task: Task.toJSON(result) };
    }
    case "get":
      return { task: Task.toJSON(await client.getTask({ tenant: "", id: taskId(step.task) })) };
    case "cancel":
      return { task: Task.toJSON(await client.cancelTask({ tenant: "", id: taskId(step.task), metadata: undefined })) };
    case "list":
      return { list: ListTasksResponse.toJSON(await client.listTasks({ tenant: "", contextId: step.contextId ?? "", pageSize: 50 })) };
    case "verify": {
      // The card as served: the SDK canonicalizes a card it already parsed without its
      // security schemes (their oneofs do not survive a second fromJSON), so a parsed card's
      // signature never checks when it has any; the JSON as served checks as the spec says.
      const card = await (await keyed(new URL(".well-known/agent-card.json", request.url))).json();
      const verify = verifyAgentCardSignature(async (kid, jku) => {
        const set = await (await fetch(jku)).json();
        return set.keys.find((k) => k.kid === kid);
      });
      await verify(card);
      let changed = "accepted";
      try {
        await verify({ ...card, name: "Someone else" });
      } catch (err) {
        changed = err?.constructor?.name ?? "Error";
      }
      return { verified: true, changed };
    }
    case "push": {
      const id = taskId(step.task);
      const config = await client.createTaskPushNotificationConfig({ tenant: "", id: "", taskId: id, url: step.url, token: step.token, authentication: undefined });
      const listed = await client.listTaskPushNotificationConfig({ tenant: "", taskId: id, pageSize: 0, pageToken: "" });
      return { config: TaskPushNotificationConfig.toJSON(config), configs: ListTaskPushNotificationConfigsResponse.toJSON(listed) };
    }
    case "subscribe": {
      const events = [];
      for await (const event of client.resubscribeTask({ tenant: "", id: taskId(step.task) })) {
        events.push({ kind: kindOf(event), event: StreamResponse.toJSON(event) });
      }
      return { events };
    }
    default:
      throw new Error(`unknown step ${step.do}`);
  }
}

const client = await factory.createFromUrl(request.url);
for (const step of request.steps) {
  try {
    outcomes.push(await run(client, step));
  } catch (err) {
    outcomes.push({ error: err?.constructor?.name ?? "Error", message: String(err?.message ?? err) });
  }
}
console.log(JSON.stringify({ steps: outcomes }));
