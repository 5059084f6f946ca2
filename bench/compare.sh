#!/usr/bin/env bash
# Two agent-host release binaries in one run, alternated: the previous main's (BASELINE) and
# this tree's (or CANDIDATE), each serving the demo agent in turn for `GET /health`, the
# command list and an execute of `hello` (wrk, 64 connections, SECONDS each), ROUNDS times.
# Prints every round and then each endpoint's median req/s and p99 per binary, and the
# candidate's change. Only figures from one such run compare: the machine's speed drifts
# between runs more than the changes measured here.
# Build a baseline: git worktree add /tmp/base <commit>; (cd /tmp/base && cargo build
#   --release -p agent-host); cp "$CARGO_TARGET_DIR/release/agent-host" /var/tmp/agent-host-base
# Usage: bench/compare.sh BASELINE [CANDIDATE] [SECONDS] [ROUNDS]   (needs wrk)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
baseline="${1:?usage: bench/compare.sh BASELINE [CANDIDATE] [SECONDS] [ROUNDS]}"
candidate="${2:-}"
secs="${3:-8}"
rounds="${4:-3}"
command -v wrk >/dev/null || { echo "wrk is required: apt-get install wrk" >&2; exit 1; }
if [ -z "$candidate" ]; then
    cargo build --release --locked -q -p agent-host
    candidate="${CARGO_TARGET_DIR:-$PWD/target}/release/agent-host"
fi
scratch_dir
export AGENT_HOST_LOG=warn
execute_lua "$data/post.lua"

# One round of one binary: its three endpoints, each a line "<binary> <endpoint> rps p99_ms".
measure() {
    local name="$1" bin="$2" dir
    dir="$(mktemp -d -p "$data")"
    serve_demo_agent "$bin" "$dir"
    pids+=("$server")
    curl -sf -H "x-api-key: $key" -H 'content-type: application/json' -d '{"parameters":{"name":"Ann"}}' \
        "$base/v1/agents/helper/commands/hello/execute" >/dev/null
    for endpoint in health list execute; do
        local args=("$base/health")
        [ "$endpoint" = list ] && args=("$base/v1/agents/helper/commands")
        [ "$endpoint" = execute ] && args=(-s "$data/post.lua" "$base/v1/agents/helper/commands/hello/execute")
        wrk -t1 -c64 -d"${secs}s" --latency -H "x-api-key: $key" "${args[@]}" > "$dir/$endpoint.txt"
        awk -v who="$name" -v what="$endpoint" '
            /Requests\/sec/ { rps = $2 }
            $1 == "99%" { v = $2; n = v + 0; if (v ~ /us$/) n /= 1000; else if (v ~ /ms$/) n *= 1; else if (v ~ /s$/) n *= 1000; p99 = n }
            /Non-2xx/ { bad = $5 }
            END { if (bad > 0) { print "non-2xx answers from " who " " what > "/dev/stderr"; exit 1 }
                  printf "%s %s %d %.2f\n", who, what, rps, p99 }' "$dir/$endpoint.txt"
    done
    kill "$server"
    wait "$server" 2>/dev/null || true
}

echo "wrk -t1 -c64 -d${secs}s, $rounds rounds alternated, $(nproc) cores shared by the server and wrk"
for round in $(seq 1 "$rounds"); do
    # Who goes first alternates too: the machine warms up within a round.
    if [ $((round % 2)) -eq 1 ]; then order=(baseline candidate); else order=(candidate baseline); fi
    for who in "${order[@]}"; do
        bin="$baseline"
        [ "$who" = candidate ] && bin="$candidate"
        measure "$who" "$bin" | tee -a "$data/all.txt" | sed "s/^/round $round: /"
    done
done
awk '
    { rps[$1" "$2] = rps[$1" "$2] " " $3; p99[$1" "$2] = p99[$1" "$2] " " $4 }
    function median(list,   a, n, i, j, t) {
        n = split(list, a, " ")
        for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    END {
        printf "%-8s %14s %14s %8s %12s %12s\n", "median", "baseline req/s", "candidate", "change", "p99 base ms", "candidate"
        split("health list execute", order, " ")
        for (i = 1; i <= 3; i++) {
            e = order[i]; b = median(rps["baseline " e]); c = median(rps["candidate " e])
            printf "%-8s %14d %14d %+7.1f%% %12.2f %12.2f\n", e, b, c, (c / b - 1) * 100,
                median(p99["baseline " e]), median(p99["candidate " e])
        }
    }' "$data/all.txt"
