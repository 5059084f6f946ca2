// Pays the service the way x402 users do: with a real, published x402 client.
//
//   node pay.mjs '<request JSON>'              (the tests)
//   node pay.mjs CLIENT URL '<body JSON>'      (by hand, see docs/x402.md)
//
// request: { client: "x402-fetch" | "@x402/fetch", network: "base" | "solana", url, body,
//            key (Base: 0x-hex private key; Solana: base58 64-byte keypair), rpcUrl,
//            networkId (v2 only: the CAIP-2 id the client registers; default eip155:* / solana:*) }
// By hand, the network comes from the URL (/x402/{network}/...), the key from
// PAYER_BASE_KEY / PAYER_SOLANA_KEY and the RPC from AGENT_HOST_{BASE,SOLANA}_RPC_URL.
// Prints one JSON line: { status, body, paymentResponse, paymentResponseHeader } where
// paymentResponse is the decoded PAYMENT-RESPONSE (v2) or X-PAYMENT-RESPONSE (v1) header
// (null when absent). A client that throws exits 1 with its message on stderr.
import { createWalletClient, http, publicActions } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { base } from "viem/chains";
import { createKeyPairSignerFromBytes, getBase58Encoder } from "@solana/kit";

function byHand([client, url, body]) {
  const network = new URL(url).pathname.split("/")[2];
  const upper = String(network).toUpperCase();
  return {
    client,
    url,
    network,
    body: JSON.parse(body ?? "{}"),
    key: process.env[`PAYER_${upper}_KEY`],
    rpcUrl: process.env[`AGENT_HOST_${upper}_RPC_URL`],
  };
}

const args = process.argv.slice(2);
const request = args.length === 1 ? JSON.parse(args[0]) : byHand(args);

async function solanaSigner() {
  return createKeyPairSignerFromBytes(getBase58Encoder().encode(request.key));
}

// x402-fetch 1.2.0: x402 protocol version 1 only.
async function legacyFetch() {
  const { wrapFetchWithPayment } = await import("x402-fetch");
  if (request.network === "base") {
    // The client's own createSigner("base", key) with the local node as transport: the
    // same wallet client, kept off the public RPC.
    const wallet = createWalletClient({
      chain: base,
      transport: http(request.rpcUrl),
      account: privateKeyToAccount(request.key),
    }).extend(publicActions);
    return wrapFetchWithPayment(fetch, wallet);
  }
  const config = { svmConfig: { rpcUrl: request.rpcUrl } };
  return wrapFetchWithPayment(fetch, await solanaSigner(), undefined, undefined, config);
}

// @x402/fetch 2.x set up as its README's Quick Start shows: version-2 schemes only, one
// per CAIP-2 network, nothing else configured (Solana: the RPC, a documented option of
// ExactSvmScheme, since the chain is local).
async function currentFetch() {
  const { wrapFetchWithPaymentFromConfig } = await import("@x402/fetch");
  if (request.network === "base") {
    const { ExactEvmScheme } = await import("@x402/evm");
    return wrapFetchWithPaymentFromConfig(fetch, {
      schemes: [{ network: request.networkId ?? "eip155:*", client: new ExactEvmScheme(privateKeyToAccount(request.key)) }],
    });
  }
  const { ExactSvmScheme } = await import("@x402/svm");
  return wrapFetchWithPaymentFromConfig(fetch, {
    schemes: [
      { network: request.networkId ?? "solana:*", client: new ExactSvmScheme(await solanaSigner(), { rpcUrl: request.rpcUrl }) },
    ],
  });
}

const clients = { "x402-fetch": legacyFetch, "@x402/fetch": currentFetch };
const makeFetch = clients[request.client];
if (!makeFetch) throw new Error(`unknown client ${request.client}`);
const pay = await makeFetch();

const response = await pay(request.url, {
  method: "POST",
  headers: { "content-type": "application/json" },
  body: JSON.stringify(request.body),
});
const text = await response.text();
let body;
try {
  body = JSON.parse(text);
} catch {
  body = text;
}
const paymentResponseHeader = ["payment-response", "x-payment-response"].find((name) => response.headers.has(name)) ?? null;
const header = paymentResponseHeader && response.headers.get(paymentResponseHeader);
const paymentResponse = header ? JSON.parse(Buffer.from(header, "base64").toString("utf8")) : null;
console.log(JSON.stringify({ status: response.status, body, paymentResponse, paymentResponseHeader }));
