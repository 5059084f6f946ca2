#!/usr/bin/env bash
# One plugin per language on the same host (bench/benches/languages.rs): size, the host's
# compile, instantiate + execute. Builds the three plugins first (as scripts/test.sh does),
# timing the JavaScript and Python builds.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-$PWD/target}"
cargo build --release -p notes --target wasm32-wasip2 --quiet
export NOTES_WASM="$target/wasm32-wasip2/release/notes.wasm"
started=$(date +%s.%N)
plugins/py-echo/build.sh "$target/py-plugins" >/dev/null
echo "py-echo build (componentize-py): $(echo "$(date +%s.%N) - $started" | bc) s"
rm -f "$target/js-plugins/js_weather.wasm"
started=$(date +%s.%N)
plugins/examples/js-weather/build.sh "$target/js-plugins"
echo "js-weather build (esbuild + componentize-js): $(echo "$(date +%s.%N) - $started" | bc) s"
export PY_ECHO_WASM="$target/py-plugins/py_echo.wasm" JS_WEATHER_WASM="$target/js-plugins/js_weather.wasm"
cargo bench -p agent-host-bench --bench languages
