#!/usr/bin/env bash
# How cost grows with what the store holds (SQLite, release build, wrk -t1):
#  1. 1, 1,000 and 10,000 agents of 10 simple_text commands each (10,000 agents = 100,000
#     commands): the server restarted on them, its start-to-ready time and idle RSS; then,
#     at 16, 64 and 256 connections, GET .../commands and POST .../hello/execute for an agent
#     chosen at random per request among all of them; the RSS after; and the read cache's
#     memory per agent (RSS after every agent was listed once, less idle, per agent).
#  2. 100 and 1,000 uploaded components (the `notes` example, each a distinct variant with its
#     own compiled artifact): start-to-ready; then one agent with a command per component,
#     each executed at random, with the RSS before and after, with the default budget for
#     compiled components held in memory and with room for all of them.
#     The cache is given room for every agent (AGENT_HOST_CACHE_MAX_MIB), so the figure is
#     what one agent costs; then, at 10,000 agents, the same with the default bound, which
#     the cache must keep to.
# Usage: bench/growth.sh [SECONDS] [PARTS]   (PARTS: agents, components or both, the default;
#        needs wrk; NOTES_WASM, or the built example under the target dir; part 2 uploads
#        and compiles 1,000 components: several minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
secs="${1:-5}"
parts="${2:-both}"
command -v wrk >/dev/null || { echo "wrk is required: apt-get install wrk" >&2; exit 1; }
cargo build --release --locked -q -p agent-host
target="${CARGO_TARGET_DIR:-$PWD/target}"
bin="$target/release/agent-host"
notes="${NOTES_WASM:-$target/wasm-plugins/wasm32-wasip2/plugin/notes.wasm}"
[ -f "$notes" ] || { echo "no notes component at $notes: cargo build -p agent-host builds it" >&2; exit 1; }
data="$(mktemp -d)"
server=""
cleanup() {
    if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; fi
    rm -rf "$data"
}
trap cleanup EXIT
export AGENT_HOST_LOG=warn AGENT_HOST_ACCOUNT_MAX_AGENTS=20000 AGENT_HOST_ACCOUNT_MAX_PLUGINS=2000 \
    AGENT_HOST_AGENT_MAX_COMMANDS=2000 AGENT_HOST_ACCOUNT_MAX_PLUGIN_BYTES=1000000000 \
    AGENT_HOST_PLUGIN_MAX_COMPILES=2 AGENT_HOST_CACHE_MAX_MIB=1024
seed() { python3 bench/growth_seed.py "$@"; }
rss_mib() { awk '/^VmRSS:/ {printf "%.1f", $2 / 1024}' "/proc/$server/status"; }
stop_server() { kill "$server"; wait "$server" 2>/dev/null || true; server=""; }
# Restarts the server on its data dir ($1) and sets `ready_ms`: from start to its ready line.
restart() {
    [ -z "$server" ] || stop_server
    local started
    started="$(date +%s%N)"
    rm -f "$1/ready"
    start_server "$bin" "$1"
    ready_ms=$(( ($(date +%s%N) - started) / 1000000 ))
}
# A wrk script calling, per request, one of $1 agents (g00001..) at random: `list` or `execute`.
random_lua() {
    cat > "$data/$2.lua" <<LUA
local agents = $1
local execute = "$2" == "execute"
wrk.headers["content-type"] = "application/json"
request = function()
    local agent = string.format("g%05d", math.random(agents))
    if execute then
        return wrk.format("POST", "/v1/agents/" .. agent .. "/commands/hello/execute", nil,
            '{"parameters":{"name":"Ann"}}')
    end
    return wrk.format("GET", "/v1/agents/" .. agent .. "/commands")
end
LUA
}
load() { # name, connections, lua script, url
    wrk -t1 -c"$2" -d"${secs}s" --latency -H "x-api-key: $key" -s "$3" "$4" > "$data/wrk.txt"
    local errors
    errors="$(awk '/Non-2xx/ {print $5}' "$data/wrk.txt")"
    printf '  %-8s c=%-4s %8s req/s   p99 %9s   non-2xx %s\n' "$1" "$2" \
        "$(awk '/Requests\/sec/ {printf "%d", $2}' "$data/wrk.txt")" \
        "$(awk '$1 == "99%" {print $2}' "$data/wrk.txt")" "${errors:-0}"
}

