#!/usr/bin/env bash
# Getting rid of old events: DELETE + VACUUM on the article's single table against
# outbox.rotate() dropping old partitions. What each returns to the OS, how long it takes,
# and how long it holds up the writers that keep writing meanwhile.
#
# Each round, with HISTORY_ROWS published events (~75 MB) of old history:
#   naive     the article's bigserial table (primary key + partial index):
#             DELETE FROM outbox_naive WHERE created_at < now() - '1 hour', then VACUUM
#   rotate    outbox.events with the history in HISTORY_PARTITIONS hourly partitions in
#             the past (made with outbox._create_partition()): outbox.rotate() with
#             outbox.retention = '1s' drops them all
#   blocked   what outbox.rotate() does when a transaction that has enqueued is still open
#             (it holds a lock on outbox.events): it waits outbox.rotate_lock_timeout
#             (100 ms) for its lock, gives up with a NOTICE and returns 'skipped' rows.
#             For contrast, a plain DROP TABLE of one old partition in the same situation
#             ("unguarded"): it waits for the open transaction, and every writer queues
#             behind it.
#   late      outbox.rotate() as in "rotate", but with the old partitions flagged
#             may_hold_late_rows, as rotate() flags the newest partition when rotation has
#             fallen behind: each is scanned in full under the lock before it is dropped
# A steady writer runs all the time: pgbench, 2 clients, a fixed total rate, logging every
# transaction (outbox.enqueue() for the outbox cases, a plain INSERT for the naive one).
# Its latency includes the time a transaction waited for its turn (--rate), so a blocked
# writer shows the whole time it was held up. Baseline: the same run's transactions before
# the maintenance started; window: the transactions that overlapped the operation.
#
#   bash bench/rotation.sh          # full: 5 rounds
#   QUICK=1 bash bench/rotation.sh  # about a minute and a half, ~20 MB of history, 2 rounds
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

if [ "$QUICK" = 1 ]; then
  HISTORY_ROWS=${HISTORY_ROWS:-60000}; ROUNDS=${ROUNDS:-2}; NAIVE_RUN_S=4
else
  HISTORY_ROWS=${HISTORY_ROWS:-240000}; ROUNDS=${ROUNDS:-5}; NAIVE_RUN_S=4
fi
HISTORY_PARTITIONS=${HISTORY_PARTITIONS:-10}
WRITER_RATE=${WRITER_RATE:-200}   # transactions per second, both writer clients together
BASE_S=1.5                          # writer alone before the maintenance: the baseline
HOLD_S=2.5                        # how long the open transaction holds its lock

bench_header "rotation: DELETE + VACUUM against dropping partitions, with writers running"
bench_start 55303 "autovacuum = off"

sql <<EOF
CREATE EXTENSION outbox;
$(naive_table_sql outbox_naive)
CREATE INDEX outbox_unpublished ON outbox_naive (id) WHERE published_at IS NULL;
$(history_sql)
EOF
# BASE: where the installed partitions begin. The history partitions are the hours before.
BASE=$(sqlv "SELECT min(lower_bound) FROM outbox.partitions")
# The history, made once: every round copies it (the same rows at the same times).
sql <<EOF
CREATE UNLOGGED TABLE hist_naive AS
  SELECT * FROM history($HISTORY_ROWS, now() - interval '2 days', now() - interval '1 day');
CREATE UNLOGGED TABLE hist_outbox AS
  SELECT * FROM history($HISTORY_ROWS,
                        '$BASE'::timestamptz - interval '$HISTORY_PARTITIONS hours', '$BASE'::timestamptz);
EOF

PAYLOAD="('{\"order_id\": ' || :oid || ', \"customer_id\": ' || :cid || ', \"total\": \"' || (:cid % 1000) || '.99\", \"currency\": \"EUR\", \"items\": [{\"sku\": \"SKU-' || :sku || '\", \"qty\": ' || :qty || '}], \"placed_at\": \"' || now() || '\"}')::jsonb"
SETS='\set cid random(1, 1000000)
\set sku random(1, 99999)
\set qty random(1, 9)
\set oid random(1, 1000000000)'
bench_file writer_outbox.sql >/dev/null <<EOF
$SETS
SELECT outbox.enqueue('order', :oid::text, 'OrderPlaced', $PAYLOAD);
EOF
bench_file writer_naive.sql >/dev/null <<EOF
$SETS
INSERT INTO outbox_naive (aggregatetype, aggregateid, type, payload) VALUES ('order', :oid::text, 'OrderPlaced', $PAYLOAD);
EOF

