// The console's router: `#/page/...` in the address picks a page; every page is a
// function (main element, route parts) that fills the main element. Without a working
// key, only the sign-in page is shown.

import { get, onSignedOut, post, session } from "./api.js";
import { fill, h } from "./dom.js";
import { agentPage } from "./pages/agent.js";
import { agentsPage } from "./pages/agents.js";
import { keysPage } from "./pages/keys.js";
import { pluginsPage } from "./pages/plugins.js";
import { signInPage } from "./pages/signin.js";
import { overviewPage } from "./pages/usage.js";
import { webhooksPage } from "./pages/webhooks.js";

const pages = {
  overview: overviewPage,
  agents: (main, [id, tab]) => (id ? agentPage(main, decodeURIComponent(id), tab) : agentsPage(main)),
  keys: keysPage,
  webhooks: webhooksPage,
  plugins: pluginsPage,
  "mcp-grant": finishGrant,
};

/** The end of an OAuth grant to a remote MCP server: its authorization server sent the
 * browser back with a code, which the signed-in owner hands to the host. */
async function finishGrant(main, [query]) {
  const params = new URLSearchParams(decodeURIComponent(query ?? ""));
  const body = { state: params.get("state") ?? "", code: params.get("code") ?? "" };
  if (params.get("iss")) body.iss = params.get("iss");
  const { agent_id } = await post("/v1/account/mcp-servers/oauth/finish", body);
  location.replace(`#/agents/${encodeURIComponent(agent_id)}/mcp`);
}

/** Pages hand in a function to stop their timers when the reader moves on. */
let leave = () => {};
let account = null;

async function route() {
  leave();
  leave = () => {};
  const main = document.getElementById("main");
  const [name, ...rest] = location.hash.replace(/^#\/?/, "").split("/");
  if (!session.key()) return showSignIn(main);
  account ??= await get("/v1/account").catch(() => null);
  if (!account) return showSignIn(main);
  showAccount();
  const page = pages[name] ?? pages.overview;
  fill(main, h("p", { class: "loading" }, "Loading…"));
  try {
    leave = (await page(main, rest)) ?? leave;
  } catch (e) {
    fill(main, h("h1", { tabindex: -1 }, "Something went wrong"), h("p", { class: "error", role: "alert" }, e.message));
  }
  markCurrent(pages[name] ? name : "overview");
  // Move focus to the new page's heading, so keyboard and screen-reader users start there.
  main.querySelector("h1")?.focus({ preventScroll: true });
}

function showSignIn(main, reason) {
  account = null;
  document.getElementById("nav").hidden = true;
  fill(document.getElementById("who"));
  signInPage(main, reason, (signedIn) => {
    account = signedIn;
    if (!location.hash || location.hash === "#/signin") location.hash = "#/overview";
    else route();
  });
}

function showAccount() {
  document.getElementById("nav").hidden = false;
  fill(
    document.getElementById("who"),
    h("span", {}, `${account.name} · ${account.plan}`),
    h("button", { type: "button", class: "link", onclick: signOut }, "Sign out"),
  );
}

function signOut() {
  session.signOut();
  account = null;
  location.hash = "#/signin";
  route();
}

function markCurrent(name) {
  for (const link of document.querySelectorAll("#nav a")) {
    if (link.getAttribute("href") === `#/${name}`) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
}

// A revoked key (this tab's own, or revoked elsewhere) ends the session at its next call.
onSignedOut((message) => {
  session.signOut();
  leave();
  showSignIn(document.getElementById("main"), `Signed out: ${message}`);
});

window.addEventListener("hashchange", route);
route();
