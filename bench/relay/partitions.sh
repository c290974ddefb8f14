#!/usr/bin/env bash
# The relay's CPU against the number of partitions it reads (a measurement for the roadmap's
# "finding work must cost what the pending work costs, not what the history costs").
#
# The relay's queries (the fetch of new events, the low-water mark, the probe of its gaps,
# the retries) read every partition except the premade future ones, so each past partition
# adds its index's start-up to every batch. This script runs the same steady stream of
# writers (pgbench -R RATE, 4 clients, the writers' transaction: an order and its event)
# against the relay with the null sink, in two states of the same cluster:
#   few    the partitions CREATE EXTENSION made (the current day and outbox.premake ahead)
#   many   the same plus PAST empty past partitions (one a day, made as rotation makes them)
# in alternating order over ROUNDS rounds, and reports the relay's CPU (utime + stime from
# /proc, in % of one core) and the writers' mean latency for each, as medians.
#
#   bash bench/relay/partitions.sh          # 3 rounds of 20 s, PAST=60, RATE=200: ~3 min
#   QUICK=1 bash bench/relay/partitions.sh  # 2 rounds of 10 s
# ROUNDS, SECONDS_PER_RUN, PAST, RATE override.
set -euo pipefail
# shellcheck source=bench/relay/lib.sh
. "$(dirname "$0")/lib.sh"

if [ "$QUICK" = 1 ]; then ROUNDS=${ROUNDS:-2}; RUN_S=${SECONDS_PER_RUN:-10}; else ROUNDS=${ROUNDS:-3}; RUN_S=${SECONDS_PER_RUN:-20}; fi
PAST=${PAST:-60}
RATE=${RATE:-200}

relay_header "relay CPU vs the number of partitions, $RATE commits/s"
relay_start 56308
echo "   rounds=$ROUNDS of ${RUN_S} s per state; many = few + $PAST past partitions"
writers_setup
sql -c "ANALYZE outbox.events"

add_past() {
  sql -o /dev/null -c "SELECT count(outbox._create_partition(d, d + interval '1 day'))
    FROM generate_series(date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' - interval '$PAST days',
                         date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' - interval '1 day',
                         interval '1 day') d"
}
drop_past() {
  local p
  for p in $(sqlv "SELECT name FROM outbox.partitions WHERE upper_bound <= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'"); do
    sql -o /dev/null -c "DROP TABLE outbox.$p" -c "DELETE FROM outbox.partitions WHERE name = '$p'"
  done
}
# run LABEL: one pgbench run at RATE; appends "LABEL CPU% LATENCY_MS PARTITIONS" to results.
run() {
  local t0 t1 lat n
  n=$(sqlv "SELECT count(*) FROM outbox.partitions")
  t0=$(awk '{ print $14 + $15 }' "/proc/$RELAY_PID/stat")
  as_postgres pgbench -h "$BENCH_WORK" -p "$BENCH_PORT" -n -M prepared -c 4 -j 2 -R "$RATE" -T "$RUN_S" \
    -f "$BENCH_WORK/plain.sql" "$BENCH_DB" >"$BENCH_WORK/pgbench.out" 2>&1 || { cat "$BENCH_WORK/pgbench.out"; exit 1; }
  t1=$(awk '{ print $14 + $15 }' "/proc/$RELAY_PID/stat")
  lat=$(awk '/^latency average/ { print $4 }' "$BENCH_WORK/pgbench.out")
  local cpu
  cpu=$(awk -v a="$t0" -v b="$t1" -v s="$RUN_S" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.1f", 100 * (b - a) / hz / s }')
  echo "$1 $cpu $lat $n" >>"$BENCH_WORK/results.txt"
  printf '      %-5s %3d partitions: relay CPU %5.1f %% of a core, writers %s ms per transaction\n' "$1" "$n" "$cpu" "$lat"
}

for r in $(seq "$ROUNDS"); do
  echo "   round $r/$ROUNDS:"
  if [ $((r % 2)) = 1 ]; then
    run few; add_past; run many; drop_past
  else
    add_past; run many; drop_past; run few
  fi
done

echo
echo "-- results: medians of $ROUNDS runs of ${RUN_S} s at $RATE commits/s (null sink)"
for v in few many; do
  cpu=$(awk -v v="$v" '$1 == v { print $2 }' "$BENCH_WORK/results.txt" | median)
  lat=$(awk -v v="$v" '$1 == v { print $3 }' "$BENCH_WORK/results.txt" | median)
  n=$(awk -v v="$v" '$1 == v { print $4 }' "$BENCH_WORK/results.txt" | median)
  printf '   %-5s %3d partitions: relay CPU %5.1f %% of a core, writers %s ms\n' "$v" "$n" "$cpu" "$lat"
done
few=$(awk '$1 == "few" { print $2 }' "$BENCH_WORK/results.txt" | median)
many=$(awk '$1 == "many" { print $2 }' "$BENCH_WORK/results.txt" | median)
echo "   each past partition adds $(awk -v a="$few" -v b="$many" -v p="$PAST" 'BEGIN { printf "%.2f", (b - a) / p }') % of a core at $RATE commits/s"
