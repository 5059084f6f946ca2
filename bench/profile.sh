#!/usr/bin/env bash
# Where a keyed request's CPU goes: loads one endpoint of a release server with wrk (64
# connections) while `perf` samples the server, then prints the hottest functions (self
# time, and with their callees) as shares of the server's CPU. Divide by the requests
# served (printed) for microseconds per request. Release builds have no debug info; perf
# unwinds through .eh_frame, which they keep.
# BIN=<binary> profiles that binary instead of this tree's (an older commit's, to compare).
# Usage: bench/profile.sh [execute|list|health|mcp] [SECONDS]   (needs perf and wrk;
#        KEEP_PERF=FILE keeps the samples for perf report)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
what="${1:-execute}"
secs="${2:-8}"
command -v perf >/dev/null || { echo "perf is required: apt-get install linux-perf" >&2; exit 1; }
[ -n "${BIN:-}" ] || cargo build --release --locked -q -p agent-host
bin="${BIN:-${CARGO_TARGET_DIR:-$PWD/target}/release/agent-host}"
data="$(mktemp -d)"
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$data"' EXIT
export AGENT_HOST_LOG=warn
serve_demo_agent "$bin" "$data"
execute_lua "$data/post.lua"
case "$what" in
execute) args=(-s "$data/post.lua" "$base/v1/agents/helper/commands/hello/execute") ;;
list) args=("$base/v1/agents/helper/commands") ;;
health) args=("$base/health") ;;
mcp)
    mcp_call_lua "$data/mcp.lua"
    args=(-H "authorization: Bearer $key" -s "$data/mcp.lua" "$base/mcp/helper")
    ;;
*) echo "execute, list, health or mcp" >&2; exit 2 ;;
esac
wrk -t1 -c64 -d2s -H "x-api-key: $key" "${args[@]}" >/dev/null # warm up
# The server's CPU time (user + system, in clock ticks) over the whole measured run.
ticks() { awk '{print $14 + $15}' "/proc/$server/stat"; }
before="$(ticks)"
wrk -t1 -c64 -d"$((secs + 2))s" -H "x-api-key: $key" "${args[@]}" > "$data/wrk.txt" &
load=$!
sleep 1
perf record -F 499 -g --call-graph dwarf,16384 -o "$data/perf.data" -p "$server" -- sleep "$secs" 2>/dev/null >/dev/null
wait "$load"
after="$(ticks)"
grep -E "Requests/sec" "$data/wrk.txt"
requests="$(awk '/requests in/ {print $1}' "$data/wrk.txt")"
awk -v t="$((after - before))" -v hz="$(getconf CLK_TCK)" -v n="$requests" \
    'BEGIN { printf "server CPU per request: %.1f us (%d requests)\n", t / hz * 1e6 / n, n }'
report() { perf report -i "$data/perf.data" --sort symbol --stdio -g none "$@" 2>/dev/null |
    grep -E '^ +[0-9.]+%' | sed -E 's/ +-? +-? *$//; s/ +/ /g' | cut -c1-160; }
echo "--- self time"
report --no-children | head -40 || true
echo "--- with callees"
report --children | head -70 || true
echo "--- by part of the request (a sample counts in the first part its stack shows)"
perf script -i "$data/perf.data" 2>/dev/null | python3 -c '
import sys
parts = [
    ("database reads (blocking pool, SQLite or PostgreSQL)", ["rusqlite", "tokio_postgres", "Sqlite>::read", "Postgres>::read", "blocking::pool::Spawner"]),
    ("plugin: instantiate", ["instantiate_async"]),
    ("plugin: drop the instance", ["drop_in_place<wasmtime::runtime::store::StoreOpaque>"]),
    ("plugin: the call and the rest of the run", ["services::commands::execute", "PluginRuntime"]),
    ("key check and rate limit", ["guard::check_key", "keys::authenticate", "RateLimiter::check"]),
    ("JSON in and out", ["serde_json", "serde_path_to_error"]),
    ("HTTP: hyper and the socket", ["hyper::", "tokio::net::tcp", "writev", "readv", "recvfrom", "sendto"]),
]
counts = {name: 0 for name, _ in parts}
total = 0
for stack in sys.stdin.read().split("\n\n"):
    if not stack.strip():
        continue
    total += 1
    for name, markers in parts:
        if any(m in stack for m in markers):
            counts[name] += 1
            break
for name, _ in parts:
    print(f"{100 * counts[name] / max(total, 1):5.1f}%  {name}")
print(f"{100 * (total - sum(counts.values())) / max(total, 1):5.1f}%  other (runtime, scheduling, allocator, kernel)")
'
if [ -n "${KEEP_PERF:-}" ]; then cp "$data/perf.data" "$KEEP_PERF"; fi
