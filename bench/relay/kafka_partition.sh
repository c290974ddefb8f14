#!/usr/bin/env bash
# One Kafka partition without a leader for 30 s, in the middle of a drain, side by side with
# healthy drains, in one run (issue #23: the keys of the other partitions keep flowing at
# >= 0.8x; the stuck keys are delivered, in order, after recovery). One relay worker, every
# outbox.* setting and every kafka sink option at its default (straggler.timeout.ms 2000).
#
# The mock has 3 brokers and each topic 4 partitions (replication 3), so a partition can lose
# its leader (`leader <topic> 0 -1`) while the others keep theirs, as in test/t/011 section 3b.
# Which partition a key lands on is read back, not computed: one probe event per key, read
# by kcat.
#
# Shape: a backlog drain, not a steady writer. A writer at a fixed rate below the relay's
# capacity reads 1.0x whatever the outage costs, as long as the relay keeps up; a drain runs
# at capacity, so whatever the held keys cost the relay (a refused message, a put-back UPDATE
# per held event, their retries coming due) shows up in the other keys' rate. Per drain:
# ROWS events over KEYS keys (~1/4 of them on the partition that loses its leader), enqueued
# with no sink configured, then configure_sink(). The mark is the moment DOWN_AT of the
# backlog has been sent; in the leaderless drain the leader goes then and comes back
# LEADERLESS_SECONDS later. Measured: events of the keys on the other partitions published
# from the mark to the last of them (published_at), per second, against the same segment of
# a baseline drain run just before and one just after (their mean; their ratio is the A/A
# noise). The backlog is sized so that the baseline spends a few seconds past the mark, and
# the leaderless drain's healthy keys finish well within the window.
#
# kcat reads each topic while the relay writes it (the mock keeps only the last 5 MB of a
# partition; kcat runs at nice -10, and an offset reset in its log voids that drain's check):
# every enqueued id (sets, not counts), per key the first occurrences in seq order, each key
# on its partition. The leaderless drain also reports the time from the leader's return to
# the last stuck event published.
#
#   bash bench/relay/kafka_partition.sh     # 400,000 events over 1,000 keys per drain, ~4 min
#   QUICK=1 bash bench/relay/kafka_partition.sh   # 100,000 events, leaderless 10 s, ~1.5 min
# ROWS, KEYS, DOWN_AT (0.25), LEADERLESS_SECONDS (30) override.
set -euo pipefail
# shellcheck source=bench/relay/lib.sh
. "$(dirname "$0")/lib.sh"

if [ "$QUICK" = 1 ]; then
  ROWS=${ROWS:-100000}
  LEADERLESS_SECONDS=${LEADERLESS_SECONDS:-10}
fi

ROWS=${ROWS:-400000}
LEADERLESS_SECONDS=${LEADERLESS_SECONDS:-30}

relay_header "kafka_partition: one partition's leader gone $LEADERLESS_SECONDS s mid-drain, beside healthy drains"
relay_start 56318 "autovacuum = off"
mock_start 3
echo "   Kafka mock: 3 brokers; kcat $(kcat -V 2>&1 | sed -n "s/^Version \([^ ]*\).*/\1/p" | head -n 1)"

"$PY" "$RELAY_BENCH_DIR/kafka_partition.py" --bootstrap "$BOOTSTRAP" \
  --mock-fifo "$BENCH_WORK/mock.in" --mock-out "$BENCH_WORK/mock.out" --work "$BENCH_WORK" \
  --rows "$ROWS" --keys "${KEYS:-1000}" --down-at "${DOWN_AT:-0.25}" \
  --leaderless-seconds "$LEADERLESS_SECONDS"