# writer_start NAME SCRIPT SECONDS: a throttled, logging pgbench in the background.
WRITER_PID=""
writer_start() {
  rm -f "$BENCH_WORK/log_$1".*
  as_postgres pgbench -h "$BENCH_WORK" -p "$BENCH_PORT" -n -M prepared -c 2 -j 2 -R "$WRITER_RATE" \
    -T "$3" --log --log-prefix="$BENCH_WORK/log_$1" -f "$BENCH_WORK/$2.sql" "$BENCH_DB" \
    >"$BENCH_WORK/writer_$1.out" 2>&1 &
  WRITER_PID=$!
  WRITER_T0=$(now_us)
}
writer_wait() {
  wait "$WRITER_PID" || { cat "$BENCH_WORK/writer_$1.out"; exit 1; }
}
# lat NAME FROM_US TO_US MODE: "count p99_ms max_ms" of the writer's transactions; MODE
# overlap: those running at any moment of [FROM, TO]; MODE ended: those that ended in it.
# pgbench log line: client txno latency_us script epoch_s epoch_us [lag_us]
lat() {
  cat "$BENCH_WORK/log_$1".* | awk -v a="$2" -v b="$3" -v m="$4" '{
      end = $5 * 1000000 + $6; start = end - $3
      if ((m == "overlap" && start <= b && end >= a) || (m == "ended" && end >= a && end < b))
        printf "%.3f\n", $3 / 1000 }' | sort -g |
    awk '{ v[NR] = $1 } END {
      if (NR == 0) { print "0 nan nan"; exit }
      i = int(NR * 0.99 + 0.999); if (i > NR) i = NR; if (i < 1) i = 1
      print NR, v[i], v[NR] }'
}
# timed TAG SQL...: runs statements in one session (psql -c each), prints server-side ms
# of the last statement to $BENCH_WORK/t_TAG, everything psql printed to $BENCH_WORK/o_TAG.
timed() {
  local tag=$1
  shift
  local args=(-c '\timing on')
  local s
  for s in "$@"; do args+=(-c "$s"); done
  sql "${args[@]}" >"$BENCH_WORK/o_$tag" 2>&1 || { cat "$BENCH_WORK/o_$tag"; exit 1; }
  sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' "$BENCH_WORK/o_$tag" | tail -n 1 >"$BENCH_WORK/t_$tag"
}
mb_of() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }

OUTBOX_SIZE_SQL="SELECT coalesce(sum(pg_total_relation_size(inhrelid)), 0) FROM pg_inherits WHERE inhparent = 'outbox.events'::regclass"
results="$BENCH_WORK/results.txt"   # round key value
: >"$results"
rec() { echo "$1 $2 $3" >>"$results"; }

