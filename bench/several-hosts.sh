#!/usr/bin/env bash
# Several hosts on one PostgreSQL against one host on SQLite, on this machine (every process
# shares its cores): keyed execute of the demo agent's `hello` and the same command as an MCP
# tool call, first on one host on SQLite, then on 1, 2 and 3 hosts sharing one PostgreSQL
# database (a throwaway cluster from scripts/postgres.sh: fsync and synchronous commit off).
# The offered load is the same each time: 64 connections in all, split evenly over one wrk
# per host. For each: requests/s in all and per host, the CPU the hosts and the database used
# (in cores, from /proc), and requests/s per host-core: what a host adds when it has a core.
# Then paid requests on the local Base chain (Anvil) through 1, 2 and 3 hosts on one database,
# `PAID_LOAD_PAYERS` payers (8) paying at once, `PAID_LOAD_REQUESTS` (240) a round: the
# harness is the end-to-end test tests/api/paid_load.rs, built in release (run
# scripts/test.sh once first: it prepares Anvil).
# Usage: bench/several-hosts.sh [SECONDS] [HOSTS...]   (defaults 8 and 1 2 3; needs wrk)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
secs="${1:-8}"
shift || true
counts=("${@:-1 2 3}")
read -r -a counts <<< "${counts[*]}"
command -v wrk >/dev/null || { echo "wrk is required: apt-get install wrk" >&2; exit 1; }
cargo build --release --locked -q -p agent-host
bin="${CARGO_TARGET_DIR:-$PWD/target}/release/agent-host"
scratch_dir
pgdir="$(mktemp -d)"
trap 'for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; scripts/postgres.sh stop "$pgdir"; rm -rf "$data"' EXIT
admin="$(scripts/postgres.sh start "$pgdir")"
export AGENT_HOST_LOG=warn
execute_lua "$data/execute.lua"
mcp_call_lua "$data/mcp.lua"

# CPU ticks (1/100 s) used so far by the processes $@ and their children that still run.
ticks() {
    local total=0 pid
    for pid in "$@"; do
        for p in "$pid" $(pgrep -P "$pid" || true); do
            [ -r "/proc/$p/stat" ] || continue
            total=$((total + $(awk '{print $14 + $15}' "/proc/$p/stat")))
        done
    done
    echo "$total"
}
postmaster() { head -1 "$pgdir/data/postmaster.pid"; }

# Runs workload $1 (execute or mcp) against every URL in `urls` at once, 64 connections in
# all, and prints one line named $2.
load() {
    local workload="$1" name="$2" n="${#urls[@]}" i path script
    case "$workload" in
    execute) path="/v1/agents/helper/commands/hello/execute" script="$data/execute.lua" ;;
    mcp) path="/mcp/helper" script="$data/mcp.lua" ;;
    esac
    local hosts_before db_before
    hosts_before="$(ticks "${hosts[@]}")"
    db_before="$(ticks "$(postmaster)")"
    local runs=()
    for i in "${!urls[@]}"; do
        wrk -t1 -c$((64 / n)) -d"${secs}s" -H "x-api-key: $key" -H "authorization: Bearer $key" \
            -s "$script" "${urls[$i]}$path" > "$data/wrk-$i.txt" &
        runs+=($!)
    done
    wait "${runs[@]}"
    local hosts_cores db_cores total=0 each=() rps
    hosts_cores="$(awk -v a="$hosts_before" -v b="$(ticks "${hosts[@]}")" -v s="$secs" 'BEGIN {printf "%.2f", (b - a) / 100 / s}')"
    db_cores="$(awk -v a="$db_before" -v b="$(ticks "$(postmaster)")" -v s="$secs" 'BEGIN {printf "%.2f", (b - a) / 100 / s}')"
    for i in "${!urls[@]}"; do
        if grep -q Non-2xx "$data/wrk-$i.txt"; then echo "non-2xx answers from host $i" >&2; exit 1; fi
        rps="$(awk '/Requests\/sec/ {printf "%d", $2}' "$data/wrk-$i.txt")"
        each+=("$rps")
        total=$((total + rps))
    done
    printf '%-20s %-8s %7d req/s in all (%s)   hosts %s cores, database %s   %6d req/s per host-core\n' \
        "$name" "$workload" "$total" "$(IFS=/; echo "${each[*]}")" "$hosts_cores" \
        "${db_cores}" "$(awk -v t="$total" -v c="$hosts_cores" 'BEGIN {printf "%d", t / c}')"
}

echo "several hosts: $secs s a run, 64 connections in all, $(nproc) cores shared by the hosts, PostgreSQL and wrk"

# One host on SQLite: the reference.
serve_demo_agent "$bin" "$data/sqlite"
pids+=("$server")
hosts=("$server")
urls=("$base")
curl -sf "$base/health" >/dev/null
load execute "1 host, SQLite" >/dev/null
for workload in execute mcp; do
    load "$workload" "1 host, SQLite"
done
kill "$server"
wait "$server" 2>/dev/null || true

# One database for every count of hosts: each host has its own data dir, with the first
# one's master key (secrets sealed by one host open on the others).
psql -q "$admin" -c "CREATE DATABASE bench" >/dev/null
# The address names the database before its query (TLS settings): swap that name only.
export AGENT_HOST_DATABASE_URL="${admin/\/postgres\?//bench?}"
for n in "${counts[@]}"; do
    hosts=()
    urls=()
    for i in $(seq 1 "$n"); do
        dir="$data/pg-$n-$i"
        if [ "$n" = "${counts[0]}" ] && [ "$i" = 1 ]; then
            serve_demo_agent "$bin" "$dir"
            first="$dir"
        else
            mkdir -p "$dir"
            cp "$first/master.key" "$dir/master.key"
            start_server "$bin" "$dir"
        fi
        pids+=("$server")
        hosts+=("$server")
        urls+=("$base")
    done
    load execute "$n host(s), PostgreSQL" >/dev/null
    for workload in execute mcp; do
        load "$workload" "$n host(s), PostgreSQL"
    done
    for pid in "${hosts[@]}"; do kill "$pid"; wait "$pid" 2>/dev/null || true; done
done

echo "paid requests (Base on Anvil, x402 v1): ${PAID_LOAD_PAYERS:-8} payers at once, ${PAID_LOAD_REQUESTS:-240} a round"
TEST_POSTGRES_URL="$admin" PAID_LOAD_REQUESTS="${PAID_LOAD_REQUESTS:-240}" \
    cargo test --release --locked -q -p agent-host --test api -- --exact \
    paid_load::paid_requests_through_several_hosts_are_each_settled_once --nocapture --test-threads 1 2>&1 |
    grep "host(s)"
