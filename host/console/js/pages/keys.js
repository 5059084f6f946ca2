import { del, get, post, session } from "../api.js";
import { confirmDialog, copyButton, errorText, field, fill, form, h, table, time } from "../dom.js";

const SCOPES = [
  ["use", "use: the agent endpoints (chat, commands, chat-app, social, balances)"],
  ["spend", "spend: also wallet transfers"],
  ["manage", "manage: also this console and the account's keys, agents and plugins"],
];

/** A key's id is the start of its secret: so the console knows which key it signed in with. */
const mine = (k) => session.key()?.startsWith(`${k.id}_`);

/** The account's keys: create one (its secret shown once), revoke one. */
export async function keysPage(main) {
  const list = h("div");
  const status = h("p", { role: "status", "aria-live": "polite" });
  const refresh = async () => {
    const { keys } = await get("/v1/account/keys");
    fill(
      list,
      table("The account's API keys", [
        ["Name", (k) => k.name ?? ""],
        ["Key id", (k) => h("span", {}, h("code", {}, k.id), mine(k) ? " (this session)" : null)],
        ["Scope", (k) => k.scope],
        ["Created", (k) => time(k.created_at)],
        ["Last used", (k) => time(k.last_used_at) ?? "never"],
        ["State", (k) => (k.active ? "active" : h("span", {}, "revoked ", time(k.revoked_at)))],
        ["", (k) => (k.active ? h("button", { type: "button", class: "danger", "aria-label": `Revoke ${k.id}`, onclick: () => revoke(k) }, "Revoke") : null)],
      ], keys),
    );
  };
  const revoke = async (k) => {
    const sure = await confirmDialog(
      "Revoke this key?",
      `Key ${k.name ? `"${k.name}" ` : ""}${k.id} (${k.scope}) will be refused from now on, by every host. This cannot be undone.` +
        (mine(k) ? " It is the key of this session: you will be signed out." : ""),
      "Revoke",
    );
    if (!sure) return;
    try {
      await del(`/v1/account/keys/${encodeURIComponent(k.id)}`);
      fill(status, `Key ${k.id} is revoked.`);
      await refresh();
    } catch (e) {
      fill(status, errorText(e));
    }
  };

  const scope = h("select", { name: "scope" }, SCOPES.map(([value, label]) => h("option", { value }, label)));
  const name = h("input", { type: "text", name: "name", maxlength: 64, placeholder: "e.g. Telegram bot" });
  const created = form({ "aria-label": "Create a key" }, [
    field("Name (optional)", name, "To tell this key apart from the others."),
    field("Scope", scope, "Give a key the least it needs: a key given to a webhook should be use."),
    h("button", { type: "submit" }, "Create key"),
  ], async () => {
    const made = await post("/v1/account/keys", { scope: scope.value, name: name.value || undefined });
    name.value = "";
    await refresh();
    const secret = h("input", { type: "text", readonly: true, value: made.key, class: "secret", "aria-label": "The new key" });
    return h(
      "div",
      { class: "once" },
      h("p", {}, h("strong", {}, "Copy this key now: it is shown only once."), ` Key id ${made.id}, scope ${made.scope}.`),
      h("div", { class: "row" }, secret, copyButton(made.key, "Copy key")),
    );
  });

  fill(main, h("h1", { tabindex: -1 }, "API keys"), h("h2", {}, "New key"), created, h("h2", {}, "Keys"), status, list);
  await refresh();
}