echo "agent-host growth, $secs s per wrk run, SQLite, $(nproc) cores shared by the server and wrk"
# RSS (KiB) after listing agents 1..$1 once, and after listing every one of $2.
touch_rss() {
    seed touch "$base" "$key" "$1"
    idle="$(awk '/^VmRSS:/ {print $2}' "/proc/$server/status")"
    seed touch "$base" "$key" "$2"
    cached="$(awk '/^VmRSS:/ {print $2}' "/proc/$server/status")"
}
[ "$parts" != components ] && echo "== 1. agents"
for agents in 1 1000 10000; do
    [ "$parts" != components ] || break
    dir="$data/agents-$agents"
    mkdir -p "$dir"
    "$bin" --data-dir "$dir" account create bench --plan enterprise --rpm 1000000000 --rpd 1000000000 >/dev/null
    key="$("$bin" --data-dir "$dir" key create --account bench 2>/dev/null)"
    start_server "$bin" "$dir"
    seeded="$(date +%s)"
    seed agents "$base" "$key" 1 "$agents" 10
    seeded=$(( $(date +%s) - seeded ))
    restart "$dir"
    echo "$agents agents, $((agents * 10)) commands (applied in ${seeded} s): ready in $ready_ms ms, idle RSS $(rss_mib) MiB"
    random_lua "$agents" list
    random_lua "$agents" execute
    for conns in 16 64 256; do
        load list "$conns" "$data/list.lua" "$base"
        load execute "$conns" "$data/execute.lua" "$base"
    done
    echo "  RSS after the load: $(rss_mib) MiB"
    if [ "$agents" -gt 1 ]; then
        restart "$dir"
        # Idle after one agent was read: the first request's one-off costs are not the agents'.
        touch_rss 1 "$agents"
        echo "  every agent listed once: RSS $((cached / 1024)) MiB, $(( (cached - idle) * 1024 / agents )) bytes per agent over idle"
    fi
    if [ "$agents" -eq 10000 ]; then
        AGENT_HOST_CACHE_MAX_MIB=64 restart "$dir"
        touch_rss 1 "$agents"
        echo "  the same with the cache's default bound (64 MiB): RSS $((cached / 1024)) MiB, $(( (cached - idle) / 1024 )) MiB over idle"
    fi
    stop_server
done

[ "$parts" != agents ] || exit 0
echo "== 2. components"
dir="$data/components"
mkdir -p "$dir"
"$bin" --data-dir "$dir" account create bench --plan enterprise --rpm 1000000000 --rpd 1000000000 >/dev/null
key="$("$bin" --data-dir "$dir" key create --account bench 2>/dev/null)"
start_server "$bin" "$dir"
uploaded=0
for count in 100 1000; do
    started="$(date +%s)"
    seed components "$base" "$key" "$((uploaded + 1))" "$((count - uploaded))" "$notes" >> "$data/hashes"
    echo "uploaded $((count - uploaded)) components in $(( $(date +%s) - started )) s"
    uploaded="$count"
    restart "$dir"
    echo "$count components: ready in $ready_ms ms, idle RSS $(rss_mib) MiB"
done
{
    echo 'username = "many"'
    echo 'name = "Many"'
    n=0
    while read -r hash; do
        n=$((n + 1))
        printf '[[commands]]\ncommand = "n%d"\nhandler_type = "custom"\nplugin = "%s"\n' "$n" "$hash"
    done < "$data/hashes"
} > "$data/many.toml"
curl -sf -H "x-api-key: $key" -H 'content-type: application/toml' --data-binary "@$data/many.toml" \
    "$base/v1/account/agents" >/dev/null
cat > "$data/custom.lua" <<'LUA'
wrk.headers["content-type"] = "application/json"
request = function()
    return wrk.format("POST", string.format("/v1/agents/many/commands/n%d/execute", math.random(1000)), nil,
        '{"parameters":{"action":"list"}}')
end
LUA
# With the default budget for compiled components held in memory, then with room for all.
for budget in 256 4096; do
    AGENT_HOST_PLUGIN_LOADED_COMPONENTS_MIB="$budget" restart "$dir"
    before="$(rss_mib)"
    load custom 64 "$data/custom.lua" "$base"
    load custom 64 "$data/custom.lua" "$base"
    echo "  1,000 custom commands run at random, plugin_loaded_components_mib=$budget: RSS $before MiB before, $(rss_mib) MiB after"
done
