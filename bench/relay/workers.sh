#!/usr/bin/env bash
# The relay's parallel workers: how fast N workers drain a backlog against one.
#
# outbox.workers = N (restart only) runs N relay workers. With outbox.ordering = key (the
# default, restart only) they keep per-key order: aggregate ids hash to 64 shards and each
# worker owns some; outbox.ordering = none was the opt-in unordered mode until 0.6.0, where
# the workers raced over all events (FOR UPDATE SKIP LOCKED). Since 0.6.0 it means key: its
# rows and the none / key ratios then run the same relay twice (an A/A check of the spread);
# RELAY_LIBS of an earlier build compares the modes. The null sink's delay_ms makes each send()
# of a batch take that long, as a slow broker would: that is where more workers should pay.
#
# Each drain: a backlog of ROWS small events (default 200,000; QUICK=1: 50,000) over KEYS
# aggregate ids ('k0001'..'k1000') is enqueued while no sink is configured
# (outbox.unconfigure_sink(); one statement, then ANALYZE and CHECKPOINT); then
# configure_sink('null', ...) and the clock runs from its commit until
# `SELECT count(*) FROM outbox.event_status WHERE published_at IS NULL` says 0. That count scans
# the backlog's partition (~25 ms at 200,000 events): asked every 50 ms it would take half a
# core from the relay. So the relay's shared-memory counters (outbox._workers()) are polled
# every POLL_MS (10 ms), and the table is asked once they count the whole backlog sent, or
# when it was last asked a second ago (in case a build counts otherwise).
# Result: events/s = ROWS / that time, and the relay workers' CPU (utime + stime from /proc,
# all workers together) over the same time. Variants, each a restart of the same cluster
# with outbox.workers / outbox.ordering changed and every other relay setting at its default
# (batch_size 1000 ...), the sink's delay_ms as given:
#   slow-1       null sink, delay_ms = DELAY_MS (5), 1 worker,  ordering = key
#   slow-2                                           2 workers, ordering = key
#   slow-4                                           4 workers, ordering = key
#   slow-4-none                                      4 workers, ordering = none
#   null-4-none  null sink, delay_ms = 0,            4 workers, ordering = none
#   null-4                                           4 workers, ordering = key
#   null-2                                           2 workers, ordering = key
#   null-1                                           1 worker,  ordering = key
#   slow100-1    null sink, delay_ms = DELAY_MS, outbox.batch_size = 100, 1 worker
#   slow100-4                                                            4 workers
# (the last two: where the sink's wait is most of a batch's time, as with a far broker or
# an HTTP endpoint; with batches of 1000 the relay's own CPU is ~45 % of a 1-worker drain,
# and on 2 cores that bounds what 4 workers can gain) in this order in odd rounds and reversed in even rounds, over ROUNDS rounds (3; QUICK=1:
# 2), after one warm-up drain (null-1, not counted). Reported: the median events/s of each
# variant, and per ratio the median of the per-round ratios (min-max):
#   slow sink, 4 workers / 1 (key)        goal >= 3x
#   slow sink, 2 workers / 1 (key)        goal >= 1.8x
#   null sink, 2 workers / 1 (key)        goal >= 1x (not slower)
#   ordering none / key at 4 workers, null sink and slow sink
#   slow sink with batch_size = 100, 4 workers / 1
# A build without outbox.ordering (before the sharded relay: its workers > 1 race over all
# events, unordered) gets no outbox.ordering line (PostgreSQL would drop it with a WARNING,
# as the outbox prefix is reserved); the script says so, and its none / key rows then
# compare identical settings.
#
#   bash bench/relay/workers.sh          # 3 rounds x 10 variants of 200,000 events, ~3.5 min
#   QUICK=1 bash bench/relay/workers.sh  # 2 rounds of 50,000 events, ~30 s
# (times of the build before the sharded relay; a drain is a second or two, the rest is the
# fill and the restart.)
# ROUNDS, ROWS, KEYS, DELAY_MS, POLL_MS, TIMEOUT_S (per drain, 300) override.
# RELAY_LIBS=DIR runs the libraries of another build (outbox.so, outbox_sink_null.so,
# outbox_sink_kafka.so from DIR, with the SQL scripts installed); PG_CONFIG=... picks the
# PostgreSQL installation (and the installed libraries) as for every benchmark.
set -euo pipefail
# shellcheck source=bench/relay/lib.sh
. "$(dirname "$0")/lib.sh"

