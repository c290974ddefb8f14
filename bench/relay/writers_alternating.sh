#!/usr/bin/env bash
# Writer throughput with the relay's wake-up at commit on and off, alternating every few
# seconds inside one long pgbench run (issue #3; target: at most 3 % loss at 32 writers).
#
# writers.sh compares separate 5 s pgbench runs, one per variant and round. On this
# machine whole runs drift by several per cent (from second to second too), so 12 rounds
# cannot tell 1.5 % from 4 %. Here one pgbench run of RUN_S seconds (-c CLIENTS, -j 2, the
# same transaction as writers.sh: an order INSERT and outbox.enqueue) logs its transactions
# per second (--aggregate-interval 1), while the script switches outbox.wake_at_commit
# (a line in an included configuration file and SIGHUP; every writer applies it before its
# next command) every PHASE_S seconds through cycles of three phases:
#   on        outbox.wake_at_commit = on (the default)
#   off       off: the relay finds the events by its poll (outbox.poll_interval, 1 s)
#   control   off again: the A/A control, the benchmark's own error
# Every switch is the same write and reload, whatever the value. The order inside
# a cycle is balanced as in writers.sh (cycle c runs rotation c of the list, mirrored
# every second set of three cycles), so each phase follows each other one equally often.
# The first second of each phase is dropped (the reload reaching every writer, the relay
# catching up); a phase's rate is the mean of its other seconds. Per cycle: on / off and
# control / off; the result is the median of those ratios, with quartiles, and their mean
# with its 95 % interval (relaybench.py phases).
#
#   bash bench/relay/writers_alternating.sh          # 32 writers, 1440 s (120 cycles), ~25 min
#   QUICK=1 bash bench/relay/writers_alternating.sh  # 120 s, ~3 min
# CLIENTS, RUN_S, PHASE_S (4) override.
set -euo pipefail
# shellcheck source=bench/relay/lib.sh
. "$(dirname "$0")/lib.sh"

# Per-cycle ratios spread by about +-6 % (quartiles) here, so the 95 % interval of their
# mean is about +-1.7 % after 120 cycles and +-3.5 % after 30.
if [ "$QUICK" = 1 ]; then RUN_S=${RUN_S:-120}; else RUN_S=${RUN_S:-1440}; fi
CLIENTS=${CLIENTS:-32}
PHASE_S=${PHASE_S:-4}
[ "$PHASE_S" -ge 2 ] || { echo "PHASE_S must be at least 2" >&2; exit 2; }

relay_header "writers, alternating: one pgbench run, outbox.wake_at_commit switched every ${PHASE_S} s"
relay_start 56306 "${RELAY_SETTINGS:-}"
echo "   clients=$CLIENTS, one run of $RUN_S s, phases of $PHASE_S s (first second dropped)"

echo "include_if_exists = 'wake.conf'" >>"$BENCH_WORK/data/postgresql.conf"
sqlv "SELECT pg_reload_conf()" >/dev/null
writers_setup
# As in writers.sh: write some events and ANALYZE, so that the relay's kept UPDATE plan is
# made for a partition with statistics.
as_postgres pgbench -h "$BENCH_WORK" -p "$BENCH_PORT" -n -M prepared -c 4 -j 2 -t 2500 -f "$BENCH_WORK/plain.sql" "$BENCH_DB" >/dev/null 2>&1
sql -c "ANALYZE outbox.events"

declare -A VALUE=([on]=on [off]=off [control]=off)

j=$((CLIENTS < 2 ? CLIENTS : 2))
phases=$((RUN_S / PHASE_S))
# The label of every phase (0-based K): cycle c = K / 3 runs rotation c of the list, mirrored
# in every second set of three cycles (relaybench.py's balanced_order, as throughput_paired.sh).
mapfile -t PHASE_LABELS < <("$PY" "$RELAY_BENCH_DIR/relaybench.py" order --labels on,off,control \
  --cycles $(((phases + 2) / 3)))
