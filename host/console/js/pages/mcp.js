import { del, get } from "../api.js";
import { confirmDialog, copyButton, errorText, fill, h, table, time } from "../dom.js";

/** The agent's MCP server: its address, how to add it to the usual clients, and the
 * clients allowed to sign in to it with OAuth (each can be revoked). */
export function mcpTab(panel, agent) {
  const url = `${location.origin}/mcp/${agent.id}`;
  const claude = `claude mcp add --transport http ${agent.username} ${url} --header "Authorization: Bearer <api key>"`;
  const cursor = JSON.stringify(
    { mcpServers: { [agent.username]: { url, headers: { Authorization: "Bearer <api key>" } } } },
    null,
    2,
  );
  const block = (label, text) => [h("h3", {}, label), h("pre", {}, h("code", {}, text)), copyButton(text, `Copy ${label}`)];
  const grants = h("div");
  const status = h("p", { role: "status", "aria-live": "polite" });
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
    h("p", {}, "Replace <api key> with a key of this account; a key of scope use is enough. " +
      "Where the operator turned OAuth on, clients such as Claude.ai and ChatGPT add the address alone and sign in."),
    h("h3", {}, "Clients signed in with OAuth"),
    grants,
    status,
  );
  const refresh = async () => {
    const { grants: all } = await get("/v1/account/oauth/grants");
    const mine = all.filter((g) => g.agent_id === agent.id);
    fill(
      grants,
      table("Clients that may call this agent's tools as the account", [
        ["Client", (g) => g.client_name ?? g.client_id],
        ["Allowed", (g) => time(g.created_at)],
        ["Last used", (g) => time(g.last_used_at) ?? "never"],
        ["", (g) => h("button", { type: "button", class: "danger", "aria-label": `Revoke ${g.client_name ?? g.client_id}`,
          onclick: () => revoke(g) }, "Revoke")],
      ], mine, "No client has signed in to this agent."),
    );
  };
  const revoke = async (g) => {
    const sure = await confirmDialog(
      "Revoke this client's access?",
      `${g.client_name ?? g.client_id} will no longer call this agent's tools; it must ask again. This cannot be undone.`,
      "Revoke",
    );
    if (!sure) return;
    try {
      await del(`/v1/account/oauth/grants/${encodeURIComponent(g.id)}`);
      fill(status, "The client's access is revoked.");
      await refresh();
    } catch (e) {
      fill(status, errorText(e));
    }
  };
  refresh().catch((e) => fill(status, errorText(e)));
}
