#!/usr/bin/env bash
# Runs every fuzz target in fuzz/ for SECONDS each (default 30) under libFuzzer. A target that
# fails (a crash, a broken invariant, or a run that cannot start) stops the script with a
# non-zero exit; a crashing input is kept in fuzz/artifacts/TARGET/.
#
# Short runs (under 60 s: CI's ten seconds a target) build the targets in the workspace with
# the dependencies the tests' build compiled, instrumenting only the host and the targets
# (scripts/fuzz-rustc): about two minutes of building where cargo fuzz's own build of
# everything took eleven on a fresh machine; they replay the corpus and try fresh inputs
# guided by our parsers' branches. Longer runs use cargo fuzz, everything instrumented and
# optimized, in a target dir of its own. cargo fuzz passes nightly-only compiler flags; this
# machine has one stable toolchain and no other can be fetched, so RUSTC_BOOTSTRAP=1 lets
# stable accept them. No sanitizer (-s none): the code under test is safe Rust, and
# libFuzzer's coverage and the targets' own invariants are what find the bugs. Installs
# cargo-fuzz when it is missing.
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-30}"
shift || true
# CI's Clippy wrapper is not for these builds: the short runs set their own below.
unset RUSTC_WORKSPACE_WRAPPER CLIPPY_ARGS
target_dir="${CARGO_TARGET_DIR:-$PWD/target}"
build="$target_dir/fuzz"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(sed -n 's/^name = "\(.*\)"$/\1/p' fuzz/Cargo.toml | grep -v '^agent-host-fuzz$')
fi
if [ "$secs" -lt 60 ]; then
    RUSTC_WORKSPACE_WRAPPER="$PWD/scripts/fuzz-rustc" cargo build --locked -p agent-host-fuzz --bins
    # What `cargo fuzz run` does: libFuzzer's own main, the corpus folders, crashes kept.
    fuzz_run() {
        "$target_dir/debug/$target" -artifact_prefix="fuzz/artifacts/$target/" "$@"
    }
else
    if ! cargo fuzz --version 2>/dev/null | grep -q '0.13.2'; then
        cargo install cargo-fuzz --locked --version 0.13.2
    fi
    export RUSTC_BOOTSTRAP=1
    cargo fuzz build -s none --fuzz-dir fuzz --target-dir "$build"
    fuzz_run() { # CORPUS SEEDS LIBFUZZER-ARGS...
        cargo fuzz run -s none --fuzz-dir fuzz --target-dir "$build" "$target" "$1" "$2" -- "${@:3}"
    }
fi
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
    mkdir -p "fuzz/artifacts/$target" "$build"
    fuzz_run "$corpus" "fuzz/seeds/$target" \
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
