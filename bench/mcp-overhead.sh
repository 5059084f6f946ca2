#!/usr/bin/env bash
# The MCP endpoint's cost over the keyed execute path, in one run: wrk at 64 connections
# against `POST /v1/agents/helper/commands/hello/execute` and against a `tools/call` of the
# same command (simple_text, a fresh instance per call) at `/mcp/helper`, as a client of the
# 2025-11-25 revision sends it (no session: the server keeps none). Execute runs first and
# last; the ratio is to their mean (target: tool call >= 0.8 of execute).
# Usage: bench/mcp-overhead.sh [SECONDS]   (needs wrk: apt-get install wrk)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
secs="${1:-10}"
command -v wrk >/dev/null || { echo "wrk is required: apt-get install wrk" >&2; exit 1; }
cargo build --release --locked -q -p agent-host
target="${CARGO_TARGET_DIR:-$PWD/target}/release"
scratch_dir
export AGENT_HOST_LOG=warn
serve_demo_agent "$target/agent-host" "$data/host"
pids+=("$server")
execute_lua "$data/execute.lua"
mcp_call_lua "$data/mcp.lua"
reply="$(curl -sf -H "authorization: Bearer $key" -H 'content-type: application/json' \
    -H 'accept: application/json, text/event-stream' -H 'mcp-protocol-version: 2025-11-25' \
    -d '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"hello","arguments":{"name":"Ann"}}}' \
    "$base/mcp/helper")"
case "$reply" in *"Hello, Ann"*) ;; *) echo "the tool call did not answer: $reply" >&2; exit 1 ;; esac

echo "wrk -t1 -c64 -d${secs}s, release build, $(nproc) cores shared by the server and wrk"
wrk_run execute-first "$base/v1/agents/helper/commands/hello/execute" "$data/execute.lua"
wrk_run tool-call "$base/mcp/helper" "$data/mcp.lua"
wrk_run execute-last "$base/v1/agents/helper/commands/hello/execute" "$data/execute.lua"
awk '
    FILENAME ~ /execute-/ { execute += $1 / 2; next }
    { tool = $1 }
    END { printf "tool call / execute: %.2f   (target >= 0.80)\n", tool / execute }
' "$data"/execute-first.res "$data"/execute-last.res "$data"/tool-call.res
