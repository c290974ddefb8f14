#!/usr/bin/env bash
# A long history (issue #24): the relay's CPU and delivery latency with HISTORY published
# events retained over PAST past partitions, against the same run with no history, both while
# a REPEATABLE READ transaction holds the xmin horizon for the whole run.
#
# One cluster, two states, in this order (small, large, small again: a drift shows):
#   small  the partitions CREATE EXTENSION made, no history
#   large  the same plus PAST past partitions (one an hour, made as rotation makes them)
#          holding HISTORY published events in all (~200-byte payloads, spread evenly), then
#          ANALYZE, and a wait until the relay has sealed them (their indexes no longer
#          scanned for SEAL_WAIT_S, 5 s), as it has long done for an old history
# In each: the holder opens (BEGIN ISOLATION LEVEL REPEATABLE READ and a query), pgbench -R
# RATE (4 clients, one outbox.enqueue() per autocommit transaction) runs for RUN_S seconds,
# the run's events are drained, then the holder ends. Measured: the relay's CPU (utime +
# stime from /proc) per event of the run, and published_at - created_at of the run's events,
# p50 and p99 (outbox.event_status).
#
#   bash bench/relay/history.sh            # HISTORY=10M, PAST=120, RUN_S=600, RATE=500: ~45 min
#   QUICK=1 bash bench/relay/history.sh    # HISTORY=1M, RUN_S=60: ~5 min
# HISTORY, PAST, RUN_S, RATE, SEAL_WAIT_S override.
set -euo pipefail
# shellcheck source=bench/relay/lib.sh
. "$(dirname "$0")/lib.sh"

if [ "$QUICK" = 1 ]; then HISTORY=${HISTORY:-1000000}; RUN_S=${RUN_S:-60}; else HISTORY=${HISTORY:-10000000}; RUN_S=${RUN_S:-600}; fi
PAST=${PAST:-120}
RATE=${RATE:-500}
SEAL_WAIT_S=${SEAL_WAIT_S:-5}

relay_header "relay with a long history under a held xmin horizon"
relay_start 56315 "outbox.partition_interval = '1h'" "outbox.retention = '30d'"
echo "   history $HISTORY published events over $PAST past partitions; $RATE enqueues/s for $RUN_S s per state; RR holder open during each run"
sql -q -o /dev/null -c "SELECT outbox.configure_sink('null')"
bench_file enqueue.sql >/dev/null <<'EOF'
\set k random(1, 1000)
SELECT outbox.enqueue('run' || :state, :client_id::text || '-' || :k::text, 'OrderPlaced', '{"order_id": 123456, "total": 44.98, "currency": "EUR"}');
EOF

# The history: past partitions, filled with published events (as a relay would have left
# them), one INSERT per partition.
add_history() {
  local per=$((HISTORY / PAST))
  sql -q -o /dev/null -c "SELECT count(outbox._create_partition(h, h + interval '1 hour'))
    FROM generate_series(date_trunc('hour', now()) - interval '$PAST hours',
                         date_trunc('hour', now()) - interval '1 hour', interval '1 hour') h"
  for i in $(seq "$PAST" -1 1); do
    echo "INSERT INTO outbox.events (id, aggregatetype, aggregateid, type, payload, created_at, part_at, published_at)
          SELECT gen_random_uuid(), 'order', (g % 1000)::text, 'OrderPlaced',
                 jsonb_build_object('order_id', g, 'customer', 'customer-' || (g % 1000), 'total', 44.98,
                                    'currency', 'EUR', 'lines', jsonb_build_array(jsonb_build_object('sku', 'sku-1', 'qty', 2))),
                 t, t, t + interval '1 millisecond'
            FROM generate_series(1, $per) g,
                 LATERAL (SELECT date_trunc('hour', now()) - interval '$i hours' + g * (interval '1 hour' / ($per + 1))) s(t);"
  done | sql -q -o /dev/null
  # As an old history is: vacuumed and analyzed long ago (autovacuum would otherwise work
  # through the new partitions during the run).
  sql -q -c "VACUUM (ANALYZE) outbox.events"
  sql -q -c "CHECKPOINT"
  wait_sealed
}
drop_history() {
  local p
  for p in $(sqlv "SELECT name FROM outbox.partitions WHERE upper_bound <= date_trunc('hour', now())"); do
    sql -q -c "DROP TABLE outbox.$p" -c "DELETE FROM outbox.partitions WHERE name = '$p'"
  done
}
# wait_sealed: until the relay has sealed the past partitions (src/relay/seal.cpp), as it has
# long done for an old history: their indexes are no longer scanned (pg_stat counters, over
# SEAL_WAIT_S). At most 5 minutes.
past_scans() {
  sqlv "SELECT coalesce(sum(s.idx_scan), 0) FROM pg_stat_user_indexes s JOIN pg_inherits i ON i.inhrelid = s.relid
         JOIN outbox.partitions p ON format('outbox.%I', p.name)::regclass = s.relid
        WHERE i.inhparent = 'outbox.events'::regclass AND p.upper_bound <= date_trunc('hour', now())"
}
wait_sealed() {
  local a b t0=$SECONDS
  a=$(past_scans)
  while [ $((SECONDS - t0)) -lt 300 ]; do
    sleep "$SEAL_WAIT_S"
    b=$(past_scans)
    if [ "$a" = "$b" ]; then
      echo "   the past partitions are sealed (no index scan in ${SEAL_WAIT_S} s), after $((SECONDS - t0)) s"
      return 0
    fi
    a=$b
  done
  echo "   WARNING: the past partitions' indexes were still scanned after 300 s"
}

