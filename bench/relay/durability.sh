#!/usr/bin/env bash
# The cost of the relay's durability wait (0.4.0): before a fetched batch goes to the sink,
# the relay flushes the WAL up to the insert position read after the fetch
# (src/relay/durability.cpp, flush_visible_commits), so that no event is published whose
# transaction a crash could still lose (writers with synchronous_commit = off).
#
# Two builds of the same tree, same flags, made by this script in a temp directory:
#   wait      the extension as it is
#   no wait   the same with -DOUTBOX_BENCH_NO_DURABILITY_WAIT, which only durability.cpp
#             honours: flush_visible_commits() returns the position without flushing
#             (there is no setting for this: the comparison build exists for this script)
# Each build runs in a server of its own (relay_start with RELAY_LIBS; default settings,
# outbox.wait_for_sync_standbys off, the null sink), both up all along; one is loaded at a
# time. The writers (pgbench -M prepared, -c 1 / 8 / 32, -j 1 / 2 / 2, as fast as they go)
# run writers.sh's transaction (an order INSERT and outbox.enqueue, ~170 bytes of JSON),
# with their synchronous_commit on (the default) and off (PGOPTIONS). A fourth cell, 1
# writer at 200 commits/s (pgbench -R; latency.sh's rate), shows the latency when the
# relay starts a batch at each commit: above 1,000 events/s outbox.min_batch_interval
# (50 ms) gathers them, and that wait hides the flush's. Per cell, ROUNDS rounds of the
# four runs {wait, no wait} x {on, off}, in a balanced order (relaybench.py order:
# rotation r of the list, mirrored every second set of four rounds, so that every run
# follows every other one equally often).
#
# Before the runs each server writes WAL_PREFILL_MB of WAL and checkpoints, so that the runs
# reuse recycled WAL segments as a server in service does (see below); the script reports
# how many segments the runs still had to create, and the checkpoints (none expected).
#
# Per run: the writers' tps; enqueue -> published (published_at - created_at of the run's
# events, p50 / p99; created_at is the enqueue's clock, inside the writer's transaction,
# so for synchronous_commit = on it includes the writer's own commit flush); the relay's
# CPU (utime + stime of its process / run time) and batches/s; pg_stat_wal's wal_sync and
# wal_write per second of run time (the whole server: writers, WAL writer and relay). After
# each run the script waits until the run's events are published and STATS_WAIT_S (1.5 s)
# more, so that the relay (which reports its statistics at most once a second, at the end
# of a pass; an idle relay passes every outbox.poll_interval, 1 s) and the writers'
# backends have reported; the counters cover the run and that tail.
# Per cell: medians over the rounds; the tps ratio wait / no wait is the median of the
# per-round ratios (q1 / q3: their quartiles).
#
# AA=1 runs an A/A control instead: the "no wait" server runs the normal build too, so the
# ratios show the benchmark's own error (two servers, same code).
#
#   bash bench/relay/durability.sh          # 8 rounds x 5 s per run, ~16 min
#   QUICK=1 bash bench/relay/durability.sh  # 4 rounds x 2 s, ~4.5 min
# ROUNDS, SECONDS_PER_RUN, CELLS, STATS_WAIT_S, WAL_PREFILL_MB, AA override.
set -euo pipefail
# shellcheck source=bench/relay/lib.sh
. "$(dirname "$0")/lib.sh"

if [ "$QUICK" = 1 ]; then
  ROUNDS=${ROUNDS:-4}; SECONDS_PER_RUN=${SECONDS_PER_RUN:-2}
else
  ROUNDS=${ROUNDS:-8}; SECONDS_PER_RUN=${SECONDS_PER_RUN:-5}
fi
# Cells: N writers as fast as they go, or N@R: N writers at R commits/s in all (pgbench -R).
CELLS=${CELLS:-"1 8 32 1@200"}
STATS_WAIT_S=${STATS_WAIT_S:-1.5}
WAL_PREFILL_MB=${WAL_PREFILL_MB:-$((ROUNDS * SECONDS_PER_RUN * 50))}  # ~40 MB per round-second are written
AA=${AA:-0}

# Two servers: relay_start's cleanup stops the one in BENCH_WORK; this one also stops the
# other server and removes the builds.
eval "lib_$(declare -f relay_cleanup)"
SERVER_WORKS=""
BUILD_DIR=""
relay_cleanup() {
  local rc=$? w
  trap - EXIT INT TERM
  for w in $SERVER_WORKS; do
    [ "$w" != "$BENCH_WORK" ] || continue
    cluster_stop "$w" immediate
    bench_remove_work "$w"
  done
  [ -z "$BUILD_DIR" ] || rm -rf "$BUILD_DIR"
  # The library's cleanup reads the exit status from $?.
  if [ "$rc" = 0 ]; then lib_relay_cleanup; else (exit "$rc") || lib_relay_cleanup; fi
}
trap relay_cleanup EXIT
trap 'exit 130' INT TERM

