#!/usr/bin/env bash
# Two release binaries (an older commit's and this one's) alternated in one run, who goes
# first alternating too round by round: the keyed execute and an MCP `tools/call`
# (2025-11-25, the direct path) of the demo agent's `hello`, wrk at 64 connections per
# figure, ROUNDS rounds. Both serve the same agent: the manifest DEMO_AGENT names (the
# older commit's, which both binaries read).
# Usage: DEMO_AGENT=old-helper.toml bench/mcp-ab.sh OLD_BINARY NEW_BINARY [SECONDS] [ROUNDS]
#   (needs wrk: apt-get install wrk)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
old="$1" new="$2" secs="${3:-8}" rounds="${4:-3}"
command -v wrk >/dev/null || { echo "wrk is required: apt-get install wrk" >&2; exit 1; }
scratch_dir
export AGENT_HOST_LOG=warn
execute_lua "$data/execute.lua"
mcp_call_lua "$data/mcp.lua"
for round in $(seq 1 "$rounds"); do
    # Who goes first alternates: the second server of a round meets a warmer machine.
    order=("$old" "$new")
    if ((round % 2 == 0)); then order=("$new" "$old"); fi
    for bin in "${order[@]}"; do
        name="$(basename "$bin")-$round"
        serve_demo_agent "$bin" "$data/$name"
        wrk_run "$name-exec" "$base/v1/agents/helper/commands/hello/execute" "$data/execute.lua"
        wrk_run "$name-tool" "$base/mcp/helper" "$data/mcp.lua"
        kill "$server"
        wait "$server" 2>/dev/null || true
    done
done
