// The OAuth consent page: shows who asks for which agent's tools, and sends the person's
// answer. Allowing takes the account's API key (a key that manages the account), typed
// here or kept by the console in this tab; it is sent once, as x-api-key, and not kept.
// Every element is built with createElement and textContent (the policy refuses HTML).
// Nothing leaves the page without a click: a refused request is shown, with a way back
// (never an automatic redirect), and Allow wakes only once the person is on the page.

const CONSOLE_KEY = "agent-host.key";
const main = document.getElementById("main");
const query = location.search.replace(/^\?/, "");

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (name === "text") node.textContent = value;
    else node.setAttribute(name, value);
  }
  for (const child of children) node.append(child);
  return node;
}

function show(...nodes) {
  main.replaceChildren(...nodes);
  main.focus();
}

function refusal(body) {
  show(
    el("h1", { text: "This request cannot be answered" }),
    el("p", { role: "alert", text: body.error_description || body.error?.message || "The request is not valid." }),
    el("p", { class: "hint", text: "Nothing was allowed. Go back to the application and try again." }),
  );
}

async function answer(allow, key, button) {
  button.disabled = true;
  const headers = { "content-type": "application/json" };
  if (allow) headers["x-api-key"] = key;
  const response = await fetch("/oauth/authorize/decision", {
    method: "POST",
    headers,
    body: JSON.stringify({ query, allow }),
  });
  const body = await response.json().catch(() => ({}));
  if (body.redirect) {
    show(el("p", { class: "loading", text: "Returning to the application…" }));
    location.assign(body.redirect);
    return;
  }
  button.disabled = false;
  const message = body.error?.message || body.error_description || "That did not work.";
  document.getElementById("problem").textContent = message;
}

// A request the client may hear refused: shown, and sent back only when the person asks.
function refusedBack(to) {
  const why = new URL(to).searchParams.get("error_description") || "The request is not valid.";
  const back = el("button", { type: "button", id: "return", text: "Return to the application" });
  back.addEventListener("click", () => location.assign(to));
  show(
    el("h1", { text: "This request cannot be answered" }),
    el("p", { role: "alert", text: why }),
    el("p", { class: "hint", text: `Nothing was allowed. The application is at ${new URL(to).origin === "null" ? to : new URL(to).origin}.` }),
    back,
  );
}

// Allow wakes a moment after the page shows and once the person moves or types here, so a
// click meant for another window (a double-click trap) cannot land on it.
function wakeWhenPresent(button) {
  button.disabled = true;
  let shownAt = document.visibilityState === "visible" ? Date.now() : Infinity;
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible") shownAt = Date.now();
  });
  const wake = () => {
    if (Date.now() - shownAt >= 700) button.disabled = false;
    else setTimeout(wake, 100);
  };
  const present = () => {
    removeEventListener("pointermove", present);
    removeEventListener("keydown", present);
    wake();
  };
  addEventListener("pointermove", present);
  addEventListener("keydown", present);
}

function consent(request) {
  const stored = sessionStorage.getItem(CONSOLE_KEY) || "";
  const key = el("input", { type: "password", id: "key", autocomplete: "off", spellcheck: "false" });
  key.value = stored;
  const allow = el("button", { type: "button", id: "allow", text: "Allow" });
  const deny = el("button", { type: "button", id: "deny", class: "danger", text: "Deny" });
  allow.addEventListener("click", () => {
    if (!key.value.trim()) {
      document.getElementById("problem").textContent = "Enter your account's API key to allow.";
      key.focus();
      return;
    }
    answer(true, key.value.trim(), allow);
  });
  deny.addEventListener("click", () => answer(false, "", deny));
  wakeWhenPresent(allow);
  const redirect = new URL(request.redirect_uri);
  show(
    el("h1", { text: "Allow access to an agent?" }),
    el("p", {}, el("strong", { id: "client", text: request.client.name }), " asks to call the tools of agent ",
      el("strong", { id: "agent", text: request.agent }), " as your account."),
    el("ul", {},
      el("li", { text: "It may call the agent's commands and chat with it, counted against your account's limits." }),
      el("li", { text: "It may not see or change your keys, wallets, payments or other agents." }),
      el("li", { text: `Scope: ${request.scope}. You can revoke this later in the console (MCP page) or through /v1/account/oauth/grants.` }),
    ),
    el("p", { class: "hint", text: `The answer goes to ${redirect.origin === "null" ? request.redirect_uri : redirect.origin}.` }),
    el("div", { class: "field" },
      el("label", { for: "key", text: "Your account's API key (scope manage)" }),
      key,
      el("span", { class: "hint", text: stored ? "The console's key in this tab is filled in." : "It is sent once to this server and not kept." }),
    ),
    el("p", { id: "problem", role: "alert" }),
    el("div", { class: "actions" }, allow, deny),
  );
}

const response = await fetch(`/oauth/authorize/request?${query}`);
const body = await response.json().catch(() => ({}));
if (body.redirect) refusedBack(body.redirect);
else if (response.ok) consent(body);
else refusal(body);
