#!/usr/bin/env bash
# Allocations per request of `GET /health`, the command list and an execute, for each binary
# given (this tree's release build by default): a uprobe on glibc's malloc counts them while
# wrk (8 connections, 2 s) loads the server. Unlike req/s, the count does not move with the
# machine, so it compares commits measured on different days; a layer added to every route
# shows as a step in it.
# Usage: bench/allocations.sh [BINARY...]   (needs perf with uprobes, and wrk; run as root.
#        DEMO_AGENT=<manifest> for an older binary that refuses today's demo manifest)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
command -v perf >/dev/null || { echo "perf is required: apt-get install linux-perf" >&2; exit 1; }
command -v wrk >/dev/null || { echo "wrk is required: apt-get install wrk" >&2; exit 1; }
if [ $# -eq 0 ]; then
    cargo build --release --locked -q -p agent-host
    set -- "${CARGO_TARGET_DIR:-$PWD/target}/release/agent-host"
fi
libc="$(ldconfig -p | awk '/libc\.so\.6 .*x86-64/ {print $NF; exit}')"
perf probe -q -x "$libc" malloc 2>/dev/null || true
scratch_dir
export AGENT_HOST_LOG=warn
execute_lua "$data/post.lua"
for bin in "$@"; do
    dir="$(mktemp -d -p "$data")"
    serve_demo_agent "$bin" "$dir" 2>/dev/null
    pids+=("$server")
    line="$(basename "$bin")"
    for endpoint in health list execute; do
        case "$endpoint" in
        health) args=("$base/health") ;;
        list) args=("$base/v1/agents/helper/commands") ;;
        execute) args=(-s "$data/post.lua" "$base/v1/agents/helper/commands/hello/execute") ;;
        esac
        wrk -t1 -c8 -d1s -H "x-api-key: $key" "${args[@]}" >/dev/null # warm up
        perf stat -e probe_libc:malloc -x, -o "$data/stat.txt" -p "$server" -- \
            wrk -t1 -c8 -d2s -H "x-api-key: $key" "${args[@]}" > "$data/wrk.txt"
        requests="$(awk '/requests in/ {print $1}' "$data/wrk.txt")"
        mallocs="$(awk -F, '/malloc/ {print $1}' "$data/stat.txt")"
        line="$line  $endpoint $(awk -v m="$mallocs" -v n="$requests" 'BEGIN { printf "%.1f", m / n }')"
    done
    echo "$line   (allocations per request)"
    kill "$server"
done
