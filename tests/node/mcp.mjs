// Talks to an agent's MCP endpoint the way MCP clients do: with the official TypeScript
// SDK's Streamable HTTP client (@modelcontextprotocol/sdk), and pays for tool calls with
// x402's MCP transport, the payment built by the x402 packages (@x402/core with
// @x402/evm and @x402/svm) and sent in the call's _meta["x402/payment"].
//
//   node mcp.mjs '<request JSON>'
//
// request: { url, key?: API key sent as "Authorization: Bearer", calls: [call] }
// call:    { name, arguments?, progress?: true (ask for progress notifications),
//            pay?: { network: "base" | "solana", key, rpcUrl, networkId, smartWallet? (Base: see
//            accounts.mjs), paymentId? (names the payment with x402's payment-identifier, as
//            @x402/extensions documents it) }, send?: false (sign
//            the payment, do not send it),
//            payment?: a payment object to send as is (a replay),
//            signIn?: { network, key }: signs the 402's sign-in-with-x challenge with
//            @x402/extensions' createSIWxPayload and sends it in _meta["sign-in-with-x"],
//            paying nothing }
// Prints one JSON line: { serverVersion, tools: [every tool, all pages], results: [
//   { result, progress: [numbers], paymentRequired, payment, bazaar } or { error: {code, message} }
// ] } where paymentRequired is what the first, unpaid call answered when `pay` was given,
// payment what was sent, and bazaar what @x402/extensions' own validators say of the
// 402's bazaar extension ({ consistent, spec }: each { valid, errors }).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { payer } from "./x402_payer.mjs";
import { createKeyPairSignerFromBytes, getBase58Encoder } from "@solana/kit";

const request = JSON.parse(process.argv[2]);
const headers = request.key ? { Authorization: `Bearer ${request.key}` } : {};
const transport = new StreamableHTTPClientTransport(new URL(request.url), { requestInit: { headers } });
const client = new Client({ name: "agent-host-tests", version: "1.0.0" });
await client.connect(transport);

const tools = [];
let cursor;
do {
  const page = await client.listTools(cursor ? { cursor } : {});
  tools.push(...page.tools);
  cursor = page.nextCursor;
} while (cursor);

const results = [];
for (const call of request.calls) {
  const progress = [];
  const options = call.progress ? { onprogress: (p) => progress.push(p.progress), timeout: 120000 } : { timeout: 120000 };
  const params = { name: call.name, arguments: call.arguments ?? {} };
  let paymentRequired = null;
  let bazaar = null;
  let payment = call.payment ?? null;
  if (call.pay) {
    const unpaid = await client.callTool(params, undefined, options);
    paymentRequired = unpaid.structuredContent ?? JSON.parse(unpaid.content[0].text);
    const offered = paymentRequired.extensions?.bazaar;
    if (offered) {
      const { validateDiscoveryExtension, validateDiscoveryExtensionSpec } = await import("@x402/extensions/bazaar");
      bazaar = { consistent: validateDiscoveryExtension(offered), spec: validateDiscoveryExtensionSpec(offered) };
    }
    if (call.pay.paymentId) {
      const { appendPaymentIdentifierToExtensions } = await import("@x402/extensions/payment-identifier");
      paymentRequired.extensions ??= {};
      appendPaymentIdentifierToExtensions(paymentRequired.extensions, call.pay.paymentId);
    }
    const payments = await payer(call.pay);
    payment = await payments.createPaymentPayload(paymentRequired);
    if (call.send === false) {
      results.push({ paymentRequired, payment, progress, bazaar });
      continue;
    }
  }
  if (call.signIn) {
    const unpaid = await client.callTool(params, undefined, options);
    paymentRequired = unpaid.structuredContent ?? JSON.parse(unpaid.content[0].text);
    const { createSIWxPayload } = await import("@x402/extensions/sign-in-with-x");
    const challenge = paymentRequired.extensions["sign-in-with-x"];
    const solana = call.signIn.network === "solana";
    const signer = solana
      ? await createKeyPairSignerFromBytes(getBase58Encoder().encode(call.signIn.key))
      : (await import("viem/accounts")).privateKeyToAccount(call.signIn.key);
    const chain = challenge.supportedChains.find((c) => c.type === (solana ? "ed25519" : "eip191"));
    const info = { ...challenge.info, chainId: chain.chainId, type: chain.type };
    params._meta = { "sign-in-with-x": await createSIWxPayload(info, signer, request.url) };
  }
  if (payment) params._meta = { "x402/payment": payment };
  try {
    const result = await client.callTool(params, undefined, options);
    results.push({ result, progress, paymentRequired, payment, bazaar });
  } catch (error) {
    // A protocol error (an unknown tool): the SDK throws it as an McpError.
    results.push({ error: { code: error.code, message: error.message }, progress });
  }
}
console.log(JSON.stringify({ serverVersion: client.getServerVersion(), tools, results }));
await client.close();