round_naive() {
  local r=$1
  sql -c "TRUNCATE outbox_naive" -c "INSERT INTO outbox_naive (aggregatetype, aggregateid, type, payload, created_at, published_at)
    SELECT 'order', aggregateid, 'OrderPlaced', payload, ts, ts + interval '1 second' FROM hist_naive" \
      -c "VACUUM ANALYZE outbox_naive" -c "CHECKPOINT"
  rec "$r" naive.size0 "$(sqlv "SELECT pg_total_relation_size('outbox_naive')")"
  local run_s
  run_s=$(awk -v b=$BASE_S -v n=$NAIVE_RUN_S 'BEGIN { print int(b + n + 0.5) }')
  writer_start naive writer_naive "$run_s"
  sleep "$BASE_S"
  local t1 t2 t3 t4
  t1=$(now_us)
  timed del "DELETE FROM outbox_naive WHERE created_at < now() - interval '1 hour'"
  t2=$(now_us)
  rec "$r" naive.size_del "$(sqlv "SELECT pg_total_relation_size('outbox_naive')")"
  sleep 0.5
  t3=$(now_us)
  timed vac "VACUUM outbox_naive"
  t4=$(now_us)
  rec "$r" naive.size_vac "$(sqlv "SELECT pg_total_relation_size('outbox_naive')")"
  rec "$r" naive.heap_vac "$(sqlv "SELECT pg_relation_size('outbox_naive')")"
  rec "$r" naive.del_ms "$(cat "$BENCH_WORK/t_del")"
  rec "$r" naive.vac_ms "$(cat "$BENCH_WORK/t_vac")"
  local t_end
  t_end=$(now_us)
  writer_wait naive
  [ "$(awk -v a="$t_end" -v b="$WRITER_T0" -v s="$run_s" 'BEGIN { print (a - b < s * 1000000) }')" = 1 ] ||
    echo "   (warning: the naive maintenance outlasted the writer run)"
  read -r n p99 max < <(lat naive $((WRITER_T0 + 500000)) "$t1" ended)
  rec "$r" naive.base_p99 "$p99"; rec "$r" naive.base_max "$max"
  read -r n p99 max < <(lat naive "$t1" "$t2" overlap)
  rec "$r" naive.del_p99 "$p99"; rec "$r" naive.del_max "$max"; rec "$r" naive.del_n "$n"
  read -r n p99 max < <(lat naive "$t3" "$t4" overlap)
  rec "$r" naive.vac_p99 "$p99"; rec "$r" naive.vac_max "$max"; rec "$r" naive.vac_n "$n"
}

# Old partitions with the history in them, ending where the installed partitions begin.
make_outbox_history() {
  sql <<EOF
CREATE TEMP TABLE parts AS
  SELECT '$BASE'::timestamptz - make_interval(hours => g) AS lo
    FROM generate_series(1, $HISTORY_PARTITIONS) g;
SELECT count(outbox._create_partition(lo, lo + interval '1 hour')) FROM (SELECT lo FROM parts ORDER BY lo) s \\g /dev/null
INSERT INTO outbox.events (id, aggregatetype, aggregateid, type, payload, created_at, part_at, published_at)
  SELECT id, 'order', aggregateid, 'OrderPlaced', payload, ts, ts, ts + interval '1 second'
    FROM hist_outbox;
VACUUM ANALYZE outbox.events;
CHECKPOINT;
EOF
}

