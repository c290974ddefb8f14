#!/usr/bin/env bash
# Diagnostic for throughput.sh and latency.sh: is the time the kafka sink spends per batch
# the sink's, or the Kafka mock's? kafka_probe.c produces batches the way the sink does
# (produce the whole batch, then wait for every delivery report; same producer settings),
# outside PostgreSQL, against the same mock (librdkafka's mock cluster, 1 broker), for:
#   - the mock's default topic (4 partitions) vs topics made with 1 and 2 partitions,
#   - linger.ms=0, socket.nagle.disable=true (the client side), max.in.flight=1,
#   - the producer's start: the first batch 20 ms after rd_kafka_new, through a topic handle
#     (as the sink produces) or by topic name (as it did before: ~1 s to the first report).
# librdkafka's mock on its own does not set TCP_NODELAY on the connections it accepts, so
# when two requests are in flight the second answer can wait for the client's delayed ACK
# (~40 ms on Linux). outbox_kafka_mock sets it, as Kafka's brokers do (strace -f -e
# setsockopt shows it; so does the mock's last line, printed at the end).
#
#   bash bench/relay/kafka_probe.sh     # ~10 s; needs gcc and librdkafka-dev
#   OUTBOX_KAFKA_MOCK_NAGLE=1 bash bench/relay/kafka_probe.sh   # the mock without TCP_NODELAY
set -euo pipefail
# shellcheck source=bench/relay/lib.sh
. "$(dirname "$0")/lib.sh"

BENCH_WORK=$(make_workdir)
trap relay_cleanup EXIT
trap 'exit 130' INT TERM
gcc -O2 -o "$BENCH_WORK/kafka_probe" "$RELAY_BENCH_DIR/kafka_probe.c" -lrdkafka
mock_start
echo "== kafka_probe: batches produced as the kafka sink does, against the Kafka mock at $BOOTSTRAP"
echo "   librdkafka $(dpkg-query -W -f '${Version}' librdkafka1 2>/dev/null || echo '?'); mock: $(mock_cmd create_topic p1 1)" \
     "$(mock_cmd create_topic p2 2) $(mock_cmd create_topic p4 4)"
probe() { "$BENCH_WORK/kafka_probe" "$BOOTSTRAP" 40 "$@"; }
for m in 1 100 1000; do probe "$m" p4; done
probe 100 p1
probe 1000 p1
probe 100 p2
probe 100 p4 linger.ms 0
probe 100 p4 socket.nagle.disable true
probe 100 p4 max.in.flight 1
probe 1000 p1 linger.ms 0
probe 1 p1 probe.start.delay.ms 20
probe 1 p1 probe.start.delay.ms 20 probe.topic.by.name true
mock_cmd quit >/dev/null
for _ in $(seq 50); do kill -0 "$MOCK_PID" 2>/dev/null || break; sleep 0.1; done
echo "   $(tail -n 1 "$BENCH_WORK/mock.log")"
