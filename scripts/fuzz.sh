#!/usr/bin/env bash
# Runs every fuzz target in fuzz/ for SECONDS each (default 30) with cargo fuzz (libFuzzer).
# A target that fails (a crash, a broken invariant, or a run that cannot start) stops the
# script with a non-zero exit; a crashing input is kept in
# fuzz/artifacts/TARGET/ (replay: cargo fuzz run TARGET fuzz/artifacts/TARGET/crash-...).
#
# cargo fuzz passes nightly-only compiler flags; this machine has one stable toolchain and
# no other can be fetched, so RUSTC_BOOTSTRAP=1 lets stable accept them. Targets run without
# a sanitizer (-s none): the code under test is safe Rust, and libFuzzer's coverage and the
# targets' own invariants are what find the bugs. Installs cargo-fuzz when it is missing.
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-30}"
shift || true
# Not a crate of the workspace: CI's Clippy wrapper must not reach it.
unset RUSTC_WORKSPACE_WRAPPER CLIPPY_ARGS
if ! cargo fuzz --version 2>/dev/null | grep -q '0.13.2'; then
    cargo install cargo-fuzz --locked --version 0.13.2
fi
export RUSTC_BOOTSTRAP=1
build="${CARGO_TARGET_DIR:-$PWD/target}/fuzz"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(cargo fuzz list --fuzz-dir fuzz)
fi
# Short runs (CI's ten seconds a target) build in the dev profile: half the build time of
# an optimized one, and a short run finds what it finds either way. Longer runs build
# optimized, for more inputs a second.
profile=()
[ "$secs" -ge 60 ] || profile=(--dev)
cargo fuzz build "${profile[@]}" -s none --fuzz-dir fuzz --target-dir "$build"
# The components the host builds are seeds for inspection.
plugins="${CARGO_TARGET_DIR:-$PWD/target}/wasm-plugins"
summary=()
for target in "${targets[@]}"; do
    corpus="fuzz/corpus/$target"
    mkdir -p "$corpus" "fuzz/seeds/$target"
    rm -rf "fuzz/artifacts/$target" # each run reports what it finds itself
    max_len=4096
    # Replies split at Telegram's 4,096 characters: the inputs must be able to pass it.
    [ "$target" = telegram_update ] && max_len=20000
    if [ "$target" = component_inspect ]; then
        # Compiling a component under coverage instrumentation costs about 30 ms a kilobyte
        # here: the 350 KB probe plugin alone takes 11 s idle and passed libFuzzer's 20 s
        # timeout on a loaded machine. The smaller plugins reach the same checks.
        find "$plugins/wasm32-wasip2/plugin" "$plugins/components" -maxdepth 1 -name '*.wasm' -size -200000c \
            -exec cp -n {} "$corpus"/ \; 2>/dev/null || true
        find "$corpus" -size +200000c -delete
        max_len=200000
    fi
    echo "fuzz: $target for ${secs}s"
    log="$build/$target.log"
    status=0
    cargo fuzz run "${profile[@]}" -s none --fuzz-dir fuzz --target-dir "$build" "$target" "$corpus" "fuzz/seeds/$target" -- \
        -max_total_time="$secs" -max_len="$max_len" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
        >"$log" 2>&1 || status=$?
    grep -E '^(==|SUMMARY|Test unit written|thread .* panicked|Failed)' "$log" || true
    # Any failing run fails the script, with or without a crash file: a target that cannot
    # start, a corpus it cannot read or a libFuzzer error would otherwise pass unseen.
    if [ "$status" -ne 0 ]; then
        tail -n 40 "$log" >&2
        echo "fuzz: $target failed (exit $status); artifacts, if any: fuzz/artifacts/$target/" >&2
        exit 1
    fi
    if find "fuzz/artifacts/$target" -name 'crash-*' -o -name 'oom-*' -o -name 'timeout-*' 2>/dev/null | grep -q .; then
        echo "fuzz: $target found an input that breaks it: fuzz/artifacts/$target/" >&2
        exit 1
    fi
    executed=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    if [ -z "$executed" ] || [ "$executed" -eq 0 ]; then
        tail -n 40 "$log" >&2
        echo "fuzz: $target ran no input" >&2
        exit 1
    fi
    summary+=("$(printf '%-24s %10s executions in %ss' "$target" "$executed" "$secs")")
done
echo "fuzz: executions per target"
printf '  %s\n' "${summary[@]}"
