// Pays the service the way x402 users do: with a real, published x402 client.
//
//   node pay.mjs --serve                       (the tests: one request per stdin line)
//   node pay.mjs '<request JSON>'              (one request)
//   node pay.mjs CLIENT URL '<body JSON>' [upto]   (by hand, see docs/x402.md)
//
// request: { client: "x402-fetch" | "@x402/fetch", network: "base" | "solana", url, body,
//            key (Base: 0x-hex private key; Solana: base58 64-byte keypair), rpcUrl,
//            networkId (v2 only: the CAIP-2 id the client registers; default eip155:* / solana:*),
//            scheme ("upto": Base, @x402/fetch only: @x402/evm's upto client instead of exact),
//            paymentId (v2 only: names every payment of this run with x402's payment-identifier,
//            as @x402/extensions documents it), attempts (how many times to ask, while the
//            request throws: a client's retry after a dropped connection; default 1) }
// By hand, the network comes from the URL (/x402/{network}/...), the key from
// PAYER_BASE_KEY / PAYER_SOLANA_KEY and the RPC from AGENT_HOST_{BASE,SOLANA}_RPC_URL.
// A request's result is one JSON object: { status, body, paymentResponse, paymentResponseHeader,
// failures } where paymentResponse is the decoded PAYMENT-RESPONSE (v2) or X-PAYMENT-RESPONSE
// (v1) header (null when absent) and failures the messages of the attempts that threw.
// One request prints it on a line; a client that throws on its last attempt exits 1 with its
// message on stderr.
// --serve reads lines { id, request } and answers each, as it ends, with a line { id, paid }
// or { id, error }; a line { id, cancel: true } stops a request. Requests run side by side,
// each with clients of its own, and the modules are loaded once (a fresh Node process per
// payment cost about 3 s of CPU, mostly loading). An error no request catches ends the
// process after a line { fatal }.
import { inspect } from "node:util";
import { createWalletClient, http, publicActions } from "viem";
import { base } from "viem/chains";
import { createKeyPairSignerFromBytes, getBase58Encoder } from "@solana/kit";
import { baseAccount } from "./accounts.mjs";

function byHand([client, url, body, scheme]) {
  const network = new URL(url).pathname.split("/")[2];
  const upper = String(network).toUpperCase();
  return {
    client,
    url,
    network,
    scheme,
    body: JSON.parse(body ?? "{}"),
    key: process.env[`PAYER_${upper}_KEY`],
    rpcUrl: process.env[`AGENT_HOST_${upper}_RPC_URL`],
  };
}

async function solanaSigner(request) {
  return createKeyPairSignerFromBytes(getBase58Encoder().encode(request.key));
}

// x402-fetch 1.2.0: x402 protocol version 1 only.
async function legacyFetch(request) {
  const { wrapFetchWithPayment } = await import("x402-fetch");
  if (request.network === "base") {
    // The client's own createSigner("base", key) with the local node as transport: the
    // same wallet client, kept off the public RPC.
    const wallet = createWalletClient({
      chain: base,
      transport: http(request.rpcUrl),
      account: await baseAccount(request),
    }).extend(publicActions);
    return wrapFetchWithPayment(fetch, wallet);
  }
  const config = { svmConfig: { rpcUrl: request.rpcUrl } };
  return wrapFetchWithPayment(fetch, await solanaSigner(request), undefined, undefined, config);
}

// @x402/fetch 2.x set up as its README's Quick Start shows: version-2 schemes only, one
// per CAIP-2 network, nothing else configured (Solana: the RPC, a documented option of
// ExactSvmScheme, since the chain is local).
async function currentFetch(request) {
  const { wrapFetchWithPayment, x402Client } = await import("@x402/fetch");
  let schemes;
  if (request.network === "base" && request.scheme === "upto") {
    // @x402/evm's upto client as its README registers it, alone: beside exact, the client
    // takes the first offer it can pay, and the service lists exact first. With its RPC
    // (a documented option) it reads the payer's Permit2 approval, and signs a permit for
    // it when there is none and the 402 offers gas sponsoring.
    const { UptoEvmScheme } = await import("@x402/evm/upto/client");
    const upto = new UptoEvmScheme(await baseAccount(request), { rpcUrl: request.rpcUrl });
    schemes = [{ network: request.networkId ?? "eip155:*", client: upto }];
  } else if (request.network === "base") {
    const { ExactEvmScheme } = await import("@x402/evm");
    schemes = [{ network: request.networkId ?? "eip155:*", client: new ExactEvmScheme(await baseAccount(request)) }];
  } else {
    const { ExactSvmScheme } = await import("@x402/svm");
    schemes = [
      { network: request.networkId ?? "solana:*", client: new ExactSvmScheme(await solanaSigner(request), { rpcUrl: request.rpcUrl }) },
    ];
  }
  const client = x402Client.fromConfig({ schemes });
  if (request.paymentId) {
    // The payment-identifier client example's hook: the same id on every payment this
    // logical request makes, so that a retry is recognised.
    const { appendPaymentIdentifierToExtensions } = await import("@x402/extensions/payment-identifier");
    client.onBeforePaymentCreation(async ({ paymentRequired }) => {
      paymentRequired.extensions ??= {};
      appendPaymentIdentifierToExtensions(paymentRequired.extensions, request.paymentId);
    });
  }
  return wrapFetchWithPayment(fetch, client);
}

const clients = { "x402-fetch": legacyFetch, "@x402/fetch": currentFetch };

async function pay(request, signal) {
  const makeFetch = clients[request.client];
  if (!makeFetch) throw new Error(`unknown client ${request.client}`);
  const paying = await makeFetch(request);
  const failures = [];
  let response;
  for (let attempt = 1; !response; attempt++) {
    try {
      response = await paying(request.url, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(request.body),
        signal,
      });
    } catch (error) {
      if (attempt >= (request.attempts ?? 1)) throw error;
      failures.push(String(error?.cause?.message ?? error?.message ?? error));
    }
  }
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
  return { status: response.status, body, paymentResponse, paymentResponseHeader, failures };
}

function describe(error) {
  // With its cause: "fetch failed" alone does not say whether the connection was refused or cut.
  return inspect(error, { depth: 4 });
}

async function serve() {
  const { createInterface } = await import("node:readline");
  const cancels = new Map();
  // A client's error no request catches ended its own process before; here it ends the
  // shared one, saying why, and the tests waiting are told so (never a silent success).
  const fatal = (error) => {
    console.log(JSON.stringify({ fatal: describe(error) }));
    process.exit(1);
  };
  process.on("unhandledRejection", fatal);
  process.on("uncaughtException", fatal);
  for await (const line of createInterface({ input: process.stdin })) {
    if (!line.trim()) continue;
    const { id, request, cancel } = JSON.parse(line);
    if (cancel) {
      // The test stopped waiting (it ended, or gave up): as a killed client would, this
      // request stops too.
      cancels.get(id)?.abort();
      continue;
    }
    const controller = new AbortController();
    cancels.set(id, controller);
    pay(request, controller.signal)
      .then(
        (paid) => console.log(JSON.stringify({ id, paid })),
        (error) => console.log(JSON.stringify({ id, error: describe(error) })),
      )
      .finally(() => cancels.delete(id));
  }
}

const args = process.argv.slice(2);
if (args[0] === "--serve") {
  await serve();
} else {
  const request = args.length === 1 ? JSON.parse(args[0]) : byHand(args);
  console.log(JSON.stringify(await pay(request)));
}
