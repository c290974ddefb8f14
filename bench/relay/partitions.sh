#!/usr/bin/env bash
# The relay's CPU against the number of partitions (issue: "finding work costs the pending
# work, not the history").
#
# The relay's queries (the fetch of new events, the low-water mark, the probe of its gaps,
# the retries) leave out the premade future partitions and the sealed past ones
# (src/relay/seal.cpp: past, every event published, no transaction left that could write
# there). This script compares two states of the same cluster:
#   few    the partitions CREATE EXTENSION made (the current day and outbox.premake ahead): 5
#   many   the same plus PAST empty past partitions (one a day, made as rotation makes them),
#          given SEAL_WAIT_S (3 s) for the relay to seal them (a round a second)
# in alternating order over ROUNDS rounds, in two runs each:
#   load   a steady stream of writers (pgbench -R RATE, 4 clients, the writers' transaction:
#          an order and its event), null sink: the relay's CPU (utime + stime from /proc, in %
#          of one core) and the writers' mean latency
#   idle   no writers, outbox.poll_interval = 10ms: the relay's CPU per idle pass (a fetch
#          that finds nothing, and the mark's check), in microseconds
# and reports medians, and the ratios many / few.
#
#   bash bench/relay/partitions.sh          # 3 rounds of 20 s, PAST=195, RATE=200: ~6 min
#   QUICK=1 bash bench/relay/partitions.sh  # 2 rounds of 10 s
# ROUNDS, SECONDS_PER_RUN, PAST, RATE, SEAL_WAIT_S override.
set -euo pipefail
# shellcheck source=bench/relay/lib.sh
. "$(dirname "$0")/lib.sh"

if [ "$QUICK" = 1 ]; then ROUNDS=${ROUNDS:-2}; RUN_S=${SECONDS_PER_RUN:-10}; else ROUNDS=${ROUNDS:-3}; RUN_S=${SECONDS_PER_RUN:-20}; fi
PAST=${PAST:-195}
RATE=${RATE:-200}
SEAL_WAIT_S=${SEAL_WAIT_S:-3}
IDLE_POLL_MS=10

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
# idle LABEL: the relay alone, polling every IDLE_POLL_MS; appends "idle-LABEL US_PER_POLL 0 N".
idle() {
  local t0 t1 n us
  n=$(sqlv "SELECT count(*) FROM outbox.partitions")
  sql -o /dev/null -c "ALTER SYSTEM SET outbox.poll_interval = '${IDLE_POLL_MS}ms'" -c "SELECT pg_reload_conf()"
  sleep 1
  t0=$(awk '{ print $14 + $15 }' "/proc/$RELAY_PID/stat")
  sleep "$RUN_S"
  t1=$(awk '{ print $14 + $15 }' "/proc/$RELAY_PID/stat")
  sql -o /dev/null -c "ALTER SYSTEM RESET outbox.poll_interval" -c "SELECT pg_reload_conf()"
  us=$(awk -v a="$t0" -v b="$t1" -v s="$RUN_S" -v hz="$(getconf CLK_TCK)" -v p="$IDLE_POLL_MS" \
    'BEGIN { printf "%.1f", 1e6 * (b - a) / hz / (s * 1000 / p) }')
  echo "idle-$1 $us 0 $n" >>"$BENCH_WORK/results.txt"
  printf '      %-5s %3d partitions, idle: relay CPU %6.1f us per pass\n' "$1" "$n" "$us"
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
    run few; idle few; add_past; sleep "$SEAL_WAIT_S"; run many; idle many; drop_past
  else
    add_past; sleep "$SEAL_WAIT_S"; idle many; run many; drop_past; idle few; run few
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
for v in few many; do
  us=$(awk -v v="idle-$v" '$1 == v { print $2 }' "$BENCH_WORK/results.txt" | median)
  n=$(awk -v v="idle-$v" '$1 == v { print $4 }' "$BENCH_WORK/results.txt" | median)
  printf '   %-5s %3d partitions, idle: relay CPU %6.1f us per pass\n' "$v" "$n" "$us"
done
few=$(awk '$1 == "few" { print $2 }' "$BENCH_WORK/results.txt" | median)
many=$(awk '$1 == "many" { print $2 }' "$BENCH_WORK/results.txt" | median)
ifew=$(awk '$1 == "idle-few" { print $2 }' "$BENCH_WORK/results.txt" | median)
imany=$(awk '$1 == "idle-many" { print $2 }' "$BENCH_WORK/results.txt" | median)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b / a }'; }
echo "   many / few: relay CPU at $RATE commits/s $(ratio "$few" "$many")x, idle pass $(ratio "$ifew" "$imany")x"
awk -v r="$(ratio "$few" "$many")" 'BEGIN { print "   " (r <= 1.10 ? "MET" : "MISSED") ": relay CPU at 200 commits/s within 10 % (" r "x)" }'
awk -v r="$(ratio "$ifew" "$imany")" 'BEGIN { print "   " (r <= 1.10 ? "MET" : "MISSED") ": idle pass within 10 % (" r "x)" }'