round_outbox() {
  local r=$1 t1 t2 t3 t4 t5 t6 n p99 max hold_pid
  make_outbox_history
  rec "$r" outbox.size0 "$(sqlv "$OUTBOX_SIZE_SQL")"

  # blocked: an open transaction that has enqueued, while rotate() runs; then the
  # unguarded DROP in the same situation.
  writer_start blocked writer_outbox "$(awk -v b=$BASE_S -v h=$HOLD_S 'BEGIN { print int(b + h + 2) }')"
  sleep "$BASE_S"
  sql -c "BEGIN" -c "SELECT outbox.enqueue('order', 'holder', 'OrderPlaced', '{}')" \
      -c "SELECT pg_sleep($HOLD_S)" -c "COMMIT" >/dev/null 2>&1 &
  hold_pid=$!
  sleep 0.3
  t1=$(now_us)
  timed blocked "SET outbox.retention = '1s'" "SELECT action, count(*) FROM outbox.rotate() GROUP BY 1 ORDER BY 1"
  t2=$(now_us)
  rec "$r" blocked.ms "$(cat "$BENCH_WORK/t_blocked")"
  rec "$r" blocked.skipped "$(awk -F'|' '/skipped/ { gsub(/ /, "", $2); print $2 }' "$BENCH_WORK/o_blocked" | head -n 1)"
  rec "$r" blocked.dropped "$(awk -F'|' '/dropped/ { gsub(/ /, "", $2); print $2 }' "$BENCH_WORK/o_blocked" | head -n 1)"
  grep -q 'NOTICE:  outbox.rotate: outbox.events is busy' "$BENCH_WORK/o_blocked" && rec "$r" blocked.notice 1
  sleep 0.2
  local victim
  victim=$(sqlv "SELECT name FROM outbox.partitions ORDER BY lower_bound LIMIT 1")
  t3=$(now_us)
  timed unguarded "SET lock_timeout = 0" "DROP TABLE outbox.\"$victim\""
  t4=$(now_us)
  rec "$r" unguarded.ms "$(cat "$BENCH_WORK/t_unguarded")"
  wait "$hold_pid" || true
  writer_wait blocked
  read -r n p99 max < <(lat blocked $((WRITER_T0 + 500000)) "$t1" ended)
  rec "$r" blocked.base_p99 "$p99"; rec "$r" blocked.base_max "$max"
  read -r n p99 max < <(lat blocked "$t1" "$t2" overlap)
  rec "$r" blocked.win_p99 "$p99"; rec "$r" blocked.win_max "$max"; rec "$r" blocked.win_n "$n"
  read -r n p99 max < <(lat blocked "$t3" "$t4" overlap)
  rec "$r" unguarded.win_p99 "$p99"; rec "$r" unguarded.win_max "$max"; rec "$r" unguarded.win_n "$n"

  # rotate: nothing in the way; drops every old partition.
  sql -c "CHECKPOINT"
  rec "$r" outbox.size1 "$(sqlv "$OUTBOX_SIZE_SQL")"
  rec "$r" outbox.parts_before "$(sqlv "SELECT count(*) FROM pg_inherits WHERE inhparent = 'outbox.events'::regclass")"
  writer_start rotate writer_outbox "$(awk -v b=$BASE_S 'BEGIN { print int(b + 2.5) }')"
  sleep "$BASE_S"
  t5=$(now_us)
  timed rotate "SET outbox.retention = '1s'" "SELECT action, count(*) FROM outbox.rotate() GROUP BY 1 ORDER BY 1"
  t6=$(now_us)
  rec "$r" rotate.ms "$(cat "$BENCH_WORK/t_rotate")"
  rec "$r" rotate.dropped "$(awk -F'|' '/dropped/ { gsub(/ /, "", $2); print $2 }' "$BENCH_WORK/o_rotate" | head -n 1)"
  rec "$r" outbox.size2 "$(sqlv "$OUTBOX_SIZE_SQL")"
  writer_wait rotate
  read -r n p99 max < <(lat rotate $((WRITER_T0 + 500000)) "$t5" ended)
  rec "$r" rotate.base_p99 "$p99"; rec "$r" rotate.base_max "$max"
  read -r n p99 max < <(lat rotate "$t5" "$t6" overlap)
  rec "$r" rotate.win_p99 "$p99"; rec "$r" rotate.win_max "$max"; rec "$r" rotate.win_n "$n"
}

# late: the same rotate() after rotation had fallen behind. Then outbox.rotate() flags the
# partition that was the newest (may_hold_late_rows: enqueue may have routed recent events
# into it) and, before dropping it, checks it with a full scan for rows newer than the
# cutoff, while it holds ACCESS EXCLUSIVE on outbox.events. Here every old partition is
# flagged, so that the scanned volume is the whole history: as one flagged partition of
# that size would be.
round_late() {
  local r=$1 t1 t2 n p99 max
  make_outbox_history
  sql -c "UPDATE outbox.partitions SET may_hold_late_rows = true WHERE upper_bound <= '$BASE'" \
      -c "CHECKPOINT"
  rec "$r" late.flagged "$(sqlv "SELECT count(*) FROM outbox.partitions WHERE may_hold_late_rows")"
  rec "$r" late.size "$(sqlv "SELECT coalesce(sum(pg_relation_size(format('outbox.%I', name)::regclass)), 0) FROM outbox.partitions WHERE may_hold_late_rows")"
  writer_start late writer_outbox "$(awk -v b=$BASE_S 'BEGIN { print int(b + 2.5) }')"
  sleep "$BASE_S"
  t1=$(now_us)
  timed late "SET outbox.retention = '1s'" "SELECT action, count(*) FROM outbox.rotate() GROUP BY 1 ORDER BY 1"
  t2=$(now_us)
  rec "$r" late.ms "$(cat "$BENCH_WORK/t_late")"
  rec "$r" late.dropped "$(awk -F'|' '/dropped/ { gsub(/ /, "", $2); print $2 }' "$BENCH_WORK/o_late" | head -n 1)"
  writer_wait late
  read -r n p99 max < <(lat late "$t1" "$t2" overlap)
  rec "$r" late.win_p99 "$p99"; rec "$r" late.win_max "$max"
}

