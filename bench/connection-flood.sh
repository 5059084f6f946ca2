#!/usr/bin/env bash
# A paid request (Base, on the suite's local Anvil) and a keyed execute, measured quiet and
# then while 10,000 idle connections (from 50 loopback addresses, reopened whenever the
# server closes them) and a 100-connection slowloris are held against the same host by
# bench/flood.py, a process of its own: p50 and p99 of each, both ways. The harness is the end-to-end test
# connections::paid_and_keyed_requests_are_answered_under_a_connection_flood (300 idle
# connections in the suite), built in release here.
# Usage: bench/connection-flood.sh [IDLE] [SAMPLES]   (defaults 10000 and 100; run
#        scripts/test.sh once first: it prepares Anvil)
set -euo pipefail
cd "$(dirname "$0")/.."
# The test process holds the flood's client ends, the server the other ends.
ulimit -n "$(ulimit -Hn)"
FLOOD_IDLE="${1:-10000}" FLOOD_SAMPLES="${2:-100}" cargo test --release --locked -q -p agent-host --test api -- --exact \
    connections::paid_and_keyed_requests_are_answered_under_a_connection_flood --nocapture --test-threads 1 2>&1 |
    { grep -vE '^(running|test |\.+$|$)' || true; }
