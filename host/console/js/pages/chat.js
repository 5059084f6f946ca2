import { enc, get } from "../api.js";
import { copyButton, fill, h, table } from "../dom.js";

/** The agent's chat: how OpenAI's clients reach it, and what its chats used, day by day. */
export async function chatTab(panel, agent) {
  const { days, total } = await get(`/v1/account/agents/${enc(agent.id)}/chat-usage?days=30`);
  const baseUrl = `${location.origin}/v1/agents/${agent.id}/openai/v1`;
  const python = [
    "from openai import OpenAI",
    `client = OpenAI(base_url="${baseUrl}", api_key="<api key>")`,
    `answer = client.chat.completions.create(model="${agent.username}", messages=[{"role": "user", "content": "Hello"}])`,
    "print(answer.choices[0].message.content)",
  ].join("\n");
  const count = (n) => n.toLocaleString("en");
  fill(
    panel,
    h("h2", {}, "OpenAI-compatible endpoint"),
    h(
      "p",
      {},
      "OpenAI's clients and the frameworks built on them talk to this agent by setting their base URL to this address: " +
        "its personality, knowledge and commands apply as in the API's chat.",
    ),
    h("p", {}, h("code", { id: "openai-url" }, baseUrl), " ", copyButton(baseUrl, "Copy base URL")),
    h("pre", {}, h("code", {}, python)),
    copyButton(python, "Copy the Python example"),
    h("h2", {}, "Chat tokens, last 30 days"),
    h(
      "p",
      { id: "chat-total" },
      `${count(total.chats)} ${total.chats === 1 ? "chat" : "chats"}, ${count(total.prompt_tokens)} prompt tokens, ` +
        `${count(total.completion_tokens)} completion tokens.`,
    ),
    table("Chats and tokens by day (UTC), oldest first", [
      ["Day", (d) => d.day],
      ["Chats", (d) => count(d.chats)],
      ["Prompt tokens", (d) => count(d.prompt_tokens)],
      ["Completion tokens", (d) => count(d.completion_tokens)],
    ], days, "No chats in the last 30 days."),
  );
}
