#!/usr/bin/env bash
# The host's own cost per chat request, without a model: the chat endpoint against an
# OpenAI-compatible server that answers at once (bench/examples/fake_openai.rs), compared
# with that server hit directly. wrk, 1 connection then 16, release builds.
# Usage: bench/chat-overhead.sh [SECONDS]   (needs wrk)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
secs="${1:-8}"
command -v wrk >/dev/null || { echo "wrk is required: apt-get install wrk" >&2; exit 1; }
cargo build --release --locked -q -p agent-host
cargo build --release --locked -q -p agent-host-bench --example fake_openai
target="${CARGO_TARGET_DIR:-$PWD/target}/release"
data="$(mktemp -d)"
trap 'kill "$server" "$fake" 2>/dev/null || true; rm -rf "$data"' EXIT
"$target/examples/fake_openai" 18999 & fake=$!
export AGENT_HOST_LOG=warn AGENT_HOST_LLM_BASE_URL=http://127.0.0.1:18999/v1 AGENT_HOST_LLM_MODEL=fake
serve_demo_agent "$target/agent-host" "$data"
cat > "$data/chat.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"message":"When does the office open?","conversationHistory":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello!"}]}'
wrk.headers["content-type"] = "application/json"
LUA
cat > "$data/fake.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"model":"fake","messages":[{"role":"user","content":"hi"}]}'
wrk.headers["content-type"] = "application/json"
LUA
row() { # name, connections, url, script, extra
    local out
    out="$(wrk -t1 -c"$2" -d"${secs}s" --latency -s "$4" "${@:5}" "$3")"
    printf '%-24s c=%-3s %10s req/s   p50 %9s   p99 %9s\n' "$1" "$2" \
        "$(awk '/Requests\/sec/ {print $2}' <<<"$out")" "$(awk '$1 == "50%" {print $2}' <<<"$out")" "$(awk '$1 == "99%" {print $2}' <<<"$out")"
}
status="$(curl -s -o /dev/null -w '%{http_code}' -H "x-api-key: $key" -H 'content-type: application/json' \
    -d '{"message":"hi"}' "$base/v1/agents/helper/chat")"
[ "$status" = 200 ] || { echo "chat answered $status; is the release build current?" >&2; exit 1; }
for c in 1 16; do
    row "fake provider directly" "$c" "http://127.0.0.1:18999/v1/chat/completions" "$data/fake.lua"
    row "chat through the host" "$c" "$base/v1/agents/helper/chat" "$data/chat.lua" -H "x-api-key: $key"
done
