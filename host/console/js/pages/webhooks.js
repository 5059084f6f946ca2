import { del, enc, get, patch, post } from "../api.js";
import { confirmDialog, copyButton, errorText, field, fill, form, h, table, time } from "../dom.js";

// The account's signed webhooks: endpoints with their events and state (and why one was
// disabled), each one's deliveries with their attempts, and "Send again".

const EVENTS = [
  ["payment.settled", "a payment settled"],
  ["payment.refunded", "a payment refunded"],
  ["payment.needs_operator", "a payment the service stopped working on (a refund that kept failing)"],
  ["job.succeeded", "a job succeeded"],
  ["job.failed", "a job failed"],
  ["command.failing", "a command keeps failing"],
  ["schedule.ran", "a schedule that sends its answer by webhook ran"],
  ["schedule.stopped", "a schedule stopped after failing again and again"],
  ["wallet.low_balance", "a wallet runs low (set its alert in the agent's Wallets tab)"],
  ["key.created", "an API key made"],
  ["key.updated", "an API key renamed, or its end changed"],
  ["key.revoked", "an API key revoked"],
];

export async function webhooksPage(main) {
  const list = h("div");
  const status = h("p", { role: "status", "aria-live": "polite" });
  const refresh = async () => {
    const { endpoints } = await get("/v1/account/webhooks");
    fill(list, endpoints.length ? endpoints.map((e) => endpointCard(e, refresh, status)) : h("p", { class: "empty" }, "No endpoints yet."));
  };

  const url = h("input", { type: "url", name: "url", required: true, placeholder: "https://example.com/hooks/agent-host", spellcheck: "false" });
  const description = h("input", { type: "text", name: "description", maxlength: 200 });
  const boxes = EVENTS.map(([value, text]) => h("label", { class: "check" }, h("input", { type: "checkbox", name: "events", value, checked: true }), ` ${value}: ${text}`));
  const created = form({ "aria-label": "Add an endpoint" }, [
    field("Endpoint URL", url, "Each delivery is a signed POST; a private address is refused unless the operator allows it."),
    field("Description (optional)", description),
    h("fieldset", {}, h("legend", {}, "Events"), boxes),
    h("button", { type: "submit" }, "Add endpoint"),
  ], async () => {
    const events = boxes.map((b) => b.querySelector("input")).filter((i) => i.checked).map((i) => i.value);
    const made = await post("/v1/account/webhooks", { url: url.value.trim(), events, description: description.value || undefined });
    url.value = "";
    await refresh();
    return secretBox(made.secret, `Endpoint ${made.id} added.`);
  });

  fill(
    main,
    h("h1", { tabindex: -1 }, "Webhooks"),
    h("p", {}, "The account's events, posted to your endpoints and signed: see docs/webhooks.md for how to verify them."),
    h("h2", {}, "New endpoint"),
    created,
    h("h2", {}, "Endpoints"),
    status,
    list,
  );
  await refresh();
}

function secretBox(secret, note) {
  const box = h("input", { type: "text", readonly: true, value: secret, class: "secret", "aria-label": "Signing secret" });
  return h("div", { class: "once" },
    h("p", {}, note, " ", h("strong", {}, "Its signing secret:"), " verify each delivery with it."),
    h("div", { class: "row" }, box, copyButton(secret, "Copy secret")));
}

function endpointCard(e, refresh, status) {
  const deliveries = h("div");
  const secret = h("div");
  const act = async (what, done) => {
    try {
      await what();
      fill(status, done);
      await refresh();
    } catch (err) {
      fill(status, errorText(err));
    }
  };
  const toggle = () => act(() => patch(`/v1/account/webhooks/${enc(e.id)}`, { enabled: !e.enabled }), `Endpoint ${e.id} is ${e.enabled ? "disabled" : "enabled"}.`);
  const remove = async () => {
    if (!(await confirmDialog("Delete this endpoint?", `${e.url} will get nothing more; its deliveries go with it.`, "Delete"))) return;
    await act(() => del(`/v1/account/webhooks/${enc(e.id)}`), `Endpoint ${e.id} is deleted.`);
  };
  const showSecret = async () => fill(secret, secretBox((await get(`/v1/account/webhooks/${enc(e.id)}`)).secret, ""));
  const loadDeliveries = async () => {
    const { deliveries: rows } = await get(`/v1/account/webhooks/${enc(e.id)}/deliveries?limit=50`);
    fill(deliveries, table(`Deliveries to ${e.url}, newest first`, [
      ["Event", (d) => d.event_type],
      ["When", (d) => time(d.created_at)],
      ["State", (d) => h("span", { class: `state ${d.state}` }, d.state)],
      ["Attempts", (d) => String(d.attempts)],
      ["Last answer", (d) => d.last_error ?? (d.last_status ? `HTTP ${d.last_status}` : "—")],
      ["Latency", (d) => (d.last_latency_ms === null ? "—" : `${d.last_latency_ms} ms`)],
      ["Event id", (d) => h("code", {}, d.event_id)],
      ["", (d) => h("button", { type: "button", class: "copy", "aria-label": `Send ${d.event_id} again`, disabled: !e.enabled, onclick: () => resend(d) }, "Send again")],
    ], rows, "Nothing sent yet."));
  };
  const resend = (d) => act(() => post(`/v1/account/webhooks/${enc(e.id)}/deliveries/${enc(d.id)}/resend`, {}), `Delivery of ${d.event_id} will be sent again.`);
  loadDeliveries().catch((err) => fill(deliveries, h("p", { class: "error" }, errorText(err))));
  return h("section", { class: "wallet endpoint" },
    h("h3", {}, h("code", {}, e.url)),
    e.description ? h("p", {}, e.description) : null,
    h("p", {},
      h("span", { class: `state ${e.enabled ? "succeeded" : "failed"}` }, e.enabled ? "enabled" : "disabled"),
      e.enabled ? "" : [": ", e.disabled_reason ?? ""],
      e.consecutive_failures ? ` · ${e.consecutive_failures} failed attempts in a row` : "",
      e.last_success_at ? [" · last success ", time(e.last_success_at)] : ""),
    h("p", { class: "hint" }, `Events: ${e.events.join(", ")}`),
    h("div", { class: "actions" },
      h("button", { type: "button", class: "copy", onclick: toggle }, e.enabled ? "Disable" : "Enable"),
      h("button", { type: "button", class: "copy", onclick: showSecret }, "Show signing secret"),
      h("button", { type: "button", class: "danger", "aria-label": `Delete ${e.url}`, onclick: remove }, "Delete")),
    secret,
    deliveries);
}
