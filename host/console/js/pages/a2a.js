import { enc, get } from "../api.js";
import { copyButton, errorText, fill, h, table } from "../dom.js";

/** The agent as an A2A server: its card's address, its skills as the card lists them for
 * this account, and lines that talk to it with the official A2A SDKs. */
export function a2aTab(panel, agent) {
  const endpoint = `${location.origin}/a2a/${agent.id}`;
  const card = `${endpoint}/.well-known/agent-card.json`;
  const python = [
    "import asyncio, httpx, uuid",
    "from a2a.client import A2ACardResolver, ClientConfig, ClientFactory",
    "from a2a.types import Message, Part, Role, SendMessageRequest",
    "",
    "async def main():",
    `    async with httpx.AsyncClient(headers={"x-api-key": "<api key>"}) as http:`,
    `        card = await A2ACardResolver(http, "${endpoint}").get_agent_card()`,
    "        client = ClientFactory(ClientConfig(httpx_client=http)).create(card)",
    `        message = Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[Part(text="Hello!")])`,
    "        async for event in client.send_message(SendMessageRequest(message=message)):",
    "            print(event)",
    "",
    "asyncio.run(main())",
  ].join("\n");
  const javascript = [
    `import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory } from "@a2a-js/sdk/client";`,
    `const keyed = (url, init = {}) => fetch(url, { ...init, headers: { ...init.headers, "x-api-key": "<api key>" } });`,
    "const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {",
    "  transports: [new JsonRpcTransportFactory({ fetchImpl: keyed })],",
    "  cardResolver: new DefaultAgentCardResolver({ fetchImpl: keyed }),",
    "}));",
    `const client = await factory.createFromUrl("${endpoint}/");`,
  ].join("\n");
  const block = (label, text) => [h("h3", {}, label), h("pre", {}, h("code", {}, text)), copyButton(text, `Copy ${label}`)];
  const skills = h("div");
  const status = h("p", { role: "status", "aria-live": "polite" });
  fill(
    panel,
    h("h2", {}, "A2A agent"),
    h(
      "p",
      {},
      "Other agents send this agent messages and tasks here: the commands with a2a in their integrations are its skills, " +
        "any other message is a chat turn. With a key of this account they are free; anyone else pays per task with x402, " +
        "or uses free what the manifest's [a2a] open allows.",
    ),
    h("p", {}, "Its card: ", h("code", { id: "a2a-card-url" }, card), " ", copyButton(card, "Copy the card's address")),
    ...block("Python (a2a-sdk)", python),
    ...block("JavaScript (@a2a-js/sdk)", javascript),
    h("p", {}, "Replace <api key> with a key of this account. [a2a] listed = true in the manifest shows the card to anyone " +
      "and lists the agent at /a2a."),
    h("h3", {}, "Skills on the card"),
    skills,
    status,
  );
  get(`/a2a/${enc(agent.id)}/.well-known/agent-card.json`)
    .then((read) =>
      fill(
        skills,
        table("The skills this account's key may use", [
          ["Skill", (s) => s.id],
          ["What it does", (s) => s.description],
          ["Example", (s) => (s.examples ?? [])[0] ?? ""],
        ], read.skills ?? [], "No skill: add a2a to a command's integrations."),
      ),
    )
    .catch((e) => fill(status, errorText(e)));
}
