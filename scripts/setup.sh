#!/usr/bin/env bash
# Installs what building and testing agent-host needs on a fresh machine. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
    echo "setup: cargo is required (install Rust with rustup)" >&2
    exit 1
fi
echo "setup: $(cargo --version)"
