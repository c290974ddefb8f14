#!/usr/bin/env bash
# Replay (outbox.replay(), the database's "outbox replay" worker) against the relay, in one
# run, side by side:
#
#   1 and 2 run PAIRS times (3; QUICK=1: 2), each pair on a fresh backlog (TRUNCATE first):
#   1. drain: ROWS article-sized order events (outbox.enqueue('order', ...), the payload of
#      sinks.sh / throughput.sh) over 100,000 keys, enqueued while no sink is configured (the
#      relay idles), VACUUM (ANALYZE), CHECKPOINT; then configure_sink('null') and the clock
#      runs from its commit until the relay's shared-memory counters (outbox._workers(),
#      polled every 5 ms) count the backlog sent, as sinks.sh / throughput.sh / workers.sh
#      time a drain; then, off the clock, outbox.event_status must say none is unpublished.
#   2. replay: once the relay has saved its low-water mark above the backlog (as it has long
#      before any replay of retained events: until then "published" is a delivery-log probe
#      per event in the worker's fetch, and before 7502efc in replay()'s count), CHECKPOINT; SELECT outbox.replay('-infinity', now()) (autocommit) and the clock
#      runs from its commit until its outbox.replays row says state = 'done' (polled every
#      5 ms, by primary key); rate = events_sent / that time. Also the rate over the row's own
#      started_at .. finished_at (a fresh worker saves its progress at its first batch), how long
#      the replay() call itself took (it counts the window's events before it commits), and
#      the replay worker's CPU (its pid from pg_stat_activity, backend_type 'outbox replay';
#      /proc/PID/task/*/schedstat, sampled while it runs).
#   3. live writers: pgbench -R RATE (commits at the times of a Poisson process), CLIENTS
#      clients (-j 2), one outbox.enqueue() of an order event per autocommit transaction, key
#      = the pgbench client, SECONDS_PER_RUN s; latency = the event's published_at in
#      outbox.event_status (the relay's delivery log) - the moment COMMIT returned to pgbench
#      (its -l log), the k-th event of a client (in seq order) being its k-th transaction:
#      latency_curve.sh's method, unchanged. Four variants, ROUNDS rounds, the order reversed
#      every other round:
#        alone    no replay runs
#        replay   a replay of everything retained ('-infinity', now(): the ROWS events and the
#                 live events of the runs before) is requested, and the writers start once it
#                 has committed. So that one runs the whole time, a "keeper" (polling every
#                 5 ms) keeps AHEAD (1) more requested behind it (the worker takes the running
#                 replays in id order, one after the other) and requests another whenever one
#                 is done; those still running when the writers end are cancelled
#                 (outbox.cancel_replay()). AHEAD=0: the next is requested only once the one
#                 before is done. Coverage: the share of the writers' time in which the worker
#                 was sending one (replay i from its commit, or replay i-1's finished_at if
#                 later, to its finished_at; the replay worker's CPU over the run shows it busy).
#        full     the same with outbox.replay_share = 100 (set and reset by ALTER SYSTEM and a
#                 reload): the replay worker sends all the time, as it did before the share.
#        hog      a control, no replay: a busy loop (sh) takes one core for the run, about
#                 the CPU a replay takes: what CPU contention alone does. A writer's log
#                 time is when pgbench got to run after its COMMIT returned, so a busy core
#                 can make it late, and the measured latency shorter (even below 0).
#      Per run: p50 / p99 / max, the relay's CPU (all threads), the replay worker's CPU, the
#      server's WAL bytes and syncs per second (pg_stat_wal) and the share of 20-ms samples of
#      pg_stat_activity in which the relay waited for the WAL (IO/WALSync, IO/WALWrite,
#      LWLock/WALWrite).
#   4. Targets (the replay issue): replay rate >= 0.8x the drain rate (the median of the
#      per-pair ratios); live p99 with a replay <= 2x without (the median of the per-round
#      ratios).
#
# Settings: a user's. Every outbox.* setting at its default (batch_size 1000, 1 relay worker,
# max_workers 4, wake at commit), autovacuum on; the server as in every relay benchmark
# (bench/relay/lib.sh: outbox preloaded, outbox.database = 'postgres', fsync and
# synchronous_commit on, shared_buffers 512MB). The VACUUM after the fill is what autovacuum
# would do to a 1M-row backlog within a minute: done by hand, it cannot land inside a timed
# window.
#
#   bash bench/relay/replay.sh            # 3 pairs of 1,000,000 events, 3 rounds of 20 s
#                                         # per variant: ~7.5 min
#   QUICK=1 bash bench/relay/replay.sh    # 2 pairs of 200,000 events, 2 rounds of 8 s: ~1.8 min
# ROWS, KEYS, PAIRS, RATE, CLIENTS, SECONDS_PER_RUN, ROUNDS, AHEAD, TIMEOUT_S (per drain /
# replay, 600) override. RELAY_LIBS=DIR runs another build.
set -euo pipefail
# shellcheck source=bench/relay/lib.sh
. "$(dirname "$0")/lib.sh"

