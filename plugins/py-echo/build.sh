#!/usr/bin/env bash
# Builds py_echo.wasm from app.py against wit/v0.1.0 with componentize-py (PyPI).
# Usage: plugins/py-echo/build.sh OUT_DIR
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:?usage: build.sh OUT_DIR}"
mkdir -p "$out"
cd "$here"
componentize-py -d ../../wit/v0.1.0 -w command-plugin componentize app -o "$out/py_echo.wasm"