if [ "$QUICK" = 1 ]; then ROUNDS=${ROUNDS:-2}; ROWS=${ROWS:-50000}; else ROUNDS=${ROUNDS:-3}; ROWS=${ROWS:-200000}; fi
KEYS=${KEYS:-1000}
DELAY_MS=${DELAY_MS:-5}
POLL_MS=${POLL_MS:-10}
TIMEOUT_S=${TIMEOUT_S:-300}

# label workers ordering delay_ms description
VARIANTS=(
  "slow-1      1 key  $DELAY_MS - slow sink (delay_ms=$DELAY_MS), 1 worker"
  "slow-2      2 key  $DELAY_MS - slow sink (delay_ms=$DELAY_MS), 2 workers"
  "slow-4      4 key  $DELAY_MS - slow sink (delay_ms=$DELAY_MS), 4 workers"
  "slow-4-none 4 none $DELAY_MS - slow sink (delay_ms=$DELAY_MS), 4 workers, ordering=none"
  "null-4-none 4 none 0 - null sink, 4 workers, ordering=none"
  "null-4      4 key  0 - null sink, 4 workers"
  "null-2      2 key  0 - null sink, 2 workers"
  "null-1      1 key  0 - null sink, 1 worker"
  "slow100-1   1 key  $DELAY_MS 100 slow sink (delay_ms=$DELAY_MS), batch_size=100, 1 worker"
  "slow100-4   4 key  $DELAY_MS 100 slow sink (delay_ms=$DELAY_MS), batch_size=100, 4 workers"
)

relay_header "relay parallel workers: backlog drain rate, 1 / 2 / 4 workers, ordering key / none" \
  "1, 2 or 4 workers (outbox.workers, a restart per variant)"
# autovacuum off, as in throughput_paired.sh: every drain starts from a TRUNCATE.
relay_start 56311 "autovacuum = off"
HAVE_ORDERING=$(sqlv "SELECT count(*) FROM pg_settings WHERE name = 'outbox.ordering'")
if [ "$HAVE_ORDERING" = 1 ]; then
  echo "   outbox.ordering: defined by this build (default $(sqlv "SELECT boot_val FROM pg_settings WHERE name = 'outbox.ordering'"))"
else
  echo "   NOTE: this build has no outbox.ordering (SELECT count(*) FROM pg_settings WHERE name = 'outbox.ordering' is 0):"
  echo "         it is not set; each variant runs the build's only mode (before the sharded relay: workers > 1"
  echo "         race over all events, unordered), and the none / key ratios compare identical settings"
fi
echo "   rounds=$ROUNDS; each drain: $ROWS events over $KEYS keys, sink configured after the fill; poll ${POLL_MS} ms"
sql -o /dev/null -c "SELECT outbox.unconfigure_sink()"

# drain ROUND LABEL WORKERS ORDERING DELAY_MS BATCH_SIZE: a restart with these settings (BATCH_SIZE
# "-": the default), then one drain (relaybench.py backlog), appended to results.txt unless
# ROUND is "warm-up".
drain() {
  local settings=("outbox.workers = $3") opts='{}' out="$BENCH_WORK/results.txt"
  [ "${6:--}" != - ] && settings+=("outbox.batch_size = $6")
  [ "$HAVE_ORDERING" = 1 ] && settings+=("outbox.ordering = '$4'")
  [ "$5" != 0 ] && opts="{\"delay_ms\": $5}"
  [ "$1" = warm-up ] && out=""
  relay_restart "${settings[@]}"
  [ "$(sqlv "SHOW outbox.workers")" = "$3" ] || { echo "outbox.workers is not $3 after the restart" >&2; exit 1; }
  if [ "$HAVE_ORDERING" = 1 ] && [ "$(sqlv "SHOW outbox.ordering")" != "$4" ]; then
    echo "outbox.ordering is not $4 after the restart" >&2
    exit 1
  fi
  py backlog --rows "$ROWS" --keys "$KEYS" --options "$opts" --poll-ms "$POLL_MS" \
    --timeout "$TIMEOUT_S" --label "$2" --round "$1" --out "$out"
}

