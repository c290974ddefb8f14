#!/usr/bin/env bash
# A held xmin horizon (PgQue's benchmark/xmin-horizon scenario, issue #24): a steady stream
# of enqueues while a REPEATABLE READ transaction stays open for the whole run, against the
# same stream without it. VACUUM cannot remove a row version that the open snapshot may still
# see, so every row version that delivery leaves behind stays in the partition: the question
# is how many delivery leaves (targets: 0 dead tuples created by delivery, the partition with
# the holder within 1.1x of its size without, delivery as fast).
#
# Each variant: outbox.events truncated, then pgbench -R RATE (Poisson arrivals) from 4
# clients for DURATION seconds, one outbox.enqueue() of a ~200-byte payload per autocommit
# transaction, the null sink configured, the server's defaults (autovacuum on). With the
# holder, a session runs BEGIN ISOLATION LEVEL REPEATABLE READ and a query before pgbench
# starts and ends only after the measurement. Measured once every event is published, with
# the holder still open: the events' partitions through pgstattuple (exact: it reads them)
# - size, live and dead tuples - and the relay's own tables' dead tuples. Delivery:
# published_at - created_at (created_at is the enqueuing transaction's start, tens of
# microseconds before its commit here), p50 and p99.
#
#   bash bench/relay/held_horizon.sh            # RATE=800 DURATION=120: ~5 min
#   QUICK=1 bash bench/relay/held_horizon.sh    # DURATION=20: ~1 min
# RATE, DURATION override; RELAY_LIBS=DIR runs another build.
set -euo pipefail
# shellcheck source=bench/relay/lib.sh
. "$(dirname "$0")/lib.sh"

RATE=${RATE:-800}
if [ "$QUICK" = 1 ]; then DURATION=${DURATION:-20}; else DURATION=${DURATION:-120}; fi

relay_header "relay under a held xmin horizon: dead tuples and size of the events' partitions"
relay_start 56312
echo "   $RATE enqueues/s (pgbench -R, 4 clients) for $DURATION s per variant; null sink; autovacuum on"
sql -q -c "CREATE EXTENSION pgstattuple"
sql -q -o /dev/null -c "SELECT outbox.configure_sink('null')"
bench_file enqueue.sql >/dev/null <<'EOF'
\set k random(1, 1000)
SELECT outbox.enqueue('order', :client_id::text || '-' || :k::text, 'OrderPlaced',
  '{"order_id": 123456, "customer": "customer-0001", "lines": [{"sku": "sku-0001", "qty": 2, "price": 19.99}, {"sku": "sku-0002", "qty": 1, "price": 5.00}], "total": 44.98, "currency": "EUR"}');
EOF


results="$BENCH_WORK/held.txt"
: >"$results"
for variant in without with; do
  sql -q -c "TRUNCATE outbox.events"
  sql -q -c "CHECKPOINT"
  holder=""
  if [ "$variant" = with ]; then
    holder_start
    holder=$HOLDER_PID
    echo "   holder: backend_xmin $(sqlv "SELECT backend_xmin FROM pg_stat_activity WHERE application_name = 'horizon_holder'")"
  fi
  pgb -n -c 4 -j 2 -R "$RATE" -T "$DURATION" -f "$BENCH_WORK/enqueue.sql" >"$BENCH_WORK/pgbench.out" 2>&1 || true
  relay_wait_published
  tps=$(pgbench_tps "$BENCH_WORK/pgbench.out")
  read -r n p50 p99 < <(sqlv "
    SELECT count(*),
           round((percentile_cont(0.5) WITHIN GROUP (ORDER BY d))::numeric, 2),
           round((percentile_cont(0.99) WITHIN GROUP (ORDER BY d))::numeric, 2)
      FROM (SELECT extract(epoch FROM published_at - created_at) * 1000 AS d FROM outbox.event_status) s" | tr '|' ' ')
  # Every partition that holds rows, exactly; and the relay's tables (its state).
  read -r bytes live dead < <(sqlv "
    SELECT sum(s.table_len), sum(s.tuple_count), sum(s.dead_tuple_count)
      FROM pg_inherits i, LATERAL pgstattuple(i.inhrelid) s
     WHERE i.inhparent = 'outbox.events'::regclass" | tr '|' ' ')
  state_dead=$(sqlv "
    SELECT coalesce(sum(s.dead_tuple_count), 0)
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace, LATERAL pgstattuple(c.oid) s
     WHERE n.nspname = 'outbox' AND c.relkind = 'r' AND c.relname LIKE 'relay%'")
  holder_ok=-
  if [ -n "$holder" ]; then
    holder_ok=$(holder_holds)
    holder_stop
  fi
  mb=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')
  printf '   %-7s holder: %6d events (%.0f/s)  p50 %6s ms  p99 %6s ms  partitions %6s MB  live %7d  dead %7d  relay tables dead %5d%s\n' \
    "$variant" "$n" "${tps:-0}" "$p50" "$p99" "$mb" "$live" "$dead" "$state_dead" \
    "$([ "$holder_ok" = 0 ] && echo '  (WARNING: the holder had ended)')"
  echo "$variant $n $p50 $p99 $bytes $live $dead $state_dead" >>"$results"
done

echo
read -r _ n0 p50_0 p99_0 b0 _ d0 _ < <(grep '^without' "$results")
read -r _ n1 p50_1 p99_1 b1 _ d1 s1 < <(grep '^with ' "$results")
size_ratio=$(awk -v a="$b1" -v b="$b0" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
echo "   | | without holder | with holder | ratio |"
echo "   | --- | ---: | ---: | ---: |"
echo "   | events | $n0 | $n1 | |"
safe_ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }'; }
echo "   | delivery p50 ms | $p50_0 | $p50_1 | $(safe_ratio "$p50_1" "$p50_0") |"
echo "   | delivery p99 ms | $p99_0 | $p99_1 | $(safe_ratio "$p99_1" "$p99_0") |"
echo "   | partitions MB | $(awk -v b="$b0" 'BEGIN { printf "%.1f", b / 1048576 }') | $(awk -v b="$b1" 'BEGIN { printf "%.1f", b / 1048576 }') | ${size_ratio}x |"
echo "   | dead tuples in the partitions | $d0 | $d1 | |"
echo "   | dead tuples in the relay's tables | | $s1 | |"
echo
verdict "with the holder, delivery leaves 0 dead tuples in the events' partitions ($d1)" \
  "$([ "$d1" = 0 ] && echo 1 || echo 0)"
verdict "with the holder, the partitions within 1.1x of their size without (${size_ratio}x)" \
  "$(awk -v r="$size_ratio" 'BEGIN { print (r <= 1.1 ? 1 : 0) }')"
verdict "delivery as fast with the holder: p99 within 1.1x (or 1 ms) of without ($p99_1 / $p99_0 ms)" \
  "$(awk -v a="$p99_1" -v b="$p99_0" 'BEGIN { print ((a <= 1.1 * b || a - b <= 1) ? 1 : 0) }')"
