import { del, enc, get, patch, post } from "../api.js";
import { confirmDialog, errorText, field, fill, form, h, table, time } from "../dom.js";

// The agent's schedules: what it does on its own, when, where the answer goes, and where
// each stands (its next time, how its last run went); a form to add one, and each one's runs.

const WHEN = [
  ["daily", "Every day at"],
  ["cron", "On a cron expression"],
  ["every", "Every few minutes"],
  ["once", "Once, at"],
];
const DELIVER = [
  ["log", "Only the run log"],
  ["social", "A post on the agent's social account"],
  ["telegram", "A message from the agent's bot"],
  ["webhook", "A schedule.ran webhook event"],
];

/** How a schedule's time reads. */
function whenText(s) {
  if (s.cron) return `${s.cron} (${s.timezone})`;
  if (s.every_seconds) return `every ${s.every_seconds / 60} min`;
  return ["once at ", time(s.at)];
}

const whatText = (s) => (s.prompt ? `prompt: ${s.prompt.length > 60 ? s.prompt.slice(0, 60) + "…" : s.prompt}` : `/${s.command}`);

/** The schedules tab; refreshed every 5 s so next and last runs stay current. */
export async function schedulesTab(panel, agent) {
  const base = `/v1/account/agents/${enc(agent.id)}/schedules`;
  const list = h("div");
  const runs = h("div");
  const status = h("p", { role: "status", "aria-live": "polite" });
  let timer = null;

  const act = async (what, done) => {
    try {
      await what();
      fill(status, done);
      await refresh();
    } catch (e) {
      fill(status, errorText(e));
    }
  };
  const showRuns = async (s) => {
    const { runs: rows } = await get(`${base}/${enc(s.id)}/runs?limit=50`);
    fill(runs, h("h2", {}, `Runs of ${s.name}`), table(`Runs of ${s.name}, newest first`, [
      ["Due", (r) => time(r.due_at)],
      ["State", (r) => h("span", { class: `state ${r.state}` }, r.state)],
      ["Finished", (r) => (r.finished_at ? time(r.finished_at) : null)],
      ["Answer or error", (r) => r.error ?? r.output],
    ], rows, "No runs yet."));
  };
  const refresh = async () => {
    clearTimeout(timer);
    const { schedules } = await get(base);
    fill(list, table("Schedules", [
      ["Name", (s) => s.name],
      ["When", whenText],
      ["What", whatText],
      ["Sent to", (s) => (s.deliver.to === "telegram" ? `telegram chat ${s.deliver.chat_id}` : s.deliver.to)],
      ["Status", (s) => h("span", { class: `state ${s.status}`, title: s.stopped_reason ?? "" }, s.stopped_reason ? `${s.status}: ${s.stopped_reason}` : s.status)],
      ["Next run", (s) => (s.next_run_at && s.status === "active" ? time(s.next_run_at) : null)],
      ["Last run", (s) => (s.last_run_at ? [time(s.last_run_at), " ", h("span", { class: `state ${s.last_outcome}` }, s.last_outcome ?? "")] : "never")],
      ["", (s) => h("div", { class: "row" },
        s.status === "done" ? null : h("button", { type: "button", onclick: () => act(() => patch(`${base}/${enc(s.id)}`, { enabled: s.status !== "active" }), `${s.name} is ${s.status === "active" ? "paused" : "resumed"}.`) }, s.status === "active" ? "Pause" : "Resume"),
        h("button", { type: "button", onclick: () => showRuns(s).catch((e) => fill(status, errorText(e))) }, "Runs"),
        h("button", { type: "button", class: "danger", onclick: async () => {
          if (await confirmDialog(`Delete schedule ${s.name}?`, "It will not run again; its runs go with it.", "Delete")) {
            await act(() => del(`${base}/${enc(s.id)}`), `${s.name} is deleted.`);
          }
        } }, "Delete")),
      ],
    ], schedules, "No schedules yet."));
    timer = setTimeout(() => refresh().catch(() => {}), 5000);
  };

  fill(panel,
    h("p", {}, "Work the agent does on its own: a prompt to its chat or one of its commands, on a schedule. Runs count against your plan and your chats' token budget."),
    h("h2", {}, "New schedule"),
    newScheduleForm(agent, base, refresh),
    h("h2", {}, "Schedules"),
    status,
    list,
    runs,
  );
  await refresh();
  return () => clearTimeout(timer);
}

