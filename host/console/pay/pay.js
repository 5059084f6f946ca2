// The payment page: what a browser shows at an agent's x402 address. It reads the same
// price lists an x402 client reads (this address asked for JSON, and each paid command's
// own address), lists what the agent sells, and lets a person with a browser wallet pay
// for a message or a command with x402 version 2 and see the answer: an EVM wallet on
// Base (./wallet.js), a Wallet-Standard wallet on Solana (./solana.js). Every text comes
// from the server through textContent (see ../js/dom.js); the CSP allows nothing else.
import { errorText, field, fill, form, h, short, usdc, webLink } from "../js/dom.js";
import * as solana from "./solana.js";
import * as evm from "./wallet.js";

const main = document.getElementById("main");
const walletArea = document.getElementById("wallet");
const [, , network, agentId, , routedCommand] = location.pathname.split("/");
const agentPath = `/x402/${network}/${agentId}`;

/** base64 of UTF-8 text, and back: the x402 headers' encoding. */
const encode = (text) => btoa(String.fromCharCode(...new TextEncoder().encode(text)));
const decode = (b64) => new TextDecoder().decode(Uint8Array.from(atob(b64), (c) => c.charCodeAt(0)));

class Refusal extends Error {
  constructor(body, status) {
    super(body?.error ?? `The server answered ${status}`);
    this.code = body?.code;
  }
}

/** A price list: the version-1 body and the version-2 `PAYMENT-REQUIRED` header. */
async function priceList(path) {
  const response = await fetch(path, { headers: { accept: "application/json" } });
  const body = await response.json();
  if (!response.ok) throw new Refusal(body, response.status);
  const header = response.headers.get("payment-required");
  return { v1: body, v2: header ? JSON.parse(decode(header)) : null };
}

/** What the person may buy: a message at the agent's address, and each paid command at its own. */
async function offers() {
  const agent = await priceList(agentPath);
  const names = agent.v1.accepts[0].extra.availableCommands ?? [];
  const commands = await Promise.all(
    names.map(async (name) => ({ name, path: `${agentPath}/commands/${encodeURIComponent(name)}`, list: await priceList(`${agentPath}/commands/${encodeURIComponent(name)}`) })),
  );
  return { agent, commands };
}

/**
 * The person's wallet on this address's network: found, connected, and asked for the
 * payload of a version-2 requirement. On Base it signs the offer's authorization; on
 * Solana it signs the payment transaction this server builds for it.
 */
const sides = {
  base: {
    found: () => evm.provider(),
    missing: "Install a browser wallet for Base (or use a smart wallet's browser extension) to pay here, or pay with an x402 client.",
    connect: async (wallet) => evm.connect(wallet),
    label: (account) => account,
    payload: (wallet, account, accepted) => evm.authorize(wallet, account, accepted),
  },
  solana: {
    found: (accepted) => accepted && solana.walletFor(solana.chainOf(accepted.network)),
    missing: "Install a Solana browser wallet (Phantom, Solflare, Backpack) to pay here, or pay with an x402 client.",
    connect: (wallet) => solana.connect(wallet),
    label: (account) => account.address,
    async payload(wallet, account, accepted, command) {
      const response = await fetch(`${agentPath}/payment-transaction`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(command ? { payer: account.address, command } : { payer: account.address }),
      });
      const built = await response.json();
      if (!response.ok) throw new Refusal(built, response.status);
      return solana.authorize(wallet, account, solana.chainOf(accepted.network), built.transaction);
    },
  },
};
const side = sides[network] ?? null;
let accepted = null;
let account = null;

function showWallet() {
  const wallet = side?.found(accepted);
  if (!wallet) return fill(walletArea, "No browser wallet");
  if (account) return fill(walletArea, "Paying from ", short(side.label(account), 6));
  const button = h("button", { type: "button" }, wallet.name ? `Connect ${wallet.name}` : "Connect wallet");
  button.addEventListener("click", async () => {
    try {
      account = await side.connect(wallet);
      showWallet();
    } catch (e) {
      fill(walletArea, errorText(e));
    }
  });
  fill(walletArea, button);
}

/** How often, and after how long, the same signed payment is sent again when no answer came. */
const RETRIES = [1_000, 2_000, 4_000];

/**
 * Sends a signed payment, and sends the very same one again when the connection failed
 * before an answer came (the server may have settled it): the server knows it by its
 * payment-identifier and answers what it bought, charged once. An answer that says the
 * first try is still being served is waited for the same way.
 */
async function send(path, header, body) {
  for (let attempt = 0; ; attempt += 1) {
    const last = attempt === RETRIES.length;
    let response;
    try {
      response = await fetch(path, {
        method: "POST",
        headers: { "content-type": "application/json", "payment-signature": header },
        body: JSON.stringify(body),
      });
    } catch (error) {
      if (last) throw new Error(`No answer came (${error.message}). Check your wallet before paying again.`);
      await new Promise((resolve) => setTimeout(resolve, RETRIES[attempt]));
      continue;
    }
    // A proxy's error page in place of the answer is no answer: the same payment again.
    const answer = await response.json().catch(() => null);
    if (answer === null) {
      if (last) throw new Error(`No answer came (the server said ${response.status}). Check your wallet before paying again.`);
      await new Promise((resolve) => setTimeout(resolve, RETRIES[attempt]));
      continue;
    }
    if (answer.code === "payment_in_progress" && !last) {
      await new Promise((resolve) => setTimeout(resolve, RETRIES[attempt]));
      continue;
    }
    return { response, answer };
  }
}

/** The payment-identifier extension as the offer declares it, with an id for this payment. */
function identified(declared) {
  const extension = declared?.["payment-identifier"];
  if (!extension) return {};
  // crypto.getRandomValues works on plain-http pages too (randomUUID does not).
  const random = Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
  return { "payment-identifier": { ...extension, info: { ...extension.info, id: `page_${random}` } } };
}

