#!/usr/bin/env bash
# HTTP load: `POST .../commands/hello/execute` (a simple_text command, one fresh WASM
# instance per call) against the cheapest authenticated endpoint of the same server
# (`GET .../commands`, which does the same key check, rate limit and agent lookup), in one
# run, with wrk at 64 connections. Prints both and their ratios.
# Usage: bench/http-load.sh [SECONDS]   (needs wrk: apt-get install wrk)
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-10}"
command -v wrk >/dev/null || { echo "wrk is required: apt-get install wrk" >&2; exit 1; }
cargo build --release --locked -q -p agent-host
bin="${CARGO_TARGET_DIR:-$PWD/target}/release/agent-host"
data="$(mktemp -d)"
trap 'kill "$server" 2>/dev/null || true; rm -rf "$data"' EXIT
export AGENT_HOST_LOG=warn
"$bin" --data-dir "$data" account create bench --plan enterprise --rpm 1000000000 --rpd 1000000000 >/dev/null
key="$("$bin" --data-dir "$data" key create --account bench 2>/dev/null)"
"$bin" --data-dir "$data" agent apply examples/helper.toml --account bench >/dev/null
"$bin" --data-dir "$data" --json serve --listen 127.0.0.1:0 > "$data/ready" &
server=$!
for _ in $(seq 1 100); do [ -s "$data/ready" ] && break; sleep 0.1; done
base="$(sed -E 's/.*"(http:[^"]+)".*/\1/' "$data/ready")"
curl -sf -H "x-api-key: $key" -H 'content-type: application/json' -d '{"parameters":{"name":"Ann"}}' \
    "$base/v1/agents/helper/commands/hello/execute" >/dev/null
cat > "$data/post.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"parameters":{"name":"Ann"}}'
wrk.headers["content-type"] = "application/json"
LUA

run() { # name, extra wrk args...
    local name="$1"; shift
    wrk -t1 -c64 -d"${secs}s" --latency -H "x-api-key: $key" "$@" > "$data/$name.txt"
    local rps p50 p99
    rps="$(awk '/Requests\/sec/ {print $2}' "$data/$name.txt")"
    p50="$(awk '$1 == "50%" {print $2}' "$data/$name.txt")"
    p99="$(awk '$1 == "99%" {print $2}' "$data/$name.txt")"
    errors="$(awk '/Non-2xx/ {print $5}' "$data/$name.txt")"
    printf '%-10s %10s req/s   p50 %8s   p99 %8s   non-2xx %s\n' "$name" "$rps" "$p50" "$p99" "${errors:-0}"
    echo "$rps" > "$data/$name.rps"
}
echo "wrk -t1 -c64 -d${secs}s against $base (release build, $(nproc) cores shared by server and wrk)"
run list "$base/v1/agents/helper/commands"
run execute -s "$data/post.lua" "$base/v1/agents/helper/commands/hello/execute"
awk -v a="$(cat "$data/execute.rps")" -v b="$(cat "$data/list.rps")" \
    'BEGIN { printf "execute / list throughput: %.2f (target >= 0.80)\n", a / b }'
