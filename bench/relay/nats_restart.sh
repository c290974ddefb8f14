#!/usr/bin/env bash
# nats-server restarted mid-stream (issue #23): "delivery resumes within 2 s of the server
# being ready; outbox.status never shows a configuration error".
#
# One relay worker, every outbox.* setting and every nats sink option at its default
# ({"servers"} only). nats-server -js with its file store and a monitoring port (-m) in the
# work directory, a stream OUTBOX on outbox.event.> made with the nats npm package
# (test/consumers/nats_stream.js), as sinks.sh does. One psycopg writer commits RATE
# outbox.enqueue() per second over KEYS keys through the whole run; another session samples
# outbox.status every 100 ms. ROUNDS times: SIGTERM nats-server, wait for it to exit, leave it
# down OUTAGE_SECONDS, start it again on the same port and store; "ready" is the first 200
# from /healthz (which includes JetStream), "resumed" the first published_at at or after it.
# At the end the stream is read back with the nats npm package: every id of outbox.events in
# it, and per key the first occurrences in seq order (bench/relay/nats_restart.py).
#
#   bash bench/relay/nats_restart.sh   # 10 restarts, 5 s down, 200 commits/s: ~2-5 min
# ROUNDS, RATE, KEYS, OUTAGE_SECONDS, STEADY_SECONDS override.
set -euo pipefail
# shellcheck source=bench/relay/lib.sh
. "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-10}
RATE=${RATE:-200}
KEYS=${KEYS:-100}
OUTAGE_SECONDS=${OUTAGE_SECONDS:-5}
STEADY_SECONDS=${STEADY_SECONDS:-5}
NATS_SO="$(pg_config --pkglibdir)/outbox_sink_nats.so"

[ -f "$NATS_SO" ] || { echo "no $NATS_SO: make install (needs libnats-dev)" >&2; exit 1; }
command -v nats-server >/dev/null || { echo "no nats-server (Debian: nats-server)" >&2; exit 1; }

# nats_cleanup: stops the nats-server the driver left running (its pid in nats.pid); keeps
# the exit status for relay_cleanup, which runs after it.
# shellcheck disable=SC2317  # called from the EXIT trap
nats_cleanup() {
  local rc=$? pid
  if [ -n "$BENCH_WORK" ] && [ -s "$BENCH_WORK/nats.pid" ]; then
    pid=$(cat "$BENCH_WORK/nats.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  return "$rc"
}

relay_header "nats_restart: nats-server restarted mid-stream under a steady writer, default settings"
relay_start 56316
trap 'nats_cleanup; relay_cleanup' EXIT
consumers_install
mkdir -p "$BENCH_WORK/nats"

status=0
"$PY" "$RELAY_BENCH_DIR/nats_restart.py" --port "$(free_port)" --monitor-port "$(free_port)" \
  --store "$BENCH_WORK/nats" --nats-log "$BENCH_WORK/nats.log" --pid-file "$BENCH_WORK/nats.pid" \
  --stream-js "$BENCH_WORK/consumers/nats_stream.js" --rounds "$ROUNDS" --rate "$RATE" \
  --keys "$KEYS" --outage-seconds "$OUTAGE_SECONDS" --steady-seconds "$STEADY_SECONDS" || status=$?

# What the relay and the sink logged about the outages (back-offs, connection events).
echo
echo "   server log, the relay's lines (first 40):"
grep -E 'outbox relay|nats:' "$BENCH_WORK/server.log" | sed 's/^/      /' | head -n 40 || true
exit "$status"