function newScheduleForm(agent, base, refresh) {
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  const name = h("input", { type: "text", name: "name", required: true, pattern: "[a-z0-9_\\-]{1,64}", placeholder: "daily-post" });
  const when = h("select", { name: "when" }, WHEN.map(([value, text]) => h("option", { value }, text)));
  const daily = h("input", { type: "time", name: "daily", value: "09:00" });
  const cron = h("input", { type: "text", name: "cron", placeholder: "0 9 * * mon-fri", spellcheck: "false" });
  const timezone = h("input", { type: "text", name: "timezone", value: zone, spellcheck: "false" });
  const every = h("input", { type: "number", name: "every", min: 1, value: 60 });
  const at = h("input", { type: "datetime-local", name: "at" });
  const what = h("select", { name: "what" }, h("option", { value: "prompt" }, "A prompt to the agent's chat"),
    agent.commands.length ? h("option", { value: "command" }, "One of its commands") : null);
  const prompt = h("textarea", { name: "prompt", rows: 3, maxlength: 4000, placeholder: "Write today's tip for our followers." });
  const command = h("select", { name: "command" }, agent.commands.map((c) => h("option", { value: c.command }, `/${c.command}`)));
  const parameters = h("textarea", { name: "parameters", rows: 2, class: "code", placeholder: "{ }" });
  const deliver = h("select", { name: "deliver" }, DELIVER.map(([value, text]) => h("option", { value }, text)));
  const chatId = h("input", { type: "text", name: "chat_id", inputmode: "numeric", placeholder: "-1001234567890" });
  const missed = h("select", { name: "missed" }, h("option", { value: "catch_up" }, "Run once, late"), h("option", { value: "skip" }, "Skip it"));

  const parts = {
    daily: field("Time of day", daily), cron: field("Cron expression", cron, "minute hour day-of-month month day-of-week"),
    timezone: field("Time zone", timezone, "An IANA name, such as Europe/Paris"),
    every: field("Every (minutes)", every), once: field("At", at, "Your browser's time"),
    prompt: field("Prompt", prompt), command: field("Command", command), parameters: field("Parameters (JSON)", parameters),
    chatId: field("Telegram chat id", chatId),
  };
  const show = () => {
    parts.daily.hidden = when.value !== "daily";
    parts.cron.hidden = when.value !== "cron";
    parts.timezone.hidden = when.value !== "daily" && when.value !== "cron";
    parts.every.hidden = when.value !== "every";
    parts.once.hidden = when.value !== "once";
    parts.prompt.hidden = what.value !== "prompt";
    parts.command.hidden = parts.parameters.hidden = what.value !== "command";
    parts.chatId.hidden = deliver.value !== "telegram";
  };
  [when, what, deliver].forEach((s) => s.addEventListener("change", show));
  show();

  return form({ "aria-label": "New schedule" }, [
    field("Name", name, "a-z, 0-9, - and _"),
    field("When", when), parts.daily, parts.cron, parts.every, parts.once, parts.timezone,
    field("What", what), parts.prompt, parts.command, parts.parameters,
    field("Send the answer to", deliver), parts.chatId,
    field("A time missed while the service was down", missed),
    h("button", { type: "submit" }, "Add schedule"),
  ], async () => {
    const body = { name: name.value.trim(), deliver: { to: deliver.value }, missed: missed.value };
    if (when.value === "daily") {
      const [hour, minute] = daily.value.split(":").map(Number);
      Object.assign(body, { cron: `${minute} ${hour} * * *`, timezone: timezone.value.trim() });
    } else if (when.value === "cron") {
      Object.assign(body, { cron: cron.value.trim(), timezone: timezone.value.trim() });
    } else if (when.value === "every") {
      body.every_seconds = Number(every.value) * 60;
    } else {
      body.at = at.value ? new Date(at.value).toISOString() : "";
    }
    if (what.value === "prompt") body.prompt = prompt.value;
    else {
      body.command = command.value;
      if (parameters.value.trim()) body.parameters = JSON.parse(parameters.value);
    }
    if (deliver.value === "telegram") body.deliver.chat_id = Number(chatId.value);
    const made = await post(base, body);
    name.value = "";
    await refresh();
    return made.next_run_at ? `${made.name} runs next at ${new Date(made.next_run_at).toLocaleString()}.` : `${made.name} is saved.`;
  });
}