start=$(($(date +%s) + 2))
# cpu_sample: the relay's CPU ticks, and the machine's busy and total ticks (/proc/stat).
cpu_sample() {
  echo "$(awk '{ print $14 + $15 }' "/proc/$RELAY_PID/stat")" \
       "$(awk '$1 == "cpu" { t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t }' /proc/stat)"
}
# The switches, at start + K * PHASE_S (the first one before pgbench starts): the value goes
# into a file that postgresql.conf includes, and SIGHUP to the postmaster (ALTER SYSTEM would
# fsync postgresql.auto.conf, which under this load took up to 0.7 s).
pm_pid=$(head -n 1 "$BENCH_WORK/data/postmaster.pid")
(
  for k in $(seq 0 $((phases - 1))); do
    label=${PHASE_LABELS[$k]}
    now=$(date +%s.%N)
    sleep "$(awk -v t="$((start + k * PHASE_S))" -v n="$now" 'BEGIN { d = t - n - 0.02; print (d > 0 ? d : 0) }')"
    echo "outbox.wake_at_commit = ${VALUE[$label]}" >"$BENCH_WORK/data/wake.conf"
    kill -HUP "$pm_pid"
    echo "$k $label $(date +%s.%N) $(cpu_sample)" >>"$BENCH_WORK/switches.txt"
  done
  sleep "$(awk -v t="$((start + phases * PHASE_S))" -v n="$(date +%s.%N)" 'BEGIN { d = t - n; print (d > 0 ? d : 0) }')"
  echo "$phases end $(date +%s.%N) $(cpu_sample)" >>"$BENCH_WORK/switches.txt"
) &
toggler=$!
RELAY_EXTRA_PIDS="$RELAY_EXTRA_PIDS $toggler"
sleep "$(awk -v t="$start" -v n="$(date +%s.%N)" 'BEGIN { d = t - n; print (d > 0 ? d : 0) }')"
b0=$(sqlv "SELECT batches FROM outbox._workers()")
(cd "$BENCH_WORK" && as_postgres pgbench -h "$BENCH_WORK" -p "$BENCH_PORT" -n -M prepared -c "$CLIENTS" -j "$j" \
   -T "$((phases * PHASE_S + 1))" --log --log-prefix="$BENCH_WORK/tx" --aggregate-interval=1 \
   -f "$BENCH_WORK/plain.sql" "$BENCH_DB" >"$BENCH_WORK/pgbench.out" 2>&1) || { cat "$BENCH_WORK/pgbench.out"; exit 1; }
b1=$(sqlv "SELECT batches FROM outbox._workers()")
wait "$toggler" || true
grep -E '^tps' "$BENCH_WORK/pgbench.out" | sed 's/^/   pgbench: /'
echo "   relay: $(((b1 - b0) / (phases * PHASE_S + 1))) batches/s over the run"

# Per second: epoch (pgbench's intervals start at its threads' start, just after $start;
# the extra last second belongs to no phase) -> transactions (summed over pgbench's threads' logs).
cat "$BENCH_WORK"/tx.* | awk '{ n[$1] += $2 } END { for (s in n) print s, n[s] }' | sort -n >"$BENCH_WORK/per_second.txt"
late=$(awk -v s="$start" -v p="$PHASE_S" '$1 > 0 { d = $3 - (s + $1 * p); if (d > m) m = d } END { printf "%.0f", 1000 * m }' \
       "$BENCH_WORK/switches.txt")
echo "   switches: $(grep -vc ' end ' "$BENCH_WORK/switches.txt") of $phases; latest $late ms after its second"

"$PY" "$RELAY_BENCH_DIR/relaybench.py" phases --switches "$BENCH_WORK/switches.txt" \
  --seconds "$BENCH_WORK/per_second.txt" --start "$start" --phase "$PHASE_S" >"$BENCH_WORK/report.txt"
echo
grep -v '^LOSS' "$BENCH_WORK/report.txt"
loss=$(awk '$1 == "LOSS" { print $2 }' "$BENCH_WORK/report.txt")
echo
verdict "writers at $CLIENTS: wake at commit costs at most 3 % (alternating phases, median loss: $(awk -v x="$loss" 'BEGIN { printf "%.1f", 100 * x }') %)" \
  "$(awk -v x="$loss" 'BEGIN { print (x <= 0.03) ? 1 : 0 }')"
