#!/usr/bin/env bash
# HTTP load against a fixed reference, in one run: a bare axum server answering the same
# JSON (bench/examples/bare_server.rs, no key check, no store, no plugin), then agent-host's
# `GET /health`, `GET .../commands` (key check, rate limit, agent lookup, JSON) and
# `POST .../commands/hello/execute` (the same plus a fresh simple_text instance), each with
# wrk at 64 connections. The reference runs first and last; ratios are to their mean, since
# only ratios compare across runs on a shared machine.
# Usage: bench/http-load.sh [SECONDS] [sqlite|postgres]   (needs wrk: apt-get install wrk;
#        postgres starts a throwaway cluster with scripts/postgres.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
secs="${1:-10}"
backend="${2:-sqlite}"
command -v wrk >/dev/null || { echo "wrk is required: apt-get install wrk" >&2; exit 1; }
cargo build --release --locked -q -p agent-host
cargo build --release --locked -q -p agent-host-bench --example bare_server
target="${CARGO_TARGET_DIR:-$PWD/target}/release"
data="$(mktemp -d)"
pgdir=""
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    if [ -n "$pgdir" ]; then scripts/postgres.sh stop "$pgdir"; fi
    rm -rf "$data"
}
trap cleanup EXIT
export AGENT_HOST_LOG=warn
case "$backend" in
sqlite) ;;
postgres)
    # Its own directory: the cluster may belong to the postgres user (scripts/postgres.sh).
    pgdir="$(mktemp -d)"
    admin="$(scripts/postgres.sh start "$pgdir")"
    psql -q "$admin" -c "CREATE DATABASE bench" >/dev/null
    # The address names the database before its query (TLS settings): swap that name only.
    export AGENT_HOST_DATABASE_URL="${admin/\/postgres\?//bench?}"
    ;;
*) echo "backend must be sqlite or postgres" >&2; exit 2 ;;
esac
serve_demo_agent "$target/agent-host" "$data/host"
pids+=("$server")
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$target/examples/bare_server" "$port" &
pids+=($!)
bare="http://127.0.0.1:$port"
curl -sf -H "x-api-key: $key" -H 'content-type: application/json' -d '{"parameters":{"name":"Ann"}}' \
    "$base/v1/agents/helper/commands/hello/execute" >/dev/null
curl -sf -H 'content-type: application/json' -d '{"parameters":{"name":"Ann"}}' \
    "$bare/v1/agents/helper/commands/hello/execute" >/dev/null
execute_lua "$data/post.lua"

# wrk's latency in ms, whatever unit it printed.
ms() { awk -v v="$1" 'BEGIN { n = v + 0; if (v ~ /us$/) n /= 1000; else if (v ~ /ms$/) n *= 1; else if (v ~ /s$/) n *= 1000; printf "%.2f", n }'; }
run() { # name, url, extra wrk args...
    local name="$1" url="$2"; shift 2
    wrk -t1 -c64 -d"${secs}s" --latency -H "x-api-key: $key" "$@" "$url" > "$data/$name.txt"
    local rps p50 p99 errors
    rps="$(awk '/Requests\/sec/ {printf "%d", $2}' "$data/$name.txt")"
    p50="$(ms "$(awk '$1 == "50%" {print $2}' "$data/$name.txt")")"
    p99="$(ms "$(awk '$1 == "99%" {print $2}' "$data/$name.txt")")"
    errors="$(awk '/Non-2xx/ {print $5}' "$data/$name.txt")"
    printf '%-12s %8s req/s   p50 %7s ms   p99 %7s ms   non-2xx %s\n' "$name" "$rps" "$p50" "$p99" "${errors:-0}"
    echo "$rps $p99" > "$data/$name.res"
}
echo "wrk -t1 -c64 -d${secs}s, $backend, release builds, $(nproc) cores shared by the servers and wrk"
run bare-first "$bare/v1/agents/helper/commands/hello/execute" -s "$data/post.lua"
run health "$base/health"
run list "$base/v1/agents/helper/commands"
run execute "$base/v1/agents/helper/commands/hello/execute" -s "$data/post.lua"
run bare-last "$bare/v1/agents/helper/commands/hello/execute" -s "$data/post.lua"
awk '
    FILENAME ~ /bare-(first|last)/ { bare_rps += $1 / 2; bare_p99 += $2 / 2; next }
    { split(FILENAME, p, "/"); n = p[length(p)]; sub(/\.res$/, "", n); rps[n] = $1; p99[n] = $2 }
    END {
        printf "bare reference (mean of first and last): %d req/s, p99 %.2f ms\n", bare_rps, bare_p99
        printf "health  / bare: %.2f\n", rps["health"] / bare_rps
        printf "list    / bare: %.2f   (target >= 0.70)\n", rps["list"] / bare_rps
        printf "execute / bare: %.2f   (target >= 0.60)\n", rps["execute"] / bare_rps
        printf "execute p99 / bare p99: %.2f   (target <= 1.50)\n", p99["execute"] / bare_p99
    }' "$data"/bare-first.res "$data"/bare-last.res "$data"/health.res "$data"/list.res "$data"/execute.res
