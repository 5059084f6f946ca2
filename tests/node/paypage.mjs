// Paying from a browser (Debian's chromium, driven by playwright-core), against a running
// agent-host that tests/api/browsers.rs set up with a seller on the local Base chain:
//
// 1. The payment page: a person opens the agent's x402 address, connects the browser wallet
//    (an EIP-1193 provider injected into the page, backed by a local key; it starts on
//    another chain, so the page must ask it to switch) and buys /hello. The connection of
//    its first try is cut after the server settled and answered: the page sends the same
//    signed payment again, and shows the answer it bought.
// 2. A page on another origin pays with the reference client, @x402/fetch (bundled for the
//    browser with esbuild, served by this script), and reads PAYMENT-RESPONSE: what CORS
//    on the paid routes must allow.
//
//
// With SCENARIO=wallets, instead: the wallets people are given.
// 3. On Base, the page with a smart wallet (an EIP-1193 provider whose account is the tests'
//    smart wallet, not deployed yet: it signs as viem's smart accounts do, ERC-6492).
// 4. On Solana, the page with a Wallet-Standard wallet (registered as Phantom and Solflare
//    register, signing with a real key in Node): the page has the server build the payment
//    transaction, the wallet signs it, the page pays.
//
// env: PAY_BASE (http://127.0.0.1:PORT), SELLER (the agent's id), PAYER_KEY (0x-hex key of
//      a payer holding USDC; with SCENARIO=wallets, the smart wallet's owner), CHROMIUM
//      (default /usr/bin/chromium), SCREENSHOTS (optional); for SCENARIO=wallets also
//      SMART_WALLET ({factory, salt} JSON), BASE_RPC, SOLANA_PAYER_KEY (base58 keypair).
// Prints one JSON line: { page: {transaction, sent}, crossOrigin: {status, response,
// paymentResponse} } (`sent`: how many times the page sent its payment), or with
// SCENARIO=wallets { smartWallet: {transaction}, solana: {transaction} }. Exits 1 with the
// failure on stderr.
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { createServer } from "node:http";
import { build } from "esbuild";
import { chromium } from "playwright-core";
import { privateKeyToAccount } from "viem/accounts";
import {
  createKeyPairSignerFromBytes,
  getBase58Encoder,
  getTransactionDecoder,
  getTransactionEncoder,
  partiallySignTransaction,
} from "@solana/kit";
import { baseAccount } from "./accounts.mjs";

const env = (name, fallback) => {
  const value = process.env[name] ?? fallback;
  if (value === undefined) throw new Error(`${name} is not set`);
  return value;
};
const base = env("PAY_BASE");
const seller = env("SELLER");
const payerKey = env("PAYER_KEY");
const shots = process.env.SCREENSHOTS;
if (shots) mkdirSync(shots, { recursive: true });
const payer = privateKeyToAccount(payerKey);

const browser = await chromium.launch({ executablePath: env("CHROMIUM", "/usr/bin/chromium") });
const problems = [];
function watch(page) {
  page.setDefaultTimeout(20_000);
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  // A 402 is an answer (the price), which Chromium logs as a failed load; anything else
  // logged as an error (a CSP refusal, a CORS block, a script error) is a fault.
  page.on("console", (m) => m.type() === "error" && !m.text().startsWith("Failed to load resource") && problems.push(`console: ${m.text()}`));
}
const step = (name) => console.error(`paypage: ${name}`);

/** The wallet's side of the page: what it was asked, and its answers, signed in Node by `signer`. */
async function injectWallet(page, signer = payer) {
  const asked = [];
  let chainId = 1;
  await page.exposeFunction("walletRequest", async ({ method, params }) => {
    asked.push(method);
    switch (method) {
      case "eth_requestAccounts":
      case "eth_accounts":
        return [signer.address];
      case "eth_chainId":
        return `0x${chainId.toString(16)}`;
      case "wallet_switchEthereumChain":
        chainId = Number.parseInt(params[0].chainId, 16);
        return null;
      case "eth_signTypedData_v4": {
        assert.equal(params[0].toLowerCase(), signer.address.toLowerCase(), "signs for the connected account");
        const { domain, types, primaryType, message } = JSON.parse(params[1]);
        assert.equal(domain.chainId, chainId, "signs on the chain it was switched to");
        delete types.EIP712Domain;
        return signer.signTypedData({ domain, types, primaryType, message });
      }
      default:
        throw new Error(`the wallet does not support ${method}`);
    }
  });
  await page.addInitScript(() => {
    window.ethereum = { isTestWallet: true, request: (args) => window.walletRequest(args) };
  });
  return { asked, chain: () => chainId };
}

/**
 * A Solana wallet as Phantom and Solflare are to a page: it registers through the Wallet
 * Standard's events, connects, and signs transactions (here in Node, with `signer`'s key,
 * checking that it is asked to sign as the transfer's authority). What it signed, base64.
 */