echo "   warm-up (not counted):"
drain warm-up null-1 1 key 0 -
for r in $(seq "$ROUNDS"); do
  echo "   round $r/$ROUNDS:"
  order=($(seq 0 $((${#VARIANTS[@]} - 1))))
  [ $((r % 2)) = 1 ] || order=($(seq $((${#VARIANTS[@]} - 1)) -1 0))
  for i in "${order[@]}"; do
    read -r label w o d b _ <<<"${VARIANTS[$i]}"
    drain "$r" "$label" "$w" "$o" "$d" "$b"
  done
done

RES=$BENCH_WORK/results.txt
touch "$RES"
col() {  # col LABEL FIELD: that field of LABEL's drains, one per line
  awk -v v="$1" -v f="$2" '$2 == v { print $f }' "$RES"
}
# ratio_rounds A B: "median (min-max)" of the per-round ratios A / B (rounds with both)
ratio_rounds() {
  local rs
  rs=$(awk -v a="$1" -v b="$2" '$2 == a { x[$1] = $3 } $2 == b { y[$1] = $3 }
    END { for (r in x) if ((r in y) && y[r] > 0) printf "%.4f\n", x[r] / y[r] }' "$RES")
  if [ -z "$rs" ]; then echo "nan (no round)"; return; fi
  printf '%.2fx (%.2f-%.2f)' "$(median <<<"$rs")" "$(sort -g <<<"$rs" | head -n 1)" "$(sort -g <<<"$rs" | tail -n 1)"
}
ratio_median() {  # the median of the per-round ratios A / B alone
  awk -v a="$1" -v b="$2" '$2 == a { x[$1] = $3 } $2 == b { y[$1] = $3 }
    END { for (r in x) if ((r in y) && y[r] > 0) printf "%.4f\n", x[r] / y[r] }' "$RES" | median
}

echo
echo "-- results: medians of $ROUNDS rounds; $ROWS events over $KEYS keys per drain; events/s from the commit"
echo "   of configure_sink() until none is unpublished; relay CPU: all its workers, over the drain"
[ "$HAVE_ORDERING" = 1 ] || echo "   (this build has no outbox.ordering: 'ordering=none' rows ran the same settings as the others)"
printf '   | %-50s | %9s | %7s | %13s | %7s |\n' "variant" "events/s" "s" "relay CPU s" "batches"
printf '   | %-50s | %9s | %7s | %13s | %7s |\n' "---" "---:" "---:" "---:" "---:"
for v in "${VARIANTS[@]}"; do
  read -r label _ _ _ _ desc <<<"$v"
  [ -n "$(col "$label" 3)" ] || { printf '   | %-50s | %9s | %7s | %13s | %7s |\n' "$desc" "-" "-" "-" "-"; continue; }
  printf '   | %-50s | %9.0f | %7.2f | %13.2f | %7.0f |\n' "$desc" "$(col "$label" 3 | median)" \
    "$(col "$label" 4 | median)" "$(col "$label" 5 | median)" "$(col "$label" 6 | median)"
done
echo
echo "   ratio: median of the per-round ratios (min-max)"
printf '   | %-50s | %-20s | %-6s |\n' "ratio" "median (min-max)" "goal"
printf '   | %-50s | %-20s | %-6s |\n' "---" "---:" "---"
printf '   | %-50s | %-20s | %-6s |\n' "slow sink: 4 workers / 1 (ordering=key)" "$(ratio_rounds slow-4 slow-1)" ">= 3x"
printf '   | %-50s | %-20s | %-6s |\n' "slow sink: 2 workers / 1 (ordering=key)" "$(ratio_rounds slow-2 slow-1)" ">= 1.8x"
printf '   | %-50s | %-20s | %-6s |\n' "null sink: 2 workers / 1 (ordering=key)" "$(ratio_rounds null-2 null-1)" ">= 1x"
printf '   | %-50s | %-20s | %-6s |\n' "null sink, 4 workers: ordering none / key" "$(ratio_rounds null-4-none null-4)" ""
printf '   | %-50s | %-20s | %-6s |\n' "slow sink, 4 workers: ordering none / key" "$(ratio_rounds slow-4-none slow-4)" ""
printf '   | %-50s | %-20s | %-6s |\n' "slow sink, batch_size=100: 4 workers / 1" "$(ratio_rounds slow100-4 slow100-1)" ""
echo
s41=$(ratio_median slow-4 slow-1)
n21=$(ratio_median null-2 null-1)
s21=$(ratio_median slow-2 slow-1)
verdict "slow sink (delay_ms=$DELAY_MS): 4 workers drain >= 3x as fast as 1, ordering=key ($(printf '%.2f' "$s41")x)" \
  "$(awk -v r="$s41" 'BEGIN { print (r != "nan" && r + 0 >= 3) ? 1 : 0 }')"
verdict "slow sink (delay_ms=$DELAY_MS): 2 workers drain >= 1.8x as fast as 1, ordering=key ($(printf '%.2f' "$s21")x)" \
  "$(awk -v r="$s21" 'BEGIN { print (r != "nan" && r + 0 >= 1.8) ? 1 : 0 }')"
verdict "null sink: 2 workers drain no slower than 1, ordering=key ($(printf '%.2f' "$n21")x)" \
  "$(awk -v r="$n21" 'BEGIN { print (r != "nan" && r + 0 >= 1) ? 1 : 0 }')"
