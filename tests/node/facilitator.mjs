// An x402 facilitator, as operators run one: the x402 reference's facilitator
// (@x402/core's x402Facilitator with the `exact` schemes of @x402/evm and @x402/svm, and
// @x402/evm's `upto`, which settles through Permit2 and the upto proxy) behind
// its HTTP API, settling on the local chains (Anvil, Surfpool) with its own funded keys,
// which pay the gas and the fees.
//
//   POST /verify  {x402Version, paymentPayload, paymentRequirements} → VerifyResponse
//   POST /settle  (the same)                                          → SettleResponse
//   GET  /supported                                                   → SupportedResponse
//
// env: EVM_KEY (0x-hex private key), EVM_RPC_URL, EVM_NETWORK (CAIP-2, default
//      eip155:8453); SVM_KEY (base58 64-byte keypair), SVM_RPC_URL, SVM_NETWORK (CAIP-2);
//      each chain only when its key is set; FACILITATOR_AUTH (optional: the Authorization
//      header it requires).
// Prints one JSON line, {url, evm, svm} (its accounts), once it listens on 127.0.0.1;
// serves until killed.
import { createServer } from "node:http";
import { createKeyPairSignerFromBytes, getBase58Encoder } from "@solana/kit";
import { x402Facilitator } from "@x402/core/facilitator";
import { toFacilitatorEvmSigner } from "@x402/evm";
import { registerExactEvmScheme } from "@x402/evm/exact/facilitator";
import { UptoEvmScheme } from "@x402/evm/upto/facilitator";
import { toFacilitatorSvmSigner } from "@x402/svm";
import { registerExactSvmScheme } from "@x402/svm/exact/facilitator";
import { createWalletClient, http, publicActions } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { base } from "viem/chains";

const env = (name, fallback) => {
  const value = process.env[name] ?? fallback;
  if (value === undefined) throw new Error(`${name} is not set`);
  return value;
};
const auth = process.env.FACILITATOR_AUTH;
const facilitator = new x402Facilitator();
const accounts = {};
if (process.env.EVM_KEY) {
  const account = privateKeyToAccount(process.env.EVM_KEY);
  const wallet = createWalletClient({ account, chain: base, transport: http(env("EVM_RPC_URL")) }).extend(publicActions);
  const signer = toFacilitatorEvmSigner({ ...wallet, address: account.address });
  registerExactEvmScheme(facilitator, { signer, networks: env("EVM_NETWORK", "eip155:8453") });
  facilitator.register(env("EVM_NETWORK", "eip155:8453"), new UptoEvmScheme(signer));
  accounts.evm = account.address;
}
if (process.env.SVM_KEY) {
  const keypair = await createKeyPairSignerFromBytes(getBase58Encoder().encode(process.env.SVM_KEY));
  const signer = toFacilitatorSvmSigner(keypair, { defaultRpcUrl: env("SVM_RPC_URL") });
  registerExactSvmScheme(facilitator, { signer, networks: env("SVM_NETWORK") });
  accounts.svm = keypair.address;
}

const json = (response, status, body) => {
  response.writeHead(status, { "content-type": "application/json" });
  response.end(JSON.stringify(body));
};

const server = createServer(async (request, response) => {
  try {
    if (auth && request.headers.authorization !== auth) return json(response, 401, { error: "unauthorized" });
    if (request.method === "GET" && request.url === "/supported") return json(response, 200, facilitator.getSupported());
    if (request.method !== "POST" || !["/verify", "/settle"].includes(request.url)) return json(response, 404, { error: "not found" });
    let text = "";
    for await (const chunk of request) text += chunk;
    const { paymentPayload, paymentRequirements } = JSON.parse(text);
    const answer =
      request.url === "/verify"
        ? await facilitator.verify(paymentPayload, paymentRequirements)
        : await facilitator.settle(paymentPayload, paymentRequirements);
    json(response, 200, answer);
  } catch (error) {
    json(response, 500, { error: String(error?.message ?? error) });
  }
});
server.listen(0, "127.0.0.1", () => {
  console.log(JSON.stringify({ url: `http://127.0.0.1:${server.address().port}`, ...accounts }));
});
