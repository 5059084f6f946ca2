import { del, enc, get } from "../api.js";
import { confirmDialog, errorText, fill, h } from "../dom.js";
import { manifestForm } from "./agents.js";
import { chatTab } from "./chat.js";
import { commandsTab } from "./commands.js";
import { integrationsTab } from "./integrations.js";
import { jobsTab } from "./jobs.js";
import { logsTab } from "./logs.js";
import { mcpTab } from "./mcp.js";
import { a2aTab } from "./a2a.js";
import { paymentsTab } from "./money.js";
import { schedulesTab } from "./schedules.js";
import { tryTab } from "./try.js";
import { usageTab } from "./usage.js";
import { walletsTab } from "./wallets.js";

const TABS = [
  ["commands", "Commands", commandsTab],
  ["usage", "Usage", usageTab],
  ["try", "Try it", tryTab],
  ["chat", "Chat", chatTab],
  ["wallets", "Wallets", walletsTab],
  ["payments", "Payments", paymentsTab],
  ["jobs", "Jobs", jobsTab],
  ["schedules", "Schedules", schedulesTab],
  ["logs", "Logs", logsTab],
  ["integrations", "Chat-app and social", integrationsTab],
  ["mcp", "MCP", mcpTab],
  ["a2a", "A2A", a2aTab],
  ["settings", "Manifest", settingsTab],
];

/** One agent: a heading, its tabs, and the chosen tab's content. */
export async function agentPage(main, id, tab = "commands") {
  const agent = await get(`/v1/account/agents/${enc(id)}`);
  const [, , render] = TABS.find(([name]) => name === tab) ?? TABS[0];
  const panel = h("section", { class: "tab" });
  fill(
    main,
    h("p", { class: "crumbs" }, h("a", { href: "#/agents" }, "Agents"), " / ", agent.username),
    h("h1", { tabindex: -1 }, agent.name || agent.username),
    h(
      "nav",
      { class: "tabs", "aria-label": "Agent" },
      TABS.map(([name, label]) =>
        h("a", { href: `#/agents/${enc(agent.id)}/${name}`, "aria-current": name === tab ? "page" : null }, label),
      ),
    ),
    panel,
  );
  return render(panel, agent);
}

/** The manifest form for this agent, and deleting it. */
function settingsTab(panel, agent) {
  const status = h("p", { role: "status", "aria-live": "polite" });
  const remove = async () => {
    const sure = await confirmDialog(
      `Delete agent ${agent.username}?`,
      "Its commands go with it; its jobs, transfers and payments stay on record. An agent that holds a wallet cannot be deleted.",
      "Delete agent",
    );
    if (!sure) return;
    try {
      await del(`/v1/account/agents/${enc(agent.id)}`);
      location.hash = "#/agents";
    } catch (e) {
      fill(status, errorText(e));
    }
  };
  fill(
    panel,
    h("h2", {}, "Update from a manifest"),
    h("p", {}, `Apply a manifest with username = "${agent.username}" to change this agent.`),
    manifestForm(),
    h("h2", {}, "Delete"),
    status,
    h("button", { type: "button", class: "danger", onclick: remove }, "Delete this agent"),
  );
}