for r in $(seq 1 "$ROUNDS"); do
  echo "   round $r/$ROUNDS ..."
  if [ $((r % 2)) = 1 ]; then round_naive "$r"; round_outbox "$r"; round_late "$r"
  else round_late "$r"; round_outbox "$r"; round_naive "$r"; fi
done
grep -h 'NOTICE' "$BENCH_WORK/o_blocked" | head -n 1 | sed 's/^/   last blocked rotate said: /'

m() { awk -v k="$1" '$2 == k && $3 != "" && $3 != "nan" { print $3 }' "$results" | median; }
f1() { printf '%.1f' "$1"; }

echo
echo "-- results: medians over $ROUNDS rounds; history $HISTORY_ROWS published events; writer"
echo "   ${WRITER_RATE} tx/s on 2 clients; latencies in ms (p99 / max of the writer's transactions)"
echo
echo "   naive: DELETE + VACUUM of the single bigserial table"
printf '     size before            %8s MB\n' "$(mb_of "$(m naive.size0)")"
printf '     DELETE                 %8s ms   size after  %6s MB   writer p99/max %s / %s ms\n' \
  "$(f1 "$(m naive.del_ms)")" "$(mb_of "$(m naive.size_del)")" "$(f1 "$(m naive.del_p99)")" "$(f1 "$(m naive.del_max)")"
printf '     VACUUM                 %8s ms   size after  %6s MB   writer p99/max %s / %s ms\n' \
  "$(f1 "$(m naive.vac_ms)")" "$(mb_of "$(m naive.size_vac)")" "$(f1 "$(m naive.vac_p99)")" "$(f1 "$(m naive.vac_max)")"
printf '     writer, no maintenance                                           p99/max %s / %s ms\n' \
  "$(f1 "$(m naive.base_p99)")" "$(f1 "$(m naive.base_max)")"
echo
echo "   rotate: outbox.rotate() dropping the $(m rotate.dropped) old partitions left (the unguarded DROP took one)"
printf '     size before            %8s MB   (all of outbox.events, %s partitions)\n' "$(mb_of "$(m outbox.size1)")" "$(m outbox.parts_before)"
printf '     rotate()               %8s ms   size after  %6s MB   writer p99/max %s / %s ms\n' \
  "$(f1 "$(m rotate.ms)")" "$(mb_of "$(m outbox.size2)")" "$(f1 "$(m rotate.win_p99)")" "$(f1 "$(m rotate.win_max)")"
printf '     writer, no maintenance                                           p99/max %s / %s ms\n' \
  "$(f1 "$(m rotate.base_p99)")" "$(f1 "$(m rotate.base_max)")"
echo
echo "   blocked: a transaction that enqueued stays open ${HOLD_S}s while maintenance runs"
printf '     rotate() gives up      %8s ms   skipped %s partitions, NOTICE in %s/%s rounds   writer p99/max %s / %s ms\n' \
  "$(f1 "$(m blocked.ms)")" "$(m blocked.skipped)" "$(awk '$2 == "blocked.notice"' "$results" | wc -l)" "$ROUNDS" \
  "$(f1 "$(m blocked.win_p99)")" "$(f1 "$(m blocked.win_max)")"
printf '     unguarded DROP TABLE   %8s ms   (waits for the open transaction)       writer p99/max %s / %s ms\n' \
  "$(f1 "$(m unguarded.ms)")" "$(f1 "$(m unguarded.win_p99)")" "$(f1 "$(m unguarded.win_max)")"
