import { del, get, patch, post, session } from "../api.js";
import { confirmDialog, copyButton, errorText, field, fill, form, h, table, time } from "../dom.js";

const SCOPES = [
  ["use", "use: the agent endpoints (chat, commands, chat-app, social, balances)"],
  ["spend", "spend: also wallet transfers"],
  ["manage", "manage: also this console and the account's keys, agents and plugins"],
];

const ENDS = [
  ["", "never"],
  ["7", "in 7 days"],
  ["30", "in 30 days"],
  ["90", "in 90 days"],
  ["365", "in a year"],
];

const state = (k) =>
  k.revoked_at ? h("span", {}, "revoked ", time(k.revoked_at))
  : k.expired ? h("span", {}, "expired ", time(k.expires_at))
  : k.expires_at ? h("span", {}, "active until ", time(k.expires_at))
  : "active";

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
        ["State", state],
        ["", (k) => (k.revoked_at ? null : h("span", { class: "row" },
          h("button", { type: "button", "aria-label": `Edit ${k.id}`, onclick: () => edit(k) }, "Edit"),
          h("button", { type: "button", class: "danger", "aria-label": `Revoke ${k.id}`, onclick: () => revoke(k) }, "Revoke")))],
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

  const edit = async (k) => {
    const changed = await editDialog(k);
    if (!changed) return;
    try {
      await patch(`/v1/account/keys/${encodeURIComponent(k.id)}`, changed);
      fill(status, `Key ${k.id} is updated.`);
      await refresh();
    } catch (e) {
      fill(status, errorText(e));
    }
  };

  const scope = h("select", { name: "scope" }, SCOPES.map(([value, label]) => h("option", { value }, label)));
  const name = h("input", { type: "text", name: "name", maxlength: 64, placeholder: "e.g. Telegram bot" });
  const ends = endSelect();
  const created = form({ "aria-label": "Create a key" }, [
    field("Name (optional)", name, "To tell this key apart from the others."),
    field("Scope", scope, "Give a key the least it needs: a key given to a webhook should be use."),
    field("Expires", ends, "A key for a trial or a contractor can end by itself."),
    h("button", { type: "submit" }, "Create key"),
  ], async () => {
    const made = await post("/v1/account/keys", {
      scope: scope.value,
      name: name.value || undefined,
      expires_in_days: ends.value ? Number(ends.value) : undefined,
    });
    name.value = "";
    await refresh();
    const secret = h("input", { type: "text", readonly: true, value: made.key, class: "secret", "aria-label": "The new key" });
    return h(
      "div",
      { class: "once" },
      h("p", {}, h("strong", {}, "Copy this key now: it is shown only once."), ` Key id ${made.id}, scope ${made.scope}`,
        made.expires_at ? [", expires ", time(made.expires_at)] : null, "."),
      h("div", { class: "row" }, secret, copyButton(made.key, "Copy key")),
    );
  });

  fill(main, h("h1", { tabindex: -1 }, "API keys"), h("h2", {}, "New key"), created, h("h2", {}, "Keys"), status, list);
  await refresh();
}

const endSelect = (keep) =>
  h("select", { name: "expires" }, [
    keep ? h("option", { value: "keep" }, keep) : null,
    ENDS.map(([value, label]) => h("option", { value }, label)),
  ]);

/** Asks for a key's new name and end; answers the PATCH body, or null when cancelled. */
function editDialog(k) {
  return new Promise((resolve) => {
    const name = h("input", { type: "text", name: "name", maxlength: 64, value: k.name ?? "" });
    const ends = endSelect(k.expires_at ? `keep (${new Date(k.expires_at).toLocaleString()})` : "keep (never)");
    const dialog = h("dialog", { "aria-label": `Edit key ${k.id}` });
    const body = form({}, [
      h("h2", {}, `Edit key ${k.id}`),
      field("Name", name, "Empty removes the name."),
      field("Expires", ends, "An expired key can be given more time."),
      h("div", { class: "actions" },
        h("button", { type: "button", onclick: () => dialog.close() }, "Cancel"),
        h("button", { type: "submit" }, "Save")),
    ], async () => {
      const changed = { name: name.value.trim() || null };
      if (ends.value === "") changed.expires_at = null;
      else if (ends.value !== "keep") changed.expires_in_days = Number(ends.value);
      dialog.close();
      resolve(changed);
    });
    dialog.append(body);
    dialog.addEventListener("close", () => {
      dialog.remove();
      resolve(null);
    });
    document.body.append(dialog);
    dialog.showModal();
  });
}
