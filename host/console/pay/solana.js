// A person's Solana browser wallet (Phantom, Solflare, Backpack), found through the Wallet
// Standard, as the payment page needs it: connect, and sign the payment transaction this
// server builds for the payer (x402 `exact` on Solana; the page can reach no Solana node to
// build one). Nothing here holds a key: the wallet signs, and shows its owner what the
// transaction moves.

const registered = [];

// The Wallet Standard's handshake, both ways: wallets that load after the page register on
// their event; those that loaded before answer the page's "app ready".
const api = Object.freeze({
  register(...wallets) {
    registered.push(...wallets);
    return () => {};
  },
});
globalThis.addEventListener("wallet-standard:register-wallet", (event) => event.detail(api));
globalThis.dispatchEvent(new CustomEvent("wallet-standard:app-ready", { detail: api }));

/** The Wallet-Standard chain of a CAIP-2 Solana network (its genesis hash's start). */
const CHAINS = {
  "5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp": "solana:mainnet",
  EtWTRABZaYq6iMfeYKouRu166VU2xqa1: "solana:devnet",
  "4uhcVJyU9pJkvQyS88uRDiswHXSCkY3z": "solana:testnet",
};

export function chainOf(network) {
  return CHAINS[network.split(":")[1]] ?? null;
}

/** The first wallet that can connect and sign a transaction on `chain`, or null. */
export function walletFor(chain) {
  return (
    registered.find(
      (wallet) =>
        wallet.features?.["standard:connect"] &&
        wallet.features?.["solana:signTransaction"] &&
        (wallet.chains ?? []).includes(chain),
    ) ?? null
  );
}

/** The account the person allows this page to see. */
export async function connect(wallet) {
  const { accounts } = await wallet.features["standard:connect"].connect();
  const account = accounts?.[0] ?? wallet.accounts?.[0];
  if (!account) throw new Error("The wallet shared no account.");
  return account;
}

const fromBase64 = (text) => Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
const toBase64 = (bytes) => btoa(Array.from(bytes, (b) => String.fromCharCode(b)).join(""));

/**
 * The x402 `exact` payload on Solana: the payment transaction built here for `account`
 * (`transaction`, base64), signed by the wallet as the transfer's authority; the fee payer's
 * signature is left to the seller.
 */
export async function authorize(wallet, account, chain, transaction) {
  const [signed] = await wallet.features["solana:signTransaction"].signTransaction({
    account,
    chain,
    transaction: fromBase64(transaction),
  });
  return { transaction: toBase64(signed.signedTransaction) };
}
