// Regenerates types/ (TypeScript declarations of the host's interfaces) from the WIT with
// jco's bindgen, as guest types: what a plugin imports and what it exports.
//
//   npm run types              (from plugin-sdk/js; commit the result)
//   node types.mjs --check     exits 1 if types/ is not what the WIT gives (the test suite runs it)
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

// jco's CLI reads WIT through a WASI sandbox that cannot see this repository's paths, so the
// WIT goes in as text to the same bindgen component.
const bindgen = "./node_modules/@bytecodealliance/jco-transpile/vendor/js-component-bindgen-component.js";
const here = dirname(fileURLToPath(import.meta.url));
const { $init, generateTypes } = await import(join(here, bindgen));
await $init;

// The world's one wasi:http import is what the engine's `fetch()` uses; plugins never import
// it themselves, so the declarations leave it (and the WASI packages behind it) out.
const source = readFileSync(join(here, "../../wit/v0.4.0/plugin.wit"), "utf8").replace(
  /^\s*import wasi:http\/outgoing-handler@[\d.]+;\n/m,
  "",
);
if (/^\s*(import|use|include) wasi:/m.test(source)) throw new Error("types.mjs: the world imports more of WASI than it knows");
const files = generateTypes("command-plugin", {
  wit: { tag: "source", val: source },
  world: "command-plugin",
  guest: true,
  tlaCompat: false,
  features: { tag: "list", val: [] },
});
const out = join(here, "types");
if (process.argv.includes("--check")) {
  const stale = files.filter(([name, bytes]) => {
    try {
      return !readFileSync(join(out, name)).equals(Buffer.from(bytes));
    } catch {
      return true;
    }
  });
  if (stale.length) {
    console.error(`types/ is out of date with the WIT (${stale.map(([n]) => n).join(", ")}): run npm run types`);
    process.exit(1);
  }
  process.exit(0);
}
rmSync(out, { recursive: true, force: true });
for (const [name, bytes] of files) {
  mkdirSync(dirname(join(out, name)), { recursive: true });
  writeFileSync(join(out, name), bytes);
}
console.error(`wrote ${files.length} files to types/`);
