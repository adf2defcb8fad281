#!/usr/bin/env bash
# Runs the public HTTP cache test suite (github.com/http-tests/cache-tests) against
# `transport-proxy`, a reverse proxy over one CachedTransport, in the default mode and following
# HTTP caching (with `freshness.staleIfError`, the app's leave to answer stale when the origin fails), and
# prints the per-group table beside the suite's published results of browsers
# and proxy caches.
#
#     git clone https://github.com/http-tests/cache-tests /tmp/cache-tests
#     bash Examples/scripts/cache-tests.sh /tmp/cache-tests
#
# Needs Node 20 or later. The suite's server and client run without npm packages, except its four
# interim-response tests (they need `undici`); without it those report a harness failure.
set -euo pipefail
suite=$(cd "${1:?usage: cache-tests.sh SUITE_DIR}" && pwd)
cd "$(dirname "$0")/../.."
server_port=${SERVER_PORT:-8000}
proxy_port=${PROXY_PORT:-8080}
out=$(mktemp -d)

swift build --package-path Examples --product transport-proxy >&2
proxy=$(swift build --package-path Examples --product transport-proxy --show-bin-path)/transport-proxy

pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; }
trap cleanup EXIT

(cd "$suite" && npm_package_config_protocol=http npm_package_config_port=$server_port \
    npm_package_config_pidfile="$out/server.pid" exec node test-engine/server/server.mjs) > "$out/server.log" 2>&1 &
pids+=($!)

run() {
    local name=$1; shift
    "$proxy" --upstream "http://127.0.0.1:$server_port" --port "$proxy_port" "$@" > "$out/proxy-$name.log" 2>&1 &
    local proxy_pid=$!
    for _ in $(seq 50); do
        curl -s -o /dev/null "http://127.0.0.1:$proxy_port/" && break
        sleep 0.1
    done
    (cd "$suite" && npm_config_base="http://127.0.0.1:$proxy_port" npm_package_config_id= \
        node --no-warnings test-engine/cli.mjs) > "$out/$name.json"
    kill "$proxy_pid"
    wait "$proxy_pid" 2>/dev/null || true
}

run default
run http-caching --http-caching --stale-if-error

node Examples/scripts/cache-tests-summary.mjs "$suite" \
    "CachedTransport default=$out/default.json" \
    "CachedTransport HTTP caching=$out/http-caching.json" \
    "Chrome=$suite/results/chrome.json" "Firefox=$suite/results/firefox.json" \
    "Safari=$suite/results/safari.json" "nginx=$suite/results/nginx.json" "Squid=$suite/results/squid.json"
echo "results: $out"
