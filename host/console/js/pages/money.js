import { enc, get } from "../api.js";
import { external, fill, h, short, table, time, usdc, usdcText } from "../dom.js";

/** What the agent earned over x402 (with receipts), what it paid for, and what it sent. */
export async function paymentsTab(panel, agent) {
  const [{ payments }, { transfers }, spending] = await Promise.all([
    get(`/v1/account/agents/${enc(agent.id)}/payments?limit=100`),
    get(`/v1/account/agents/${enc(agent.id)}/transfers?limit=100`),
    get(`/v1/account/agents/${enc(agent.id)}/spending?limit=100`),
  ]);
  fill(
    panel,
    h("h2", {}, "x402 payments received"),
    table("Payments received over x402, newest first", [
      ["When", (p) => time(p.receipt.timestamp)],
      ["Amount", (p) => amount(p)],
      ["Command", (p) => (p.command ? `/${p.command}` : "chat")],
      ["Payer", (p) => short(p.receipt.payer)],
      ["Network", (p) => `${p.network} (x402 v${p.x402Version})`],
      ["State", (p) => h("span", { class: `state ${p.state}` }, p.state)],
      ["Transaction", (p) => external(p.explorer_url, h("span", {}, "Explorer ", short(p.receipt.transactionSignature, 6)))],
      ["Receipt", (p) => receipt(p)],
    ], payments, "No payments yet."),
    h("h2", {}, "Payments made"),
    spendingLimits(spending),
    table("Payments the agent made for the services its commands called, newest first", [
      ["When", (s) => time(s.created_at)],
      ["Amount", (s) => usdc(s.amount_micro_usdc)],
      ["Command", (s) => `/${s.command}`],
      ["For", (s) => h("code", {}, s.resource)],
      ["Paid to", (s) => short(s.pay_to)],
      ["Network", (s) => `${s.network} (x402 v${s.x402Version})`],
      ["State", (s) => h("span", { class: `state ${s.state}` }, s.state)],
      ["Transaction", (s) => (s.transaction ? external(s.explorer_url, h("span", {}, "Explorer ", short(s.transaction, 6))) : s.error ?? "—")],
    ], spending.payments, "No payments made."),
    h("h2", {}, "Transfers"),
    table("Transfers from the agent's wallets, newest first", [
      ["When", (t) => time(t.created_at)],
      ["Amount", (t) => usdc(t.amount_micro_usdc)],
      ["Kind", (t) => t.kind],
      ["To", (t) => short(t.recipient)],
      ["Network", (t) => t.network],
      ["State", (t) => h("span", { class: `state ${t.state}` }, t.state)],
      ["Transaction", (t) => external(t.explorer_url, h("span", {}, "Explorer ", short(t.signature, 6)))],
      ["Memo", (t) => t.memo ?? t.error],
    ], transfers, "No transfers yet."),
  );
}

/** What a payment charged; paid by use (x402 `upto`), against the maximum it authorized. */
function amount(p) {
  if (!p.byUse) return usdc(p.receipt.amountPaidMicroUsdc);
  return h("span", {}, usdc(p.receipt.amountPaidMicroUsdc), ` by use, of at most ${usdcText(p.byUse.maxAmountMicroUsdc)}`);
}

/** What a payment by use measured: a command's units, or a message's tokens. */
function used(byUse) {
  if (byUse.units !== undefined) return `${byUse.units} units`;
  return `${byUse.inputTokens} input and ${byUse.outputTokens} output tokens`;
}

function receipt(p) {
  const r = p.receipt;
  return h("details", { class: "receipt" },
    h("summary", {}, "Receipt"),
    h("dl", {},
      h("dt", {}, "Paid"), h("dd", {}, usdc(r.amountPaidMicroUsdc)),
      p.byUse
        ? [h("dt", {}, "Used"), h("dd", {}, used(p.byUse))]
        : null,
      h("dt", {}, "Payer"), h("dd", {}, h("code", {}, r.payer)),
      h("dt", {}, "Paid to"), h("dd", {}, h("code", {}, r.payTo)),
      h("dt", {}, "Transaction"), h("dd", {}, h("code", {}, r.transactionSignature ?? "—")),
      h("dt", {}, "Time"), h("dd", {}, time(r.timestamp)),
      p.job_id ? [h("dt", {}, "Job"), h("dd", {}, h("code", {}, p.job_id))] : null,
      p.error ? [h("dt", {}, "Error"), h("dd", {}, p.error)] : null,
    ),
  );
}

/** What the owner lets the agent spend (the manifest's `[payments]`), and what it spent today. */
function spendingLimits(spending) {
  const p = spending.policy;
  if (!p) return h("p", { class: "hint", id: "spending-limits" }, "This agent pays for nothing: its manifest has no [payments].");
  return h("p", { class: "hint", id: "spending-limits" },
    `Up to ${usdcText(p.max_per_payment_micro_usdc)} a payment and ${usdcText(p.max_per_day_micro_usdc)} in any 24 hours `,
    `(${usdcText(spending.spent_today_micro_usdc)} paid in the last 24 hours), `,
    `on ${p.networks.join(" and ")}, for ${p.commands.map((c) => `/${c}`).join(", ")}, to ${p.payees.join(", ")}.`,
  );
}
