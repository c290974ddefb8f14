#!/usr/bin/env bash
# Every sink end to end, in one run: how fast the relay drains a backlog into it, and how
# long an event takes from the writer's COMMIT to the sink's acknowledgement at a steady
# 200 commits/s.
#
# Sinks, each against a receiver on this machine (127.0.0.1 only), all started here:
#   null    SELECT outbox.configure_sink('null')
#   kafka   librdkafka's mock cluster (test/tools/outbox_kafka_mock 1), {"bootstrap.servers"};
#           the events' topic is auto-created with 4 partitions
#   http    test/consumers/webhook_receiver.js (node, from a copy of test/consumers after
#           `npm ci`): verifies every request's Standard Webhooks signature in JS
#           (standardwebhooks) and appends a JSON line per request (headers and body) to its
#           log, synchronously, before it answers 200; {"url", "secret_file"}, the secret in
#           a file under outbox.sink_files_directory. The receiver's CPU is in the table: on
#           2 cores it competes with the server for the CPU.
#   nats    nats-server -js (file storage in the work directory), a stream "OUTBOX" on
#           outbox.event.> made with the nats npm package (test/consumers/nats_stream.js);
#           {"servers"}, the default subject template outbox.event.${aggregatetype}, and
#           Nats-Msg-Id = event id (a 2-minute duplicate window, the server's default).
#           Runs only when outbox_sink_nats.so is installed; otherwise "nats: skipped".
# Settings are the ones a user would have: every outbox.* setting and every sink option at
# its default (batch 1000, wake at commit, 1 relay worker, http max_concurrency 8, Kafka
# linger.ms 1, the sink's default); the server as in every relay benchmark (bench/relay/lib.sh: fsync and
# synchronous_commit on, shared_buffers 512MB) plus autovacuum off (each drain starts from a
# TRUNCATE).
#
# Per round, each sink in a rotated order (balanced_order), first the drains, then the
# latency runs:
#   (a) drain: ROWS article-sized order events over 100,000 keys enqueued while no sink is
#       configured (the relay idles), ANALYZE, CHECKPOINT; configure_sink(); the clock runs
#       from its commit until no event is unpublished (the relay's counters polled every
#       5 ms, then the table). It includes the creation of the sink (connecting).
#   (b) latency: one psycopg writer commits one outbox.enqueue() per transaction at RATE/s
#       for SECONDS_PER_RUN (+1 s warm-up, not counted); latency = published_at (set right
#       after the sink acknowledged the batch) - the moment COMMIT returned in the writer:
#       definition (i) of latency.sh.
# A warm-up drain of 10,000 events per sink comes first (not counted). Reported: medians of
# the rounds, the ratio to the null sink as the median of the per-round ratios.
#
#   bash bench/relay/sinks.sh          # 3 rounds, 100k events, 15 s at 200/s, ~4 min
#   QUICK=1 bash bench/relay/sinks.sh  # 3 rounds, 20k events, 5 s at 200/s, ~1.2 min
# ROUNDS, ROWS, SECONDS_PER_RUN, RATE override.
set -euo pipefail
# shellcheck source=bench/relay/lib.sh
. "$(dirname "$0")/lib.sh"

if [ "$QUICK" = 1 ]; then
  ROUNDS=${ROUNDS:-3}; ROWS=${ROWS:-20000}; SECONDS_PER_RUN=${SECONDS_PER_RUN:-5}
else
  ROUNDS=${ROUNDS:-3}; ROWS=${ROWS:-100000}; SECONDS_PER_RUN=${SECONDS_PER_RUN:-15}
fi
RATE=${RATE:-200}
NATS_SO="$(pg_config --pkglibdir)/outbox_sink_nats.so"

# nats_start: nats-server with JetStream and the stream OUTBOX on outbox.event.>. Sets
# NATS_PID, NATS_URL.
nats_start() {
  local port
  port=$(free_port)
  nats-server -js -a 127.0.0.1 -p "$port" -sd "$BENCH_WORK/nats" >"$BENCH_WORK/nats.log" 2>&1 9>&- &
  NATS_PID=$!
  RELAY_EXTRA_PIDS="$RELAY_EXTRA_PIDS $NATS_PID"
  NATS_URL="nats://127.0.0.1:$port"
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
  nats_stream add "$NATS_URL" OUTBOX 'outbox.event.>' || {
    echo "could not make the stream; nats-server's log:" >&2; tail -n 20 "$BENCH_WORK/nats.log" >&2; return 1; }
  echo "   $(nats-server --version) $NATS_URL (pid $NATS_PID), stream OUTBOX on outbox.event.>"
}

# nats_stream COMMAND URL STREAM [SUBJECTS]: test/consumers/nats_stream.js, in the copy.
nats_stream() {
  node "$BENCH_WORK/consumers/nats_stream.js" "$@"
}

relay_header "sinks: drain throughput and commit -> ack latency of every sink, default settings"
relay_start 56312 "autovacuum = off"
mock_start
consumers_install
receiver_start
nats_args=()
if [ -f "$NATS_SO" ]; then
  nats_start
  nats_args=(--nats-url "$NATS_URL" --nats-pid "$NATS_PID"
    --nats-count-cmd "NODE_PATH='$BENCH_WORK/consumers/node_modules' node '$BENCH_REPO/scripts/nats-stream.js' count '$NATS_URL' OUTBOX")
else
  echo "   nats: skipped (no outbox_sink_nats.so)"
fi
echo "   rounds=$ROUNDS, drains of $ROWS events, latency $SECONDS_PER_RUN s (+1 s warm-up) at $RATE commits/s"

py sinks --bootstrap "$BOOTSTRAP" --mock-pid "$MOCK_PID" \
  --http-url "http://127.0.0.1:$RECEIVER_PORT/webhooks" --http-secret-file webhook.secret \
  --receiver-pid "$RECEIVER_PID" --receiver-log "$BENCH_WORK/receiver.log" \
  ${nats_args[@]+"${nats_args[@]}"} \
  --rounds "$ROUNDS" --rows "$ROWS" --seconds "$SECONDS_PER_RUN" --rate "$RATE"
