#!/usr/bin/env bash
# Sets up and runs the whole test suite: unit tests and the end-to-end tests in tests/,
# which run the real binary over HTTP on 127.0.0.1 against SQLite files in temp dirs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo test --workspace --locked "$@"
