#!/usr/bin/env node
// Builds a plugin written with this SDK into a WebAssembly component of the world
// `agent:plugin/command-plugin@0.4.0`:
//
//   node plugin-sdk/js/build.mjs src/index.js out/plugin.wasm
//
// 1. esbuild bundles the plugin and this SDK into one ES module (componentize-js takes one
//    file); the host's interfaces (`agent:plugin/...`) stay imports.
// 2. componentize-js embeds it in SpiderMonkey and binds it to the WIT in ../../wit. The
//    standard `fetch()` is in (the `http` feature): it goes out through `wasi:http`, which
//    the host sends through the same guard as the SDK's `http`. Only `fetch-event` (serving
//    HTTP, which a command does not do) is left out.
import { mkdtempSync, rmSync, statSync, writeFileSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { componentize } from "@bytecodealliance/componentize-js";

const here = dirname(fileURLToPath(import.meta.url));
export const WIT = resolve(here, "../../wit/v0.4.0");

export async function buildPlugin(entry, out) {
  const started = Date.now();
  const work = mkdtempSync(join(tmpdir(), "agent-plugin-"));
  try {
    const bundle = join(work, "plugin.js");
    await build({
      entryPoints: [entry],
      bundle: true,
      format: "esm",
      platform: "neutral",
      target: "es2022",
      outfile: bundle,
      external: ["agent:plugin/*"],
      alias: { "@agent-host/plugin-sdk": join(here, "index.js") },
      logLevel: "warning",
    });
    const { component } = await componentize({
      sourcePath: bundle,
      witPath: WIT,
      worldName: "command-plugin",
      disableFeatures: ["fetch-event"],
    });
    mkdirSync(dirname(resolve(out)), { recursive: true });
    writeFileSync(out, component);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return { bytes: statSync(out).size, ms: Date.now() - started };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const [entry, out] = process.argv.slice(2);
  if (!entry || !out) {
    console.error("usage: build.mjs ENTRY.js OUT.wasm");
    process.exit(2);
  }
  const { bytes, ms } = await buildPlugin(entry, out);
  console.error(`built ${out}: ${bytes} bytes in ${(ms / 1000).toFixed(1)} s`);
}
