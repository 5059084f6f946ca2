#!/usr/bin/env bash
# One plugin per language on the same host (bench/benches/languages.rs): size, the host's
# compile, instantiate + execute. Builds the Python and JavaScript plugins first (as
# scripts/test.sh does), timing their builds; the Rust one comes with the host's build.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-$PWD/target}"
# The Rust plugin as the host's build makes it (host/build.rs, the `plugin` profile).
export NOTES_WASM="$target/wasm-plugins/wasm32-wasip2/plugin/notes.wasm"
started=$(date +%s%N)
rm -f "$target/py-plugins/py_echo.wasm"
plugins/py-echo/build.sh "$target/py-plugins" >/dev/null
echo "py-echo build (componentize-py): $(( ($(date +%s%N) - started) / 1000000 )) ms"
rm -f "$target/js-plugins/js_weather.wasm"
started=$(date +%s%N)
plugins/examples/js-weather/build.sh "$target/js-plugins"
echo "js-weather build (esbuild + componentize-js): $(( ($(date +%s%N) - started) / 1000000 )) ms"
export PY_ECHO_WASM="$target/py-plugins/py_echo.wasm" JS_WEATHER_WASM="$target/js-plugins/js_weather.wasm"
cargo bench -p agent-host-bench --bench languages
