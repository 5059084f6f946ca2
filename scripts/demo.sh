#!/usr/bin/env bash
# Sets up and runs agent-host on its embedded defaults: SQLite in ./data, the demo
# account and agent "helper", a printed API key. Extra arguments go to `demo`
# (for example --listen 127.0.0.1:9090).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec cargo run --release --quiet -p agent-host -- demo "$@"
