#!/usr/bin/env bash
# What a paid request costs on our side, apart from the chain: 30 paid requests per network
# (Base on Anvil, Solana on the local Solana chain) and x402 version (1 and 2), each traced,
# split by its spans into the chain's time (node calls, and the waits between them once the
# transaction is sent) and ours (decode and verify, the store, signing, the plugin run, the
# answer).
# The harness is the end-to-end test tests/api/paid_traces.rs (it needs the suite's local
# chains; the suite pays 2 requests of each kind), built in release here with 30.
# Usage: bench/paid-path.sh   (PAID_PATH_TREE=1 also prints each row's last request as its
#        span tree; run scripts/test.sh once first: it prepares Anvil and the Solana chain)
set -euo pipefail
cd "$(dirname "$0")/.."
PAID_PATH_REQUESTS="${PAID_PATH_REQUESTS:-30}" cargo test --release --locked -q -p agent-host --test api -- --exact \
    paid_traces::a_paid_requests_trace_tells_the_chains_time_from_ours --nocapture --test-threads 1 2>&1 |
    { grep -vE '^(running|test |\.+$|$)' || true; }
