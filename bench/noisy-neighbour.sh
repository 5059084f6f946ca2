#!/usr/bin/env bash
# A cheap command's latency while another tenant runs the worst plugins we have: wrk on one
# tenant's `simple_text` execute (8 connections), first alone, then while a second tenant
# keeps 24 hostile runs going at once (busy loops to their deadline, memory bombs, progress
# floods in long jobs, 4 MiB outputs), all on the same server.
# Usage: bench/noisy-neighbour.sh [SECONDS]   (needs wrk: apt-get install wrk)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
secs="${1:-20}"
command -v wrk >/dev/null || { echo "wrk is required: apt-get install wrk" >&2; exit 1; }
cargo build --release --locked -q -p agent-host
target="${CARGO_TARGET_DIR:-$PWD/target}"
bin="$target/release/agent-host"
probe="$target/wasm-plugins/wasm32-wasip2/plugin/probe.wasm"
data="$(mktemp -d)"
pids=()
trap 'kill "${pids[@]}" "$server" 2>/dev/null || true; rm -rf "$data"' EXIT
export AGENT_HOST_LOG=error
cli() { "$bin" --data-dir "$data" "$@"; }
cli account create quiet --plan enterprise --rpm 1000000000 --rpd 1000000000 >/dev/null
cli account create hostile --plan enterprise --rpm 1000000000 --rpd 1000000000 >/dev/null
quiet="$(cli key create --account quiet 2>/dev/null)"
hostile="$(cli key create --account hostile 2>/dev/null)"
cli agent apply examples/helper.toml --account quiet >/dev/null
cat > "$data/hostile.toml" <<TOML
username = "hostile"
name = "Hostile"

[[commands]]
command = "burn"
handler_type = "custom"
plugin = "$probe"
timeout_ms = 5000

[[commands]]
command = "flood"
handler_type = "custom"
plugin = "$probe"
long_running = true
timeout_ms = 30000
TOML
cli agent apply "$data/hostile.toml" --account hostile >/dev/null
start_server "$bin" "$data"
execute_lua "$data/post.lua"

measure() { # label
    wrk -t1 -c8 -d"${secs}s" --latency -H "x-api-key: $quiet" -s "$data/post.lua" \
        "$base/v1/agents/helper/commands/hello/execute" > "$data/wrk.txt"
    printf '%-22s %8s req/s   p50 %8s   p90 %8s   p99 %8s   non-2xx %s\n' "$1" \
        "$(awk '/Requests\/sec/ {print $2}' "$data/wrk.txt")" \
        "$(awk '$1 == "50%" {print $2}' "$data/wrk.txt")" \
        "$(awk '$1 == "90%" {print $2}' "$data/wrk.txt")" \
        "$(awk '$1 == "99%" {print $2}' "$data/wrk.txt")" \
        "$(awk '/Non-2xx/ {print $5}' "$data/wrk.txt")"
}

hostile_loop() { # command, parameters JSON, pause: one hostile run after another
    while true; do
        curl -s -o /dev/null -H "x-api-key: $hostile" -H 'content-type: application/json' \
            -d "{\"parameters\":$2}" "$base/v1/agents/hostile/commands/$1/execute" || sleep 0.1
        sleep "$3"
    done
}

echo "wrk -t1 -c8 -d${secs}s on the quiet tenant's simple_text execute (release build, $(nproc) cores)"
measure "alone"
for _ in $(seq 6); do hostile_loop burn '{"mode":"loop"}' 0 & pids+=($!); done
for _ in $(seq 6); do hostile_loop burn '{"mode":"memory"}' 0 & pids+=($!); done
for _ in $(seq 6); do hostile_loop burn '{"mode":"huge_output","n":4194304}' 0 & pids+=($!); done
# Jobs answer at once: a new one every 2 s per loop, each flooding progress for 25 s.
for _ in $(seq 6); do hostile_loop flood '{"mode":"progress_flood","n":25000}' 2 & pids+=($!); done
sleep 2
measure "beside 24 hostile runs"
echo "server threads: $(awk '/Threads/ {print $2}' /proc/$server/status), RSS: $(awk '/VmRSS/ {print $2, $3}' /proc/$server/status)"
