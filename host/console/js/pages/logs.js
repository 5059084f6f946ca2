import { enc, get } from "../api.js";
import { fill, h, short, table, time } from "../dom.js";

/** The agent's kept plugin runs: each that logged or did not succeed, with its lines. */
export async function logsTab(panel, agent) {
  const { runs } = await get(`/v1/account/agents/${enc(agent.id)}/logs?limit=100`);
  fill(
    panel,
    h("p", { class: "hint" }, "Runs that wrote log lines or did not succeed, newest first; the last 100 per command are kept."),
    table("Plugin runs", [
      ["Started", (r) => time(r.started_at)],
      ["Command", (r) => `/${r.command}`],
      ["From", (r) => r.origin],
      ["Outcome", (r) => h("span", { class: `state ${r.outcome}` }, r.outcome)],
      ["Duration", (r) => `${r.duration_ms} ms`],
      ["Run", (r) => short(r.id, 6)],
      ["Log", (r) => lines(r)],
    ], runs, "No runs kept yet."),
  );
}

function lines(run) {
  const rows = run.lines.map((l) => `${l.at.slice(11, 23)} ${l.level.padEnd(5)} ${l.message}`);
  if (run.error) rows.unshift(`error: ${run.error}`);
  if (!rows.length) return null;
  return h("pre", { class: "log" }, rows.join("\n"));
}
