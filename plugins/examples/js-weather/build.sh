#!/usr/bin/env bash
# Builds js_weather.wasm from src/index.js with the JavaScript SDK (plugin-sdk/js: esbuild,
# then componentize-js against wit/v0.4.0); skipped when the output is newer than every input.
# Usage: plugins/examples/js-weather/build.sh OUT_DIR
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:?usage: build.sh OUT_DIR}/js_weather.wasm"
sdk="$here/../../../plugin-sdk/js"
wit="$here/../../../wit/v0.4.0"
mkdir -p "$(dirname "$out")"
npm install --prefix "$sdk" --no-audit --no-fund --loglevel=error >/dev/null
if [ -f "$out" ] && [ -z "$(find "$here/src" "$sdk/index.js" "$sdk/build.mjs" "$sdk/package-lock.json" "$wit" -newer "$out" -print -quit)" ]; then
    exit 0
fi
node "$sdk/build.mjs" "$here/src/index.js" "$out"
