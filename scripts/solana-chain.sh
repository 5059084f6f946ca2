#!/usr/bin/env bash
# Builds the end-to-end suite's local Solana chain (tests/solana-chain: Surfpool, with its own
# lock file and target dir) and prints the binary's path. About 12 minutes of two cores the
# first time, seconds after.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-$PWD/target}/solana-chain"
# Not a crate of the workspace: CI's Clippy wrapper must not reach it.
unset RUSTC_WORKSPACE_WRAPPER CLIPPY_ARGS
cargo build --locked --quiet --manifest-path tests/solana-chain/Cargo.toml --target-dir "$target" >&2
echo "$target/debug/solana-chain"