if [ "$QUICK" = 1 ]; then
  ROWS=${ROWS:-200000}; SECONDS_PER_RUN=${SECONDS_PER_RUN:-8}; ROUNDS=${ROUNDS:-2}; PAIRS=${PAIRS:-2}
else
  ROWS=${ROWS:-1000000}; SECONDS_PER_RUN=${SECONDS_PER_RUN:-20}; ROUNDS=${ROUNDS:-3}; PAIRS=${PAIRS:-3}
fi
KEYS=${KEYS:-100000}
RATE=${RATE:-200}
CLIENTS=${CLIENTS:-4}
TIMEOUT_S=${TIMEOUT_S:-600}
AHEAD=${AHEAD:-1}

relay_header "replay: outbox.replay() of a retained backlog against the relay's drain of it; live writers beside a replay"
relay_start 56320 ${REPLAY_BENCH_SETTINGS:+"$REPLAY_BENCH_SETTINGS"}
echo "   $PAIRS drain + replay pairs of $ROWS events over $KEYS keys; live writers: $CLIENTS clients at $RATE commits/s (pgbench -R)," \
     "$SECONDS_PER_RUN s per run, $ROUNDS rounds"
echo "   max_worker_processes=$(sqlv "SHOW max_worker_processes"), autovacuum=$(sqlv "SHOW autovacuum")"

# The Python side (replay_bench.py): relaybench.py's connection and relay helpers, plus the replay's own.
RB_PY=$RELAY_BENCH_DIR/replay_bench.py
export RELAY_BENCH_DIR
rb() {  # rb FUNCTION JSON_ARGS
  "$PY" "$RB_PY" "$1" "$2"
}
jget() {  # jget FILE KEY
  "$PY" -c 'import json, sys; v = json.load(open(sys.argv[1])).get(sys.argv[2]); print("nan" if v is None else v)' "$1" "$2"
}

# --- 1 and 2, PAIRS times: a drain, then a replay of the same events ------------------------
for pair in $(seq "$PAIRS"); do
  echo
  echo "-- 1. drain ($pair/$PAIRS): $ROWS events enqueued with no sink, then configure_sink('null')"
  rb fill "{\"rows\": $ROWS, \"keys\": $KEYS}"
  rb drain "{\"rows\": $ROWS, \"timeout\": $TIMEOUT_S, \"out\": \"$BENCH_WORK/drain.$pair.json\"}"

  echo "-- 2. replay ($pair/$PAIRS): outbox.replay('-infinity', now()) of the $ROWS published events"
  # A replay of retained events comes long after their delivery: by then the relay has saved
  # its low-water mark above them (outbox.relay_state, at most once a second, on a pass), and
  # "published" is "seq below the mark" for each. Right after a drain the saved mark can
  # still be below the backlog, and then every event is probed in the delivery log
  # (outbox._delivered_at(), in each of the worker's fetches; before 7502efc also in
  # replay()'s count, which held the caller for seconds).
  lw_t0=$(now_us)
  for _ in $(seq 600); do
    [ "$(sqlv "SELECT (SELECT low_water FROM outbox.relay_state) > (SELECT max(seq) FROM outbox.events)")" = t ] && break
    sleep 0.05
  done
  echo "   the relay's saved low-water mark passed the backlog $(awk -v a="$lw_t0" -v b="$(now_us)" 'BEGIN { printf "%.1f", (b - a) / 1e6 }') s after the drain's check" \
       "(low_water $(sqlv "SELECT low_water FROM outbox.relay_state"), max(seq) $(sqlv "SELECT max(seq) FROM outbox.events"))"
  sql -q -c "CHECKPOINT"
  rb replay "{\"timeout\": $TIMEOUT_S, \"expect\": $ROWS, \"out\": \"$BENCH_WORK/replay.$pair.json\"}"
