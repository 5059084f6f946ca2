import { del, enc, get, post, put } from "../api.js";
import { confirmDialog, copyButton, errorText, field, fill, form, h, table, time } from "../dom.js";

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
  const remote = h("div");
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
    h("h2", {}, "Remote servers as its tools"),
    h("p", {}, "The MCP servers this agent's manifest names ([[mcp_servers]]): their tools are offered to its chat beside its commands. " +
      "A server that needs a credential gets it here; it is kept sealed and never shown again."),
    remote,
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
  remoteServers(remote, agent).catch((e) => fill(remote, errorText(e)));
}

/** Each remote server, listed now: its tools, or why it cannot be used; and its credential. */
async function remoteServers(box, agent) {
  const base = `/v1/account/agents/${enc(agent.id)}/mcp-servers`;
  const { servers } = await get(base);
  const again = () => remoteServers(box, agent).catch((e) => fill(box, errorText(e)));
  fill(box, servers.length ? servers.map((s) => {
    const value = h("input", { type: "password", name: "credential", required: true, autocomplete: "off", placeholder: "Bearer ..." });
    const credential = s.header ? form({ "aria-label": `Credential of ${s.name}` }, [
      field(`${s.header} header sent to ${s.name}`, value, s.credential_set ? "Set. A new value replaces it." : "Not set: its tools are left out."),
      h("button", { type: "submit" }, "Save credential"),
    ], async () => {
      await put(`${base}/${enc(s.name)}/credential`, { value: value.value });
      value.value = "";
      await again();
    }) : null;
    // An OAuth server: its owner signs in at the server's authorization server, which sends
    // the browser back to the host, then here.
    const grant = s.oauth ? form({ "aria-label": `Sign in to ${s.name}` }, [
      h("p", { class: "hint" }, s.credential_set ? "Connected with OAuth. Signing in again replaces the grant." : "Not connected: its tools are left out until you sign in."),
      h("button", { type: "submit" }, s.credential_set ? `Sign in to ${s.name} again` : `Sign in to ${s.name}`),
    ], async () => {
      const { authorization_url } = await post(`${base}/${enc(s.name)}/oauth`, {});
      window.location.assign(authorization_url);
    }) : null;
    return h("section", { class: "card" },
      h("h3", {}, s.name), h("p", {}, h("code", {}, s.url)),
      s.error ? h("p", { class: "error" }, s.error) : h("p", {}, `Tools offered: ${s.tools.join(", ") || "none"}`),
      credential, grant);
  }) : h("p", { class: "empty" }, "The manifest names no remote MCP server."));
}
