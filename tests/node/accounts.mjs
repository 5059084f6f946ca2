// The Base accounts the tests pay with, shared by pay.mjs (HTTP) and mcp.mjs (MCP):
// a key's own account, or the tests' smart wallet that the key owns (it signs payments'
// typed data and sign-in messages).
//
// request: { key (0x-hex private key), rpcUrl, smartWallet?: { factory, salt } }
import {
  createPublicClient,
  encodeAbiParameters,
  encodeFunctionData,
  hashMessage,
  hashTypedData,
  http,
  parseAbi,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { base } from "viem/chains";

// The tests' smart wallet (contracts/TestSmartWallet.sol) as a viem smart account: the
// address its factory gives the key's owner, and signatures the wallet checks (the owner's
// over the wallet's replay-safe hash, encoded with the owner's index), which viem wraps in
// ERC-6492 while the wallet is not deployed.
async function smartAccount(request) {
  const { entryPoint07Abi, entryPoint07Address, toSmartAccount } = await import("viem/account-abstraction");
  const owner = privateKeyToAccount(request.key);
  const client = createPublicClient({ chain: base, transport: http(request.rpcUrl) });
  const factoryAbi = parseAbi([
    "function createAccount(address owner, uint256 salt) returns (address)",
    "function getAddress(address owner, uint256 salt) view returns (address)",
  ]);
  const { factory } = request.smartWallet;
  const args = [owner.address, BigInt(request.smartWallet.salt ?? 0)];
  const address = await client.readContract({ address: factory, abi: factoryAbi, functionName: "getAddress", args });
  const unused = async () => {
    throw new Error("the tests' smart wallet only signs x402 payments and sign-ins");
  };
  // What the wallet checks of any hash: the owner's signature of its replay-safe form.
  const signHash = async (hash) => {
    const replaySafe = hashTypedData({
      domain: { name: "Test Smart Wallet", version: "1", chainId: base.id, verifyingContract: address },
      types: { WalletMessage: [{ name: "hash", type: "bytes32" }] },
      primaryType: "WalletMessage",
      message: { hash },
    });
    const ownerSignature = await owner.sign({ hash: replaySafe });
    return encodeAbiParameters([{ type: "uint256" }, { type: "bytes" }], [0n, ownerSignature]);
  };
  return toSmartAccount({
    client,
    entryPoint: { abi: entryPoint07Abi, address: entryPoint07Address, version: "0.7" },
    getAddress: async () => address,
    getFactoryArgs: async () => ({
      factory,
      factoryData: encodeFunctionData({ abi: factoryAbi, functionName: "createAccount", args }),
    }),
    signTypedData: async (typedData) => signHash(hashTypedData(typedData)),
    signMessage: async ({ message }) => signHash(hashMessage(message)),
    signUserOperation: unused,
    encodeCalls: unused,
    decodeCalls: unused,
    getStubSignature: async () => "0x",
  });
}

export async function baseAccount(request) {
  return request.smartWallet ? smartAccount(request) : privateKeyToAccount(request.key);
}