done

# --- 3. live writers, alone and beside a replay --------------------------------------------
echo
echo "-- 3. live writers: $CLIENTS clients at $RATE commits/s for $SECONDS_PER_RUN s, alone and beside a replay"
sql -q -c "CREATE TABLE pgbench_log (client int, txn int, latency_us bigint, script int, epoch bigint, us int, lag_us bigint)"
bench_file enqueue.sql >/dev/null <<'EOF'
\set sku random(1, 99999)
\set qty random(1, 9)
\set cid random(1, 100000)
SELECT outbox.enqueue('lat' || :run, :client_id::text, 'OrderPlaced', jsonb_build_object('order_id', :cid * 10 + :qty, 'customer_id', :cid, 'total', (:cid % 1000) || '.99', 'currency', 'EUR', 'items', jsonb_build_array(jsonb_build_object('sku', 'SKU-' || :sku, 'qty', :qty)), 'placed_at', now()));
EOF

relay_cpu_ns() {
  local pid
  for pid in $RELAY_PIDS; do cat /proc/"$pid"/task/*/schedstat 2>/dev/null; done |
    awk '{ s += $1 } END { printf "%.0f", s }'
}

# live_wait_published FROM_SEQ: until no event above FROM_SEQ is unpublished (120 s at most).
# relay_wait_published asks outbox.event_status about every event, a delivery-log probe
# (outbox._delivered_at()) each: ~15 s per look at 1M events. The live events are the newest,
# and the view's seq predicate goes down to each partition's seq index.
live_wait_published() {
  for _ in $(seq 1200); do
    [ "$(sqlv "SELECT count(*) FROM outbox.event_status WHERE seq > $1 AND published_at IS NULL")" = 0 ] && return 0
    sleep 0.1
  done
  echo "   WARNING: events above seq $1 still unpublished after 120 s" >&2
}

RES=$BENCH_WORK/live.txt
: >"$RES"
run=0
live_run() {  # live_run ROUND VARIANT (alone | hog | replay | full)
  local r=$1 v=$2 keeper_pid="" hog_pid="" waits_pid w0 w1 cpu0 cpu1 pid0 tps n p50 p99 pmax rcpu="-" cov="-" nrep="-" seq0
  run=$((run + 1))
  seq0=$(sqlv "SELECT last_value FROM outbox.events_seq")
  live_wait_published $((seq0 - 20000))
  [ "$(sqlv "SELECT count(*) FROM outbox.replays WHERE state = 'running'")" = 0 ] ||
    echo "   WARNING: a replay is still running before run $run"
  sleep 1
  relay_wait_workers
  pid0=$RELAY_PIDS
  rm -f "$BENCH_WORK"/pgl.* "$BENCH_WORK"/keeper.*
  if [ "$v" = full ]; then
    sql -q -c "ALTER SYSTEM SET outbox.replay_share = 100" -c "SELECT pg_reload_conf()" >/dev/null
  fi
  if [ "$v" = replay ] || [ "$v" = full ]; then
    rb keeper "{\"ahead\": $AHEAD, \"ready\": \"$BENCH_WORK/keeper.ready\", \"stop\": \"$BENCH_WORK/keeper.stop\", \"out\": \"$BENCH_WORK/keeper.json\"}" \
      >"$BENCH_WORK/keeper.out" 2>&1 &
    keeper_pid=$!
    RELAY_EXTRA_PIDS="$RELAY_EXTRA_PIDS $keeper_pid"
    for _ in $(seq 600); do [ -f "$BENCH_WORK/keeper.ready" ] && break; sleep 0.05; done
    [ -f "$BENCH_WORK/keeper.ready" ] || { echo "   the keeper did not request a replay:"; cat "$BENCH_WORK/keeper.out"; exit 1; }
  fi
  if [ "$v" = hog ]; then
    sh -c 'while :; do :; done' &
    hog_pid=$!
    RELAY_EXTRA_PIDS="$RELAY_EXTRA_PIDS $hog_pid"
  fi
  rb waits "{\"pid\": ${RELAY_PIDS%% *}, \"seconds\": $SECONDS_PER_RUN, \"out\": \"$BENCH_WORK/waits.json\"}" &
  waits_pid=$!
  cpu0=$(relay_cpu_ns)
  w0=$(now_us)
  pgb -n -c "$CLIENTS" -j 2 -R "$RATE" -T "$SECONDS_PER_RUN" -D run="$run" \
    -l --log-prefix="$BENCH_WORK/pgl" -f "$BENCH_WORK/enqueue.sql" >"$BENCH_WORK/pgbench.out" 2>&1 || true
  w1=$(now_us)
  if [ -n "$hog_pid" ]; then
    kill "$hog_pid"
    wait "$hog_pid" 2>/dev/null || true
    RELAY_EXTRA_PIDS=${RELAY_EXTRA_PIDS/ $hog_pid/}
  fi
  wait "$waits_pid" || true
  if [ -n "$keeper_pid" ]; then
    echo "$w0 $w1" >"$BENCH_WORK/keeper.stop.tmp" && mv "$BENCH_WORK/keeper.stop.tmp" "$BENCH_WORK/keeper.stop"
    wait "$keeper_pid" || { echo "   the keeper failed:"; cat "$BENCH_WORK/keeper.out"; exit 1; }
    RELAY_EXTRA_PIDS=${RELAY_EXTRA_PIDS/ $keeper_pid/}
    cat "$BENCH_WORK/keeper.out"
    rcpu=$(jget "$BENCH_WORK/keeper.json" replay_cpu_pct)
    cov=$(jget "$BENCH_WORK/keeper.json" coverage)
    nrep=$(jget "$BENCH_WORK/keeper.json" replays)
  fi
  if [ "$v" = full ]; then
    sql -q -c "ALTER SYSTEM RESET outbox.replay_share" -c "SELECT pg_reload_conf()" >/dev/null
  fi
  live_wait_published "$seq0"
  cpu1=$(relay_cpu_ns)
  relay_wait_workers
  [ "$RELAY_PIDS" = "$pid0" ] || { echo "   WARNING: a relay worker restarted during the run ($pid0 -> $RELAY_PIDS)"; cpu1=$cpu0; }
  sql -q -c "TRUNCATE pgbench_log"
  cat "$BENCH_WORK"/pgl.* | sql -q -c "\\copy pgbench_log FROM pstdin (FORMAT text, DELIMITER ' ')"
  tps=$(pgbench_tps "$BENCH_WORK/pgbench.out")
  # latency_curve.sh's query, with "seq > seq0" added (the run's events all are: the same
  # rows, read through the seq index instead of a scan of the 1M-event partition).
  read -r n p50 p99 pmax < <(sqlv "
    SELECT count(*), round(percentile_cont(0.5) WITHIN GROUP (ORDER BY d)::numeric, 2),
           round(percentile_cont(0.99) WITHIN GROUP (ORDER BY d)::numeric, 2),
           round(max(d)::numeric, 1)
      FROM (SELECT (extract(epoch FROM e.published_at) - (l.epoch + l.us / 1e6)) * 1000 AS d
              FROM (SELECT aggregateid::int AS client, published_at,
                           row_number() OVER (PARTITION BY aggregateid ORDER BY seq) AS txn
                      FROM outbox.event_status WHERE aggregatetype = 'lat$run' AND seq > $seq0) e
              JOIN pgbench_log l USING (client, txn)) s" | tr '|' ' ')
  local txns
  txns=$(sqlv "SELECT count(*) FROM pgbench_log")
  [ "$n" = "$txns" ] || echo "   WARNING: run $run: $n events joined to $txns logged transactions"
  local secs relay_pct replay_pct
  secs=$(awk -v a="$w0" -v b="$w1" 'BEGIN { printf "%.3f", (b - a) / 1e6 }')
  relay_pct=$(awk -v a="$cpu0" -v b="$cpu1" -v s="$secs" 'BEGIN { printf "%.1f", (b - a) / 1e9 / s * 100 }')
  # The replay worker's: over the keeper's life (from the first replay() call until the
  # worker had exited after the cancel).
  replay_pct=$(awk -v c="$rcpu" 'BEGIN { if (c == "-") print "-"; else printf "%.1f", c }')
  printf '   round %d %-6s (run %2d): %5.0f commits/s, %5d events: p50 %6s ms  p99 %7s ms  max %7s ms;' \
    "$r" "$v" "$run" "${tps:-0}" "$n" "$p50" "$p99" "$pmax"
  local syncs walw
  syncs=$(printf '%.0f' "$(jget "$BENCH_WORK/waits.json" syncs)")
  walw=$(printf '%.1f' "$(jget "$BENCH_WORK/waits.json" wal_wait_pct)")
  printf ' relay CPU %5s %% of a core, replay worker %5s %%; WAL %5s kB/s, %4s syncs/s, relay waiting for the WAL in %4s %% of samples' \
    "$relay_pct" "$replay_pct" "$(printf '%.0f' "$(jget "$BENCH_WORK/waits.json" wal_kb)")" "$syncs" "$walw"
  case $v in replay | full) printf '; %s replay(s), coverage %.1f %%' "$nrep" "$(awk -v c="$cov" 'BEGIN { print 100 * c }')" ;; esac
  echo
  echo "$r $v $run ${tps:-0} $n $p50 $p99 $pmax $relay_pct $replay_pct $cov $nrep $syncs $walw $(jget "$BENCH_WORK/waits.json" wal_kb)" >>"$RES"
}

for r in $(seq "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then order=(alone hog replay full); else order=(full replay hog alone); fi
  for v in "${order[@]}"; do live_run "$r" "$v"; done
done

# --- 4. summary ----------------------------------------------------------------------------
# pairs.txt: "PAIR DRAIN_RATE DRAIN_S DRAIN_CPU REPLAY_RATE REPLAY_S REPLAY_CPU RATE_ROWS CALL_S OK"
PR=$BENCH_WORK/pairs.txt
: >"$PR"
for pair in $(seq "$PAIRS"); do
  D=$BENCH_WORK/drain.$pair.json
  P=$BENCH_WORK/replay.$pair.json
  echo "$pair $(jget "$D" rate) $(jget "$D" secs) $(jget "$D" relay_cpu) $(jget "$P" rate) $(jget "$P" secs)" \
       "$(jget "$P" replay_cpu) $(jget "$P" rate_rows) $(jget "$P" call_s) $(jget "$P" ok)" >>"$PR"
done
pcol() {  # pcol FIELD: that field of every pair
  awk -v f="$1" '{ print $f }' "$PR"
}
col() {  # col VARIANT FIELD
  awk -v v="$1" -v f="$2" '$2 == v { print $f }' "$RES"
}
per_round() {  # per_round FIELD [VARIANT]: the per-round ratios VARIANT (replay) / alone
  awk -v f="$1" -v x="${2:-replay}" '$2 == "alone" { a[$1] = $f } $2 == x { b[$1] = $f }
    END { for (r in a) if ((r in b) && a[r] > 0) printf "%.4f\n", b[r] / a[r] }' "$RES"
}
rr() {  # rr FIELD [VARIANT]: "median (min-max)"
  local rs
  rs=$(per_round "$1" "${2:-replay}")
  printf '%.2fx (%.2f-%.2f)' "$(median <<<"$rs")" "$(sort -g <<<"$rs" | head -n 1)" "$(sort -g <<<"$rs" | tail -n 1)"
}

echo
echo "-- results ($ROWS events over $KEYS keys, null sink, batch_size $(sqlv "SHOW outbox.batch_size"))"
printf '   | %-6s | %15s | %6s | %9s | %16s | %6s | %17s | %13s | %8s |\n' "pair" "drain events/s" "s" "relay CPU" "replay events/s" "s" "replay worker CPU" "replay() call" "ratio"
printf '   | %-6s | %15s | %6s | %9s | %16s | %6s | %17s | %13s | %8s |\n' "---" "---:" "---:" "---:" "---:" "---:" "---:" "---:" "---:"
while read -r pr dr ds dc rr_ rs rc _ call _; do
  printf '   | %-6s | %15.0f | %6.2f | %7.0f %% | %16.0f | %6.2f | %15.0f %% | %11.2f s | %7.2fx |\n' \
    "$pr" "$dr" "$ds" "$(awk -v c="$dc" -v s="$ds" 'BEGIN { print 100 * c / s }')" "$rr_" "$rs" \
    "$(awk -v c="$rc" -v s="$rs" 'BEGIN { print 100 * c / s }')" "$call" "$(ratio "$rr_" "$dr")"
done <"$PR"
printf '   | %-6s | %15.0f | %6.2f | %9s | %16.0f | %6.2f | %17s | %13s | %7.2fx |\n' "median" \
  "$(pcol 2 | median)" "$(pcol 3 | median)" "" "$(pcol 5 | median)" "$(pcol 6 | median)" "" "" \
  "$(awk '{ printf "%.4f\n", $5 / $2 }' "$PR" | median)"
echo "   (ratio: replay events/s / drain events/s of the same pair; the median row's ratio is the median of the pairs')"
echo
printf '   | %-46s | %7s | %7s | %9s | %10s | %8s | %8s | %11s | %15s |\n' "live writers, $RATE commits/s, $CLIENTS clients" \
  "p50 ms" "p99 ms" "relay CPU" "replay CPU" "coverage" "WAL kB/s" "WAL syncs/s" "relay WAL waits"
printf '   | %-46s | %7s | %7s | %9s | %10s | %8s | %8s | %11s | %15s |\n' "---" "---:" "---:" "---:" "---:" "---:" "---:" "---:" "---:"
for v in alone hog replay full; do
  case $v in
    alone) label="no replay" ;;
    hog) label="no replay, a busy loop on one core (control)" ;;
    replay) label="beside a replay (replay_share 10, the default)" ;;
    full) label="beside a replay, replay_share 100" ;;
  esac
  printf '   | %-46s | %7.2f | %7.2f | %7.1f %% | %10s | %8s | %8.0f | %11.0f | %13.1f %% |\n' "$label" \
    "$(col "$v" 6 | median)" "$(col "$v" 7 | median)" "$(col "$v" 9 | median)" \
    "$([ "$v" = replay ] || [ "$v" = full ] && printf '%.1f %%' "$(col "$v" 10 | median)" || echo "-")" \
    "$([ "$v" = replay ] || [ "$v" = full ] && printf '%.1f %%' "$(col "$v" 11 | awk '{ print 100 * $1 }' | median)" || echo "-")" \
    "$(col "$v" 15 | median)" "$(col "$v" 13 | median)" "$(col "$v" 14 | median)"
done
echo "   (medians of $ROUNDS rounds; each round's runs above)"
echo "   with a replay / without: p50 $(rr 6), p99 $(rr 7) (median of the per-round ratios, min-max)"
echo "   replay_share 100 / without: p50 $(rr 6 full), p99 $(rr 7 full)"
echo "   control, busy loop / without: p99 $(rr 7 hog)"
echo
r_rate=$(awk '{ printf "%.4f\n", $5 / $2 }' "$PR" | median)
r_min=$(awk '{ printf "%.4f\n", $5 / $2 }' "$PR" | sort -g | head -n 1)
r_max=$(awk '{ printf "%.4f\n", $5 / $2 }' "$PR" | sort -g | tail -n 1)
r_p99=$(per_round 7 | median)
all_ok=$(awk '$10 != "True" { bad = 1 } END { print bad ? 0 : 1 }' "$PR")
[ "$all_ok" = 1 ] || echo "   (a replay did not end done with events_total sent: see its WARNING above)"
verdict "replay of $ROWS retained events (null sink) >= 0.8x the drain rate of the same events ($(printf '%.3f' "$r_rate")x, median of $PAIRS pairs, $(printf '%.2f-%.2f' "$r_min" "$r_max"))" \
  "$(awk -v r="$r_rate" -v ok="$all_ok" 'BEGIN { print (r + 0 >= 0.8 && ok == 1) ? 1 : 0 }')"
verdict "live p99 commit -> ack at $RATE commits/s with a replay running <= 2x without ($(printf '%.2f' "$r_p99")x)" \
  "$(awk -v r="$r_p99" 'BEGIN { print (r != "nan" && r + 0 <= 2) ? 1 : 0 }')"
if grep -E 'ERROR|FATAL|PANIC|WARNING' "$BENCH_WORK/server.log" | grep -v 'canceling statement' >/dev/null; then
  echo "   server log: $(grep -cE 'ERROR|FATAL|PANIC|WARNING' "$BENCH_WORK/server.log") ERROR/FATAL/PANIC/WARNING lines; the first:"
  grep -E 'ERROR|FATAL|PANIC|WARNING' "$BENCH_WORK/server.log" | head -n 5 | sed 's/^/     /'
else
  echo "   server log: no ERROR, FATAL, PANIC or WARNING line"
fi
