// Compiles the tests' own contracts (contracts/*.sol, with OpenZeppelin's from npm) with
// solc from npm, offline, into build/contracts.json: { "<Name>": { abi, bytecode } }.
// Compiled once: the output is kept while the sources and the compiler are unchanged.
//
//   node compile.mjs          (prints the path of build/contracts.json)
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const solc = require("solc");

const sources = {};
for (const file of readdirSync(join(here, "contracts")).filter((f) => f.endsWith(".sol")).sort()) {
  sources[file] = { content: readFileSync(join(here, "contracts", file), "utf8") };
}
const input = {
  language: "Solidity",
  sources,
  settings: {
    // Anvil's default hardfork runs it; the optimizer keeps deployments cheap, like real wallets'.
    evmVersion: "cancun",
    optimizer: { enabled: true, runs: 200 },
    outputSelection: { "*": { "*": ["abi", "evm.bytecode.object"] } },
  },
};
const out = join(here, "build/contracts.json");
const stamp = createHash("sha256").update(JSON.stringify(input)).update(solc.version()).digest("hex");
if (existsSync(out) && JSON.parse(readFileSync(out, "utf8")).stamp === stamp) {
  console.log(out);
  process.exit(0);
}
const findImports = (path) => {
  try {
    return { contents: readFileSync(require.resolve(path), "utf8") };
  } catch {
    return { error: `not found: ${path}` };
  }
};
const result = JSON.parse(solc.compile(JSON.stringify(input), { import: findImports }));
const errors = (result.errors ?? []).filter((e) => e.severity === "error");
if (errors.length) {
  console.error(errors.map((e) => e.formattedMessage).join("\n"));
  process.exit(1);
}
const contracts = { stamp };
for (const file of Object.keys(sources)) {
  for (const [name, contract] of Object.entries(result.contracts[file])) {
    contracts[name] = { abi: contract.abi, bytecode: `0x${contract.evm.bytecode.object}` };
  }
}
mkdirSync(dirname(out), { recursive: true });
writeFileSync(out, JSON.stringify(contracts));
console.log(out);
