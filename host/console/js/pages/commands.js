import { enc, get, localPath, post } from "../api.js";
import { field, fill, form, h, progress, table, webLink } from "../dom.js";

/** The agent's commands, and a form to run one and see its result. */
export function commandsTab(panel, agent) {
  const commands = agent.commands;
  const choice = h("select", { name: "command" }, commands.map((c) => h("option", { value: c.command }, `/${c.command}`)));
  const params = h("fieldset", { class: "params" });
  const showParams = () => {
    const command = commands.find((c) => c.command === choice.value);
    fill(params, h("legend", {}, "Parameters"), parameterFields(command?.parameters ?? []));
  };
  choice.addEventListener("change", showParams);
  showParams();

  const tryForm = form({ "aria-label": "Try a command" }, [
    field("Command", choice),
    params,
    h("button", { type: "submit" }, "Run command"),
  ], async () => {
    const command = commands.find((c) => c.command === choice.value);
    const parameters = readParameters(params, command?.parameters ?? []);
    const ran = await post(`/v1/agents/${enc(agent.id)}/commands/${enc(choice.value)}/execute`, { parameters });
    return resultView(ran.result);
  });

  fill(
    panel,
    table("Commands", [
      ["Command", (c) => h("code", {}, `/${c.command}`)],
      ["Type", (c) => c.handler_type],
      ["Description", (c) => c.description],
      ["Price", (c) => (c.price_usd == null ? "free" : `${c.price_usd} USD`)],
      ["Enabled", (c) => (c.enabled ? "yes" : "no")],
      ["Paid calls", (c) => (c.paused ? h("span", { class: "error" }, `paused: ${c.paused.reason}`) : "taken")],
      ["Plugin", (c) => (c.plugin ? h("code", { title: c.plugin }, c.plugin.slice(0, 19) + "…") : null)],
    ], commands, "No commands."),
    commands.length ? [h("h2", {}, "Try a command"), tryForm] : null,
  );
}

function parameterFields(parameters) {
  if (!parameters.length) return h("p", { class: "hint" }, "This command takes no parameters.");
  return parameters.map((p) => {
    const label = `${p.name}${p.required ? " (required)" : ""}`;
    const attrs = { name: `param-${p.name}`, required: p.required || null };
    let input;
    switch (p.type) {
      case "number":
        input = h("input", { ...attrs, type: "number", step: "any" });
        break;
      case "boolean":
        input = h("input", { ...attrs, type: "checkbox", required: null });
        break;
      case "array":
      case "object":
        input = h("textarea", { ...attrs, rows: 3, class: "code", placeholder: p.type === "array" ? "[ ]" : "{ }" });
        break;
      default:
        input = h("input", { ...attrs, type: "text" });
    }
    return field(label, input, [p.type, p.description].filter(Boolean).join(": "));
  });
}

function readParameters(fieldset, parameters) {
  const values = {};
  for (const p of parameters) {
    const input = fieldset.querySelector(`[name="param-${CSS.escape(p.name)}"]`);
    if (!input) continue;
    if (p.type === "boolean") {
      values[p.name] = input.checked;
    } else if (input.value === "") {
      continue;
    } else if (p.type === "number") {
      values[p.name] = Number(input.value);
    } else if (p.type === "array" || p.type === "object") {
      try {
        values[p.name] = JSON.parse(input.value);
      } catch {
        throw new Error(`Parameter ${p.name} is not valid JSON`);
      }
    } else {
      values[p.name] = input.value;
    }
  }
  return values;
}

/** A command's result; a long-running one is followed at its status address. */
function resultView(result) {
  const view = h("div", { class: "result" });
  const show = (r) =>
    fill(
      view,
      h("h3", {}, "Result"),
      h("pre", { class: "response" }, r.response ?? ""),
      r.mediaUrl ? webLink(r.mediaUrl, "Open the media") : null,
      h("p", { class: "hint" }, `Format: ${r.format}`),
    );
  if (result.statusUrl) {
    followJob(view, result.statusUrl);
  } else {
    show(result);
  }
  return view;
}

async function followJob(view, statusUrl) {
  for (;;) {
    let status;
    try {
      status = await get(localPath(statusUrl));
    } catch (e) {
      fill(view, h("p", { class: "error" }, e.message));
      return;
    }
    if (status.state === "processing") {
      fill(view, h("h3", {}, "Running"), progress(status.progress, "Progress of the command"));
    } else if (status.state === "succeeded") {
      fill(
        view,
        h("h3", {}, "Result"),
        h("pre", { class: "response" }, status.response ?? ""),
        status.artifactUrl ? webLink(status.artifactUrl, "Open the artifact") : null,
      );
      return;
    } else {
      fill(view, h("p", { class: "error", role: "alert" }, `Failed: ${status.error} (${status.code})`));
      return;
    }
    await new Promise((r) => setTimeout(r, 1000));
    if (!view.isConnected) return; // the reader moved on
  }
}
