#!/usr/bin/env bash
# Relay throughput: how fast the relay worker drains a backlog, against the article's
# hand-written relays, all in one cluster and one run (issue #3).
#
# Variants, each at batch size 1, 100 and 1000:
#   relay worker, null sink       SELECT outbox.configure_sink('null')
#   relay worker, Kafka mock      configure_sink('kafka', '{"bootstrap.servers": ...}'),
#                                 librdkafka's mock cluster (1 broker) on this machine; the
#                                 events' topic is auto-created with 4 partitions
#   ... Kafka mock, 1 partition   the same with "topic.template": "bench.p1", a topic made
#                                 with one partition (batch 100 and 1000 only). The mock
#                                 does not set TCP_NODELAY on its connections, so when two
#                                 ProduceRequests are in flight (one per partition), the
#                                 second answer waits for the client's delayed ACK (~40 ms).
#                                 With one partition a batch is one request: what the sink
#                                 costs without that artefact of the mock; and once more
#                                 with "linger.ms": "0" (librdkafka waits 5 ms by default
#                                 for more messages; the relay produces a whole batch and
#                                 then waits for its acks, so nothing comes in meanwhile).
#   client relay (psycopg 3)      the article's loop on its bigserial table outbox_naive with
#                                 the partial index: SELECT ... WHERE published_at IS NULL
#                                 ORDER BY id LIMIT n FOR UPDATE SKIP LOCKED; UPDATE ... SET
#                                 published_at = now() WHERE id = ANY(...); COMMIT; loop
#   server-side loop (plpgsql)    the same SQL in a procedure, COMMIT per batch
#
# Each run: empty both queues (TRUNCATE), write the backlog (article-sized order events:
# outbox.enqueue() for the worker, INSERT for outbox_naive), ANALYZE, CHECKPOINT, then
# drain. The worker has no sink while its backlog is written (it idles); the clock starts
# when the transaction of configure_sink() has committed and stops when the relay's
# shared-memory counters say it has sent the whole backlog (polled every 5 ms), checked
# against the table. rows/s = backlog / that time, so it includes the relay's wake-up and
# the creation of the sink (the Kafka producer connects then); the worker's "1st" and
# "steady" columns split that out (first and last published_at).
# Batch 1 costs a commit (an fsync) per event: it runs on a smaller backlog.
# The target's two variants are minutes apart in a round here; throughput_paired.sh
# measures that ratio alone, in back-to-back pairs with an A/A control.
#
#   bash bench/relay/throughput.sh          # 3 rounds, 200k events (batch 1: 5k), ~10 min
#   QUICK=1 bash bench/relay/throughput.sh  # 3 rounds, 30k events (batch 1: 1k), ~2 min
# ROUNDS, ROWS, ROWS_B1, ROWS_KAFKA_B1, ROWS_KAFKA_B100, ROWS_KAFKA1P_B100 override.
set -euo pipefail
# shellcheck source=bench/relay/lib.sh
. "$(dirname "$0")/lib.sh"

if [ "$QUICK" = 1 ]; then
  ROUNDS=${ROUNDS:-3}; ROWS=${ROWS:-30000}; ROWS_B1=${ROWS_B1:-1000}; ROWS_KAFKA_B1=${ROWS_KAFKA_B1:-300}
  ROWS_KAFKA_B100=${ROWS_KAFKA_B100:-5000}; ROWS_KAFKA1P_B100=${ROWS_KAFKA1P_B100:-15000}
else
  ROUNDS=${ROUNDS:-3}; ROWS=${ROWS:-200000}; ROWS_B1=${ROWS_B1:-5000}; ROWS_KAFKA_B1=${ROWS_KAFKA_B1:-1000}
  ROWS_KAFKA_B100=${ROWS_KAFKA_B100:-20000}; ROWS_KAFKA1P_B100=${ROWS_KAFKA1P_B100:-100000}
fi

relay_header "relay throughput: worker (null / Kafka mock) vs hand-written relays, batch 1 / 100 / 1000"
# autovacuum off: every run starts from a TRUNCATE; an autovacuum of the queue starting in
# the middle of one variant's drain would be noise, not a property of that variant.
relay_start 56301 "autovacuum = off"
mock_start
echo "   rounds=$ROUNDS, backlog $ROWS events (batch 1: $ROWS_B1; Kafka mock, default topic: $ROWS_KAFKA_B1 at" \
     "batch 1, $ROWS_KAFKA_B100 at batch 100; 1-partition topic at batch 100: $ROWS_KAFKA1P_B100)"
echo "   mock: create_topic bench.p1 1 -> $(mock_cmd create_topic bench.p1 1)"

py throughput --bootstrap "$BOOTSTRAP" --rounds "$ROUNDS" --rows "$ROWS" --rows-b1 "$ROWS_B1" \
  --rows-kafka-b1 "$ROWS_KAFKA_B1" --rows-kafka-b100 "$ROWS_KAFKA_B100" --rows-kafka1p-b100 "$ROWS_KAFKA1P_B100" \
  --topic-p1 bench.p1
