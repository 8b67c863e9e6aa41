#!/usr/bin/env bash
# Runs every example against a fresh embedded server of its own (a temporary data directory, free ports),
# then stops it. Prints "examples: N passed, M failed"; exits 1 if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
work="$(mktemp -d)"
port="${EXAMPLES_PORT:-18780}"
realtime="${EXAMPLES_REALTIME_PORT:-18781}"
# METRICS_PORT=0: the examples need no metrics server, and another process may hold its default port.
DATA_DIR="$work/data" PORT="$port" REALTIME_PORT="$realtime" METRICS_PORT=0 HOST=127.0.0.1 \
  WEBHOOK_ALLOW_HTTP=true WEBHOOK_ALLOW_PRIVATE=true \
  node_modules/.bin/node --import tsx src/main.ts >"$work/server.log" 2>&1 &
server=$!
stop() {
  kill -TERM "$server" 2>/dev/null
  wait "$server" 2>/dev/null
  rm -rf "$work"
}
trap stop EXIT
for _ in $(seq 1 180); do
  curl -sf "http://127.0.0.1:$port/ready" >/dev/null && break
  kill -0 "$server" 2>/dev/null || { tail -20 "$work/server.log"; exit 1; }
  sleep 1
done
export API="http://127.0.0.1:$port" REALTIME="ws://127.0.0.1:$realtime" DATA_DIR="$work/data"
passed=0
failed=0
for example in send-and-listen broadcast-progress webhooks export-contacts; do
  if timeout 180 node_modules/.bin/node "examples/$example.mjs"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "example $example FAILED"
  fi
done
echo "examples: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
