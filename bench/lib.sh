# Shared by the load scripts (sourced, not run).

# Starts `agent-host serve` ($1: the binary, $2: its data dir; more arguments go to the binary
# before `serve`, e.g. nothing, or settings flags) on a free port of 127.0.0.1 and waits until
# it is ready. Sets `server` (its pid) and `base` (its URL). Its stderr goes to
# "$2/server.log".
start_server() {
    local bin="$1" dir="$2"
    shift 2
    mkdir -p "$dir"
    "$bin" --data-dir "$dir" "$@" --json serve --listen 127.0.0.1:0 > "$dir/ready" 2> "$dir/server.log" &
    server=$!
    for _ in $(seq 1 100); do [ -s "$dir/ready" ] && break; sleep 0.1; done
    base="$(sed -E 's/.*"(http:[^"]+)".*/\1/' "$dir/ready")"
}

# A wrk script ($1) posting the body of an execute of the demo agent's `hello`.
execute_lua() {
    cat > "$1" <<'LUA'
wrk.method = "POST"
wrk.body = '{"parameters":{"name":"Ann"}}'
wrk.headers["content-type"] = "application/json"
LUA
}
