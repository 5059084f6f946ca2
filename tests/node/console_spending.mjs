// The console's record of what an agent paid (the Payments tab's "Payments made"), in
// headless Chromium: signed in with a manage key, the agent's limits and each payment shown.
//
// env: CONSOLE_BASE, MANAGE_KEY, AGENT (its id), EXPECT_LIMITS (text the limits line holds),
//      EXPECT_TX (a payment's transaction), CHROMIUM.
import assert from "node:assert/strict";
import { chromium } from "playwright-core";

const env = (name) => {
  const value = process.env[name];
  if (value === undefined) throw new Error(`${name} is not set`);
  return value;
};
const base = env("CONSOLE_BASE");
const browser = await chromium.launch({ executablePath: env("CHROMIUM") });
const page = await browser.newPage({ viewport: { width: 1200, height: 860 } });
const problems = [];
page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
page.on("console", (m) => m.type() === "error" && problems.push(`console: ${m.text()}`));
page.on("requestfailed", (r) => problems.push(`request failed: ${r.url()}`));
try {
  await page.goto(`${base}/console`);
  await page.getByLabel("API key").waitFor();
  await page.getByLabel("API key").fill(env("MANAGE_KEY"));
  await page.keyboard.press("Enter");
  await page.getByRole("heading", { name: "Overview", level: 1 }).waitFor({ timeout: 60_000 });
  await page.locator("#kpi-spent strong").waitFor();
  assert.equal(await page.locator("#kpi-spent strong").textContent(), "0.02 USDC", "the overview counts what was spent");

  await page.goto(`${base}/console#/agents/${env("AGENT")}/payments`);
  await page.getByRole("heading", { name: "Payments made" }).waitFor();
  const limits = await page.locator("#spending-limits").textContent();
  assert.ok(limits.includes(env("EXPECT_LIMITS")), `the limits line: ${limits}`);
  const made = page.getByRole("table", { name: /Payments the agent made/ });
  const row = made.getByRole("row").filter({ hasText: "settled" }).first();
  await row.waitFor();
  assert.equal(await made.getByRole("row").filter({ hasText: "/buy" }).count(), 2, "both payments are listed");
  const links = await made.getByRole("link", { name: /Explorer/ }).evaluateAll((a) => a.map((l) => l.href));
  assert.ok(links.some((href) => href.includes(env("EXPECT_TX"))), `an explorer link names ${env("EXPECT_TX")}: ${links}`);
  assert.deepEqual(problems, []);
  console.log("console: spending shown");
} catch (e) {
  console.log(`console: failed; what the page said: ${JSON.stringify(problems)}`);
  throw e;
} finally {
  await browser.close();
}