/** Pays `path` for `body` (the `command`, or a message) with the person's wallet; resolves to what to show. */
async function pay(path, v2, body, command) {
  const offer = v2.accepts[0];
  const wallet = side?.found(offer);
  if (!wallet) throw new Error(side?.missing ?? "This network cannot be paid from a browser here.");
  account ??= await side.connect(wallet);
  showWallet();
  const payload = await side.payload(wallet, account, offer, command);
  const payment = { x402Version: 2, resource: v2.resource, accepted: offer, payload, extensions: identified(v2.extensions) };
  const { response, answer } = await send(path, encode(JSON.stringify(payment)), body);
  if (!answer.success) throw new Refusal(answer, response.status);
  const settled = response.headers.get("payment-response");
  const transaction = settled ? JSON.parse(decode(settled)).transaction : answer.receipt?.transactionSignature;
  const receipt = h("p", { class: "hint" }, "Paid ", usdc(answer.receipt?.amountPaidMicroUsdc), " in transaction ", short(transaction, 10));
  if (response.status === 202) return h("div", { class: "result" }, await followJob(answer), receipt);
  return h("div", { class: "result" }, h("pre", { class: "response" }, answer.response), receipt);
}

/** A paid long-running command: its status, polled at this origin until it ends (or an hour). */
async function followJob(answer) {
  const status = new URL(answer.statusUrl, location.href).pathname;
  const pause = Math.min(Math.max(answer.retryAfterSeconds ?? 2, 1), 30) * 1000;
  for (let waited = 0; waited < 3_600_000; waited += pause) {
    await new Promise((resolve) => setTimeout(resolve, pause));
    const job = await (await fetch(status, { headers: { accept: "application/json" } })).json();
    if (job.state === "succeeded") {
      return h("div", {}, h("pre", { class: "response" }, job.response ?? ""), job.artifactUrl && webLink(job.artifactUrl, "The result"));
    }
    if (job.state !== "processing") throw new Refusal(job, 200);
  }
  throw new Error(`Still running after an hour: its status is at ${answer.statusUrl}`);
}

/** A text input per parameter of the command's body schema, as the command names them. */
function parameterFields(schema) {
  const required = new Set(schema?.required ?? []);
  return Object.entries(schema?.properties ?? {}).map(([name, property]) => {
    const input = h("input", { type: property.type === "number" ? "number" : "text", name, required: required.has(name) });
    return field(required.has(name) ? name : `${name} (optional)`, input, property.description);
  });
}

function valuesOf(formEl, schema) {
  const body = {};
  for (const [name, property] of Object.entries(schema?.properties ?? {})) {
    const text = formEl.elements[name]?.value ?? "";
    if (text === "") continue;
    body[name] = property.type === "number" ? Number(text) : property.type === "boolean" ? text === "true" : text;
  }
  return body;
}

function priceOf(list) {
  return usdc(list.v2?.accepts[0].amount ?? list.v1.accepts[0].maxAmountRequired);
}

function messageSection(agent, payable) {
  const input = h("textarea", { name: "message", rows: 3, required: true });
  return h(
    "section",
    { "aria-labelledby": "buy-message" },
    h("h2", { id: "buy-message" }, "A message"),
    h("p", {}, "Ask the agent anything, for ", priceOf(agent), "."),
    payable && form({}, [field("Your message", input), h("button", { type: "submit" }, "Pay and send")], () => pay(agentPath, agent.v2, { message: input.value }, null)),
  );
}

function commandSection({ name, path, list }, payable) {
  const schema = list.v2?.extensions?.bazaar?.schema?.properties?.input?.properties?.body;
  const parameters = { ...schema, properties: { ...(schema?.properties ?? {}) }, required: (schema?.required ?? []).filter((n) => n !== "command") };
  delete parameters.properties.command;
  const headingId = `buy-${name}`;
  return h(
    "section",
    { "aria-labelledby": headingId },
    h("h2", { id: headingId }, `/${name}`),
    h("p", {}, list.v2?.resource?.description ?? list.v1.accepts[0].description, ", for ", priceOf(list), "."),
    payable && form({}, [...parameterFields(parameters), h("button", { type: "submit" }, `Pay and run /${name}`)], (formEl) => pay(path, list.v2, valuesOf(formEl, parameters), name)),
  );
}

async function show() {
  const { agent, commands } = await offers();
  const extra = agent.v1.accepts[0].extra;
  document.title = `Pay ${extra.agentName}`;
  // The page pays with version 2, from a wallet on the address's network; without one, it
  // shows the prices and says how else to pay.
  accepted = agent.v2?.accepts[0] ?? null;
  const payable = Boolean(accepted) && Boolean(side?.found(accepted));
  const shown = routedCommand ? commands.filter((c) => c.name === decodeURIComponent(routedCommand)) : commands;
  fill(
    main,
    h("h1", { tabindex: -1 }, extra.agentName),
    h("p", { class: "crumbs" }, `Sold for USDC on ${{ base: "Base", solana: "Solana" }[network] ?? network}, paid per request with x402. No account needed.`),
    payable
      ? h("p", {}, "Your wallet signs a payment of exactly the price shown; once it is settled on chain, you get the answer here.")
      : h("p", { class: "hint" }, side?.missing ?? "Pay with an x402 client: it reads this address's price list as JSON."),
    routedCommand ? null : messageSection(agent, payable),
    shown.map((command) => commandSection(command, payable)),
  );
  showWallet();
}

show().catch((e) => fill(main, h("h1", {}, "This agent cannot be paid here"), h("p", { class: "error" }, errorText(e))));