async function injectSolanaWallet(page, signer) {
  const signed = [];
  await page.exposeFunction("solanaWalletSign", async ({ transaction, account, chain }) => {
    assert.equal(account, signer.address, "signs for the connected account");
    assert.equal(chain, "solana:mainnet");
    const decoded = getTransactionDecoder().decode(Buffer.from(transaction, "base64"));
    assert.ok(signer.address in decoded.signatures, "the payer is one of the transaction's signers");
    const done = await partiallySignTransaction([signer.keyPair], decoded);
    const wire = Buffer.from(getTransactionEncoder().encode(done)).toString("base64");
    signed.push(wire);
    return wire;
  });
  await page.addInitScript((address) => {
    const account = { address, publicKey: new Uint8Array(32), chains: ["solana:mainnet"], features: ["solana:signTransaction"] };
    const fromBase64 = (text) => Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
    const toBase64 = (bytes) => btoa(Array.from(bytes, (b) => String.fromCharCode(b)).join(""));
    const wallet = {
      version: "1.0.0",
      name: "Test Wallet",
      icon: "data:image/svg+xml;base64,PHN2Zy8+",
      chains: ["solana:mainnet", "solana:devnet"],
      accounts: [],
      features: {
        "standard:connect": {
          version: "1.0.0",
          connect: async () => {
            wallet.accounts = [account];
            return { accounts: [account] };
          },
        },
        "solana:signTransaction": {
          version: "1.0.0",
          supportedTransactionVersions: ["legacy", 0],
          signTransaction: (...inputs) =>
            Promise.all(
              inputs.map(async (input) => ({
                signedTransaction: fromBase64(
                  await window.solanaWalletSign({ transaction: toBase64(input.transaction), account: input.account.address, chain: input.chain }),
                ),
              })),
            ),
        },
      },
    };
    const register = ({ register }) => register(wallet);
    window.addEventListener("wallet-standard:app-ready", (event) => register(event.detail));
    window.dispatchEvent(new CustomEvent("wallet-standard:register-wallet", { detail: register }));
  }, signer.address);
  return signed;
}

/** Opens the page at `path`, connects the wallet (its button named `connect`), buys /hello
 * for Ann; the settlement's transaction as the page shows it. */
async function buyHello(page, path, connect, from) {
  await page.goto(`${base}${path}`);
  await page.getByRole("heading", { name: "Agent seller", level: 1 }).waitFor();
  const hello = page.getByRole("region", { name: "/hello" });
  await hello.getByText("0.05 USDC").waitFor();
  await page.getByRole("button", { name: connect }).click();
  await page.getByText(`Paying from ${from.slice(0, 6)}`).waitFor();
  await hello.getByLabel("name").fill("Ann");
  await hello.getByRole("button", { name: "Pay and run /hello" }).click();
  await hello.getByText("Hello, Ann!").waitFor({ timeout: 30_000 });
  await hello.getByText("Paid 0.05 USDC").waitFor();
  return hello.locator("code").last().getAttribute("title");
}

async function wallets() {
  step("the payment page on Base, with a smart wallet not deployed yet");
  const smart = await baseAccount({ key: payerKey, rpcUrl: env("BASE_RPC"), smartWallet: JSON.parse(env("SMART_WALLET")) });
  const onBase = await browser.newPage({ viewport: { width: 1100, height: 900 } });
  watch(onBase);
  const evmWallet = await injectWallet(onBase, smart);
  const smartTransaction = await buyHello(onBase, `/x402/base/${seller}`, "Connect wallet", smart.address);
  assert.equal(evmWallet.asked.filter((m) => m === "eth_signTypedData_v4").length, 1);
  if (shots) await onBase.screenshot({ path: `${shots}/payment-page-smart-wallet.png`, fullPage: true });

  step("the payment page on Solana, with a Wallet-Standard wallet");
  const solanaSigner = await createKeyPairSignerFromBytes(getBase58Encoder().encode(env("SOLANA_PAYER_KEY")));
  const onSolana = await browser.newPage({ viewport: { width: 1100, height: 900 } });
  watch(onSolana);
  const signed = await injectSolanaWallet(onSolana, solanaSigner);
  const solanaTransaction = await buyHello(onSolana, `/x402/solana/${seller}`, "Connect Test Wallet", solanaSigner.address);
  assert.equal(signed.length, 1, "one signature for one purchase");
  if (shots) await onSolana.screenshot({ path: `${shots}/payment-page-solana.png`, fullPage: true });
  return { smartWallet: { transaction: smartTransaction }, solana: { transaction: solanaTransaction } };
}

