// Verifies webhook deliveries with the Node.js `verify` of docs/webhooks.md, read from that
// page (so the documented recipe is what is tested), as tests/python/verify_webhooks.py
// does for the Python one.
//
// argv[2]: {"secret": "whsec_...", "deliveries": [{"headers": {...}, "body": "..."}]}
// Prints {"documented": [ids], "refused": [errors]}.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const docs = readFileSync(new URL("../../docs/webhooks.md", import.meta.url), "utf8");
const recipe = docs.match(/<!-- verify-node -->\n```js\n([\s\S]*?)```/)[1];
const dir = mkdtempSync(join(tmpdir(), "verify-"));
const file = join(dir, "verify.mjs");
writeFileSync(file, recipe);
const { verify } = await import(pathToFileURL(file).href);
rmSync(dir, { recursive: true });

const { secret, deliveries } = JSON.parse(process.argv[2]);
const out = { documented: [], refused: [] };
for (const { headers, body } of deliveries) {
  try {
    verify(secret, headers, Buffer.from(body));
    out.documented.push(headers["webhook-id"]);
  } catch (e) {
    out.refused.push(e.message);
  }
}
console.log(JSON.stringify(out));
