#!/usr/bin/env bash
# Sets up and runs the whole test suite: unit tests and the end-to-end tests in tests/,
# which run the real binary over HTTP on 127.0.0.1 against SQLite files in temp dirs,
# with real WebAssembly components built from plugins/ (Rust, Python via componentize-py, and
# JavaScript via plugin-sdk/js and componentize-js),
# and real local chains: Anvil with Circle's USDC (npm, tests/node) and Surfpool (crates.io,
# tests/solana-chain, its own lock file; ~15 min to build the first time, seconds after),
# and the real x402 clients that pay (npm x402-fetch 1.2.0 and @x402/fetch 2.x: tests/node/pay.mjs);
# the official MCP client (tests/node/mcp.mjs) and conformance suite (tests/conformance).
# The web console is driven in Debian's `chromium` (installed here when missing) by npm's
# playwright-core (tests/node/console.mjs), and so are the payment page and a page on another
# origin paying with @x402/fetch (tests/node/paypage.mjs).
# The end-to-end suite then runs a second time with every test on PostgreSQL (Debian's
# `postgresql`, a throwaway cluster on a free port: scripts/postgres.sh), where the
# multi-host tests also run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
target="${CARGO_TARGET_DIR:-$PWD/target}"
plugins/py-echo/build.sh "$target/py-plugins" >/dev/null
export PY_ECHO_WASM="$target/py-plugins/py_echo.wasm"
# The JavaScript example, with the SDK's own npm packages (componentize-js, esbuild).
plugins/examples/js-weather/build.sh "$target/js-plugins"
export JS_WEATHER_WASM="$target/js-plugins/js_weather.wasm"
node plugin-sdk/js/types.mjs --check
export SMOLLM2_GGUF="$(scripts/model-path.sh)"
export MINILM_DIR="$(scripts/embedding-model-path.sh)"

if ! command -v npm >/dev/null 2>&1; then
    echo "test: npm is required for the local EVM chain (install Node.js)" >&2
    exit 1
fi
# `npm install`, not `npm ci`: npm leaves the other platforms' optional anvil packages out of
# the lock file and `npm ci` then refuses it. Versions are pinned exactly in package.json.
npm install --prefix tests/node --no-audit --no-fund --loglevel=error
# The MCP conformance suite, in its own folder (its own MCP SDK version).
npm install --prefix tests/conformance --no-audit --no-fund --loglevel=error
# The official MCP Python SDK, in a virtual environment of its own beside the build.
if [ ! -x "$target/py-mcp/bin/python" ]; then
    python3 -m venv "$target/py-mcp"
fi
"$target/py-mcp/bin/python" -m pip install --quiet --disable-pip-version-check -r tests/python/requirements.txt
export MCP_PYTHON="$target/py-mcp/bin/python"
# Headless Chromium for the console's tests; Prometheus (and promtool) for the metrics'.
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/prometheus ]; then
    scripts/apt-install.sh chromium prometheus
fi
SOLANA_CHAIN_BIN="$(scripts/solana-chain.sh)"
export SOLANA_CHAIN_BIN

cargo test --locked -p agent-host -p agent-plugin-sdk "$@"

pg_dir="$(mktemp -d /tmp/agent-host-pg.XXXXXX)"
trap 'scripts/postgres.sh stop "$pg_dir"' EXIT
TEST_POSTGRES_URL="$(scripts/postgres.sh start "$pg_dir")"
export TEST_POSTGRES_URL
echo "test: the end-to-end suite again, on PostgreSQL ($TEST_POSTGRES_URL)"
# The second pass is for the store. The tests that build scaffolded plugins with their
# toolchains (about two minutes of a CI run) touch no database (`plugin test` runs a local
# agent of its own), so they run once, above.
once_only=(
    --skip plugins::scaffolded_javascript_and_python_plugins_build_and_pass_their_cases
    --skip plugins::a_scaffolded_plugin_builds_and_is_accepted
)
separator=(--)
for arg in "$@"; do
    [ "$arg" = "--" ] && separator=()
done
cargo test --locked -p agent-host --test api "$@" "${separator[@]}" "${once_only[@]}"
