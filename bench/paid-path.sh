#!/usr/bin/env bash
# What a paid request costs on our side, apart from the chain: 30 paid requests per network
# (Base on Anvil, Solana on the local Solana chain) and x402 version (1 and 2), each traced,
# split by its spans into the chain's time (node calls, and the waits between them once the
# transaction is sent) and ours (decode and verify, the store, signing, the plugin run, the
# answer).
# The harness is tests/api/bench_paid_path.rs (an ignored test: it needs the suite's local
# chains), built in release here.
# Usage: bench/paid-path.sh   (PAID_PATH_TREE=1 also prints each row's last request as its
#        span tree, chain calls by their method; after scripts/test.sh has prepared the machine: Anvil, the
#        Solana chain helper in SOLANA_CHAIN_BIN or the target dir)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --release --locked -q -p agent-host --test api -- --ignored --exact \
    bench_paid_path::paid_path_cost --nocapture --test-threads 1 2>&1 |
    { grep -vE '^(running|test |$)' || true; }