results="$BENCH_WORK/history.txt"
: >"$results"
run() {  # LABEL STATE
  local cpu0 cpu1 n p50 p99
  holder_start
  cpu0=$(awk '{ print $14 + $15 }' "/proc/$RELAY_PID/stat")
  pgb -n -c 4 -j 2 -R "$RATE" -T "$RUN_S" -D state="$2" -f "$BENCH_WORK/enqueue.sql" >"$BENCH_WORK/pgbench.out" 2>&1 || true
  for _ in $(seq 600); do
    [ "$(sqlv "SELECT count(*) FROM outbox.event_status WHERE aggregatetype = 'run$2' AND published_at IS NULL")" = 0 ] && break
    sleep 0.1
  done
  cpu1=$(awk '{ print $14 + $15 }' "/proc/$RELAY_PID/stat")
  holder_stop
  read -r n p50 p99 < <(sqlv "
    SELECT count(*), round((percentile_cont(0.5) WITHIN GROUP (ORDER BY d))::numeric, 2),
           round((percentile_cont(0.99) WITHIN GROUP (ORDER BY d))::numeric, 2)
      FROM (SELECT extract(epoch FROM published_at - created_at) * 1000 AS d
              FROM outbox.event_status WHERE aggregatetype = 'run$2') s" | tr '|' ' ')
  local us total parts
  us=$(awk -v a="$cpu0" -v b="$cpu1" -v n="$n" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.1f", (n > 0 ? 1e6 * (b - a) / hz / n : 0) }')
  parts=$(sqlv "SELECT count(*) FROM outbox.partitions")
  total=$(sqlv "SELECT count(*) FROM outbox.events")
  printf '   %-5s %4d partitions, %9d events in all: %6d run events  p50 %6s ms  p99 %6s ms  relay CPU %6s us/event\n' \
    "$1" "$parts" "$total" "$n" "$p50" "$p99" "$us"
  echo "$1 $n $p50 $p99 $us" >>"$results"
}

run small 1
echo "   filling the history..."
t0=$(date +%s)
add_history
echo "   history filled in $(( $(date +%s) - t0 )) s"
run large 2
drop_history
run small 3

echo
# small: the mean of the runs before and after the history (a drift between them shows).
read -r s50 s99 scpu < <(awk '$1 == "small" { a += $3; b += $4; c += $5; n++ } END { printf "%.2f %.2f %.1f\n", a / n, b / n, c / n }' "$results")
read -r _ _ l50 l99 lcpu < <(grep '^large' "$results")
r() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "nan" }'; }
echo "   | | small history | $HISTORY events over $PAST more partitions | ratio |"
echo "   | --- | ---: | ---: | ---: |"
echo "   | delivery p50 ms | $s50 | $l50 | $(r "$l50" "$s50")x |"
echo "   | delivery p99 ms | $s99 | $l99 | $(r "$l99" "$s99")x |"
echo "   | relay CPU us/event | $scpu | $lcpu | $(r "$lcpu" "$scpu")x |"
echo
verdict "relay CPU with the history within 10 % of without ($(r "$lcpu" "$scpu")x)" \
  "$(awk -v a="$lcpu" -v b="$scpu" 'BEGIN { print (a <= 1.1 * b ? 1 : 0) }')"
verdict "p99 with the history within 10 % of without ($(r "$l99" "$s99")x)" \
  "$(awk -v a="$l99" -v b="$s99" 'BEGIN { print (a <= 1.1 * b ? 1 : 0) }')"
