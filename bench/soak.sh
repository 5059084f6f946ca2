#!/usr/bin/env bash
# Soak: MINUTES (default 10) of mixed traffic at a fixed rate against a release server, with
# its resident memory, open file descriptors and database size every 30 s. After warm-up all
# three must stay flat. The traffic, per second: 40 keyed command lists, 40 keyed executes of
# a simple_text and 10 of a built_in command (a fresh WASM instance each), 20 x402 price lists,
# 20 x402 payments refused at once (a malformed payment), 5 unknown keys, 5 chat messages on a
# local model stand-in.
# Usage: bench/soak.sh [MINUTES]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
minutes="${1:-10}"
cargo build --release --locked -q -p agent-host
bin="${CARGO_TARGET_DIR:-$PWD/target}/release/agent-host"
data="$(mktemp -d)"
trap 'kill "$server" "$load" "$model" 2>/dev/null || true; rm -rf "$data"' EXIT
export AGENT_HOST_LOG=error
# One client address sends all of it: lift the x402 abuse limits, which would refuse it.
export AGENT_HOST_X402_CLIENT_LIMIT_PER_MINUTE=1000000 AGENT_HOST_X402_CLIENT_LIMIT_PER_DAY=100000000
cli() { "$bin" --data-dir "$data" "$@"; }
cli account create soak --plan enterprise --rpm 100000000 --rpd 1000000000 >/dev/null
key="$(cli key create --account soak 2>/dev/null)"
cli agent apply examples/helper.toml --account soak >/dev/null
cli wallet create --agent helper --network base >/dev/null
cli wallet create --agent helper --network solana >/dev/null

# A stand-in for a hosted model: answers every chat completion at once.
python3 - "$data/model-port" <<'PY' &
import http.server, json, sys
class Model(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        body = json.dumps({"id": "c", "object": "chat.completion", "choices": [{"index": 0,
            "finish_reason": "stop", "message": {"role": "assistant", "content": "Soaked."}}]}).encode()
        self.send_response(200); self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def log_message(self, *args): pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Model)
open(sys.argv[1], "w").write(str(server.server_port))
server.serve_forever()
PY
model=$!
for _ in $(seq 1 50); do [ -s "$data/model-port" ] && break; sleep 0.1; done
export AGENT_HOST_LLM_BASE_URL="http://127.0.0.1:$(cat "$data/model-port")/v1" AGENT_HOST_LLM_MODEL=stand-in
start_server "$bin" "$data"

python3 - "$base" "$key" "$minutes" "$data/load.txt" <<'PY' &
import http.client, json, sys, threading, time, urllib.parse
base, key, minutes, report = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
host = urllib.parse.urlparse(base).netloc
end = time.time() + minutes * 60
counts, lock = {}, threading.Lock()
def traffic(name, rate, method, path, body=None, headers=None):
    conn = http.client.HTTPConnection(host, timeout=30)
    every, next_at = 1.0 / rate, time.time()
    while time.time() < end:
        try:
            conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers or {})
            status = conn.getresponse()
            status.read()
            kind = f"{name} {status.status}"
        except Exception as e:
            conn.close(); conn = http.client.HTTPConnection(host, timeout=30); kind = f"{name} error"
        with lock: counts[kind] = counts.get(kind, 0) + 1
        next_at += every
        time.sleep(max(0, next_at - time.time()))
keyed = {"x-api-key": key, "content-type": "application/json"}
kinds = [
    ("list", 40, "GET", "/v1/agents/helper/commands", None, keyed),
    ("execute hello", 40, "POST", "/v1/agents/helper/commands/hello/execute", {"parameters": {"name": "Ann"}}, keyed),
    ("execute about", 10, "POST", "/v1/agents/helper/commands/about/execute", {}, keyed),
    ("x402 price", 20, "GET", "/x402/base/helper", None, {}),
    ("x402 refused", 20, "POST", "/x402/solana/helper", {"command": "hello", "name": "Ann"},
        {"content-type": "application/json", "x-payment": "bm90IGEgcGF5bWVudA=="}),
    ("bad key", 5, "GET", "/v1/agents/helper/commands", None, {"x-api-key": "ahk_nope"}),
    ("chat", 5, "POST", "/v1/agents/helper/chat", {"message": "Hello?"}, keyed),
]
threads = [threading.Thread(target=traffic, args=k) for k in kinds]
for t in threads: t.start()
for t in threads: t.join()
with open(report, "w") as f:
    for kind in sorted(counts): f.write(f"{kind}: {counts[kind]}\n")
PY
load=$!

echo "soak: ${minutes} min against $base (release build, $(nproc) cores; 140 requests/s)"
printf '%6s %10s %6s %10s\n' "time" "RSS KiB" "fds" "db KiB"
sample() {
    local rss fds db
    rss="$(awk '/VmRSS/ {print $2}' "/proc/$server/status")"
    fds="$(ls "/proc/$server/fd" | wc -l)"
    db="$(du -k -c "$data"/agent-host.db* | tail -1 | cut -f1)"
    printf '%5ss %10s %6s %10s\n' "$1" "$rss" "$fds" "$db"
}
for i in $(seq 0 $((minutes * 2))); do
    sample $((i * 30))
    [ "$i" -lt $((minutes * 2)) ] && sleep 30
done
wait "$load" || true
echo "requests by kind and status:"
cat "$data/load.txt"
