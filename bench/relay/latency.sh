#!/usr/bin/env bash
# Relay latency: from a writer's COMMIT to the sink's acknowledgement, at a steady ~200
# commits/s, p50 / p99 (issue #3; target <= 1 ms / <= 5 ms).
#
# One writer (psycopg 3) commits one outbox.enqueue() per transaction at 200/s and records,
# per event id, the wall time at which COMMIT returned. Nothing in the extension is changed
# for the measurement; two definitions of "acknowledged", both reported:
#   (i)  published_at, which the relay sets right after the sink acknowledged the batch
#        (before its own commit): commit -> ack as the relay sees it, microseconds, for the
#        null sink and the Kafka mock;
#   (ii) the Kafka message timestamp, read back by an independent consumer (kcat, %T), with
#        the sink option "timestamp": "now" (librdkafka stamps the message when the relay
#        hands it over, just before it is sent): milliseconds, Kafka only.
# Variants, interleaved in rounds, in one cluster:
#   null sink / Kafka mock, the relay woken at each commit (outbox.wake_at_commit = on).
#   The Kafka mock twice: with the topic's 4 partitions (the mock's default), and with a
#   topic made with 1 partition. The mock does not set TCP_NODELAY, so when two
#   ProduceRequests (two partitions) are in flight, the second answer waits for the
#   client's delayed ACK (~40 ms): with 1 partition a batch is one request, as a real
#   broker (which sets TCP_NODELAY) would answer it;
#   Kafka mock, 1 partition, "linger.ms": "0" (librdkafka otherwise waits 5 ms to batch);
#   null sink / Kafka mock (4 partitions) with the commits at the times of a Poisson process
#   of the same rate (exponential gaps, seeded): bursts and lulls instead of an even beat;
#   null sink / Kafka mock (1 partition), woken only by its poll: the writer session sets
#   outbox.wake_at_commit = off (the committing backend sends the wake-up), and
#   outbox.poll_interval = 100ms (the article's peer: LISTEN/NOTIFY 2.9/22 ms, 100 ms
#   polling 55/106 ms).
# The first second of each run is a warm-up (not counted): it absorbs the Kafka producer's
# start and a new topic's metadata.
#
#   bash bench/relay/latency.sh          # 3 rounds x 8 variants x 15 s, ~8 min
#   QUICK=1 bash bench/relay/latency.sh  # 3 rounds x 8 variants x 3 s, ~2.5 min
# ROUNDS, SECONDS_PER_RUN, RATE override.
set -euo pipefail
# shellcheck source=bench/relay/lib.sh
. "$(dirname "$0")/lib.sh"

if [ "$QUICK" = 1 ]; then
  ROUNDS=${ROUNDS:-3}; SECONDS_PER_RUN=${SECONDS_PER_RUN:-3}
else
  ROUNDS=${ROUNDS:-3}; SECONDS_PER_RUN=${SECONDS_PER_RUN:-15}
fi
RATE=${RATE:-200}

relay_header "relay latency: commit -> sink ack at $RATE commits/s (wake at commit vs poll)"
relay_start 56302
mock_start
echo "   rounds=$ROUNDS, $SECONDS_PER_RUN s per run (+1 s warm-up) at $RATE commits/s"

py latency --bootstrap "$BOOTSTRAP" --rounds "$ROUNDS" --seconds "$SECONDS_PER_RUN" --rate "$RATE" \
  --mock-fifo "$BENCH_WORK/mock.in" --mock-out "$BENCH_WORK/mock.out"
