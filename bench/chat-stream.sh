#!/usr/bin/env bash
# Streamed chat, release builds, RUNS answers each (medians):
#  1. the embedded model (SmolLM2-135M) through POST /chat as server-sent events: the time to
#     its first piece of text, and tokens per second after it;
#  2. the host's cost on a remote provider's stream: an OpenAI-compatible server streaming 50
#     chunks at once (bench/examples/fake_openai.rs), read directly and through /chat.
# Usage: bench/chat-stream.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
runs="${1:-10}"
cargo build --release --locked -q -p agent-host
cargo build --release --locked -q -p agent-host-bench --example fake_openai
target="${CARGO_TARGET_DIR:-$PWD/target}/release"
scratch_dir
export AGENT_HOST_LOG=warn
timing() { python3 bench/stream_timing.py "$@"; }

# 1. The embedded model.
export AGENT_HOST_EMBEDDED_MODEL_PATH AGENT_HOST_EMBEDDED_MAX_TOKENS=200
AGENT_HOST_EMBEDDED_MODEL_PATH="$(scripts/model-path.sh)"
serve_demo_agent "$target/agent-host" "$data/embedded"
pids+=("$server")
keyed="{\"x-api-key\": \"$key\"}"
timing "$base/v1/agents/helper/chat" "$keyed" '{"message": "Hi", "stream": true}' 1 > /dev/null # loads the model
timing "$base/v1/agents/helper/chat" "$keyed" \
    '{"message": "Tell me about the office hours and how to reach support.", "stream": true}' "$runs" > "$data/embedded.json"
kill "$server"
unset AGENT_HOST_EMBEDDED_MODEL_PATH

# 2. A remote provider's stream, directly and through the host.
"$target/examples/fake_openai" 18998 50 0 & pids+=("$!")
export AGENT_HOST_LLM_BASE_URL=http://127.0.0.1:18998/v1 AGENT_HOST_LLM_MODEL=fake
serve_demo_agent "$target/agent-host" "$data/remote"
pids+=("$server")
keyed="{\"x-api-key\": \"$key\"}"
timing http://127.0.0.1:18998/v1/chat/completions '{}' \
    '{"model": "fake", "stream": true, "messages": [{"role": "user", "content": "hi"}]}' "$runs" > "$data/direct.json"
timing "$base/v1/agents/helper/chat" "$keyed" '{"message": "hi", "stream": true}' "$runs" > "$data/host.json"
timing "$base/v1/agents/helper/openai/v1/chat/completions" "{\"authorization\": \"Bearer $key\"}" \
    '{"model": "helper", "stream": true, "messages": [{"role": "user", "content": "hi"}]}' "$runs" > "$data/openai.json"

python3 - "$data" "$runs" "$(nproc)" <<'PY'
import json, statistics, sys
data, runs, cores = sys.argv[1], sys.argv[2], sys.argv[3]
load = lambda name: json.load(open(f"{data}/{name}.json"))
med = lambda rows, key: statistics.median(r[key] for r in rows)
ms = lambda s: f"{s * 1000:.1f} ms"
e = load("embedded")
rate = statistics.median((r["tokens"] - 1) / (r["total"] - r["first"]) for r in e if r["total"] > r["first"])
print(f"{runs} runs each, release build, {cores} cores")
print(f"embedded model via /chat (SSE): first text {ms(med(e, 'first'))}, {rate:.1f} tokens/s after it, "
      f"{med(e, 'tokens'):.0f} tokens in {med(e, 'pieces'):.0f} events, whole answer {ms(med(e, 'total'))}")
for name, label in [("direct", "provider directly"), ("host", "through /chat (SSE)"), ("openai", "through the OpenAI endpoint")]:
    rows = load(name)
    print(f"{label:32} first text {ms(med(rows, 'first')):>9}   all 50 chunks {ms(med(rows, 'total')):>9}   text events {med(rows, 'pieces'):.0f}")
PY
