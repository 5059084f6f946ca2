#!/usr/bin/env bash
# What idle keep-alive connections cost a host: its RSS, and keyed execute's throughput (wrk,
# 64 connections), quiet before and after, and while IDLE connections (default 10,000, from 50 loopback
# addresses) that each made one request are held open by bench/flood.py in a process of its
# own. With BASELINE (an older release binary), that binary is measured the same way in the
# same run, before this tree's; CANDIDATE=<binary> measures that binary in place of this
# tree's.
# Usage: bench/idle-connections.sh [IDLE] [SECONDS] [BASELINE]   (needs wrk)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
idle="${1:-10000}"
secs="${2:-8}"
baseline="${3:-}"
command -v wrk >/dev/null || { echo "wrk is required: apt-get install wrk" >&2; exit 1; }
[ -n "${CANDIDATE:-}" ] || cargo build --release --locked -q -p agent-host
# The server holds one end of every connection, flood.py the other.
ulimit -n "$(ulimit -Hn)"
scratch_dir
export AGENT_HOST_LOG=warn
execute_lua "$data/execute.lua"
rss_mib() { awk '/^VmRSS:/ {printf "%.1f", $2 / 1024}' "/proc/$server/status"; }
open_connections() {
    curl -sf "$metrics_url" | awk '/^http_server_open_connections / {print $2}'
}

# Measures the binary $2 (named $1): quiet, then under the flood.
measure() {
    local who="$1" bin="$2" dir="$data/$1"
    mkdir -p "$dir"
    AGENT_HOST_METRICS_LISTEN=127.0.0.1:0 serve_demo_agent "$bin" "$dir"
    pids+=("$server")
    local url="$base/v1/agents/helper/commands/hello/execute"
    wrk_run "$who-warm" "$url" "$data/execute.lua" >/dev/null
    local quiet_rss
    quiet_rss="$(rss_mib)"
    wrk_run "$who-quiet" "$url" "$data/execute.lua"
    python3 bench/flood.py "${base#http://}" "$idle" 0 keepalive > "$data/flood.out" &
    local flood=$!
    pids+=("$flood")
    for _ in $(seq 1 600); do grep -q open "$data/flood.out" 2>/dev/null && break; sleep 0.5; done
    grep -q open "$data/flood.out" || { echo "the flood did not open its connections" >&2; exit 1; }
    sleep 2
    local held_rss held
    held_rss="$(rss_mib)"
    held="$(open_connections || echo '?')"
    wrk_run "$who-held" "$url" "$data/execute.lua"
    kill "$flood"
    wait "$flood" 2>/dev/null || true
    sleep 2
    # Quiet again: the machine drifts within a run, so the held figure is set against both.
    wrk_run "$who-after" "$url" "$data/execute.lua"
    echo "$who: RSS $quiet_rss MiB quiet, $held_rss MiB with $idle idle keep-alive connections" \
        "($held open), $(awk -v a="$quiet_rss" -v b="$held_rss" -v n="$idle" \
            'BEGIN {printf "%.1f KiB", (b - a) * 1024 / n}') each;" \
        "execute $(awk -v q="$(cat "$data/$who-quiet.res")" -v h="$(cat "$data/$who-held.res")" \
            -v a="$(cat "$data/$who-after.res")" 'BEGIN {printf "%.3f", 2 * h / (q + a)}') of quiet" \
        "(the mean of before and after)"
    kill "$server"
    wait "$server" 2>/dev/null || true
}

echo "agent-host with $idle idle keep-alive connections, $secs s per wrk run, $(nproc) cores"
[ -z "$baseline" ] || measure baseline "$baseline"
measure candidate "${CANDIDATE:-${CARGO_TARGET_DIR:-$PWD/target}/release/agent-host}"
