#!/usr/bin/env bash
# What measuring costs on the keyed execute path, in one run: wrk at 64 connections against
# `POST /v1/agents/helper/commands/hello/execute` (simple_text, a fresh instance per call) on
# two servers of the same build and data: one with nothing measured, one with
# `metrics_listen` set and scraped every second as Prometheus would. Runs in the order
# off on on off, twice; the ratio is of the sums (target: on >= 0.95 of off).
# Usage: bench/telemetry-overhead.sh [SECONDS]   (needs wrk: apt-get install wrk)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
secs="${1:-10}"
command -v wrk >/dev/null || { echo "wrk is required: apt-get install wrk" >&2; exit 1; }
cargo build --release --locked -q -p agent-host
target="${CARGO_TARGET_DIR:-$PWD/target}/release"
data="$(mktemp -d)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$data"
}
trap cleanup EXIT
export AGENT_HOST_LOG=warn
serve_demo_agent "$target/agent-host" "$data/host"
pids+=("$server")
off="$base"
# The same data dir and key, measured: its own listener for the metrics.
AGENT_HOST_METRICS_LISTEN=127.0.0.1:0 start_server "$target/agent-host" "$data/host"
pids+=("$server")
on="$base"
[ -n "$metrics_url" ] || { echo "the measured server serves no metrics" >&2; exit 1; }
execute_lua "$data/execute.lua"
execute=/v1/agents/helper/commands/hello/execute

echo "wrk -t1 -c64 -d${secs}s, release build, $(nproc) cores shared by the servers and wrk"
# Both warmed up first (instance pools, caches), then measured in turns. The measured
# server is scraped every second throughout, as Prometheus would.
wrk -t1 -c64 -d3s -H "x-api-key: $key" -s "$data/execute.lua" "$off/v1/agents/helper/commands/hello/execute" >/dev/null
wrk -t1 -c64 -d3s -H "x-api-key: $key" -s "$data/execute.lua" "$on/v1/agents/helper/commands/hello/execute" >/dev/null
( while sleep 1; do curl -sf -o /dev/null -H 'accept: application/openmetrics-text' "$metrics_url" || true; done ) &
pids+=("$!")
# ABBA: off on on off, twice, so that a drift of the machine falls on both alike.
for round in 1 2; do
    wrk_run "off-${round}a" "$off$execute" "$data/execute.lua"
    wrk_run "on-${round}a" "$on$execute" "$data/execute.lua"
    wrk_run "on-${round}b" "$on$execute" "$data/execute.lua"
    wrk_run "off-${round}b" "$off$execute" "$data/execute.lua"
done
runs="$(curl -sf "$metrics_url" | awk '/^agent_host_plugin_runs_total/ {n += $NF} END {print n + 0}')"
echo "runs the measured server counted: $runs"
awk '
    FILENAME ~ /off-/ { off += $1; next }
    { on += $1 }
    END { printf "metrics on / off: %.3f   (target >= 0.95)\n", on / off }
' "$data"/off-*.res "$data"/on-*.res
