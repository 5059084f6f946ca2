#!/usr/bin/env bash
# Sets up and runs agent-host on its embedded defaults: SQLite in ./data, the demo
# account and agent "helper", a printed API key, and the embedded chat and embedding models
# (offline).
# Extra arguments go to `demo` (for example --listen 127.0.0.1:9090).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
mkdir -p data/models
ln -sf "$(scripts/model-path.sh)" data/models/smollm2-135m-instruct.gguf
ln -sfn "$(scripts/embedding-model-path.sh)" data/models/all-MiniLM-L6-v2
exec cargo run --release --quiet -p agent-host -- demo "$@"
