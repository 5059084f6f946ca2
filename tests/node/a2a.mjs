// The official A2A JavaScript SDK (@a2a-js/sdk) against an agent's A2A endpoint, for
// tests/api/a2a.rs. Reads one JSON argument: {url, key, steps}, each step one of
//   {do: "card"} | {do: "send", text, skill, data, contextId, stream, immediately}
//   {do: "get" | "cancel" | "subscribe", task: "$N"} | {do: "list", contextId}
// and prints {steps: [...]}: each step's outcome as JSON (an SDK error as {error, message}).
import { randomUUID } from "node:crypto";
import { AgentCard, Role, StreamResponse, Task, ListTasksResponse } from "@a2a-js/sdk";
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
    transports: [new JsonRpcTransportFactory({ fetchImpl: keyed })],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl: keyed }),
  }),
);

const outcomes = [];
const taskId = (ref) => (typeof ref === "string" && ref.startsWith("$") ? outcomes[Number(ref.slice(1))].task.id : ref);
const kindOf = (event) => event.payload?.$case;

async function run(client, step) {
  switch (step.do) {
    case "card":
      return { card: AgentCard.toJSON(await client.getAgentCard()) };
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
      return { task: Task.toJSON(result) };
    }
    case "get":
      return { task: Task.toJSON(await client.getTask({ tenant: "", id: taskId(step.task) })) };
    case "cancel":
      return { task: Task.toJSON(await client.cancelTask({ tenant: "", id: taskId(step.task), metadata: undefined })) };
    case "list":
      return { list: ListTasksResponse.toJSON(await client.listTasks({ tenant: "", contextId: step.contextId ?? "", pageSize: 50 })) };
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