printf '     writer, no maintenance                                           p99/max %s / %s ms\n' \
  "$(f1 "$(m blocked.base_p99)")" "$(f1 "$(m blocked.base_max)")"

echo
echo "   late: the same rotate() with the old partitions flagged may_hold_late_rows (checked by a"
echo "   full scan under the lock before the drop)"
printf '     rotate()               %8s ms   scanned %s MB in %s partitions        writer p99/max %s / %s ms\n' \
  "$(f1 "$(m late.ms)")" "$(mb_of "$(m late.size)")" "$(m late.flagged)" "$(f1 "$(m late.win_p99)")" "$(f1 "$(m late.win_max)")"

echo
echo "   per round (ms):"
printf '     %-5s %8s %8s %8s %10s %10s %10s %10s %10s\n' round delete vacuum rotate "rot.max" "blk.ms" "blk.max" "ungd.max" "late.ms"
for r in $(seq 1 "$ROUNDS"); do
  g() { awk -v r="$r" -v k="$1" '$1 == r && $2 == k { printf "%.1f", $3 }' "$results"; }
  printf '     %-5s %8s %8s %8s %10s %10s %10s %10s %10s\n' "$r" "$(g naive.del_ms)" "$(g naive.vac_ms)" \
    "$(g rotate.ms)" "$(g rotate.win_max)" "$(g blocked.ms)" "$(g blocked.win_max)" "$(g unguarded.win_max)" "$(g late.ms)"
done

echo
echo "-- targets"
freed_rot=$(awk -v a="$(m outbox.size1)" -v b="$(m outbox.size2)" 'BEGIN { print a - b }')
freed_vac=$(awk -v a="$(m naive.size0)" -v b="$(m naive.size_vac)" 'BEGIN { print a - b }')
verdict "DELETE returns no space: $(mb_of "$(m naive.size0)") -> $(mb_of "$(m naive.size_del)") MB (article: 71 MB stays 71 MB)" \
  "$(awk -v a="$(m naive.size0)" -v b="$(m naive.size_del)" 'BEGIN { print (b >= a) ? 1 : 0 }')"
echo "        VACUUM gave back $(mb_of "$freed_vac") MB: only the file's tail can go back, and here the tail"
echo "        holds the rows the writer added meanwhile (article: 71 -> 11 MB, no writer at the tail)"
verdict "rotate() returns the space at once: $(mb_of "$(m outbox.size1)") -> $(mb_of "$(m outbox.size2)") MB ($(mb_of "$freed_rot") MB freed)" \
  "$(awk -v x="$freed_rot" -v h="$(m outbox.size1)" 'BEGIN { print (x > 0.5 * h) ? 1 : 0 }')"
verdict "rotate() holds writers up less than DELETE + VACUUM does: rotate max $(f1 "$(m rotate.win_max)") ms vs DELETE max $(f1 "$(m naive.del_max)") / VACUUM max $(f1 "$(m naive.vac_max)") ms" \
  "$(awk -v a="$(m rotate.win_max)" -v b="$(m naive.del_max)" -v c="$(m naive.vac_max)" 'BEGIN { print (a <= (b > c ? b : c)) ? 1 : 0 }')"
verdict "with a lock held, rotate() gives up after outbox.rotate_lock_timeout (100 ms) with a NOTICE and 'skipped' rows ($(awk '$2 == "blocked.notice"' "$results" | wc -l)/$ROUNDS rounds; rotate took $(f1 "$(m blocked.ms)") ms)" \
  "$([ "$(awk '$2 == "blocked.notice"' "$results" | wc -l)" = "$ROUNDS" ] && [ -n "$(m blocked.skipped)" ] && echo 1 || echo 0)"
verdict "writers are held up by at most about the lock timeout meanwhile: max $(f1 "$(m blocked.win_max)") ms (<= 100 ms + 2x baseline max $(f1 "$(m blocked.base_max)") ms); unguarded DROP: $(f1 "$(m unguarded.win_max)") ms" \
  "$(awk -v a="$(m blocked.win_max)" -v b="$(m blocked.base_max)" 'BEGIN { print (a <= 100 + 2 * b) ? 1 : 0 }')"
