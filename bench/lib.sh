# Shared by the load scripts (sourced, not run).

# The loads measure the host, not its budgets: chats and uploads are not held to an
# account's token and upload budgets here.
export AGENT_HOST_ACCOUNT_CHAT_TOKENS_PER_MINUTE=4000000000 AGENT_HOST_ACCOUNT_CHAT_TOKENS_PER_DAY=4000000000
export AGENT_HOST_ACCOUNT_PLUGIN_UPLOADS_PER_MINUTE=1000000 AGENT_HOST_ACCOUNT_PLUGIN_UPLOADS_PER_DAY=100000000

# Starts `agent-host serve` ($1: the binary, $2: its data dir; more arguments go to the binary
# before `serve`, e.g. nothing, or settings flags) on a free port of 127.0.0.1 and waits until
# it is ready. Sets `server` (its pid), `base` (its URL) and `metrics_url` (with
# metrics_listen set). Its stderr goes to "$2/server.log".
start_server() {
    local bin="$1" dir="$2"
    shift 2
    mkdir -p "$dir"
    "$bin" --data-dir "$dir" "$@" --json serve --listen 127.0.0.1:0 > "$dir/ready" 2> "$dir/server.log" &
    server=$!
    for _ in $(seq 1 2000); do [ -s "$dir/ready" ] && break; sleep 0.005; done
    [ -s "$dir/ready" ] || { echo "the server did not start; its log ends:" >&2; tail -5 "$dir/server.log" >&2; return 1; }
    base="$(sed -E 's/.*"listening":\["(http:[^"]+)".*/\1/' "$dir/ready")"
    metrics_url="$(sed -nE 's/.*"metrics":"(http:[^"]+)".*/\1/p' "$dir/ready")"
}

# Seeds the demo agent (examples/helper.toml, or the manifest DEMO_AGENT names: an older
# commit's, for its binary) for an account without rate limits in the data
# dir $2 of the binary $1, then starts the server there. Sets `key` (the account's API key),
# `server` and `base`.
serve_demo_agent() {
    local bin="$1" dir="$2"
    "$bin" --data-dir "$dir" account create bench --plan enterprise --rpm 1000000000 --rpd 1000000000 >/dev/null
    key="$("$bin" --data-dir "$dir" key create --account bench 2>/dev/null)"
    "$bin" --data-dir "$dir" agent apply "${DEMO_AGENT:-examples/helper.toml}" --account bench >/dev/null
    start_server "$bin" "$dir"
}

# A wrk script ($1) posting the body of an execute of the demo agent's `hello`.
execute_lua() {
    cat > "$1" <<'LUA'
wrk.method = "POST"
wrk.body = '{"parameters":{"name":"Ann"}}'
wrk.headers["content-type"] = "application/json"
LUA
}

# A wrk script that calls the same command as a tool at /mcp/helper, as a client of the
# 2025-11-25 revision sends it (no session: the server keeps none).
mcp_call_lua() {
    cat > "$1" <<'LUA'
wrk.method = "POST"
wrk.body = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"hello","arguments":{"name":"Ann"}}}'
wrk.headers["content-type"] = "application/json"
wrk.headers["accept"] = "application/json, text/event-stream"
wrk.headers["mcp-protocol-version"] = "2025-11-25"
LUA
}

# wrk at 64 connections for $secs seconds against the URL $2 with the wrk script $3, the
# key in both headers agent-host reads; prints one line and writes the req/s to
# "$data/$1.res" (its output to "$data/$1.txt").
wrk_run() {
    wrk -t1 -c64 -d"${secs}s" --latency -H "x-api-key: $key" -H "authorization: Bearer $key" -s "$3" "$2" > "$data/$1.txt"
    local rps errors
    rps="$(awk '/Requests\/sec/ {printf "%d", $2}' "$data/$1.txt")"
    errors="$(awk '/Non-2xx/ {print $5}' "$data/$1.txt")"
    printf '%-14s %8s req/s   p50 %8s   p99 %8s   non-2xx %s\n' "$1" "$rps" \
        "$(awk '$1 == "50%" {print $2}' "$data/$1.txt")" "$(awk '$1 == "99%" {print $2}' "$data/$1.txt")" "${errors:-0}"
    echo "$rps" > "$data/$1.res"
}

# A temp dir for the run (`data`) and the processes it starts (add their pids to `pids`):
# the processes are stopped and the dir removed when the script exits.
scratch_dir() {
    data="$(mktemp -d)"
    pids=()
    trap 'for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; rm -rf "$data"' EXIT
}
