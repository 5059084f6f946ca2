# Shared by the load scripts (sourced, not run).

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
    for _ in $(seq 1 100); do [ -s "$dir/ready" ] && break; sleep 0.1; done
    base="$(sed -E 's/.*"listening":\["(http:[^"]+)".*/\1/' "$dir/ready")"
    metrics_url="$(sed -nE 's/.*"metrics":"(http:[^"]+)".*/\1/p' "$dir/ready")"
}

# Seeds the demo agent (examples/helper.toml) for an account without rate limits in the data
# dir $2 of the binary $1, then starts the server there. Sets `key` (the account's API key),
# `server` and `base`.
serve_demo_agent() {
    local bin="$1" dir="$2"
    "$bin" --data-dir "$dir" account create bench --plan enterprise --rpm 1000000000 --rpd 1000000000 >/dev/null
    key="$("$bin" --data-dir "$dir" key create --account bench 2>/dev/null)"
    "$bin" --data-dir "$dir" agent apply examples/helper.toml --account bench >/dev/null
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
