#!/usr/bin/env bash
# Sets up and runs the whole test suite: unit tests and the end-to-end tests in tests/,
# which run the real binary over HTTP on 127.0.0.1 against SQLite files in temp dirs,
# with real WebAssembly components built from plugins/ (Rust, and Python via componentize-py).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
target="${CARGO_TARGET_DIR:-$PWD/target}"
plugins/py-echo/build.sh "$target/py-plugins" >/dev/null
export PY_ECHO_WASM="$target/py-plugins/py_echo.wasm"
export SMOLLM2_GGUF="$(scripts/model-path.sh)"
cargo test --locked -p agent-host -p agent-plugin-sdk "$@"
