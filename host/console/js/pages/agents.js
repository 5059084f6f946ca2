import { get, post } from "../api.js";
import { field, fill, form, h, table } from "../dom.js";

/** The account's agents, and a manifest to create or update one. */
export async function agentsPage(main) {
  const [{ agents }, account] = await Promise.all([get("/v1/account/agents"), get("/v1/account")]);
  fill(
    main,
    h("h1", { tabindex: -1 }, "Agents"),
    pausedNotice(account.paused_commands ?? []),
    table("The account's agents", [
      ["Agent", (a) => h("a", { href: `#/agents/${encodeURIComponent(a.id)}` }, a.username)],
      ["Name", (a) => a.name],
      ["Commands", (a) => String(a.commands)],
    ], agents, "No agents yet: apply a manifest below."),
    h("h2", {}, "Create or update an agent"),
    manifestForm(),
  );
}

/** Paid commands their breaker paused after repeated failures: the owner hears of it here. */
function pausedNotice(paused) {
  if (!paused.length) return null;
  return h(
    "div",
    { class: "error", role: "alert" },
    h("p", {}, "Paid calls paused after repeated failures (payers were refunded):"),
    h(
      "ul",
      {},
      paused.map((p) =>
        h(
          "li",
          {},
          h("a", { href: `#/agents/${encodeURIComponent(p.agent_id)}` }, h("code", {}, `/${p.command}`)),
          ` (${p.failures} failures; last: ${p.reason}). A trial call may go through in ${p.retry_after_seconds} s.`,
        ),
      ),
    ),
  );
}

/** The manifest `agent apply` reads, as TOML or JSON; errors name the line or field. */
export function manifestForm(initial = "") {
  const text = h("textarea", { name: "manifest", rows: 14, spellcheck: "false", required: true, class: "code" }, initial);
  const file = h("input", { type: "file", accept: ".toml,.json,text/plain,application/json" });
  file.addEventListener("change", async () => {
    if (file.files[0]) text.value = await file.files[0].text();
  });
  return form({ "aria-label": "Apply a manifest" }, [
    field("Manifest (TOML or JSON)", text, 'A custom command names an uploaded plugin as plugin = "sha256:…" (see Plugins).'),
    field("Or load a file", file),
    h("button", { type: "submit" }, "Apply manifest"),
  ], async () => {
    const json = text.value.trimStart().startsWith("{");
    const applied = await post("/v1/account/agents", text.value, { type: json ? "application/json" : "application/toml" });
    return h(
      "p",
      {},
      `${applied.created ? "Created" : "Updated"} agent `,
      h("a", { href: `#/agents/${encodeURIComponent(applied.id)}` }, applied.username),
      ` with ${applied.commands.length} command(s)`,
      applied.removed_commands?.length ? `; removed ${applied.removed_commands.join(", ")}` : "",
      ".",
    );
  });
}
