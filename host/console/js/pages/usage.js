import { enc, get } from "../api.js";
import { fill, h, progress, table, usdcText } from "../dom.js";
import { barChart, rowChart } from "../chart.js";

// What an account's agents did and earned: the usage report (`/v1/account/usage`, or one
// agent's), drawn as charts with their tables, over a range the reader picks.

const RANGES = [
  ["7d", "Last 7 days", "step=day"],
  ["30d", "Last 30 days", (now) => `step=day&from=${day(now - 29 * 86400000)}`],
  ["24h", "Last 24 hours", "step=hour"],
];
const NETWORKS = ["base", "solana"];

const day = (ms) => new Date(ms).toISOString().slice(0, 10);
const count = (n) => Math.round(n ?? 0).toLocaleString("en");

const ms = (v) => (v === null || v === undefined ? "—" : `${v < 10 ? v.toFixed(1) : Math.round(v)} ms`);
const sum = (map) => Object.values(map ?? {}).reduce((a, b) => a + b, 0);
const label = (at, step) => (step === "hour" ? at.slice(11, 16) : at.slice(5, 10));

/** Headline numbers of a report's totals. */
function kpis(t) {
  const paid = sum(t.payments);
  const kpi = (name, value, note, id) => h("div", { class: "kpi", id }, h("span", {}, name), h("strong", {}, value), note ? h("small", {}, note) : null);
  return h("div", { class: "kpis" },
    kpi("Revenue", usdcText(sum(t.revenue_micro_usdc)), NETWORKS.filter((n) => t.revenue_micro_usdc[n]).map((n) => `${n} ${usdcText(t.revenue_micro_usdc[n])}`).join(" · "), "kpi-revenue"),
    kpi("Paid requests", count(paid), t.offers ? `of ${count(t.offers)} price lists (${Math.round((100 * paid) / t.offers)} %)` : null, "kpi-paid"),
    kpi("Command runs", count(t.calls), t.calls ? `${count(t.failed)} failed (${Math.round((100 * t.failed) / t.calls)} %)` : null, "kpi-calls"),
    kpi("Refunds", usdcText(t.refunded_micro_usdc), `${count(t.refunds)} refunded`, "kpi-refunds"),
    kpi("Fees paid", feesText(t.fees), `by the agents' wallets, in ${count(t.fee_transactions)} settlements and refunds`, "kpi-fees"),
    kpi("Chats", count(t.chats), `${count(t.prompt_tokens)} prompt and ${count(t.completion_tokens)} completion tokens`, "kpi-chats"),
    kpi("Spent", usdcText(sum(t.spent_micro_usdc)), `in ${count(sum(t.purchases))} payments for the services the commands called`, "kpi-spent"),
  );
}

function feesText(fees) {
  const parts = [];
  if (fees?.base_wei) parts.push(`${(fees.base_wei / 1e18).toPrecision(3)} ETH`);
  if (fees?.solana_lamports) parts.push(`${(fees.solana_lamports / 1e9).toPrecision(3)} SOL`);
  return parts.join(" · ") || "none";
}

