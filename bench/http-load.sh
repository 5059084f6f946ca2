#!/usr/bin/env bash
# HTTP load against a fixed reference, in one run: a bare axum server answering the same JSON
# (bench/examples/bare_server.rs, no key check, no store, no plugin), then agent-host's
# `GET /health`, `GET .../commands` (key check, rate limit, agent lookup, JSON) and
# `POST .../commands/hello/execute` (the same plus a fresh simple_text instance), each with
# wrk at 64 connections. The reference runs first and last in each round; ratios are to its
# mean, since only ratios compare across runs on a shared machine.
# With BASELINE (the previous main's release binary), that binary and this tree's are
# alternated in every round (who goes first alternates too), each on its own data, and the
# medians over ROUNDS (default 3) are printed with the change: a change on the common path
# counts when measured so, since the machine drifts between runs more than such changes.
# Build a baseline: git worktree add /tmp/base <commit>; (cd /tmp/base && cargo build
#   --release -p agent-host); cp "$CARGO_TARGET_DIR/release/agent-host" /var/tmp/agent-host-base
# CANDIDATE=<binary> measures that binary in place of this tree's (to bisect between two
# older commits' binaries).
# Usage: bench/http-load.sh [SECONDS] [sqlite|postgres] [BASELINE] [ROUNDS]   (needs wrk:
#        apt-get install wrk; postgres starts a throwaway cluster with scripts/postgres.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
secs="${1:-10}"
backend="${2:-sqlite}"
baseline="${3:-}"
rounds="${4:-3}"
[ -n "$baseline" ] || rounds=1
command -v wrk >/dev/null || { echo "wrk is required: apt-get install wrk" >&2; exit 1; }
[ -n "${CANDIDATE:-}" ] || cargo build --release --locked -q -p agent-host
cargo build --release --locked -q -p agent-host-bench --example bare_server
target="${CARGO_TARGET_DIR:-$PWD/target}/release"
candidate="${CANDIDATE:-$target/agent-host}"
scratch_dir
pgdir=""
trap 'for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; [ -n "$pgdir" ] && scripts/postgres.sh stop "$pgdir"; rm -rf "$data"' EXIT
export AGENT_HOST_LOG=warn
case "$backend" in
sqlite) ;;
postgres)
    # Its own directory: the cluster may belong to the postgres user (scripts/postgres.sh).
    pgdir="$(mktemp -d)"
    admin="$(scripts/postgres.sh start "$pgdir")"
    ;;
*) echo "backend must be sqlite or postgres" >&2; exit 2 ;;
esac
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$target/examples/bare_server" "$port" &
pids+=($!)
bare="http://127.0.0.1:$port"
execute_lua "$data/post.lua"
sleep 0.2
curl -sf -H 'content-type: application/json' -d '{"parameters":{"name":"Ann"}}' \
    "$bare/v1/agents/helper/commands/hello/execute" >/dev/null

# wrk against $2 (more wrk arguments after it); appends "<who> <endpoint> rps p99_ms" to the
# run's results and prints it.
measure() {
    local who="$1" endpoint="$2" url="$3"
    shift 3
    wrk -t1 -c64 -d"${secs}s" --latency -H "x-api-key: ${key:-none}" "$@" "$url" > "$data/last.txt"
    awk -v who="$who" -v what="$endpoint" '
        /Requests\/sec/ { rps = $2 }
        $1 == "99%" { v = $2; n = v + 0; if (v ~ /us$/) n /= 1000; else if (v ~ /ms$/) n *= 1; else if (v ~ /s$/) n *= 1000; p99 = n }
        /Non-2xx/ { bad = $5 }
        END { if (bad > 0) { print "non-2xx answers from " who " " what > "/dev/stderr"; exit 1 }
              printf "%s %s %d %.2f\n", who, what, rps, p99 }' "$data/last.txt" | tee -a "$data/all.txt"
}

# One binary's turn: a fresh data dir (and database) with the demo agent, its three endpoints.
turn() {
    local who="$1" bin="$2" dir="$data/$1-$3"
    if [ -n "$pgdir" ]; then
        local db="bench_${1}_$3"
        psql -q "$admin" -c "CREATE DATABASE $db" >/dev/null
        # The address names the database before its query (TLS settings): swap that name only.
        export AGENT_HOST_DATABASE_URL="${admin/\/postgres\?//$db?}"
    fi
    serve_demo_agent "$bin" "$dir" 2> >(grep -v "unknown setting" >&2)
    pids+=("$server")
    curl -sf -H "x-api-key: $key" -H 'content-type: application/json' -d '{"parameters":{"name":"Ann"}}' \
        "$base/v1/agents/helper/commands/hello/execute" >/dev/null
    measure "$who" health "$base/health"
    measure "$who" list "$base/v1/agents/helper/commands"
    measure "$who" execute "$base/v1/agents/helper/commands/hello/execute" -s "$data/post.lua"
    kill "$server"
    wait "$server" 2>/dev/null || true
}

echo "wrk -t1 -c64 -d${secs}s, $backend, release builds, $rounds round(s), $(nproc) cores shared by the servers and wrk"
for round in $(seq 1 "$rounds"); do
    measure bare execute "$bare/v1/agents/helper/commands/hello/execute" -s "$data/post.lua"
    if [ -z "$baseline" ]; then
        turn candidate "$candidate" "$round"
    elif [ $((round % 2)) -eq 1 ]; then
        turn baseline "$baseline" "$round"
        turn candidate "$candidate" "$round"
    else
        turn candidate "$candidate" "$round"
        turn baseline "$baseline" "$round"
    fi
    measure bare execute "$bare/v1/agents/helper/commands/hello/execute" -s "$data/post.lua"
done
awk -v compared="${baseline:+yes}" '
    { rps[$1" "$2] = rps[$1" "$2] " " $3; p99[$1" "$2] = p99[$1" "$2] " " $4 }
    function median(list,   a, n, i, j, t) {
        n = split(list, a, " ")
        for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    END {
        bare = median(rps["bare execute"]); bare_p99 = median(p99["bare execute"])
        printf "bare reference (median of every round'"'"'s first and last): %d req/s, p99 %.2f ms\n", bare, bare_p99
        split("health list execute", order, " ")
        for (i = 1; i <= 3; i++) {
            e = order[i]; c = median(rps["candidate " e]); cp = median(p99["candidate " e])
            line = sprintf("%-8s %8d req/s (%.2f of bare)  p99 %6.2f ms (%.2fx bare)", e, c, c / bare, cp, cp / bare_p99)
            if (compared) {
                b = median(rps["baseline " e])
                line = line sprintf("   baseline %8d (%.2f)  p99 %6.2f ms   change %+.1f%%", b, b / bare, median(p99["baseline " e]), (c / b - 1) * 100)
            }
            print line
        }
        print "targets: list >= 0.70 of bare, execute >= 0.60 (0.70 in issue 48), execute p99 <= 1.5x bare"
    }' "$data/all.txt"
