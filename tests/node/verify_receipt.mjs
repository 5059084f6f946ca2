// Verifies signed receipts with the `verifyReceipt` of docs/x402.md, read from that page
// (so the documented recipe is what is tested). The recipe is written beside this script,
// where its imports resolve to tests/node's packages.
//
// argv[2]: {"receipts": [{"receipt": {...}, "payTo": "..."}]}
// Prints {"verified": [{"payload": {...}} | {"error": "..."}]}, one per receipt.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const docs = readFileSync(new URL("../../docs/x402.md", import.meta.url), "utf8");
const recipe = docs.match(/<!-- verify-receipt -->\n```js\n([\s\S]*?)```/)[1];
const dir = mkdtempSync(join(fileURLToPath(new URL(".", import.meta.url)), ".verify-receipt-"));
const file = join(dir, "verify.mjs");
writeFileSync(file, recipe);
let verifyReceipt;
try {
  ({ verifyReceipt } = await import(pathToFileURL(file).href));
} finally {
  rmSync(dir, { recursive: true });
}

const { receipts } = JSON.parse(process.argv[2]);
const out = [];
for (const { receipt, payTo } of receipts) {
  try {
    out.push({ payload: await verifyReceipt(receipt, payTo) });
  } catch (e) {
    out.push({ error: e.message });
  }
}
console.log(JSON.stringify({ verified: out }));