/** The charts and tables of one report. */
function report(r, agents) {
  const points = (pick) => r.points.map((p) => ({ label: label(p.at, r.step), values: pick(p) }));
  const commands = r.commands.filter((c) => c.command !== "");
  const when = r.step === "hour" ? "by hour (UTC)" : "by day (UTC)";
  const revenue = sum(r.totals.revenue_micro_usdc);
  const parts = [
    kpis(r.totals),
    barChart({
      title: `Revenue ${when}, by network`,
      summary: `${usdcText(revenue)} in ${count(sum(r.totals.payments))} payments: ` +
        NETWORKS.map((n) => `${n} ${usdcText(r.totals.revenue_micro_usdc[n] ?? 0)}`).join(", "),
      series: NETWORKS.map((name) => ({ name })),
      points: points((p) => NETWORKS.map((n) => p.revenue_micro_usdc[n] ?? 0)),
      format: usdcText,
    }),
    barChart({
      title: `Command runs ${when}`,
      summary: `${count(r.totals.calls)} runs, ${count(r.totals.failed)} of them failed`,
      series: [{ name: "succeeded" }, { name: "failed" }],
      points: points((p) => [p.calls - p.failed, p.failed]),
      format: count,
      whole: true,
    }),
  ];
  if (commands.length) {
    parts.push(
      rowChart({
        title: "Runs and failures by command",
        summary: commands.map((c) => `${c.command}: ${count(c.calls)} runs, ${count(c.failed)} failed`).join("; "),
        series: [{ name: "succeeded" }, { name: "failed" }],
        rows: commands.map((c) => ({ label: `/${c.command}`, values: [c.calls - c.failed, c.failed] })),
        format: count,
      }),
      rowChart({
        title: "Run time by command: p50, p95, p99",
        summary: commands.map((c) => `${c.command}: p50 ${ms(c.p50_ms)}, p95 ${ms(c.p95_ms)}, p99 ${ms(c.p99_ms)}`).join("; "),
        series: [{ name: "p50" }, { name: "p95" }, { name: "p99" }],
        rows: commands.filter((c) => c.p99_ms !== null).map((c) => ({
          label: `/${c.command}`,
          values: [c.p50_ms, c.p95_ms - c.p50_ms, c.p99_ms - c.p95_ms],
        })),
        format: ms,
        cumulative: true,
      }),
      table("Commands: runs by channel, run time and what they earned", [
        ["Command", (c) => `/${c.command}`],
        ["Runs", (c) => count(c.calls)],
        ["Failed", (c) => count(c.failed)],
        ["By channel", (c) => Object.entries(c.by_channel).map(([ch, o]) => `${ch} ${count(sum(o))}`).join(", ")],
        ["p50", (c) => ms(c.p50_ms)],
        ["p95", (c) => ms(c.p95_ms)],
        ["p99", (c) => ms(c.p99_ms)],
        ["Price lists → paid", (c) => (c.offers ? `${count(c.offers)} → ${count(sum(c.payments))}` : "—")],
        ["Revenue", (c) => usdcText(sum(c.revenue_micro_usdc))],
      ], commands),
    );
  }
  for (const [key, unit, name, per] of [["base_wei", "ETH", "Base", 1e18], ["solana_lamports", "SOL", "Solana", 1e9]]) {
    if (!r.totals.fees[key]) continue;
    const amount = (v) => `${(v / per).toPrecision(3)} ${unit}`;
    parts.push(barChart({
      title: `Fees the agents' wallets paid on ${name} ${when}`,
      summary: `${amount(r.totals.fees[key])} in all, to settle payments and send refunds`,
      series: [{ name: unit }],
      points: points((p) => [p.fees[key] ?? 0]),
      format: amount,
    }));
  }
  if (agents) {
    const rows = Object.entries(r.agents ?? {}).map(([id, t]) => ({ id, name: agents.get(id) ?? id, t }));
    parts.push(
      table("Agents", [
        ["Agent", (a) => h("a", { href: `#/agents/${enc(a.id)}/usage` }, a.name)],
        ["Revenue", (a) => usdcText(sum(a.t.revenue_micro_usdc))],
        ["Runs", (a) => count(a.t.calls)],
        ["Failed", (a) => count(a.t.failed)],
        ["Chats", (a) => count(a.t.chats)],
      ], rows, "No agent did anything in this range."),
    );
  }
  parts.push(h("p", { class: "hint" },
    `All runs: p50 ${ms(r.latency.p50_ms)}, p95 ${ms(r.latency.p95_ms)}, p99 ${ms(r.latency.p99_ms)}. ` +
    "Runs are added every few seconds; payments at once."));
  return parts;
}

/** A range picker above a report that redraws on change. */
async function ranged(panel, path, agents) {
  const select = h("select", { id: "usage-range", "aria-label": "Range" }, RANGES.map(([value, text]) => h("option", { value }, text)));
  const body = h("div", { "aria-live": "polite" });
  const draw = async () => {
    const [, , query] = RANGES.find(([value]) => value === select.value);
    const q = typeof query === "function" ? query(Date.now()) : query;
    fill(body, report(await get(`${path}?${q}`), agents));
  };
  select.addEventListener("change", draw);
  fill(panel, h("div", { class: "row" }, h("label", { htmlFor: "usage-range" }, "Range"), select), body);
  await draw();
}

/** The account's overview: its agents together, and its plan against its limits. */
export async function overviewPage(main) {
  const [account, { agents }] = await Promise.all([get("/v1/account"), get("/v1/account/agents")]);
  const names = new Map(agents.map((a) => [a.id, a.username]));
  const charts = h("section", {});
  const q = account.quotas;
  const quota = (name, used, limit, format = count) => {
    const share = limit > 0 ? Math.round((100 * used) / limit) : 100;
    return h("tr", {}, h("th", { scope: "row" }, name), h("td", {}, `${format(used)} of ${format(limit)}`),
      h("td", {}, progress(share, `${name}: ${format(used)} of ${format(limit)}`)));
  };
  const bytes = (n) => `${(n / 1048576).toFixed(1)} MiB`;
  fill(
    main,
    h("h1", { tabindex: -1 }, "Overview"),
    h("p", {}, `What the agents of ${account.name} did and earned.`),
    charts,
    h("h2", {}, `Plan: ${account.plan}`),
    h("table", { id: "plan-usage" },
      h("caption", {}, "What the account uses of its plan's limits"),
      h("tbody", {},
        quota("Agents", q.agents.used, q.agents.limit),
        quota("Plugins", q.plugins.used, q.plugins.limit),
        quota("Plugin storage", q.plugin_bytes.used, q.plugin_bytes.limit, bytes),
        quota("Plugin data", q.kv_bytes.used, q.kv_bytes.limit, bytes),
        h("tr", {}, h("th", { scope: "row" }, "Requests"), h("td", { colspan: 2 }, `${count(account.rpm)} a minute, ${count(account.rpd)} a day`)))),
  );
  await ranged(charts, "/v1/account/usage", names);
}

/** One agent's usage tab. */
export async function usageTab(panel, agent) {
  await ranged(panel, `/v1/account/agents/${enc(agent.id)}/usage`, null);
}
