#!/usr/bin/env bash
# Late commits: how long events wait for the sink when many writers commit out of their
# sequence order, with and without a transaction holding xmin back (the low-water mark then
# cannot move). No target in issue #3; the roadmap asks for a hot queue that stays fast
# while a long transaction holds the horizon.
#
# pgbench (-M prepared), 8 clients (-j 2) at a fixed rate (-R, 400 commits/s), each
# transaction BEGIN; INSERT an order; SELECT outbox.enqueue(...); COMMIT (as writers.sh).
# With 8 writers, commits overtake each other's sequence values all the time: each such
# event is a late commit for the relay, found in its gaps (src/core/seq_gaps.hpp).
# Variants, interleaved in rounds:
#   free      nothing else runs
#   held      a session holds an xid (BEGIN; SELECT pg_current_xact_id(); ...) for the
#             whole run
# Reported per variant: p50 / p99 / max of published_at - created_at over the run's events
# (created_at is the enqueue, inside the writer's transaction, so this includes the
# writer's own commit), medians over the rounds, and the relay's CPU.
#
#   bash bench/relay/late_commits.sh          # 3 rounds x 10 s, ~1.5 min
#   QUICK=1 bash bench/relay/late_commits.sh  # 2 rounds x 4 s
# ROUNDS, SECONDS_PER_RUN, RATE, CLIENTS override.
set -euo pipefail
# shellcheck source=bench/relay/lib.sh
. "$(dirname "$0")/lib.sh"

if [ "$QUICK" = 1 ]; then
  ROUNDS=${ROUNDS:-2}; SECONDS_PER_RUN=${SECONDS_PER_RUN:-4}
else
  ROUNDS=${ROUNDS:-3}; SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
fi
RATE=${RATE:-400}
CLIENTS=${CLIENTS:-8}

relay_header "late commits: enqueue -> published at $RATE commits/s from $CLIENTS writers, xmin free or held"
relay_start 56305
echo "   rounds=$ROUNDS, $SECONDS_PER_RUN s per run"

sqlv "SELECT outbox.configure_sink('null')" >/dev/null
orders_table_sql | sql -o /dev/null
bench_file writer.sql >/dev/null <<'EOF2'
\set cid random(1, 1000000)
BEGIN;
INSERT INTO orders (customer_id, total) VALUES (:cid, :cid % 1000 + 0.99) RETURNING id AS oid \gset
SELECT outbox.enqueue('order', :oid::text, 'OrderPlaced', ('{"order_id": ' || :oid || ', "customer_id": ' || :cid || '}')::jsonb);
COMMIT;
EOF2

relay_cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$RELAY_PID/stat"; }
TICKS=$(getconf CLK_TCK)
results="$BENCH_WORK/results.txt"   # round variant p50 p99 max relay_cpu_pct
: >"$results"
for r in $(seq 1 "$ROUNDS"); do
  printf '   round %s/%s:' "$r" "$ROUNDS"
  for k in 0 1; do
    if [ $(((k + r) % 2)) = 0 ]; then v=free; else v=held; fi
    holder=""
    if [ "$v" = held ]; then
      sql -c "BEGIN; SELECT pg_current_xact_id(); SELECT pg_sleep($SECONDS_PER_RUN + 3); COMMIT" >/dev/null 2>&1 &
      holder=$!
      sleep 0.5
    fi
    t0=$(sqlv "SELECT clock_timestamp()")
    c0=$(relay_cpu_ticks)
    pgb -n -M prepared -c "$CLIENTS" -j 2 -R "$RATE" -T "$SECONDS_PER_RUN" -f "$BENCH_WORK/writer.sql" >"$BENCH_WORK/out.$v.$r" 2>&1 ||
      { cat "$BENCH_WORK/out.$v.$r"; exit 1; }
    c1=$(relay_cpu_ticks)
    # Every event of the run is published before it is measured (the late ones included).
    for _ in $(seq 100); do
      [ "$(sqlv "SELECT count(*) FROM outbox.event_status WHERE created_at >= '$t0' AND published_at IS NULL")" = 0 ] && break
      sleep 0.1
    done
    row=$(sqlv "SELECT round(1000 * extract(epoch FROM percentile_cont(0.5) WITHIN GROUP (ORDER BY published_at - created_at))::numeric, 2),
                       round(1000 * extract(epoch FROM percentile_cont(0.99) WITHIN GROUP (ORDER BY published_at - created_at))::numeric, 2),
                       round(1000 * extract(epoch FROM max(published_at - created_at))::numeric, 2),
                       count(*) FILTER (WHERE published_at IS NULL)
                  FROM outbox.event_status WHERE created_at >= '$t0'" | tr '|' ' ')
    [ -n "$holder" ] && wait "$holder"
    set -- $row
    [ "$4" = 0 ] || { echo "   $4 events of the run were not published within 10 s"; exit 1; }
    cpu=$(awk -v a="$c0" -v b="$c1" -v hz="$TICKS" -v s="$SECONDS_PER_RUN" 'BEGIN { printf "%.1f", 100 * (b - a) / hz / s }')
    echo "$r $v $1 $2 $3 $cpu" >>"$results"
    printf ' %s p99=%s ms' "$v" "$2"
  done
  echo
done

vals() { awk -v v="$1" -v f="$2" '$2 == v { print $f }' "$results"; }
echo
echo "-- results: medians over $ROUNDS rounds of ${SECONDS_PER_RUN}s (ms from enqueue to published_at)"
printf '   %-50s %8s %8s %8s %10s\n' variant p50 p99 max "relay CPU"
for v in free held; do
  label="xmin free"
  [ "$v" = held ] && label="xmin held by an open transaction all along"
  printf '   %-50s %8.2f %8.2f %8.2f %9.1f%%\n' "$label" "$(vals $v 3 | median)" "$(vals $v 4 | median)" \
    "$(vals $v 5 | median)" "$(vals $v 6 | median)"
done
