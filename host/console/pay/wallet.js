// A person's browser wallet on an EVM chain (EIP-1193, `window.ethereum`), as the payment
// page needs it: connect, be on the offer's chain, and sign the offer's EIP-3009
// authorization (x402 `exact` on Base). Nothing here holds a key: the wallet signs, and
// shows its owner what they sign.

/** The injected wallet, or null when the browser has none. */
export const provider = () => globalThis.ethereum ?? null;

/** The account the person allows this page to see. */
export async function connect(wallet) {
  const [account] = await wallet.request({ method: "eth_requestAccounts" });
  if (!account) throw new Error("The wallet shared no account.");
  return account;
}

/** Asks the wallet to be on `chainId` (a number) if it is not. */
async function onChain(wallet, chainId) {
  const current = Number.parseInt(await wallet.request({ method: "eth_chainId" }), 16);
  if (current === chainId) return;
  await wallet.request({ method: "wallet_switchEthereumChain", params: [{ chainId: `0x${chainId.toString(16)}` }] });
}

function randomNonce() {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return `0x${[...bytes].map((b) => b.toString(16).padStart(2, "0")).join("")}`;
}

/**
 * The x402 `exact` payload for a version-2 requirement on an EVM network: the payer's
 * TransferWithAuthorization of exactly `amount` to `payTo`, valid for the requirement's
 * time, signed as EIP-712 typed data by the wallet.
 */
export async function authorize(wallet, from, accepted) {
  const chainId = Number(accepted.network.split(":")[1]);
  await onChain(wallet, chainId);
  const now = Math.floor(Date.now() / 1000);
  const authorization = {
    from,
    to: accepted.payTo,
    value: accepted.amount,
    validAfter: String(now - 600),
    validBefore: String(now + accepted.maxTimeoutSeconds),
    nonce: randomNonce(),
  };
  const typedData = {
    types: {
      EIP712Domain: [
        { name: "name", type: "string" },
        { name: "version", type: "string" },
        { name: "chainId", type: "uint256" },
        { name: "verifyingContract", type: "address" },
      ],
      TransferWithAuthorization: [
        { name: "from", type: "address" },
        { name: "to", type: "address" },
        { name: "value", type: "uint256" },
        { name: "validAfter", type: "uint256" },
        { name: "validBefore", type: "uint256" },
        { name: "nonce", type: "bytes32" },
      ],
    },
    primaryType: "TransferWithAuthorization",
    domain: { name: accepted.extra.name, version: accepted.extra.version, chainId, verifyingContract: accepted.asset },
    message: authorization,
  };
  const signature = await wallet.request({ method: "eth_signTypedData_v4", params: [from, JSON.stringify(typedData)] });
  return { signature, authorization };
}