/** Steps 1 and 2: the page with a key's wallet on Base, and another origin's page. */
async function onBase() {
  const result = {};
  step("the payment page sells /hello to a browser wallet");
  const page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
  watch(page);
  const wallet = await injectWallet(page);
  const opened = await page.goto(`${base}/x402/base/${seller}`);
  assert.match(opened.headers()["content-type"], /text\/html/);
  assert.match(opened.headers()["content-security-policy"], /script-src 'self'/);
  await page.getByRole("heading", { name: "Agent seller", level: 1 }).waitFor();
  await page.getByRole("heading", { name: "A message" }).waitFor();
  const hello = page.getByRole("region", { name: "/hello" });
  await hello.getByText("0.05 USDC").waitFor();
  await page.getByRole("region", { name: "/forecast" }).getByText("0.01 USDC").waitFor();
  await page.getByRole("button", { name: "Connect wallet" }).click();
  await page.getByText(`Paying from ${payer.address.slice(0, 6)}`).waitFor();
  await hello.getByLabel("name").fill("Ann");
  // The first answer is lost on the way back, after the server settled and answered.
  const sent = [];
  const purchase = `${base}/x402/base/${seller}/commands/hello`;
  await page.route(purchase, async (route) => {
    const request = route.request();
    if (request.method() !== "POST") return route.continue();
    sent.push(request.headers()["payment-signature"]);
    if (sent.length > 1) return route.continue();
    const answered = await route.fetch();
    assert.equal(answered.status(), 200, "the first try was settled and answered");
    await route.abort("connectionreset");
  });
  await hello.getByRole("button", { name: "Pay and run /hello" }).click();
  await hello.getByText("Hello, Ann!").waitFor({ timeout: 30_000 });
  await hello.getByText("Paid 0.05 USDC").waitFor();
  if (shots) await page.screenshot({ path: `${shots}/payment-page.png`, fullPage: true });
  assert.equal(wallet.chain(), 8453, "the page asked the wallet onto Base");
  assert.deepEqual(
    wallet.asked.filter((m) => m === "eth_signTypedData_v4"),
    ["eth_signTypedData_v4"],
    "one signature for one purchase",
  );
  assert.equal(sent.length, 2, "sent again once");
  assert.equal(sent[0], sent[1], "the very same signed payment");
  const identifier = JSON.parse(Buffer.from(sent[0], "base64").toString()).extensions["payment-identifier"].info.id;
  assert.match(identifier, /^[A-Za-z0-9_-]{16,128}$/, "named with a payment-identifier");
  await page.unroute(purchase);
  result.page = { transaction: await hello.locator("code").last().getAttribute("title"), sent: sent.length };

  step("a page on another origin pays with @x402/fetch and reads PAYMENT-RESPONSE");
  const bundled = await build({
    stdin: {
      contents: `
        import { wrapFetchWithPayment, x402Client, decodePaymentResponseHeader } from "@x402/fetch";
        import { ExactEvmScheme } from "@x402/evm";
        import { privateKeyToAccount } from "viem/accounts";
import {
  createKeyPairSignerFromBytes,
  getBase58Encoder,
  getTransactionDecoder,
  getTransactionEncoder,
  partiallySignTransaction,
} from "@solana/kit";
import { baseAccount } from "./accounts.mjs";
        window.payWithX402 = async (url, body, key) => {
          const client = x402Client.fromConfig({
            schemes: [{ network: "eip155:*", client: new ExactEvmScheme(privateKeyToAccount(key)) }],
          });
          const response = await wrapFetchWithPayment(fetch, client)(url, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify(body),
          });
          const header = response.headers.get("payment-response");
          return {
            status: response.status,
            body: await response.json(),
            paymentResponse: header ? decodePaymentResponseHeader(header) : null,
          };
        };`,
      resolveDir: import.meta.dirname,
    },
    bundle: true,
    format: "esm",
    platform: "browser",
    write: false,
    logLevel: "error",
  });
  const script = bundled.outputFiles[0].text;
  shop = createServer((request, response) => {
    if (request.url === "/app.js") {
      response.writeHead(200, { "content-type": "text/javascript" });
      return response.end(script);
    }
    response.writeHead(200, { "content-type": "text/html" });
    response.end(`<!doctype html><title>A shop elsewhere</title><script type="module" src="/app.js"></script>`);
  });
  await new Promise((resolve) => shop.listen(0, "127.0.0.1", resolve));
  const elsewhere = `http://127.0.0.1:${shop.address().port}`;
  assert.notEqual(new URL(elsewhere).origin, new URL(base).origin);
  const other = await browser.newPage();
  watch(other);
  await other.goto(elsewhere);
  await other.waitForFunction(() => typeof window.payWithX402 === "function");
  const paid = await other.evaluate(
    ([url, key]) => window.payWithX402(url, { name: "Bob" }, key),
    [`${base}/x402/base/${seller}/commands/hello`, payerKey],
  );
  assert.equal(paid.status, 200, JSON.stringify(paid.body));
  assert.equal(paid.body.response, "Hello, Bob!");
  assert.equal(paid.paymentResponse?.success, true, "PAYMENT-RESPONSE is readable on another origin");
  result.crossOrigin = { status: paid.status, response: paid.body.response, paymentResponse: paid.paymentResponse };

  return result;
}

const result = {};
let shop;
try {
  Object.assign(result, process.env.SCENARIO === "wallets" ? await wallets() : await onBase());
  assert.deepEqual(problems, [], "the pages logged no error");
  console.log(JSON.stringify(result));
} catch (error) {
  console.error(error?.stack ?? error);
  for (const open of browser.contexts().flatMap((c) => c.pages())) {
    console.error(`--- ${open.url()}:\n${await open.locator("body").innerText().catch(() => "")}`);
  }
  if (problems.length) console.error(problems.join("\n"));
  process.exitCode = 1;
} finally {
  shop?.close();
  await browser.close();
}