relay_header "durability wait: writers and relay with and without the relay's WAL flush before a batch"
echo "   rounds=$ROUNDS, $SECONDS_PER_RUN s per run, writers (N@R: at R commits/s): $CELLS; their synchronous_commit on / off"
[ "$AA" = 1 ] && echo "   AA=1: control run, the 'no wait' server runs the normal build too"

# The builds: the tree as it is (tracked and untracked files, not ignored ones), built once;
# then durability.cpp alone again with the define and outbox.so linked anew. The sink
# libraries are the same files for both.
BUILD_DIR=$(mktemp -d "${TMPDIR:-/tmp}/outbox-durability-build.XXXXXX")
mkdir -p "$BUILD_DIR/tree" "$BUILD_DIR/wait" "$BUILD_DIR/nowait"
(cd "$BENCH_REPO" && git ls-files -z --cached --others --exclude-standard |
   tar --null --ignore-failed-read -T - -cf -) | tar -x -C "$BUILD_DIR/tree"
echo "   building tree $(git -C "$BENCH_REPO" describe --always --dirty) in $BUILD_DIR"
make -C "$BUILD_DIR/tree" -j2 >"$BUILD_DIR/build.log" 2>&1 || { tail -n 30 "$BUILD_DIR/build.log"; exit 1; }
cp "$BUILD_DIR"/tree/{outbox.so,outbox_sink_null.so,outbox_sink_kafka.so} "$BUILD_DIR/wait/"
touch "$BUILD_DIR/tree/src/relay/durability.cpp"
make -C "$BUILD_DIR/tree" -j2 PG_CPPFLAGS=-DOUTBOX_BENCH_NO_DURABILITY_WAIT outbox.so >>"$BUILD_DIR/build.log" 2>&1 ||
  { tail -n 30 "$BUILD_DIR/build.log"; exit 1; }
cp "$BUILD_DIR/tree/outbox.so" "$BUILD_DIR/nowait/"
cp "$BUILD_DIR"/wait/outbox_sink_{null,kafka}.so "$BUILD_DIR/nowait/"
# The normal build calls XLogFlush (durability.cpp is its only caller), the other one not.
[ "$(nm -D "$BUILD_DIR/wait/outbox.so" | grep -c ' U XLogFlush$')" = 1 ] ||
  { echo "the normal build does not call XLogFlush" >&2; exit 1; }
[ "$(nm -D "$BUILD_DIR/nowait/outbox.so" | grep -c ' U XLogFlush$')" = 0 ] ||
  { echo "the no-wait build still calls XLogFlush: OUTBOX_BENCH_NO_DURABILITY_WAIT not honoured" >&2; exit 1; }
[ "$AA" = 1 ] && cp "$BUILD_DIR/wait/outbox.so" "$BUILD_DIR/nowait/"

declare -A WORK PORT RELAY LABEL=([wait]="wait" [nowait]="no wait")
[ "$AA" = 1 ] && LABEL[nowait]="control (wait)"
port=56309
for b in wait nowait; do
  echo "   server '${LABEL[$b]}':"
  RELAY_LIBS="$BUILD_DIR/$b" relay_start "$port"
  SERVER_WORKS="$SERVER_WORKS $BENCH_WORK"
  WORK[$b]=$BENCH_WORK; PORT[$b]=$BENCH_PORT; RELAY[$b]=$RELAY_PID
  writers_setup
  # As writers.sh: some events and an ANALYZE before the first measured run, so that the
  # relay's kept UPDATE plan is made for a partition with statistics.
  as_postgres pgbench -h "$BENCH_WORK" -p "$BENCH_PORT" -n -M prepared -c 4 -j 2 -t 2500 -f "$BENCH_WORK/plain.sql" "$BENCH_DB" >/dev/null 2>&1
  sql -c "ANALYZE outbox.events"
  # WAL segments to recycle, as a server that has run a while has them: without them, the
  # process whose write crosses into a new segment creates it (16 MB written and synced),
  # and when that is the relay, in its flush, the batch waits for it (p99 up to 2x at 32
  # writers in a fresh cluster). WAL_PREFILL_MB of WAL messages, then a checkpoint, which
  # recycles their segments (up to max_wal_size, 4 GB): more than the runs write.
  sqlv "SELECT count(pg_logical_emit_message(false, 'durability.sh', repeat('x', 1000000))) FROM generate_series(1, $WAL_PREFILL_MB)" >/dev/null
  sql -c "CHECKPOINT"
  echo "   WAL: $(sqlv "SELECT count(*) FROM pg_ls_waldir() WHERE name ~ '^[0-9A-F]{24}$' AND name > pg_walfile_name(pg_current_wal_lsn())") segments ready for reuse"
  port=$((port + 1))
