#!/usr/bin/env bash
# What measuring costs on the keyed execute path, in one run: wrk at 64 connections against
# `POST /v1/agents/helper/commands/hello/execute` (simple_text, a fresh instance per call) on
# two servers of the same build and data: one with nothing measured, one with
# `metrics_listen` set and scraped every second as Prometheus would, and `otlp_endpoint` set
# to a local OTLP sink that takes every export, tracing SAMPLE_RATIO of the requests (0.01 by
# default, as a busy service samples; 1 traces them all). Runs in the order off on on off,
# twice; the ratio is of the sums (target: on >= 0.95 of off).
# Usage: bench/telemetry-overhead.sh [SECONDS] [SAMPLE_RATIO]   (needs wrk: apt-get install wrk)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
secs="${1:-10}"
ratio="${2:-0.01}"
command -v wrk >/dev/null || { echo "wrk is required: apt-get install wrk" >&2; exit 1; }
cargo build --release --locked -q -p agent-host
target="${CARGO_TARGET_DIR:-$PWD/target}/release"
scratch_dir
export AGENT_HOST_LOG=warn
serve_demo_agent "$target/agent-host" "$data/host"
pids+=("$server")
off="$base"
# An OTLP/HTTP sink: answers every export 200 and counts the exports and their bytes.
python3 - "$data/sink" <<'PY' &
import http.server, sys
count = {"exports": 0, "bytes": 0}
class Sink(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        count["exports"] += 1
        count["bytes"] += len(self.rfile.read(int(self.headers["content-length"])))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()
    def do_GET(self):
        body = f'{count["exports"]} {count["bytes"]}'.encode()
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", 0), Sink)
open(sys.argv[1], "w").write(str(server.server_address[1]))
server.serve_forever()
PY
pids+=("$!")
for _ in $(seq 1 50); do [ -s "$data/sink" ] && break; sleep 0.1; done
sink="http://127.0.0.1:$(cat "$data/sink")"
# The same data dir and key, measured: its own listener for the metrics, traces to the sink.
AGENT_HOST_METRICS_LISTEN=127.0.0.1:0 AGENT_HOST_OTLP_ENDPOINT="$sink" AGENT_HOST_OTLP_SAMPLE_RATIO="$ratio" start_server "$target/agent-host" "$data/host"
pids+=("$server")
on="$base"
[ -n "$metrics_url" ] || { echo "the measured server serves no metrics" >&2; exit 1; }
execute_lua "$data/execute.lua"
execute=/v1/agents/helper/commands/hello/execute

echo "wrk -t1 -c64 -d${secs}s, release build, $(nproc) cores shared by the servers and wrk; traced: $ratio of the requests"
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
sleep 6 # the last batch
echo "OTLP exports the sink received, and their bytes: $(curl -sf "$sink/")"
awk '
    FILENAME ~ /off-/ { off += $1; next }
    { on += $1 }
    END { printf "metrics and traces (ratio '"$ratio"') on / off: %.3f   (target >= 0.95)\n", on / off }
' "$data"/off-*.res "$data"/on-*.res
