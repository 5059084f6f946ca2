// The x402 client of a network, set up as the x402 packages document it (@x402/core with
// @x402/evm or @x402/svm): what the MCP test clients pay tool calls with.
//
// pay: { network: "base" | "solana", key, rpcUrl, networkId, smartWallet? (Base: see accounts.mjs),
//        scheme?: "upto" (Base: @x402/evm's upto client, registered alone, pays for use) }
import { baseAccount } from "./accounts.mjs";
import { createKeyPairSignerFromBytes, getBase58Encoder } from "@solana/kit";

export async function payer(pay) {
  const { x402Client } = await import("@x402/core/client");
  const payments = new x402Client();
  if (pay.network === "base" && pay.scheme === "upto") {
    const { UptoEvmScheme } = await import("@x402/evm/upto/client");
    // With its RPC it signs a permit for Permit2 when the payer has not approved it.
    payments.register(pay.networkId, new UptoEvmScheme(await baseAccount(pay), { rpcUrl: pay.rpcUrl }));
  } else if (pay.network === "base") {
    const { ExactEvmScheme } = await import("@x402/evm");
    payments.register(pay.networkId, new ExactEvmScheme(await baseAccount(pay)));
  } else {
    const { ExactSvmScheme } = await import("@x402/svm");
    const signer = await createKeyPairSignerFromBytes(getBase58Encoder().encode(pay.key));
    payments.register(pay.networkId, new ExactSvmScheme(signer, { rpcUrl: pay.rpcUrl }));
  }
  return payments;
}