done
use_server() {
  BENCH_WORK=${WORK[$1]}; BENCH_PORT=${PORT[$1]}; RELAY_PID=${RELAY[$1]}
}

TICKS=$(getconf CLK_TCK)
relay_cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$RELAY_PID/stat"; }
# counters: relay CPU ticks, relay batches, pg_stat_wal's wal_sync and wal_write.
counters() {
  echo "$(relay_cpu_ticks) $(sqlv "SELECT w.batches, s.wal_sync, s.wal_write FROM outbox._workers() w, pg_stat_wal s" | tr '|' ' ')"
}
# cell round build sync tps p50_ms p99_ms relay_cpu_pct batches_per_s wal_sync_per_s wal_write_per_s
results="$BUILD_DIR/results.txt"
: >"$results"

checkpoints() { sqlv "SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter"; }
declare -A CKPT0
for b in wait nowait; do use_server $b; CKPT0[$b]=$(checkpoints); done
runs_start=$(date +%s)
LABELS=(wait.on nowait.on wait.off nowait.off)
mapfile -t ORDER < <("$PY" "$RELAY_BENCH_DIR/relaybench.py" order --labels "$(IFS=,; echo "${LABELS[*]}")" --cycles "$ROUNDS")
for c in $CELLS; do
  n=${c%@*}
  j=$((n < 2 ? n : 2))
  paced=()
  [ "$c" = "$n" ] || paced=(-R "${c#*@}")
  for r in $(seq 1 "$ROUNDS"); do
    for k in 0 1 2 3; do
      label=${ORDER[$(((r - 1) * 4 + k))]}
      b=${label%.*}; s=${label#*.}
      use_server "$b"
      out="$BENCH_WORK/out.$c.$r.$s"
      seq0=$(sqlv "SELECT last_value FROM outbox.events_seq")
      read -r t0 bt0 ws0 ww0 <<<"$(counters)"
      if ! as_postgres env PGOPTIONS="-c synchronous_commit=$s" pgbench -h "$BENCH_WORK" -p "$BENCH_PORT" -n -M prepared \
           -c "$n" -j "$j" "${paced[@]}" -T "$SECONDS_PER_RUN" -f "$BENCH_WORK/plain.sql" "$BENCH_DB" >"$out" 2>&1; then
        cat "$out"; exit 1
      fi
      left=""
      for _ in $(seq 200); do
        left=$(sqlv "SELECT count(*) FROM outbox.event_status WHERE seq > $seq0 AND published_at IS NULL")
        [ "$left" = 0 ] && break
        sleep 0.05
      done
      [ "$left" = 0 ] || { echo; echo "   $left events of the run were not published within 10 s" >&2; exit 1; }
      sleep "$STATS_WAIT_S"
      read -r t1 bt1 ws1 ww1 <<<"$(counters)"
      read -r p50 p99 <<<"$(sqlv "SELECT round(1000 * extract(epoch FROM percentile_cont(0.5) WITHIN GROUP (ORDER BY published_at - created_at))::numeric, 3),
                                         round(1000 * extract(epoch FROM percentile_cont(0.99) WITHIN GROUP (ORDER BY published_at - created_at))::numeric, 3)
                                    FROM outbox.event_status WHERE seq > $seq0" | tr '|' ' ')"
      tps=$(pgbench_tps "$out")
      awk -v c="$c" -v r="$r" -v b="$b" -v s="$s" -v tps="$tps" -v p50="$p50" -v p99="$p99" -v T="$SECONDS_PER_RUN" -v hz="$TICKS" \
          -v t0="$t0" -v t1="$t1" -v bt0="$bt0" -v bt1="$bt1" -v ws0="$ws0" -v ws1="$ws1" -v ww0="$ww0" -v ww1="$ww1" \
          'BEGIN { printf "%s %s %s %s %s %s %s %.1f %.0f %.0f %.0f\n", c, r, b, s, tps, p50, p99,
                   100 * (t1 - t0) / hz / T, (bt1 - bt0) / T, (ws1 - ws0) / T, (ww1 - ww0) / T }' >>"$results"
      tail -n 1 "$results" | awk -v l="${LABEL[$b]}" -v R="$ROUNDS" '{ printf "   writers=%s round %s/%s %-15s sync %-3s: %6.0f tps, p50 %7.3f p99 %7.3f ms, relay %4.1f%% CPU %4.0f batches/s, wal_sync %5.0f/s wal_write %5.0f/s\n",
        $1, $2, R, l, $4, $5, $6, $7, $8, $9, $10, $11 }'
    done
  done
