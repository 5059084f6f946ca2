import { copyButton, fill, h } from "../dom.js";

/** The agent's MCP server: its address, and how to add it to the usual clients. */
export function mcpTab(panel, agent) {
  const url = `${location.origin}/mcp/${agent.id}`;
  const claude = `claude mcp add --transport http ${agent.username} ${url} --header "Authorization: Bearer <api key>"`;
  const cursor = JSON.stringify(
    { mcpServers: { [agent.username]: { url, headers: { Authorization: "Bearer <api key>" } } } },
    null,
    2,
  );
  const block = (label, text) => [h("h3", {}, label), h("pre", {}, h("code", {}, text)), copyButton(text, `Copy ${label}`)];
  fill(
    panel,
    h("h2", {}, "MCP server"),
    h(
      "p",
      {},
      "AI agents' clients call this agent's commands as tools here: the commands with mcp in their integrations, and a chat tool. " +
        "With a key of this account they are free; anyone else pays per call with x402.",
    ),
    h("p", {}, h("code", { id: "mcp-url" }, url), " ", copyButton(url, "Copy address")),
    ...block("Claude Code", claude),
    ...block("Cursor (.cursor/mcp.json)", cursor),
    h("p", {}, "Replace <api key> with a key of this account; a key of scope use is enough."),
  );
}
