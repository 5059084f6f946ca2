// Signs in to the service the way x402 users do: with @x402/extensions' own
// sign-in-with-x client.
//
// argv[2]: { mode, network: "base" | "solana", key (Base: 0x-hex private key; Solana: base58
//            64-byte keypair), rpcUrl, smartWallet (Base: signs as the tests' smart wallet that
//            the key owns, see accounts.mjs), url, body, challenge, domain }
//   mode "fetch": POSTs `body` to `url` through wrapFetchWithSIWx: a 402 that offers a
//     sign-in is signed and sent again. Prints { status, body, paymentRequired } of the
//     last answer (paymentRequired: its decoded PAYMENT-REQUIRED header, or null).
//   mode "sign": signs `challenge` (a 402's extensions["sign-in-with-x"]) for `url` with
//     createSIWxPayload, on the supported chain of `network`. With `domain`, the message is
//     signed for that domain instead (what a site that is not the service would have the
//     wallet sign; the client itself refuses to). Prints { header, payload }.
import { createKeyPairSignerFromBytes, getBase58Decoder, getBase58Encoder } from "@solana/kit";
import { decodePaymentRequiredHeader } from "@x402/core/http";
import {
  createSIWxMessage,
  createSIWxPayload,
  encodeSIWxHeader,
  wrapFetchWithSIWx,
} from "@x402/extensions/sign-in-with-x";
import { baseAccount } from "./accounts.mjs";

const request = JSON.parse(process.argv[2]);
const signer =
  request.network === "solana"
    ? await createKeyPairSignerFromBytes(getBase58Encoder().encode(request.key))
    : await baseAccount(request);

if (request.mode === "fetch") {
  const fetchSignedIn = wrapFetchWithSIWx(fetch, signer);
  const response = await fetchSignedIn(request.url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(request.body),
  });
  const required = response.headers.get("payment-required");
  console.log(
    JSON.stringify({
      status: response.status,
      body: await response.json(),
      paymentRequired: required ? decodePaymentRequiredHeader(required) : null,
    }),
  );
} else {
  const type = request.network === "solana" ? "ed25519" : "eip191";
  const chain = request.challenge.supportedChains.find((c) => c.type === type);
  const info = { ...request.challenge.info, chainId: chain.chainId, type: chain.type };
  let payload;
  if (request.domain) {
    const forged = { ...info, domain: request.domain };
    const address = signer.address;
    const message = createSIWxMessage(forged, address);
    const bytes = new TextEncoder().encode(message);
    const signature =
      request.network === "solana"
        ? getBase58Decoder().decode(Object.values((await signer.signMessages([{ content: bytes, signatures: {} }]))[0])[0])
        : await signer.signMessage({ message });
    payload = { ...forged, address, signature };
  } else {
    payload = await createSIWxPayload(info, signer, request.url);
  }
  console.log(JSON.stringify({ header: encodeSIWxHeader(payload), payload }));
}