done
for b in wait nowait; do
  use_server $b
  new=0
  for f in "$BENCH_WORK"/data/pg_wal/0*; do
    [ "$(stat -c %W "$f")" -lt "$runs_start" ] || new=$((new + 1))
  done
  echo "   server '${LABEL[$b]}': $new WAL segments created during the runs (not recycled), $(($(checkpoints) - CKPT0[$b])) checkpoints"
done

vals() {  # CELL BUILD SYNC FIELD
  awk -v c="$1" -v b="$2" -v s="$3" -v f="$4" '$1 == c && $3 == b && $4 == s { print $f }' "$results"
}
ratios() {  # CELL SYNC FIELD: per-round wait / no wait, sorted
  awk -v c="$1" -v s="$2" -v f="$3" '$1 == c && $4 == s && $3 == "wait" { a[$2] = $f } $1 == c && $4 == s && $3 == "nowait" { n[$2] = $f }
       END { for (r in a) if ((r in n) && n[r] > 0) print a[r] / n[r] }' "$results" | sort -g
}
quart() { awk -v q="$1" '{ v[NR] = $1 } END { print (NR ? v[int((q * NR + 3) / 4)] : "nan") }'; }

echo
echo "-- per run (medians over $ROUNDS rounds of ${SECONDS_PER_RUN}s)"
printf '   %-11s %-4s %-15s %9s %9s %9s %9s %10s %10s %10s\n' writers sync build tps "p50 ms" "p99 ms" "relay CPU" "batches/s" "wal_sync/s" "wal_write/s"
for c in $CELLS; do
  for s in on off; do
    for b in wait nowait; do
      printf '   %-11s %-4s %-15s %9.0f %9.3f %9.3f %9.1f%% %10.0f %10.0f %10.0f\n' "$c" "$s" "${LABEL[$b]}" \
        "$(vals "$c" $b $s 5 | median)" "$(vals "$c" $b $s 6 | median)" "$(vals "$c" $b $s 7 | median)" \
        "$(vals "$c" $b $s 8 | median)" "$(vals "$c" $b $s 9 | median)" "$(vals "$c" $b $s 10 | median)" \
        "$(vals "$c" $b $s 11 | median)"
    done
  done
done

echo
echo "-- table: wait vs ${LABEL[nowait]} (median over $ROUNDS rounds of ${SECONDS_PER_RUN}s; tps ratio = median of the"
echo "   per-round ratios, q1-q3 their quartiles; latency = enqueue -> published_at; relay CPU of one core;"
echo "   WAL flushes = pg_stat_wal.wal_sync per second, whole server)"
echo
echo "| writers | synchronous_commit | tps wait / ${LABEL[nowait]} | ratio (q1-q3) | p50 ms | p99 ms | relay CPU | relay batches/s | wal_sync/s | wal_write/s |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
# cell_label CELL: "32", or "1 at 200/s" for 1@200.
cell_label() { if [ "${1#*@}" = "$1" ]; then echo "$1"; else echo "${1%@*} at ${1#*@}/s"; fi; }
# pair CELL SYNC FIELD FORMAT: "wait / no wait" medians.
pair() {
  # shellcheck disable=SC2059  # the format is the caller's
  printf "$4 / $4" "$(vals "$1" wait "$2" "$3" | median)" "$(vals "$1" nowait "$2" "$3" | median)"
}
for c in $CELLS; do
  for s in on off; do
    r=$(ratios "$c" $s 5)
    printf '| %s | %s | %s | %.3f (%.3f-%.3f) | %s | %s | %s | %s | %s | %s |\n' "$(cell_label "$c")" "$s" "$(pair "$c" $s 5 %.0f)" \
      "$(median <<<"$r")" "$(quart 1 <<<"$r")" "$(quart 3 <<<"$r")" "$(pair "$c" $s 6 %.3f)" "$(pair "$c" $s 7 %.3f)" \
      "$(pair "$c" $s 8 %.1f%%)" "$(pair "$c" $s 9 %.0f)" "$(pair "$c" $s 10 %.0f)" "$(pair "$c" $s 11 %.0f)"
  done
done
