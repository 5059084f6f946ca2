#!/usr/bin/env bash
# The API against its own OpenAPI document with schemathesis (PyPI) for SECONDS (default 300):
# the suite's schema test (tests/api/schema.rs, 60 s in CI), run longer. The server it runs
# has local chains and a local model behind it. Sets up what it needs like scripts/test.sh.
# Usage: scripts/schemathesis.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
SCHEMATHESIS_SECONDS="${1:-300}" exec scripts/test.sh schema:: -- --nocapture
